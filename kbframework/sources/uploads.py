"""Documents that arrive as uploaded files, for any source type whose connector accepts them.

The host runs the whole lifecycle: it asks the connector to check the bytes, stores them by
content hash under the data folder, creates the document at once (status ``syncing``; or, to
replace one, marks the new file as pending on it), and then — in a job, or inline — has the
connector turn the file into a draft, applies it and indexes it. Until the new chunks are in,
a replaced document keeps answering from its old ones. A bad file leaves a clear error on the
document and changes nothing else.
"""
from __future__ import annotations

import hashlib
import uuid
from pathlib import Path

from kbframework.config import get_config
from kbframework.db import session_scope
from kbframework.errors import KBError, ValidationFailed
from kbframework.hooks import registry
from kbframework.ingest.queue import queue_ingest
from kbframework.models import Document, Source
from kbframework.orgs.accounts import as_uuid, ensure_source
from kbframework.sources.apply import apply_draft
from kbframework.sources.documents import doc_to_dict, get_document
from kbframework.types import DOCUMENT_ROLES


def upload_connector(type_: str):
    connector = registry.source_type(type_)
    if not connector.accepts_uploads:
        raise ValidationFailed(f"{connector.label or type_} documents are not uploaded as files.",
                               code="uploads_not_accepted")
    return connector


def storage_dir(type_: str) -> Path:
    d = get_config().data_dir / "files" / type_
    d.mkdir(parents=True, exist_ok=True)
    return d


def store_bytes(connector, data: bytes) -> tuple[str, Path]:
    """Check the bytes with the connector (content, size cap), then store them by hash."""
    if not data:
        raise ValidationFailed("The uploaded file is empty.", code=f"{connector.name}_empty")
    connector.check_upload(data, get_config().upload_max_bytes)
    digest = hashlib.sha256(data).hexdigest()
    path = storage_dir(connector.name) / f"{digest}{connector.upload_suffix}"
    if not path.exists():
        tmp = path.with_suffix(f".{uuid.uuid4().hex}.tmp")
        tmp.write_bytes(data)
        tmp.replace(path)
    return digest, path


def upload(org_id, type_: str, data: bytes, filename: str | None, title: str | None = None,
           role: str = "support", replace_document_id: str | None = None, inline: bool = False) -> dict:
    """Store the file and create (or mark for replacement) its document; a job, or ``inline``
    this call, reads it. Returns the document as the API shows it."""
    connector = upload_connector(type_)
    if role not in DOCUMENT_ROLES:
        raise ValidationFailed(f"Role must be one of {', '.join(DOCUMENT_ROLES)}.")
    digest, path = store_bytes(connector, data)
    pending = {"pending_file": str(path), "pending_sha256": digest, "pending_filename": filename,
               "pending_title": title}
    with session_scope() as s:
        if replace_document_id:
            doc = get_document(s, org_id, replace_document_id)
            if s.get(Source, doc.source_id).type != type_:
                raise ValidationFailed(f"Only a {connector.label or type_} document can be replaced by this file.")
            doc.metadata_ = {**(doc.metadata_ or {}), **pending}
            doc_id = str(doc.id)
        else:
            src = ensure_source(s, as_uuid(org_id), type_, connector.label or type_)
            doc = Document(id=uuid.uuid4(), organization_id=src.organization_id, source_id=src.id,
                           external_id=str(uuid.uuid4()), title=(title or filename or type_).strip()[:300],
                           type=type_, document_role=role, status="syncing",
                           metadata_={**pending, "filename": filename})
            s.add(doc)
            doc_id = str(doc.id)
    held = False
    if inline:
        read_upload(doc_id)
    else:
        from kbframework.jobs.queues import enqueue

        # while Redis is away the job waits in the outbox and runs once it is back
        held = bool(getattr(enqueue("ingest", "kbframework.jobs.tasks.read_upload_job", doc_id), "held", False))
    with session_scope() as s:
        out = doc_to_dict(s.get(Document, as_uuid(doc_id)))
    if held:
        out.update(accepted=True, indexing="pending",
                   message="Saved. The job queue is not reachable right now; the file is indexed as soon as "
                           "it is back.")
    return out


def read_upload(document_id: str) -> dict:
    """Turn the document's pending file into its content and index it."""
    with session_scope() as s:
        doc = s.get(Document, as_uuid(document_id))
        if doc is None:
            return {"skipped": "document gone"}
        meta = doc.metadata_ or {}
        path = meta.get("pending_file")
        if not path:
            return {"skipped": "nothing pending"}
        src = s.get(Source, doc.source_id)
        source_id, type_ = src.id, src.type
        role, ext_id = doc.document_role, doc.external_id
        title = meta.get("pending_title") or (doc.title if meta.get("pending_sha256") and doc.chunk_count else None)
        filename = meta.get("pending_filename")
    try:
        draft = upload_connector(type_).draft_from_file(Path(path), title=title, role=role, external_id=ext_id,
                                                        filename=filename)
    except KBError as exc:
        from kbframework.ingest.pipeline import mark_error

        mark_error(as_uuid(document_id), exc.message)
        with session_scope() as s:
            doc = s.get(Document, as_uuid(document_id))
            doc.metadata_ = {k: v for k, v in (doc.metadata_ or {}).items() if not k.startswith("pending_")} | {
                "last_error": exc.message, "last_error_code": exc.code}
        return {"error": exc.message}
    with session_scope() as s:
        doc, _ = apply_draft(s, s.get(Source, source_id), draft, force=True)
        doc.metadata_ = {k: v for k, v in (doc.metadata_ or {}).items() if not k.startswith("pending_")}
    res = queue_ingest([document_id], inline=True)
    return {"action": res[0].action, "chunks": res[0].chunks}
