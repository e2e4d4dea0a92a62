"""The PDF source type: files uploaded by admins.

The host stores an upload and runs the document's lifecycle; this connector only checks
that the bytes are a readable PDF and turns the stored file into a draft: the text page by
page, with form feeds between pages, so every chunk knows its page range.
"""
from __future__ import annotations

from pathlib import Path

from marshmallow import Schema

from kbframework import DocumentDraft, KBError, NothingToFetch, ValidationFailed, get_config

from kbframework_pdf.extract import PdfError, check_pdf_bytes, extract_pdf

PAGE_BREAK = "\f"


class PdfConfig(Schema):
    """PDF collections have no settings; the caps are KB_UPLOAD_MAX_BYTES and KB_PDF_MAX_PAGES."""


def draft_from_file(path: Path, title: str | None, role: str = "support", external_id: str | None = None,
                    filename: str | None = None) -> DocumentDraft:
    cfg = get_config()
    try:
        ex = extract_pdf(path, max_bytes=cfg.upload_max_bytes, max_pages=cfg.pdf_max_pages)
    except PdfError as exc:
        raise KBError(exc.message, code=f"pdf_{exc.code}")
    text = PAGE_BREAK.join(p.text for p in ex.pages)
    return DocumentDraft(
        title=(title or ex.title or (filename or path.stem)).strip()[:300], normalized_content=text,
        type="pdf", document_role=role, external_id=external_id,
        metadata={"file_sha256": ex.sha256, "pages": ex.page_count, "filename": filename,
                  "removed_lines": ex.removed_lines[:20]})


class PdfConnector(NothingToFetch):
    name = "pdf"
    label = "PDF documents"
    config_schema = PdfConfig
    accepts_uploads = True
    upload_suffix = ".pdf"

    def check_upload(self, data: bytes, max_bytes: int) -> None:
        try:
            check_pdf_bytes(data, max_bytes=max_bytes)
        except PdfError as exc:
            raise ValidationFailed(exc.message, code=f"pdf_{exc.code}")

    def draft_from_file(self, path, *, title, role, external_id, filename) -> DocumentDraft:
        return draft_from_file(Path(path), title, role, external_id, filename)

    def normalize(self, record, config, ctx):
        p = record.payload
        return draft_from_file(Path(p["path"]), p.get("title"), p.get("role", "support"), record.external_id,
                               p.get("filename"))
