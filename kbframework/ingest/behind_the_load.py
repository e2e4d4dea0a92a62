"""Work queued behind a load: it waits while ingest jobs of the load are still waiting (going to
the back of the queue a bounded number of times), then runs once. ``ingest.queue``'s statistics
refresh (ANALYZE) and the recount of a small organization's stored words
(``retrieval.term_stats``) after its chunks were written. Imports nothing of the pipeline, so
the pipeline can queue its recount here."""
from __future__ import annotations

import logging

log = logging.getLogger("kbframework.ingest")

MAX_DEFERRALS = 20  # a refresh waits behind at most this many rounds of newly queued ingest jobs
REFRESH_ID = "kbf-refresh-statistics-"  # the ids of work behind the load: none waits for another
WORDS_QUEUED = "kbf:word-counts-queued:"


def ingest_jobs_waiting(q) -> int:
    """Jobs other than a refresh among the first hundred waiting on the queue."""
    return sum(1 for jid in q.get_job_ids(0, 100) if not jid.startswith(REFRESH_ID))


def after_new_chunks(org_ids, force: bool = False) -> None:
    """Ingestion wrote chunks of these organizations: a job per organization, queued behind the
    load (at most one waiting for each), counts a small one's words again
    (``term_stats.refresh_if_incomplete``), so its stored list is complete again. Never fails
    ingestion, and never counts in the caller's process (a request's note, a CLI load in
    batches would pay a count per batch): without a queue the list stays incomplete, which only
    means its missing words are looked up, until the next refresh after loads. ``force``: the
    load's writes could not be recorded, so the list may wrongly say it is complete: counted
    again whatever it says, whatever the organization's size."""
    from redis import RedisError

    from kbframework.errors import KBError

    for org in sorted({str(o) for o in org_ids}):
        try:
            _queue_word_counts(org, force=force)
        except (RedisError, KBError) as exc:
            log.info("could not queue the word counts of organization %s: %s", org, exc)


def _queue_word_counts(org: str, deferrals: int = 0, force: bool = False) -> None:
    """At most one waiting job per organization: the key is dropped when the job starts
    counting, so a load that commits while it counts queues the next one."""
    import uuid

    from kbframework.jobs.queues import enqueue, get_redis

    r = get_redis()
    # expires, should the job be lost; a forced count goes on the queue even beside a waiting one
    if deferrals == 0 and not r.set(WORDS_QUEUED + org, 1, nx=True, ex=3600) and not force:
        return
    try:
        # a refresh's id: it waits behind the ingest jobs, not behind another refresh
        enqueue("ingest", "kbframework.jobs.tasks.refresh_word_counts_job", org, deferrals, force,
                job_id=f"{REFRESH_ID}words-{uuid.uuid4().hex}", for_organization=org)
    except BaseException:
        r.delete(WORDS_QUEUED + org)
        raise


def refresh_word_counts_queued(org: str, deferrals: int = 0, force: bool = False) -> dict:
    """The queued count of one organization's words: behind the ingest jobs still waiting (a
    bounded number of times, as the statistics refresh), then once."""
    from redis import RedisError

    from kbframework.jobs.queues import get_redis, queue
    from kbframework.retrieval.term_stats import refresh_if_incomplete

    try:
        waiting = ingest_jobs_waiting(queue("ingest"))
        if waiting and deferrals < MAX_DEFERRALS:
            _queue_word_counts(org, deferrals + 1, force)
            return {"deferred": deferrals + 1, "ingest_jobs_waiting": waiting}
        get_redis().delete(WORDS_QUEUED + org)
    except RedisError as exc:
        log.warning("word counts: Redis unreachable (%s); counting now", exc)
    done = refresh_if_incomplete(org, force=force)
    return {"counted": done, "deferrals": deferrals}
