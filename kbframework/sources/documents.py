"""Document operations shared by the admin API, the admin pages and the CLI.

Every function takes the caller's organization id and scopes its queries to it, so an id
from another organization is simply not found.
"""
from __future__ import annotations

import logging
import uuid
from datetime import datetime

from sqlalchemy import and_, func, or_, select, update

from kbframework.clock import utcnow, iso
from kbframework.hooks import registry
from kbframework.orgs.accounts import as_uuid, ensure_source
from kbframework.db import session_scope
from kbframework.errors import KBError, NotFound, ValidationFailed
from kbframework.ingest.chunker import page_label
from kbframework.ingest.queue import ingest_now, job_batches
from kbframework.sources.apply import apply_draft
from kbframework.models import Chunk, Document, Source
from kbframework.addresses import safe_link
from kbframework.types import DOCUMENT_ROLES

log = logging.getLogger("kbframework.sources.documents")

STATUSES = ("active", "disabled", "syncing", "error", "deleted", "expired", "draft")


def doc_to_dict(d: Document, source: Source | None = None, full: bool = False) -> dict:
    meta = d.metadata_ or {}
    out = {"id": str(d.id), "title": d.title, "type": d.type, "document_role": d.document_role,
           "status": d.status, "source_id": str(d.source_id), "source_type": source.type if source else None,
           "source_name": source.name if source else None, "source_url": safe_link(d.source_url),
           "external_id": d.external_id, "tags": d.tags or [], "chunk_count": d.chunk_count,
           "last_synced_at": iso(d.last_synced_at), "source_modified_at": iso(d.source_modified_at),
           "event_start": iso(d.event_start), "event_end": iso(d.event_end), "venue": d.venue,
           "city": d.city, "primary_image_url": safe_link(d.primary_image_url), "expires_at": iso(d.expires_at),
           "last_error": meta.get("last_error"), "content_flags": meta.get("content_flags") or [],
           "created_at": iso(d.created_at),
           "updated_at": iso(d.updated_at)}
    if full:
        out.update(normalized_content=d.normalized_content, override_content=d.override_content,
                   raw_content=(d.raw_content or "")[:20000] or None, sync_hash=d.sync_hash,
                   metadata=meta)
    return out


def get_document(s, org_id, doc_id) -> Document:
    d = s.scalar(select(Document).where(Document.id == as_uuid(doc_id),
                                        Document.organization_id == as_uuid(org_id)))
    if d is None:
        raise NotFound("No such document in this organization.")
    return d


def list_documents(s, org_id, *, q=None, source_id=None, type_=None, role=None, status=None, tag=None,
                   page: int = 1, per_page: int = 25, sort: str = "-updated_at") -> dict:
    page = max(1, int(page or 1))
    per_page = min(200, max(1, int(per_page or 25)))
    conds = [Document.organization_id == as_uuid(org_id)]
    if q:
        conds.append(Document.title.ilike(f"%{q.strip()}%"))
    if source_id:
        conds.append(Document.source_id == as_uuid(source_id))
    if type_:
        conds.append(Document.type == type_)
    if role:
        conds.append(Document.document_role == role)
    if status:
        conds.append(Document.status == status)
    else:
        conds.append(Document.status != "deleted")
    if tag:
        conds.append(Document.tags.contains([tag]))
    total = s.scalar(select(func.count()).select_from(Document).where(and_(*conds)))
    col = {"updated_at": Document.updated_at, "title": Document.title,
           "last_synced_at": Document.last_synced_at}.get(sort.lstrip("-"), Document.updated_at)
    order = col.desc().nullslast() if sort.startswith("-") else col.asc()
    rows = s.execute(select(Document, Source).join(Source, Source.id == Document.source_id)
                     .where(and_(*conds)).order_by(order, Document.id)
                     .limit(per_page).offset((page - 1) * per_page)).all()
    return {"items": [doc_to_dict(d, src) for d, src in rows], "page": page, "per_page": per_page,
            "total": total, "pages": max(1, -(-total // per_page))}


def _source_of(s, doc: Document) -> Source:
    return s.scalar(select(Source).where(Source.organization_id == doc.organization_id,
                                         Source.id == doc.source_id))


def document_detail(s, org_id, doc_id) -> dict:
    d = get_document(s, org_id, doc_id)
    src = _source_of(s, d)
    out = doc_to_dict(d, src, full=True)
    chunks = s.scalars(select(Chunk).where(Chunk.document_id == d.id).order_by(Chunk.chunk_index)).all()
    out["chunks"] = [{"id": c.id, "chunk_index": c.chunk_index, "heading": c.heading, "content": c.content,
                      "token_count": c.token_count, "embedding_model": c.embedding_model,
                      "metadata": c.metadata_ or {}, "pages": page_label(c.metadata_ or {})} for c in chunks]
    return out


# --------------------------------------------------------------------------- manual documents


def _manual_connector():
    conn = registry.editor_source_type()
    if conn is None:
        raise KBError("No installed source type is written in the admin: install the manual knowledge plugin.",
                      code="plugin_missing", status=501)
    return conn


def create_manual(s, org_id, data: dict) -> Document:
    conn = _manual_connector()
    draft = conn.draft_from_input(data)
    draft.external_id = str(uuid.uuid4())
    source = ensure_source(s, as_uuid(org_id), conn.name, conn.label)
    doc, _ = apply_draft(s, source, draft)
    doc.status = "syncing"
    s.flush()
    return doc


def update_manual(s, org_id, doc_id, data: dict) -> Document:
    conn = _manual_connector()
    doc = get_document(s, org_id, doc_id)
    src = _source_of(s, doc)
    if src.type != conn.name:
        raise ValidationFailed("Only manual documents can be edited here; synced documents come from their source.")
    merged = {"title": doc.title, "body": doc.normalized_content, "tags": doc.tags or [],
              "role": doc.document_role, "expires_at": iso(doc.expires_at),
              "event_start": iso(doc.event_start), "event_end": iso(doc.event_end), "venue": doc.venue,
              "city": doc.city, "source_url": doc.source_url, "image_url": doc.primary_image_url,
              "metadata": {k: v for k, v in (doc.metadata_ or {}).items() if not k.startswith("last_")}}
    merged.update(data)
    draft = conn.draft_from_input(merged)
    draft.external_id = doc.external_id
    doc, action = apply_draft(s, src, draft, force=True)
    return doc


def duplicate_manual(s, org_id, doc_id) -> Document:
    doc = get_document(s, org_id, doc_id)
    return create_manual(s, org_id, {"title": f"{doc.title} (copy)", "body": doc.normalized_content,
                                     "tags": doc.tags or [], "role": doc.document_role})


# --------------------------------------------------------------------------- lifecycle


def set_status(s, org_id, doc_id, status: str) -> Document:
    if status not in ("active", "disabled"):
        raise ValidationFailed("Status must be 'active' or 'disabled'.")
    doc = get_document(s, org_id, doc_id)
    if status == "disabled":
        doc.status = "disabled"
    elif doc.status in ("disabled", "expired", "error", "syncing"):
        doc.status = "active" if doc.chunk_count > 0 else "syncing"
    doc.updated_at = utcnow()
    return doc


def delete_document(s, org_id, doc_id) -> None:
    doc = get_document(s, org_id, doc_id)
    s.delete(doc)


def restore_document(s, org_id, doc_id, until: datetime | None = None) -> Document:
    doc = get_document(s, org_id, doc_id)
    if until is not None:
        if doc.event_end is not None or doc.event_start is not None:
            doc.event_end = until
        doc.expires_at = until if doc.expires_at is not None or doc.event_start is None else doc.expires_at
    else:
        doc.expires_at = None
    doc.status = "active" if doc.chunk_count > 0 else "syncing"
    return doc


def expire_documents(now: datetime | None = None) -> dict:
    """Documents whose event has ended (or whose expiry passed) become ``expired``."""
    now = now or utcnow()
    with session_scope() as s:
        res = s.execute(update(Document).where(
            Document.status.in_(("active", "syncing", "error")),
            or_(Document.event_end < now,
                and_(Document.event_end.is_(None), Document.event_start.isnot(None),
                     Document.event_start < now - _NO_END_GRACE),
                Document.expires_at < now)).values(status="expired", updated_at=now))
        return {"expired": res.rowcount}


from datetime import timedelta  # noqa: E402

_NO_END_GRACE = timedelta(hours=12)  # an event without an end expires 12 h after its start


def reindex_now(org_id, which: str = "all", document_id: str | None = None,
                skip_indexed_since: datetime | None = None) -> dict:
    """Re-index an organization's documents: all, only failed ones, or one document.

    ``skip_indexed_since``: a retried re-index resumes: documents indexed since the first
    attempt started are not embedded again. The result counts the outcomes and lists the
    documents that failed (``failed``: id, title, error), so callers can say how many."""
    with session_scope() as s:
        conds = [Document.organization_id == as_uuid(org_id)]
        if document_id:
            conds.append(Document.id == as_uuid(document_id))
        elif which == "failed":
            conds.append(Document.status == "error")
        else:
            conds.append(Document.status.in_(("active", "error", "syncing")))
        sizes = {str(i): n or 0 for i, n in s.execute(
            select(Document.id, func.length(func.coalesce(Document.override_content, Document.normalized_content)))
            .where(*conds))}
        total = list(sizes)
        if document_id and not total:
            raise NotFound("No such document in this organization.")
        ids = total
        if skip_indexed_since is not None and not document_id:
            done = {str(i) for i in s.scalars(select(Document.id).where(
                *conds, Document.status == "active", Document.last_synced_at >= skip_indexed_since))}
            ids = [i for i in total if i not in done]
    counts: dict = {}
    failed: list[dict] = []
    for part in job_batches([(i, sizes[i]) for i in ids]):  # bounded in count and in text held at once
        for r in ingest_now(part, force=which in ("all", "document") or bool(document_id)):
            counts[r.action] = counts.get(r.action, 0) + 1
            if r.action == "error":
                failed.append({"id": r.document_id, "error": r.error})
    if failed:
        with session_scope() as s:
            titles = dict(s.execute(select(Document.id, Document.title).where(
                Document.id.in_([as_uuid(f["id"]) for f in failed[:200]]))).all())
        for f in failed[:200]:
            f["title"] = titles.get(as_uuid(f["id"]))
    out = {"documents": len(total), "results": counts, "failed_count": len(failed), "failed": failed[:200]}
    if len(ids) != len(total):
        out["resumed"] = {"already_indexed": len(total) - len(ids)}
    return out


def validate_role(role: str | None) -> str | None:
    if role is not None and role not in DOCUMENT_ROLES:
        raise ValidationFailed(f"Role must be one of {', '.join(DOCUMENT_ROLES)}.")
    return role
