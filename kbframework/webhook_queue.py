"""Coalescing webhook work: a burst of deliveries for one item becomes one job.

WooCommerce fires a delivery per saved variation; the first delivery queues a job with a
deterministic id and a short delay, later ones within the window find it and only record
themselves. The job always re-fetches the item, so it sees the newest state.
"""
from __future__ import annotations

from datetime import timedelta

from rq.job import Job
from rq.exceptions import NoSuchJobError

from kbframework.queues import get_redis, queue

COALESCE_SECONDS = 2


def schedule_item(source_id: str, external_id: str, event: str, webhook_event_id: int | None) -> str:
    r = get_redis()
    job_id = f"wh-{source_id}-{external_id}"
    lock = f"kbf:whlock:{job_id}"
    if not r.set(lock, event, nx=True, ex=COALESCE_SECONDS + 1):
        if event == "deleted":
            r.set(lock + ":deleted", "1", ex=60)
        return job_id  # coalesced into the job already waiting
    try:
        old = Job.fetch(job_id, connection=r)
        if old.get_status(refresh=True) in ("queued", "scheduled", "deferred"):
            return job_id
    except NoSuchJobError:
        pass
    queue("webhook").enqueue_in(timedelta(seconds=COALESCE_SECONDS), "kbframework.jobs.webhook_job",
                                source_id, external_id, event, None, webhook_event_id, job_id=job_id)
    return job_id
