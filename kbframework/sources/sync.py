"""Source synchronisation, the same for every connector (the freshness rules).

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

from sqlalchemy import select, update

from kbframework.clock import utcnow
from kbframework.hooks import registry
from kbframework.orgs.accounts import as_uuid
from kbframework.db import session_scope
from kbframework.errors import KBError, NotFound
from kbframework.hooks.manager import get_plugin_manager
from kbframework.ingest.queue import JOB_DOCUMENTS, job_full, queue_ingest
from kbframework.sources.apply import apply_draft, find_document, purge_document
from kbframework.models import Document, Organization, Source, SyncRun, WebhookEvent
from kbframework.security import decrypt_json
from kbframework.types import SyncContext

log = logging.getLogger("kbframework.sources.sync")

BATCH = 50  # records applied per transaction; ingest jobs take JOB_DOCUMENTS documents each


def source_config(src: Source) -> dict:
    """The connector's config with its secrets decrypted (never sent back to a browser)."""
    return {**(src.config or {}), **decrypt_json(src.secrets)}


def sync_context(s, src: Source) -> SyncContext:
    return org_context(s, src.organization_id, src)


def org_context(s, organization_id, src: Source | None = None) -> SyncContext:
    """What a connector is told about the organization (and the source, once it is saved)."""
    org = s.get(Organization, as_uuid(organization_id))
    from kbframework.models import Setting

    st = s.scalar(select(Setting).where(Setting.organization_id == org.id))
    from kbframework.net import organization_policy

    allow = organization_policy({"allow_private_network": bool(st and st.allow_private_network)})  # the operator decides, the org narrows
    return SyncContext(organization_id=str(org.id), timezone=org.timezone,
                       allow_private_network=allow, source_id=str(src.id) if src is not None else None,
                       log=lambda m: log.info("[%s] %s", src.id if src is not None else org.id, m))


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
        if not connector.supports_sync:
            return {"skipped": f"{src.type} sources have nothing to sync"}
        if kind == "incremental" and src.watermark is None:
            kind = "full"
        owner = _run_owner()
        _close_stopped_runs(s, src.id, owner)
        run = SyncRun(organization_id=src.organization_id, source_id=src.id, kind=kind, status="running",
                      job_id=owner)
        s.add(run)
        src.status = "syncing"
        s.flush()
        run_id = run.id
        config, ctx, since = source_config(src), sync_context(s, src), src.watermark
        # No watermark: a first sync, or the field mapping changed (sources.update_source
        # clears it). Then drafts with the stored source timestamp are applied again.
        reapply = since is None
        # What we hold, for the freshness rule before any work: a record whose source timestamp is
        # not newer than its live document's is neither normalized nor applied, and a
        # connector may skip fetching details for it (ctx.extra, read-only for connectors).
        ctx.extra["reapply"] = reapply
        ctx.extra["known_modified"] = {} if reapply else dict(s.execute(
            select(Document.external_id, Document.source_modified_at).where(
                Document.source_id == src.id, Document.status != "deleted",
                Document.source_modified_at.isnot(None))).all())
    stats = {"fetched": 0, "created": 0, "changed": 0, "cheap": 0, "unchanged": 0, "stale": 0,
             "unpublished": 0, "ignored": 0, "purged": 0, "errors": 0, "embedded_documents": 0}
    seen: set[str] = set()
    to_ingest = _ToIngest()
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
                                      newest, item_errors, reapply)
                batch = []
                if to_ingest.full():
                    _ingest(to_ingest.ids, inline_ingest, stats)
                    to_ingest = _ToIngest()
        if batch:
            newest = _apply_batch(source_id, connector, batch, config, ctx, stats, to_ingest, newest,
                                  item_errors, reapply)
        _ingest(to_ingest.ids, inline_ingest, stats)
        if kind == "full":
            stats["purged"] = _reconcile(source_id, seen)
        _resume_waiting(source_id, inline_ingest, stats)
    except Exception as exc:
        reason = getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"
        log.warning("sync of %s failed: %s", source_id, reason)
        _ingest(to_ingest.ids, inline_ingest, stats)
        stats.pop("_queued", None)
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


def _apply_batch(source_id, connector, batch, config, ctx, stats, to_ingest, newest, errors, reapply=False):
    """Normalize and apply a batch in one transaction: the batch's documents are loaded with
    one query and new rows are inserted together. If anything fails, the batch is applied
    again one item at a time (a savepoint each), so one bad item only fails itself."""
    drafts = []
    # Connectors that promise RawRecord.source_modified_at is never older than their draft's
    # (``record_timestamps=True``) get records that are not newer skipped before normalizing.
    known = {} if reapply or not connector.record_timestamps else \
        (ctx.extra.get("known_modified") or {})
    for record in batch:
        held = known.get(str(record.external_id))
        if held is not None and record.source_modified_at is not None and record.source_modified_at <= held:
            stats["stale"] += 1  # nothing newer than the live document we hold (the freshness rule)
            if newest is None or record.source_modified_at > newest:
                newest = record.source_modified_at
            continue
        try:
            drafts.append((record, normalize_record(connector, record, config, ctx)))
        except Exception as exc:  # a connector's record that cannot be normalized: counted, the sync goes on
            log.warning("cannot normalize record %s", record.external_id, exc_info=True)
            stats["errors"] += 1
            errors.append(f"{record.external_id}: {getattr(exc, 'message', None) or exc}")
    try:
        results = _apply_drafts(source_id, drafts, reapply, careful=False)
    except Exception as exc:
        log.info("batch apply failed (%s); retrying item by item", exc)
        results = _apply_drafts(source_id, drafts, reapply, careful=True)
    for (record, draft), (doc_id, doc_status, action, error) in zip(drafts, results):
        if error is not None:
            stats["errors"] += 1
            errors.append(f"{record.external_id}: {error}")
            continue
        stats[action] = stats.get(action, 0) + 1
        if action in ("created", "changed") and doc_id is not None and doc_status not in ("disabled", "expired"):
            to_ingest.add(doc_id, len(draft.normalized_content or ""))
        mod = record.source_modified_at or draft.source_modified_at
        if mod is not None and (newest is None or mod > newest):
            newest = mod
    return newest


def _apply_drafts(source_id, drafts, reapply: bool, careful: bool) -> list[tuple]:
    out = []
    with session_scope() as s:
        src = s.get(Source, as_uuid(source_id))
        ext_ids = {str(d.external_id) for _, d in drafts if d.external_id is not None}
        known = {d.external_id: d for d in s.scalars(select(Document).where(
            Document.source_id == src.id, Document.external_id.in_(ext_ids)))} if ext_ids else {}
        for _record, draft in drafts:
            key = str(draft.external_id) if draft.external_id is not None else None
            try:
                if careful:
                    with s.begin_nested():
                        doc, action = apply_draft(s, src, draft, reapply=reapply, doc=known.get(key))
                else:
                    doc, action = apply_draft(s, src, draft, reapply=reapply, doc=known.get(key), flush=False)
            except Exception as exc:
                if not careful:
                    raise
                out.append((None, None, None, getattr(exc, "message", None) or str(exc)))
                continue
            if doc is not None and key is not None:
                known[key] = doc
            out.append((str(doc.id) if doc is not None else None, doc.status if doc is not None else None,
                        action, None))
    return out


class _ToIngest:
    """The documents a sync has applied and not yet queued: queued as one job once there are
    ``JOB_DOCUMENTS`` of them or their text reaches ``JOB_CHARACTERS``."""

    def __init__(self):
        self.ids: list[str] = []
        self.chars = 0

    def add(self, doc_id: str, chars: int) -> None:
        self.ids.append(doc_id)
        self.chars += chars

    def full(self) -> bool:
        return job_full(len(self.ids), self.chars)


def _ingest(ids: list[str], inline: bool, stats: dict) -> None:
    if not ids:
        return
    stats["embedded_documents"] += len(ids)
    stats.setdefault("_queued", set()).update(ids)
    for i in range(0, len(ids), JOB_DOCUMENTS):
        res = queue_ingest(ids[i:i + JOB_DOCUMENTS], inline=inline)
        if inline:
            failed = [r for r in res or [] if r.action == "error"]
            if failed:
                stats["index_errors"] = stats.get("index_errors", 0) + len(failed)


def _run_owner() -> str:
    """The RQ job running this sync, or this process when it runs inline (CLI, tests)."""
    from rq import get_current_job

    from kbframework.jobs.owners import inline_owner

    try:
        job = get_current_job()
    except Exception:  # no RQ context to read (Redis unreachable): the sync runs inline
        log.debug("no current RQ job", exc_info=True)
        job = None
    return job.id if job is not None else inline_owner()


def _close_stopped_runs(s, source_id, owner: str) -> None:
    """A run still ``running`` under this same job is an earlier attempt whose worker died;
    it is closed before the retry opens its own run."""
    s.execute(update(SyncRun).where(SyncRun.source_id == source_id, SyncRun.status == "running",
                                    SyncRun.job_id == owner).values(
        status="error", finished_at=utcnow(),
        error="This attempt stopped before it finished (its worker died); the sync was restarted."))


def _resume_waiting(source_id, inline: bool, stats: dict) -> None:
    """Documents of this source still waiting for indexing that this run did not queue (an
    earlier run stopped between saving them and queueing their indexing) are indexed now, so
    a restarted sync leaves no document half done."""
    queued = stats.pop("_queued", set())
    with session_scope() as s:
        waiting = [str(i) for i in s.scalars(select(Document.id).where(
            Document.source_id == as_uuid(source_id), Document.status == "syncing"))]
    rest = [i for i in waiting if i not in queued]
    if rest:
        stats["resumed"] = len(rest)
        _ingest(rest, inline, stats)
        stats["embedded_documents"] -= len(rest)
        stats.pop("_queued", None)


def _reconcile(source_id, seen: set[str]) -> int:
    """A full sync purges documents that the source no longer returns."""
    n = 0
    with session_scope() as s:
        rows = s.execute(select(Document.id, Document.external_id).where(
            Document.source_id == as_uuid(source_id), Document.status != "deleted")).all()
        for doc_id, external_id in rows:  # only the missing ones are loaded
            if external_id is not None and external_id not in seen:
                purge_document(s, s.get(Document, doc_id))
                n += 1
    return n


def process_webhook(source_id, external_id: str, event: str, payload: dict | None = None,
                    webhook_event_id: int | None = None) -> dict:
    """Re-fetch (or delete) one item after a webhook; the same freshness rule as a sync."""
    started = utcnow()
    with session_scope() as s:
        src = s.get(Source, as_uuid(source_id))
        if src is None:
            raise NotFound("No such source.")
        connector = registry.source_type(src.type)
        config, ctx = source_config(src), sync_context(s, src)
        disabled = src.status == "disabled"
    if disabled:  # disabled after the delivery was queued
        _mark_event(webhook_event_id, "source_disabled", None, source_id, external_id, started)
        return {"outcome": "source_disabled", "document_id": None}
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
                    if action == "stale":
                        log.info("stale webhook update ignored for %s/%s: %s is not newer than %s", source_id,
                                 external_id, draft.source_modified_at, doc.source_modified_at)
                    ingest = action in ("created", "changed") and doc.status not in ("disabled", "expired")
                if ingest:
                    queue_ingest([doc_id], inline=True)
    except KBError as exc:
        outcome = "error"
        _mark_event(webhook_event_id, "error", exc.message, source_id, external_id, started)
        raise
    _mark_event(webhook_event_id, outcome, None, source_id, external_id, started)
    return {"outcome": outcome, "document_id": doc_id}


def _mark_event(event_id, outcome, detail, source_id=None, external_id=None, before=None):
    """Record the outcome on the delivery that queued the job and on every delivery for the
    same item that was coalesced into it (still ``queued``, received before the job started)."""
    with session_scope() as s:
        if event_id is not None:
            s.execute(update(WebhookEvent).where(WebhookEvent.id == event_id).values(
                outcome=outcome, detail=detail))
        if source_id is not None and external_id is not None:
            s.execute(update(WebhookEvent).where(
                WebhookEvent.source_id == as_uuid(source_id), WebhookEvent.external_id == str(external_id),
                WebhookEvent.outcome == "queued", WebhookEvent.received_at <= (before or utcnow())).values(
                outcome=outcome, detail=detail if event_id is None else f"coalesced into event {event_id}"
                + (f": {detail}" if detail else "")))
