"""``kbf worker``: an RQ worker that runs jobs in its own process (no fork per job), so the
embedding model and plugins load once; with ``--with-scheduler`` it also runs RQ's scheduler
for delayed jobs and our periodic jobs (expiry, each source's reconciliation)."""
from __future__ import annotations

import logging
import threading
import time
from datetime import datetime, timedelta, timezone

from rq import SimpleWorker

log = logging.getLogger("kbframework.worker")

EXPIRY_EVERY = 300  # seconds


def run_worker(queue_names: list[str], burst: bool = False, with_scheduler: bool = False) -> None:
    from kbframework import jobs
    from kbframework.queues import get_redis, queue

    jobs._boot()
    if with_scheduler and not burst:
        threading.Thread(target=periodic_loop, daemon=True, name="kbf-periodic").start()
    w = SimpleWorker([queue(n) for n in queue_names], connection=get_redis())
    w.work(burst=burst, with_scheduler=with_scheduler or burst, logging_level="WARNING")


def run_burst(queue_names=("webhook", "ingest", "sync", "reindex")) -> None:
    """Drain the queues once in this process (tests and `make run` seeding use it)."""
    from kbframework.queues import get_redis, queue
    from rq.registry import ScheduledJobRegistry

    r = get_redis()
    qs = [queue(n) for n in queue_names]
    for q in qs:  # delayed jobs (webhook coalescing) run now rather than after their delay
        reg = ScheduledJobRegistry(queue=q)
        for job_id in reg.get_job_ids():
            job = q.fetch_job(job_id)
            reg.remove(job_id)
            if job is not None:
                q.enqueue_job(job)
    SimpleWorker(qs, connection=r).work(burst=True, logging_level="WARNING")


def periodic_loop() -> None:
    """Expiry every five minutes; each source's reconciliation at its own interval."""
    from kbframework.queues import enqueue

    last_expiry = 0.0
    while True:
        try:
            if time.monotonic() - last_expiry > EXPIRY_EVERY:
                enqueue("reindex", "kbframework.jobs.expire_job")
                last_expiry = time.monotonic()
            for source_id in due_sources():
                enqueue("sync", "kbframework.jobs.sync_source_job", source_id, "incremental",
                        job_id=f"reconcile-{source_id}")
        except Exception as exc:
            log.warning("periodic scheduling failed: %s", exc)
        time.sleep(30)


def due_sources(now: datetime | None = None) -> list[str]:
    from sqlalchemy import select

    from kbframework.db import session_scope
    from kbframework.models import Source

    now = now or datetime.now(timezone.utc)
    out = []
    with session_scope() as s:
        for src in s.scalars(select(Source).where(Source.status.in_(("active", "error")),
                                                  Source.sync_interval_minutes.isnot(None))):
            if src.last_sync_at is None or src.last_sync_at + timedelta(minutes=src.sync_interval_minutes) <= now:
                out.append(str(src.id))
    return out
