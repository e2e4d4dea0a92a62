"""Source synchronisation, the same for every connector (spec "Freshness", §21–§23).

    run_sync(source, kind):
      1. fetch      connector.fetch_all (full) or fetch_changed(watermark) (incremental)
      2. normalize  connector.normalize (or a kb_normalize plugin) → DocumentDraft
      3. apply      freshness rule, unpublished purge, cheap column updates (knowledge.apply_draft)
      4. ingest     only documents whose text changed, in batches on the ``ingest`` queue
      5. reconcile  on a full sync, documents the source no longer has are purged
    A fetch failure marks the source ``error`` with the reason; documents keep serving.
"""
from __future__ import annotations

import logging
import time
from datetime import datetime, timezone

from sqlalchemy import select, update

from kbframework import registry
from kbframework.accounts import as_uuid
from kbframework.db import session_scope
from kbframework.errors import KBError, NotFound
from kbframework.hooks.manager import get_plugin_manager
from kbframework.knowledge import apply_draft, find_document, purge_document
from kbframework.models import Document, Organization, Source, SyncRun, WebhookEvent
from kbframework.security import decrypt_json
from kbframework.types import SyncContext

log = logging.getLogger("kbframework.sync")

BATCH = 50


def utcnow():
    return datetime.now(timezone.utc)


def source_config(src: Source) -> dict:
    """The connector's config with its secrets decrypted (never sent back to a browser)."""
    return {**(src.config or {}), **decrypt_json(src.secrets)}


def sync_context(s, src: Source) -> SyncContext:
    org = s.get(Organization, src.organization_id)
    from kbframework.models import Setting

    st = s.scalar(select(Setting).where(Setting.organization_id == src.organization_id))
    allow = bool(((st.extra if st else {}) or {}).get("allow_private_network"))
    return SyncContext(organization_id=str(src.organization_id), timezone=org.timezone,
                       allow_private_network=allow, source_id=str(src.id),
                       log=lambda m: log.info("[%s] %s", src.id, m))


def normalize_record(connector, record, config, ctx):
    pm = get_plugin_manager()
    draft = pm.hook.kb_normalize(record=record, mapping=config.get("field_mapping") or {},
                                 source_type=connector.name, context=ctx)
    return draft if draft is not None else connector.normalize(record, config, ctx)


def run_sync(source_id, kind: str = "incremental", *, inline_ingest: bool = False) -> dict:
    t0 = time.perf_counter()
    with session_scope() as s:
        src = s.get(Source, as_uuid(source_id))
        if src is None:
            raise NotFound("No such source.")
        if src.status == "disabled":
            return {"skipped": "source disabled"}
        connector = registry.source_type(src.type)
        if not getattr(connector, "supports_sync", True):
            return {"skipped": f"{src.type} sources have nothing to sync"}
        if kind == "incremental" and src.watermark is None:
            kind = "full"
        run = SyncRun(organization_id=src.organization_id, source_id=src.id, kind=kind, status="running")
        s.add(run)
        src.status = "syncing"
        s.flush()
        run_id, org_id = run.id, src.organization_id
        config, ctx, since = source_config(src), sync_context(s, src), src.watermark
    stats = {"fetched": 0, "created": 0, "changed": 0, "cheap": 0, "unchanged": 0, "stale": 0,
             "unpublished": 0, "ignored": 0, "purged": 0, "errors": 0, "embedded_documents": 0}
    seen: set[str] = set()
    to_ingest: list[str] = []
    newest = since
    item_errors: list[str] = []
    try:
        records = connector.fetch_all(config, ctx) if kind == "full" else \
            connector.fetch_changed(config, since, ctx)
        batch = []
        for record in records:
            stats["fetched"] += 1
            seen.add(str(record.external_id))
            batch.append(record)
            if len(batch) >= BATCH:
                newest = _apply_batch(source_id, connector, batch, config, ctx, stats, to_ingest,
                                      newest, item_errors)
                batch = []
                if len(to_ingest) >= BATCH:
                    _ingest(to_ingest, inline_ingest, stats)
                    to_ingest = []
        if batch:
            newest = _apply_batch(source_id, connector, batch, config, ctx, stats, to_ingest, newest,
                                  item_errors)
        _ingest(to_ingest, inline_ingest, stats)
        if kind == "full":
            stats["purged"] = _reconcile(source_id, seen)
    except Exception as exc:
        reason = getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"
        log.warning("sync of %s failed: %s", source_id, reason)
        _ingest(to_ingest, inline_ingest, stats)
        with session_scope() as s:
            s.execute(update(Source).where(Source.id == as_uuid(source_id)).values(
                status="error", last_error=reason[:2000], updated_at=utcnow()))
            s.execute(update(SyncRun).where(SyncRun.id == run_id).values(
                status="error", error=reason[:4000], finished_at=utcnow(), stats=stats))
        return {"status": "error", "error": reason, "stats": stats}
    with session_scope() as s:
        values = dict(status="active", last_error=None, last_sync_at=utcnow(), updated_at=utcnow())
        if newest is not None:
            values["watermark"] = newest
        s.execute(update(Source).where(Source.id == as_uuid(source_id)).values(**values))
        s.execute(update(SyncRun).where(SyncRun.id == run_id).values(
            status="partial" if item_errors else "success", finished_at=utcnow(), stats=stats,
            error="\n".join(item_errors[:20]) or None))
    stats["seconds"] = round(time.perf_counter() - t0, 3)
    return {"status": "ok", "kind": kind, "stats": stats, "run_id": str(run_id)}


def _apply_batch(source_id, connector, batch, config, ctx, stats, to_ingest, newest, errors):
    with session_scope() as s:
        src = s.get(Source, as_uuid(source_id))
        for record in batch:
            try:
                draft = normalize_record(connector, record, config, ctx)
                with s.begin_nested():
                    doc, action = apply_draft(s, src, draft)
            except Exception as exc:
                stats["errors"] += 1
                errors.append(f"{record.external_id}: {getattr(exc, 'message', None) or exc}")
                continue
            stats[action] = stats.get(action, 0) + 1
            if action in ("created", "changed") and doc is not None and doc.status not in ("disabled", "expired"):
                to_ingest.append(str(doc.id))
            mod = record.source_modified_at or (draft.source_modified_at if draft else None)
            if mod is not None and (newest is None or mod > newest):
                newest = mod
    return newest


def _ingest(ids: list[str], inline: bool, stats: dict) -> None:
    if not ids:
        return
    from kbframework.documents import queue_ingest

    stats["embedded_documents"] += len(ids)
    for i in range(0, len(ids), BATCH):
        queue_ingest(ids[i:i + BATCH], inline=inline)


def _reconcile(source_id, seen: set[str]) -> int:
    """A full sync purges documents that the source no longer returns."""
    n = 0
    with session_scope() as s:
        docs = s.scalars(select(Document).where(Document.source_id == as_uuid(source_id),
                                                Document.status != "deleted")).all()
        for d in docs:
            if d.external_id is not None and d.external_id not in seen:
                purge_document(s, d)
                n += 1
    return n


def process_webhook(source_id, external_id: str, event: str, payload: dict | None = None,
                    webhook_event_id: int | None = None) -> dict:
    """Re-fetch (or delete) one item after a webhook; the same freshness rule as a sync."""
    with session_scope() as s:
        src = s.get(Source, as_uuid(source_id))
        if src is None:
            raise NotFound("No such source.")
        connector = registry.source_type(src.type)
        config, ctx = source_config(src), sync_context(s, src)
    outcome = "applied"
    doc_id = None
    try:
        if event == "deleted":
            with session_scope() as s:
                src = s.get(Source, as_uuid(source_id))
                doc = find_document(s, src, external_id)
                if doc is not None:
                    purge_document(s, doc)
                    doc_id = str(doc.id)
                outcome = "deleted" if doc else "unknown_item"
        else:
            record = connector.fetch_one(config, external_id, ctx)
            if record is None:
                with session_scope() as s:
                    src = s.get(Source, as_uuid(source_id))
                    doc = find_document(s, src, external_id)
                    if doc is not None:
                        purge_document(s, doc)
                outcome = "gone"
            else:
                draft = normalize_record(connector, record, config, ctx)
                with session_scope() as s:
                    src = s.get(Source, as_uuid(source_id))
                    doc, action = apply_draft(s, src, draft)
                    doc_id = str(doc.id) if doc else None
                    outcome = action
                    ingest = action in ("created", "changed") and doc.status not in ("disabled", "expired")
                if ingest:
                    from kbframework.documents import queue_ingest

                    queue_ingest([doc_id], inline=True)
    except KBError as exc:
        outcome = "error"
        _mark_event(webhook_event_id, "error", exc.message)
        raise
    _mark_event(webhook_event_id, outcome, None)
    return {"outcome": outcome, "document_id": doc_id}


def _mark_event(event_id, outcome, detail):
    if event_id is None:
        return
    with session_scope() as s:
        s.execute(update(WebhookEvent).where(WebhookEvent.id == event_id).values(
            outcome=outcome, detail=detail))
