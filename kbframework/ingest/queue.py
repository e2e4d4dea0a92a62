"""The one way documents get (re-)indexed: queued for a worker, or now in this process.

Either way the same steps follow the pipeline: whoever registered with ``on_ingested``
(retrieval's count cache) hears that the corpus changed, and after every few thousand new
chunks the planner's statistics are refreshed, so pre-filtered searches keep fast plans.
In a worker that refresh is one job queued behind the load (``refresh_statistics``), so a
bulk load analyzes once at its end instead of inside its ingest jobs.
"""
from __future__ import annotations

import logging
from typing import Callable

from kbframework.ingest.behind_the_load import queue_once, wait_behind_load

log = logging.getLogger("kbframework.ingest")

# documents per ingest job of a bulk load (a sync, a re-index). Each job pays a fixed cost
# (reading its documents and their organization's settings, waiting for its last write,
# RQ's bookkeeping, the word-count and vector-index marks): at fifty one-chunk documents a
# job that was a quarter of a worker's time; at 200 a load of 1,500 ran 0.40-0.47x the
# embedder alone with one worker process against 0.32-0.36x, and 0.52-0.56x against 0.40-0.44x
# with two (measured 2026-12-07). A job of 200 documents is still seconds of work, and a
# retry skips the documents it had already indexed (their hash is unchanged).
JOB_DOCUMENTS = 200
# ...or fewer, once their text reaches this many characters (about a thousand chunks): a job's
# documents are in the worker's memory together, and 200 long pages would be hundreds of MB
JOB_CHARACTERS = 2_000_000
ANALYZE_EVERY_CHUNKS = 3000


def job_full(documents: int, chars: int) -> bool:
    """Whether a job of this many documents, with this much text, takes no more."""
    return documents >= JOB_DOCUMENTS or chars >= JOB_CHARACTERS


def job_batches(sized: list[tuple[str, int]]) -> list[list[str]]:
    """(document id, its text's length) → the ids in jobs of at most ``JOB_DOCUMENTS``, each cut
    once its text reaches ``JOB_CHARACTERS``, in the given order."""
    out: list[list[str]] = []
    cur: list[str] = []
    chars = 0
    for doc_id, n in sized:
        cur.append(doc_id)
        chars += n
        if job_full(len(cur), chars):
            out.append(cur)
            cur, chars = [], 0
    if cur:
        out.append(cur)
    return out
_SINCE = "kbf:chunks_since_analyze"
_QUEUED = "kbf:analyze_queued"
_STATS_JOB = "kbframework.jobs.tasks.refresh_statistics_job"

_listeners: list[Callable[[], None]] = []


def on_ingested(fn: Callable[[], None]) -> Callable[[], None]:
    """Call ``fn()`` after every ingestion in this process (a cache of corpus counts forgets)."""
    if fn not in _listeners:
        _listeners.append(fn)
    return fn


def queue_ingest(doc_ids: list, force: bool = False, inline: bool = False):
    """Index these documents: ``inline`` now (returns the results), else on the ingest queue
    (returns the RQ job). ``force`` re-embeds unchanged documents too."""
    ids = [str(i) for i in doc_ids]
    if not ids:
        return None
    if inline:
        return ingest_now(ids, force=force)
    from kbframework import tenancy
    from kbframework.jobs.queues import enqueue

    if tenancy.current() != tenancy.SYSTEM:  # a request's or a job's own organization goes with the job
        return enqueue("ingest", "kbframework.jobs.tasks.ingest_documents_job", ids, force)
    # code with the system bypass (the CLI, a script, a sweep): a job without an organization
    # would run as nobody in the worker, find none of its documents and skip them all, so each
    # organization's documents get a job that names it (several organizations: a list of jobs)
    jobs = [enqueue("ingest", "kbframework.jobs.tasks.ingest_documents_job", part, force, for_organization=org)
            for org, part in _by_organization(ids).items()]
    return jobs[0] if len(jobs) == 1 else jobs


def _by_organization(ids: list[str]) -> dict:
    """{organization id: its document ids, in the given order}; ids this connection cannot see
    (not committed yet, or gone) keep the old way, one job with no organization (None)."""
    from sqlalchemy import text

    from kbframework.db import get_engine

    with get_engine().connect() as conn:
        org_of = dict(conn.execute(text(
            "SELECT id::text, organization_id::text FROM documents WHERE id = ANY(CAST(:ids AS uuid[]))"),
            {"ids": ids}).all())
    out: dict = {}
    for i in ids:
        out.setdefault(org_of.get(i), []).append(i)
    return out


def warm_up() -> None:
    """Load what every ingest job needs when a worker starts rather than in its first job:
    the pipeline's modules, the tokenizer and piece counts, an offline embedding model (a
    hosted one is not called: that would cost a request)."""
    from kbframework.hooks import registry
    from kbframework.ingest.pipeline import ingest_documents  # noqa: F401 (imported to load it)
    from kbframework.ingest.tokens import count_tokens_many

    count_tokens_many(["Warm up."])
    try:
        provider = registry.embedder()
        if getattr(provider, "is_offline", False):
            provider.embed_batch(["Warm up."])
    except Exception as exc:  # the first job meets the same failure and records it on its documents
        log.warning("could not load the embedding model when the worker started: %s", exc)


def ingest_now(doc_ids: list, force: bool = False) -> list:
    from kbframework.ingest.pipeline import ingest_documents

    results = ingest_documents([str(i) for i in doc_ids], force=force)
    for fn in list(_listeners):
        fn()
    refresh_statistics(sum(r.chunks for r in results if r.action == "indexed"))
    return results


def refresh_statistics(new_chunks: int) -> bool:
    """After a bulk load the planner's statistics are stale and the pre-filtered searches pick
    slow plans until autovacuum catches up; every few thousand new chunks we ANALYZE. Inside a
    worker's job the ANALYZE is queued behind the ingest jobs already waiting (one at a time);
    elsewhere (an inline load: CLI, evaluation) it runs at once. True when one ran or was queued."""
    if new_chunks <= 0:
        return False
    from redis import RedisError

    from kbframework.errors import KBError
    from kbframework.jobs.queues import get_redis

    try:
        r = get_redis()
        if r.incrby(_SINCE, new_chunks) < ANALYZE_EVERY_CHUNKS:
            return False
        if _in_job():
            queue_refresh()
            return True
    except (RedisError, KBError) as exc:  # statistics are an optimisation: never fail ingestion
        log.warning("could not count chunks for the statistics refresh: %s", exc)
        return False
    return analyze_now()


def _in_job() -> bool:
    from rq import get_current_job

    return get_current_job() is not None


def queue_refresh() -> bool:
    """Queue the refresh behind the ingest jobs waiting now, unless one is queued already."""
    return queue_once(_QUEUED, _STATS_JOB, lambda d: (d,))


def refresh_statistics_queued(deferrals: int = 0) -> dict:
    """The queued refresh: while more ingest jobs wait behind it (the load goes on), it goes to
    the back of the queue again, a bounded number of times; then one ANALYZE."""
    deferred = wait_behind_load(_QUEUED, _STATS_JOB, lambda d: (d,), deferrals)
    if deferred:
        return deferred
    return {"analyzed": analyze_now(), "deferrals": deferrals}


def analyze_now() -> bool:
    from redis import RedisError
    from sqlalchemy import text
    from sqlalchemy.exc import SQLAlchemyError

    from kbframework.db import get_engine
    from kbframework.errors import KBError
    from kbframework.jobs.queues import get_redis

    try:
        get_redis().set(_SINCE, 0)
    except (RedisError, KBError) as exc:
        log.warning("could not reset the chunk counter of the statistics refresh: %s", exc)
    try:
        from kbframework import tenancy

        with get_engine().begin() as conn, tenancy.owner(conn):  # the tenant role may not ANALYZE
            conn.execute(text("ANALYZE chunks"))
            conn.execute(text("ANALYZE documents"))
    except (SQLAlchemyError, KBError) as exc:  # statistics are an optimisation: never fail ingestion
        log.warning("could not refresh planner statistics: %s", exc)
        return False
    try:
        from kbframework.retrieval.term_stats import refresh_stale_term_stats
        from kbframework.retrieval.vector_index import prewarm_after_counts

        # the stored word counts of the organizations that changed, then their indexes loaded
        # again (each count read the organization's pages in bulk)
        prewarm_after_counts(refresh_stale_term_stats())
    except (SQLAlchemyError, KBError) as exc:  # counted on first sight meanwhile, as without them
        log.warning("could not refresh the stored word counts: %s", exc)
    return True

