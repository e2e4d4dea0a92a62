"""Coalescing webhook work: a burst of deliveries for one item becomes one job.

WooCommerce fires a delivery per saved variation. The first delivery for an item queues a
job (a short delay, ``COALESCE_SECONDS``) and records it as the item's *pending* job in
Redis; later deliveries find that pending job and only record themselves. The job
releases the pending mark when it starts, before it fetches anything, so a delivery that
arrives while the job runs queues a new job instead of being swallowed by one that has
already read the item. The job always re-fetches the item, so it sees the newest state;
it runs with the event of the newest delivery.
"""
from __future__ import annotations

import uuid
from datetime import timedelta

from rq.exceptions import InvalidJobOperation, NoSuchJobError
from rq.job import Job

from kbframework.jobs.policy import enqueue_options
from kbframework.jobs.queues import get_redis, queue

COALESCE_SECONDS = 2
PENDING_TTL = 3600  # a pending mark outlives any sane queue delay; a lost job is detected below
WAITING = ("queued", "scheduled", "deferred")
FRESH_SECONDS = 30

# delete KEYS[1] only if it still names this job; hand back (and clear) the newest event
_RELEASE = """
local out = redis.call('get', KEYS[2])
if redis.call('get', KEYS[1]) == ARGV[1] then
  redis.call('del', KEYS[1])
  redis.call('del', KEYS[2])
  return out
end
return false
"""


def _keys(source_id: str, external_id: str) -> tuple[str, str]:
    base = f"kbf:wh:{source_id}:{external_id}"
    return base + ":pending", base + ":event"


def _status(r, job_id: str) -> str | None:
    try:
        return Job(job_id, connection=r).get_status(refresh=True)
    except (NoSuchJobError, InvalidJobOperation):
        return None


def schedule_item(source_id: str, external_id: str, event: str, webhook_event_id: int | None) -> str:
    """Queue (or join) the job that re-syncs one item; returns its job id."""
    r = get_redis()
    pending_key, event_key = _keys(str(source_id), str(external_id))
    for _ in range(3):
        job_id = f"wh-{source_id}-{external_id}-{uuid.uuid4().hex[:12]}"
        pipe = r.pipeline(transaction=False)  # one round trip on the common paths
        pipe.set(event_key, event, ex=PENDING_TTL)
        pipe.set(pending_key, job_id, nx=True, ex=PENDING_TTL)
        pipe.get(pending_key)
        _, created, current = pipe.execute()
        if created:
            try:
                queue("webhook").enqueue_in(timedelta(seconds=COALESCE_SECONDS), "kbframework.jobs.tasks.webhook_job",
                                            str(source_id), str(external_id), event, None, webhook_event_id,
                                            job_id=job_id, **enqueue_options("webhook"))
            except Exception:
                r.delete(pending_key)  # no job behind the mark: let the next delivery try again
                raise
            return job_id
        if current is None:
            continue  # released in between: try to become the pending job
        current = current.decode() if isinstance(current, bytes) else str(current)
        status = _status(r, current)
        if status in WAITING:
            return current  # coalesced into the job already waiting
        if status is None and r.ttl(pending_key) > PENDING_TTL - FRESH_SECONDS:
            return current  # marked an instant ago; its creator is enqueueing it right now
        # the pending job is gone (lost, or it ran without releasing the mark): replace it
        r.delete(pending_key)
    raise RuntimeError("could not schedule the webhook job")  # pragma: no cover


def release(source_id: str, external_id: str, job_id: str | None, event: str) -> str:
    """Called by the job when it starts: later deliveries queue a new job. Returns the
    newest event recorded for the item (``event`` when none)."""
    if not job_id:
        return event
    r = get_redis()
    newest = r.eval(_RELEASE, 2, *_keys(str(source_id), str(external_id)), job_id)
    if newest:
        return newest.decode() if isinstance(newest, bytes) else str(newest)
    return event


def pending_job(source_id: str, external_id: str) -> str | None:
    """The id of the job waiting for this item, if any (tests and the admin use it)."""
    value = get_redis().get(_keys(str(source_id), str(external_id))[0])
    return value.decode() if isinstance(value, bytes) else value
