"""Applying what connectors and editors send (DocumentDrafts) to the documents table.

This is where the freshness rules live: the source-side timestamp decides conflicts,
unpublished items are purged (never served), and a change that leaves the indexed text
alone (price, stock, sale) updates columns and metadata without re-embedding anything.
"""
from __future__ import annotations

import logging
import uuid
from datetime import datetime

from sqlalchemy import delete, select

from kbframework.clock import utcnow
from kbframework.ingest.pipeline import content_hash
from kbframework.models import Chunk, Document, Source
from kbframework.types import DocumentDraft

log = logging.getLogger("kbframework.sources.apply")

COLUMN_FIELDS = ("title", "type", "document_role", "source_url", "raw_content", "normalized_content",
                 "source_modified_at", "event_start", "event_end", "venue", "city",
                 "primary_image_url", "tags", "expires_at")


def find_document(s, source: Source, external_id: str | None) -> Document | None:
    if external_id is None:
        return None
    return s.scalar(select(Document).where(Document.organization_id == source.organization_id,
                                           Document.source_id == source.id,
                                           Document.external_id == str(external_id)))


def purge_document(s, doc: Document, status: str = "deleted") -> None:
    s.execute(delete(Chunk).where(Chunk.document_id == doc.id))
    doc.chunk_count = 0
    doc.indexed_hash = None
    doc.status = status
    doc.updated_at = utcnow()


_UNSET = object()


def apply_draft(s, source: Source, draft: DocumentDraft, *, force: bool = False,
                reapply: bool = False, doc=_UNSET, flush: bool = True) -> tuple[Document | None, str]:
    """Upsert one draft. Returns (document, action) where action is one of:
    ``created`` / ``changed`` (needs ingestion), ``cheap`` (columns only, no re-embed),
    ``unchanged``, ``stale`` (not newer than what we hold: ignored), ``unpublished`` (purged),
    ``ignored`` (unpublished and never known). ``reapply``: a draft with the *same* source
    timestamp is applied too (the source's field mapping changed, so the same source data
    maps differently); an older one is still stale. ``doc``: the document for the draft's
    external id when the caller already loaded it (``None``: there is none); ``flush=False``
    leaves a new row to the session's next flush (batched inserts)."""
    if doc is _UNSET:
        doc = find_document(s, source, draft.external_id)
    if doc is not None and not force and _is_stale(doc, draft, reapply=reapply):
        log.debug("stale update ignored for %s/%s: %s <= %s", source.id, draft.external_id,
                 draft.source_modified_at, doc.source_modified_at)
        return doc, "stale"
    if not draft.published:
        if doc is None:
            return None, "ignored"
        if draft.source_modified_at:
            doc.source_modified_at = draft.source_modified_at
        purge_document(s, doc)
        doc.metadata_ = {**(doc.metadata_ or {}), "unpublished_at": utcnow().isoformat()}
        return doc, "unpublished"
    new_hash = content_hash(draft.title, draft.normalized_content)
    if doc is None:
        doc = Document(id=uuid.uuid4(), organization_id=source.organization_id, source_id=source.id,
                       external_id=str(draft.external_id) if draft.external_id is not None else None,
                       status="syncing", metadata_={})
        s.add(doc)
        _copy(doc, draft)
        doc.last_synced_at = utcnow()
        if flush:
            s.flush()
        return doc, "created"
    text_changed = new_hash != doc.sync_hash
    was_gone = doc.status in ("deleted",)
    _copy(doc, draft)
    doc.last_synced_at = utcnow()
    if was_gone:
        doc.status = "syncing"
        return doc, "changed"
    if text_changed or doc.chunk_count == 0 or force:
        if doc.status not in ("disabled", "expired"):
            doc.status = "syncing" if doc.chunk_count == 0 else doc.status
        return doc, "changed"
    return doc, "cheap" if s.is_modified(doc) else "unchanged"


def is_stale_timestamp(doc: Document, modified_at: datetime | None, *, reapply: bool = False) -> bool:
    """The freshness rule: an update applies only when its source timestamp is strictly newer than the
    stored one. Older is always stale (a late delivery must not resurrect an unpublished
    item either); an equal one is applied again only to a purged document (it may have
    been purged because it was missing from a listing) or when ``reapply``."""
    if modified_at is None or doc.source_modified_at is None:
        return False
    if modified_at < doc.source_modified_at:
        return True
    return modified_at == doc.source_modified_at and not reapply and doc.status != "deleted"


def _is_stale(doc: Document, draft: DocumentDraft, reapply: bool = False) -> bool:
    return is_stale_timestamp(doc, draft.source_modified_at, reapply=reapply)


URL_FIELDS = ("source_url", "primary_image_url")


def _safe_urls(doc_ref, draft: DocumentDraft) -> None:
    """Every URL a connector hands over is checked before it is stored: only http(s) links
    are kept; anything else (``javascript:``, ``data:``, junk) is dropped with a logged reason."""
    from kbframework.addresses import link_problem

    for f in URL_FIELDS:
        val = getattr(draft, f)
        if val in (None, ""):
            setattr(draft, f, None)
            continue
        val = val.strip() if isinstance(val, str) else val
        why = link_problem(val)
        if why:
            log.warning("dropped %s of %s: %s (%r)", f, doc_ref, why, str(val)[:200])
            setattr(draft, f, None)
        else:
            setattr(draft, f, val)
    meta = draft.metadata or {}
    for k in [k for k, v in meta.items() if (k.endswith("_url") or k in ("url", "link")) and v not in (None, "")]:
        why = link_problem(meta[k].strip() if isinstance(meta[k], str) else meta[k])
        if why:
            log.warning("dropped metadata.%s of %s: %s (%r)", k, doc_ref, why, str(meta[k])[:200])
            meta.pop(k)


def _copy(doc: Document, draft: DocumentDraft) -> None:
    _safe_urls(f"{doc.source_id}/{draft.external_id}", draft)
    for f in COLUMN_FIELDS:
        val = getattr(draft, f)
        if f == "tags":
            val = list(dict.fromkeys(t for t in (val or []) if t)) or None
        if getattr(doc, f) != val:
            setattr(doc, f, val)
    meta = dict(doc.metadata_ or {})
    for k in [k for k in meta if not k.startswith("last_") and k not in draft.metadata
              and k not in ("unpublished_at", "content_flags")]:
        meta.pop(k)
    meta.update(draft.metadata or {})
    meta.pop("unpublished_at", None)
    if meta != doc.metadata_:
        doc.metadata_ = meta
