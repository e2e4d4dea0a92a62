"""What happens after a worker dies, a job fails, or Redis was away.

``job_failed`` is every job's failure callback (abandoned by a dead worker, timed out, or
raised): it records the reason on the job (``kbf jobs`` shows the history) and, after the
last attempt, leaves the failure where an admin sees it: the sync run and its source in
``error``, documents that were waiting for indexing in ``error``, the webhook delivery
``failed``.

``sweep`` runs on every worker every ``KB_JOB_SWEEP_SECONDS`` (one worker at a time) and in
the scheduler: it queues work held in the outbox while Redis was unreachable, closes sync
runs whose worker or process is gone (their source goes back to ``error``, so scheduled
reconciliation picks it up again), re-queues webhook receipts whose job was lost, and
re-queues indexing for documents left waiting far longer than any queue takes.
"""
from __future__ import annotations

import logging
import os
from datetime import datetime, timedelta, timezone

from sqlalchemy import text

log = logging.getLogger("kbframework.jobs")

SWEEP_LOCK = "kbf:recovery-sweep"
RECEIPT_STALE = timedelta(minutes=10)  # a receipt still "queued" this long after arrival lost its job
RECEIPT_HORIZON = timedelta(hours=24)  # older ones are left to the scheduled reconciliation


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


def _ensure_db() -> None:
    """A failure callback or a sweep can run in a worker before any job opened the database."""
    from sqlalchemy.exc import SQLAlchemyError

    from kbframework.db import get_engine
    from kbframework.errors import KBError

    try:
        get_engine()
    except (KBError, SQLAlchemyError, OSError):  # the services did not start: boot them the worker's way
        log.warning("the database did not open on the first try; booting the worker's services", exc_info=True)
        from kbframework.jobs.boot import boot

        boot()


def _text(v) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


# --------------------------------------------------------------------------- failures


def failure_reason(exc_type, exc_value) -> str:
    from rq.exceptions import AbandonedJobError
    from rq.timeouts import JobTimeoutException

    from kbframework.jobs.policy import TimeLimitExceeded, heartbeat_seconds

    if exc_type is not None and issubclass(exc_type, AbandonedJobError):
        return f"the worker running it stopped (no heartbeat for {heartbeat_seconds()} s)"
    if exc_type is not None and issubclass(exc_type, (JobTimeoutException, TimeLimitExceeded)):
        return f"it ran longer than its time limit ({exc_value})"
    name = exc_type.__name__ if exc_type is not None else "error"
    message = getattr(exc_value, "message", None) or str(exc_value or "")
    return f"{name}: {message}"[:1000]


def job_failed(job, connection, exc_type, exc_value, tb) -> None:
    """RQ failure callback (before RQ decides whether to retry)."""
    reason = failure_reason(exc_type, exc_value)
    final = not job.should_retry
    meta = job.meta or {}
    failures = list(meta.get("failures") or [])[-9:]
    failures.append({"at": utcnow().isoformat(timespec="seconds"), "reason": reason})
    meta["failures"] = failures
    meta["attempts"] = int(meta.get("attempts") or 0) + 1
    if not final:
        wait = job.get_retry_interval() if hasattr(job, "get_retry_interval") else 0
        meta["next_attempt"] = (f"retry in {wait} s" if wait else "retry now") + f" ({job.retries_left} left)"
    else:
        meta["next_attempt"] = None
    job.meta = meta
    try:
        job.save_meta()
    except Exception as exc:
        log.warning("could not record the failure of job %s: %s", job.id, exc)
    log.warning("job %s (%s) failed, attempt %s: %s%s", job.id, job.func_name, meta["attempts"], reason,
                "" if final else f"; {meta['next_attempt']}")
    try:
        _ensure_db()
        with _scope_of(job):
            _record_failure(job, reason, final, meta["attempts"])
    except Exception as exc:  # the job's own state is already in RQ's failed registry
        log.warning("could not record the failure of job %s in the database: %s", job.id, exc)


def _scope_of(job):
    """A failure is recorded in the failed job's organization: the callback also runs from the
    sweep (a dead worker's job), outside any job. A job that names no organization (queued
    before jobs recorded theirs) has its failure recorded with an explicit bypass: the update
    touches only the rows the job's own ids name."""
    from kbframework import tenancy
    from kbframework.jobs.scope import organization_of

    org = organization_of(job)
    return tenancy.organization(org) if org else tenancy.system("record the failure of a job naming no organization")


def _record_failure(job, reason: str, final: bool, attempts: int) -> None:
    from kbframework.db import get_engine

    func = job.func_name or ""
    args = list(job.args or [])
    if func.endswith(".sync_source_job") and args:
        what = f"gave up after {attempts} attempts: {reason}" if final else \
            f"attempt {attempts} stopped ({reason}); it will be retried"
        with get_engine().begin() as conn:
            conn.execute(text(
                "UPDATE sync_runs SET status = 'error', error = :e, finished_at = now() "
                "WHERE job_id = :j AND status = 'running'"), {"e": f"The sync {what}", "j": job.id})
            conn.execute(text(
                "UPDATE sources SET status = 'error', last_error = :e, updated_at = now() "
                "WHERE id = CAST(:s AS uuid) AND status = 'syncing'"), {"e": f"The sync {what}", "s": str(args[0])})
        return
    if not final:
        return
    if func.endswith(".ingest_documents_job") and args:
        _fail_documents([str(i) for i in (args[0] or [])], f"Indexing gave up after {attempts} attempts: {reason}")
    elif func.endswith(".extract_job") and args:
        _fail_documents([str(args[0])], f"Extraction gave up after {attempts} attempts: {reason}")
    elif func.endswith(".webhook_job") and len(args) >= 5 and args[4] is not None:
        with get_engine().begin() as conn:
            conn.execute(text("UPDATE webhook_events SET outcome = 'failed', detail = :d WHERE id = :i"),
                         {"d": f"gave up after {attempts} attempts: {reason}"[:2000], "i": int(args[4])})


def _fail_documents(ids: list[str], reason: str) -> None:
    """Documents still waiting for this work become ``error`` (their old chunks, if any, keep
    serving); documents indexed meanwhile are left alone."""
    from kbframework.db import get_engine

    if not ids:
        return
    with get_engine().begin() as conn:
        conn.execute(text(
            "UPDATE documents SET status = 'error', updated_at = now(), "
            "metadata = metadata || jsonb_build_object('last_error', CAST(:r AS text), "
            "'last_error_at', CAST(:t AS text)) "
            "WHERE id = ANY(CAST(:ids AS uuid[])) AND status = 'syncing'"),
            {"r": reason[:2000], "t": utcnow().isoformat(), "ids": ids})


# --------------------------------------------------------------------------- the sweep


def sweep(connection=None, *, registries: bool = False) -> dict:
    """One recovery pass (skipped when another process swept within the interval). It runs
    cross-organization: the worker calls it between jobs, where it sees no rows by default."""
    from kbframework import tenancy

    with tenancy.system("the recovery sweep over every organization's held jobs, runs and receipts"):
        return _sweep(connection, registries=registries)


def _sweep(connection=None, *, registries: bool = False) -> dict:
    from kbframework.jobs.outbox import drain
    from kbframework.jobs.policy import sweep_seconds
    from kbframework.jobs.queues import enqueue_now, get_redis

    r = connection or get_redis()
    if not r.set(SWEEP_LOCK, os.getpid(), nx=True, ex=max(1, int(sweep_seconds()))):
        return {"skipped": "swept moments ago"}
    _ensure_db()
    out: dict = {}
    if registries:
        out["abandoned"] = clean_registries(r)
    for name, step in (("outbox", lambda: drain(enqueue_now)), ("runs", lambda: recover_runs(r)),
                       ("receipts", lambda: requeue_lost_receipts(r))):
        try:
            out[name] = step()
        except Exception as exc:
            log.warning("recovery step %s failed: %s", name, exc)
            out[name] = f"error: {exc}"
    return out


def clean_registries(connection) -> int:
    """RQ's own cleanup of started jobs whose lease ran out: retried, or failed after the last
    attempt (our failure callback runs for each)."""
    from rq.registry import StartedJobRegistry

    from kbframework.jobs.queues import QUEUE_NAMES, queue

    n = 0
    for name in QUEUE_NAMES:
        q = queue(name)
        if q.acquire_maintenance_lock():
            try:
                reg = StartedJobRegistry(queue=q)
                n += len(reg.get_expired_job_ids())
                reg.cleanup()
            finally:
                q.release_maintenance_lock()
    return n


def recover_runs(connection) -> dict:
    """Close sync runs left ``running`` by a process that is gone; a source left ``syncing``
    without a live run goes to ``error`` (so it stays due for reconciliation)."""
    from kbframework.db import get_engine
    from kbframework.jobs.owners import owner_alive

    closed = 0
    with get_engine().begin() as conn:
        rows = conn.execute(text(
            "SELECT id, job_id, started_at FROM sync_runs WHERE status = 'running'")).all()
        for run_id, owner, started in rows:
            if owner_alive(connection, owner, started):
                continue
            conn.execute(text(
                "UPDATE sync_runs SET status = 'error', finished_at = now(), "
                "error = coalesce(error, :e) WHERE id = :i AND status = 'running'"),
                {"i": run_id, "e": "The sync stopped before it finished: the process running it is gone."})
            closed += 1
        sources = conn.execute(text(
            "UPDATE sources s SET status = 'error', updated_at = now(), "
            "last_error = 'The sync stopped before it finished (its worker or process is gone); "
            "it is retried, and the scheduled reconciliation runs it again.' "
            "WHERE s.status = 'syncing' AND NOT EXISTS (SELECT 1 FROM sync_runs r "
            "WHERE r.source_id = s.id AND r.status = 'running') RETURNING s.id")).all()
    if closed or sources:
        log.warning("recovered %s stopped sync run(s); %s source(s) back to error", closed, len(sources))
    return {"runs": closed, "sources": len(sources)}


def requeue_lost_receipts(connection) -> int:
    """A webhook receipt still ``queued`` long after it arrived, with no job waiting for its
    item and nothing in the outbox, lost its job (a crash between receipt and queueing, or
    Redis losing data): its item is fetched again."""
    from kbframework.db import get_engine
    from kbframework.jobs.queues import enqueue
    from kbframework.sources.webhook_queue import pending_job

    now = utcnow()
    with get_engine().connect() as conn:
        rows = conn.execute(text(
            "SELECT source_id, external_id, max(id), organization_id FROM webhook_events "
            "WHERE outcome = 'queued' AND external_id IS NOT NULL AND received_at < :stale "
            "AND received_at > :horizon GROUP BY source_id, external_id, organization_id LIMIT 200"),
            {"stale": now - RECEIPT_STALE, "horizon": now - RECEIPT_HORIZON}).all()
        held = {(_text(a[0]), _text(a[1])) for a in conn.execute(text(
            "SELECT args->>0, args->>1 FROM job_outbox WHERE queue = 'webhook'")).all()}
    n = 0
    for source_id, external_id, event_id, org_id in rows:
        key = (str(source_id), str(external_id))
        if key in held or pending_job(*key):
            continue
        marker = f"kbf:wh-requeued:{event_id}"
        if not connection.set(marker, 1, nx=True, ex=int(RECEIPT_HORIZON.total_seconds())):
            continue  # queued once already; its job records the outcome
        enqueue("webhook", "kbframework.jobs.tasks.webhook_job", key[0], key[1], "updated", None, int(event_id),
                job_id=f"wh-{key[0]}-{key[1]}-requeued-{event_id}", for_organization=org_id)
        n += 1
    if n:
        log.warning("re-queued %s webhook item(s) whose job was lost", n)
    return n
