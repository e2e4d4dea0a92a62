"""Upload, replace and extract: shared by the HTTP route and `kbf doc add-pdf`."""
from __future__ import annotations

import uuid
from datetime import datetime, timezone
from pathlib import Path

from sqlalchemy import select

from kbframework.orgs.accounts import as_uuid, ensure_source
from kbframework.db import session_scope
from kbframework.sources.documents import get_document, queue_ingest
from kbframework.errors import KBError, ValidationFailed
from kbframework.sources.apply import apply_draft
from kbframework.models import Document, Source, jsonb_merge
from kbframework.types import DOCUMENT_ROLES

from kbframework_pdf.connector import draft_from_file, store_bytes


def upload(org_id, data: bytes, filename: str | None, title: str | None = None, role: str = "support",
           replace_document_id: str | None = None, inline: bool = False) -> dict:
    """Store the file and create (or mark for replacement) the document at once; a job extracts."""
    if role not in DOCUMENT_ROLES:
        raise ValidationFailed(f"Role must be one of {', '.join(DOCUMENT_ROLES)}.")
    digest, path = store_bytes(data)
    with session_scope() as s:
        if replace_document_id:
            doc = get_document(s, org_id, replace_document_id)
            if doc.type != "pdf":
                raise ValidationFailed("Only a PDF document can be replaced by a PDF.")
            doc.metadata_ = {**(doc.metadata_ or {}), "pending_file": str(path), "pending_sha256": digest,
                             "pending_filename": filename, "pending_title": title}
            doc_id = str(doc.id)
        else:
            src = ensure_source(s, as_uuid(org_id), "pdf", "PDF documents")
            doc = Document(id=uuid.uuid4(), organization_id=src.organization_id, source_id=src.id,
                           external_id=str(uuid.uuid4()), title=(title or filename or "PDF").strip()[:300],
                           type="pdf", document_role=role, status="syncing",
                           metadata_={"pending_file": str(path), "pending_sha256": digest,
                                      "pending_filename": filename, "pending_title": title, "filename": filename})
            s.add(doc)
            doc_id = str(doc.id)
    held = False
    if inline:
        extract_job(doc_id)
    else:
        from kbframework.jobs.queues import enqueue

        # while Redis is away the job waits in the outbox and runs once it is back
        held = bool(getattr(enqueue("ingest", "kbframework_pdf.service.extract_job", doc_id), "held", False))
    with session_scope() as s:
        d = s.get(Document, as_uuid(doc_id))
        from kbframework.sources.documents import doc_to_dict

        out = doc_to_dict(d)
    if held:
        out.update(accepted=True, indexing="pending",
                   message="Saved. The job queue is not reachable right now; the file is indexed as soon as "
                           "it is back.")
    return out


def extract_job(document_id: str) -> dict:
    """Extract the pending file and re-index; the old chunks serve until the new ones are in."""
    from kbframework.jobs import tasks as jobs

    jobs._boot()
    with session_scope() as s:
        doc = s.get(Document, as_uuid(document_id))
        if doc is None:
            return {"skipped": "document gone"}
        meta = doc.metadata_ or {}
        path = meta.get("pending_file")
        if not path:
            return {"skipped": "nothing pending"}
        src = s.get(Source, doc.source_id)
        role, ext_id = doc.document_role, doc.external_id
        title = meta.get("pending_title") or (doc.title if meta.get("pending_sha256") and doc.chunk_count else None)
        filename = meta.get("pending_filename")
    try:
        draft = draft_from_file(Path(path), title, role, ext_id, filename)
    except KBError as exc:
        from kbframework.ingest.pipeline import mark_error

        mark_error(as_uuid(document_id), exc.message)
        with session_scope() as s:
            doc = s.get(Document, as_uuid(document_id))
            doc.metadata_ = {k: v for k, v in (doc.metadata_ or {}).items() if not k.startswith("pending_")} | {
                "last_error": exc.message, "last_error_code": exc.code}
        return {"error": exc.message}
    with session_scope() as s:
        src = s.get(Source, as_uuid(str(src.id)))
        doc, action = apply_draft(s, src, draft, force=True)
        doc.metadata_ = {k: v for k, v in (doc.metadata_ or {}).items() if not k.startswith("pending_")}
    res = queue_ingest([document_id], inline=True)
    return {"action": res[0].action, "chunks": res[0].chunks}
