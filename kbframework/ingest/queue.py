"""The one way documents get (re-)indexed: queued for a worker, or now in this process.

Either way the same steps follow the pipeline: whoever registered with ``on_ingested``
(retrieval's count cache) hears that the corpus changed, and after every few thousand new
chunks the planner's statistics are refreshed, so pre-filtered searches keep fast plans.
"""
from __future__ import annotations

import logging
from typing import Callable

log = logging.getLogger("kbframework.ingest")

ANALYZE_EVERY_CHUNKS = 3000

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
    from kbframework.jobs.queues import enqueue

    return enqueue("ingest", "kbframework.jobs.tasks.ingest_documents_job", ids, force)


def ingest_now(doc_ids: list, force: bool = False) -> list:
    from kbframework.ingest.pipeline import ingest_documents

    results = ingest_documents([str(i) for i in doc_ids], force=force)
    for fn in list(_listeners):
        fn()
    refresh_statistics(sum(r.chunks for r in results if r.action == "indexed"))
    return results


def refresh_statistics(new_chunks: int) -> bool:
    """After a bulk load the planner's statistics are stale and the pre-filtered searches pick
    slow plans until autovacuum catches up; every few thousand new chunks we ANALYZE at once."""
    if new_chunks <= 0:
        return False
    from redis import RedisError
    from sqlalchemy import text
    from sqlalchemy.exc import SQLAlchemyError

    from kbframework.db import get_engine
    from kbframework.errors import KBError
    from kbframework.jobs.queues import get_redis

    try:
        r = get_redis()
        total = r.incrby("kbf:chunks_since_analyze", new_chunks)
        if total < ANALYZE_EVERY_CHUNKS:
            return False
        r.set("kbf:chunks_since_analyze", 0)
        with get_engine().begin() as conn:
            conn.execute(text("ANALYZE chunks"))
            conn.execute(text("ANALYZE documents"))
        return True
    except (RedisError, SQLAlchemyError, KBError) as exc:  # statistics are an optimisation: never fail ingestion
        log.warning("could not refresh planner statistics: %s", exc)
        return False
