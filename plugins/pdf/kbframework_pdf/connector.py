"""The PDF source type: files uploaded by admins, stored by content hash under the data folder.

The upload creates the document at once (status ``syncing``); a job extracts the text page by
page and hands it to the host's ingestion pipeline with form feeds between pages, so every
chunk knows its page range. A bad file leaves a clear error and changes nothing else.
"""
from __future__ import annotations

import hashlib
import uuid
from pathlib import Path

from marshmallow import Schema

from kbframework.config import get_config
from kbframework.errors import KBError, ValidationFailed
from kbframework.types import DocumentDraft, NothingToFetch

from kbframework_pdf.extract import PdfError, check_pdf_bytes, extract_pdf

PAGE_BREAK = "\f"


class PdfConfig(Schema):
    """PDF collections have no settings; the caps are KB_UPLOAD_MAX_BYTES and KB_PDF_MAX_PAGES."""


def storage_dir() -> Path:
    d = get_config().data_dir / "files" / "pdf"
    d.mkdir(parents=True, exist_ok=True)
    return d


def store_bytes(data: bytes) -> tuple[str, Path]:
    """Check the bytes are a PDF (by content) within the size cap; store them by hash."""
    cfg = get_config()
    try:
        check_pdf_bytes(data, max_bytes=cfg.upload_max_bytes)
    except PdfError as exc:
        raise ValidationFailed(exc.message, code=f"pdf_{exc.code}")
    digest = hashlib.sha256(data).hexdigest()
    path = storage_dir() / f"{digest}.pdf"
    if not path.exists():
        tmp = path.with_suffix(f".{uuid.uuid4().hex}.tmp")
        tmp.write_bytes(data)
        tmp.replace(path)
    return digest, path


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
    secret_fields: tuple = ()

    def normalize(self, record, config, ctx):
        p = record.payload
        return draft_from_file(Path(p["path"]), p.get("title"), p.get("role", "support"), record.external_id,
                               p.get("filename"))
