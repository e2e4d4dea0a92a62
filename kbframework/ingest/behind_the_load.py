"""Work queued behind a load: it waits while ingest jobs of the load are still waiting (going to
the back of the queue a bounded number of times), then runs once. ``ingest.queue``'s statistics
refresh (ANALYZE) and the recount of a small organization's stored words
(``retrieval.term_stats``) after its chunks were written. Imports nothing of the pipeline, so
the pipeline can queue its recount here."""
from __future__ import annotations

import logging
from typing import Callable

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
            queue_once(WORDS_QUEUED + org, WORDS_JOB, lambda d, org=org: (org, d, force), "words-", force=force,
                       for_organization=org)
        except (RedisError, KBError) as exc:
            log.info("could not queue the word counts of organization %s: %s", org, exc)


def queue_once(key: str, func: str, args: Callable[[int], tuple], label: str = "", force: bool = False,
               **kwargs) -> bool:
    """Queue the job ``func(*args(0))`` behind the load unless one under ``key`` is waiting
    already (``force``: even then); the key is dropped by ``wait_behind_load`` when the job
    starts its work, or here if the job could not be queued. ``args(deferrals)``: the job's
    arguments after so many deferrals. True when it was queued."""
    from kbframework.jobs.queues import get_redis

    r = get_redis()
    if not r.set(key, 1, nx=True, ex=3600) and not force:  # expires, should the queued job be lost
        return False
    try:
        _enqueue(func, args(0), label, **kwargs)
    except BaseException:
        r.delete(key)  # not queued: the next load tries again
        raise
    return True


def wait_behind_load(key: str, func: str, args: Callable[[int], tuple], deferrals: int, label: str = "",
                     **kwargs) -> dict | None:
    """In the queued job: while ingest jobs still wait (the load goes on), the job goes to the
    back of the queue again, at most ``MAX_DEFERRALS`` times, and the deferral is returned; else
    the key is dropped (a load from now on queues the next one) and None says: do the work now."""
    from redis import RedisError

    from kbframework.jobs.queues import get_redis, queue

    try:
        waiting = ingest_jobs_waiting(queue("ingest"))
        if waiting and deferrals < MAX_DEFERRALS:
            _enqueue(func, args(deferrals + 1), label, **kwargs)
            return {"deferred": deferrals + 1, "ingest_jobs_waiting": waiting}
        get_redis().delete(key)
    except RedisError as exc:
        log.warning("%s: Redis unreachable (%s); running it now", func.rsplit(".", 1)[-1], exc)
    return None


def _enqueue(func: str, args: tuple, label: str, **kwargs) -> None:
    import uuid

    from kbframework.jobs.queues import enqueue

    # a refresh's id: it waits behind the ingest jobs, not behind another refresh
    enqueue("ingest", func, *args, job_id=f"{REFRESH_ID}{label}{uuid.uuid4().hex}", **kwargs)


WORDS_JOB = "kbframework.jobs.tasks.refresh_word_counts_job"


def refresh_word_counts_queued(org: str, deferrals: int = 0, force: bool = False) -> dict:
    """The queued count of one organization's words: behind the ingest jobs still waiting, then
    once."""
    from kbframework.retrieval.term_stats import refresh_if_incomplete

    deferred = wait_behind_load(WORDS_QUEUED + org, WORDS_JOB, lambda d: (org, d, force), deferrals, "words-",
                                for_organization=org)
    if deferred:
        return deferred
    counted = refresh_if_incomplete(org, force=force)
    if counted:
        from kbframework.retrieval.vector_index import prewarm_after_counts

        prewarm_after_counts([counted])  # the count read the organization's pages in bulk
    return {"counted": counted, "deferrals": deferrals}
