"""Stored word counts (``term_stats``, migration 0009) for the keyword ranking of large
organizations: BM25 needs each question word's chunk count, and on first sight a count costs
up to ``DF_CAP`` heap visits in a large organization. They are refreshed from ``ts_stat`` after
loads (``kbf db indexes --build``, the statistics refresh queued behind an ingest load) for
the organizations above the exact-scan size that changed by a tenth; ``corpus_stats`` reads
them before it counts. This module imports nothing of ingestion, so ingestion's statistics
refresh can call it; a process's cached counts follow within their ten minutes."""
from __future__ import annotations

import logging
import time

from sqlalchemy import text

log = logging.getLogger("kbframework.term_stats")


REFRESH_CHANGE = 0.1  # a stored count is refreshed once the organization's chunks moved by a tenth


def term_stats_min_chunks() -> int:
    """Organizations above the exact-scan size keep stored counts: below it a count on first
    sight costs a few milliseconds."""
    from kbframework.config import get_config

    return get_config().exact_scan_max_rows


def refresh_term_stats(org_id) -> dict:
    """Every word's chunk count in one organization, from ``ts_stat`` over its chunks, replacing
    the stored ones in one transaction (readers see the old counts or the new)."""
    import uuid

    from kbframework.db import session_scope

    org = str(uuid.UUID(str(org_id)))  # a literal inside ts_stat's query text: only a real id
    t0 = time.perf_counter()
    with session_scope() as s:
        s.execute(text("DELETE FROM term_stats WHERE organization_id = :org"), {"org": org})
        words = s.execute(text(
            "INSERT INTO term_stats (organization_id, lexeme, df) SELECT CAST(:org AS uuid), word, ndoc "
            "FROM ts_stat(:q)"), {"org": org, "q": f"SELECT tsv FROM chunks WHERE organization_id = '{org}'"}).rowcount
        chunks = s.execute(text("SELECT count(*) FROM chunks WHERE organization_id = :org"), {"org": org}).scalar()
        secs = round(time.perf_counter() - t0, 2)
        s.execute(text(
            "INSERT INTO term_stats_state (organization_id, chunks, words, seconds, refreshed_at) "
            "VALUES (:org, :n, :w, :secs, now()) ON CONFLICT (organization_id) DO UPDATE SET "
            "chunks = EXCLUDED.chunks, words = EXCLUDED.words, seconds = EXCLUDED.seconds, "
            "refreshed_at = EXCLUDED.refreshed_at"), {"org": org, "n": chunks, "w": words, "secs": secs})
    log.info("stored %s word counts of organization %s (%s chunks) in %.1fs", words, org, chunks, secs)
    return {"organization_id": org, "words": words, "chunks": chunks, "seconds": secs}


def stale_term_stats(session, sizes: dict[str, int] | None = None) -> list[str]:
    """Organizations above ``term_stats_min_chunks`` whose stored counts are missing or were
    made when they held a tenth more or fewer chunks; and stored counts of organizations that
    fell below it are dropped. ``sizes``: {organization id: chunks}, when the caller counted
    them already (otherwise one pass over the chunks counts them)."""
    limit = term_stats_min_chunks()
    if sizes is None:
        sizes = {str(o): int(n) for o, n in session.execute(text(
            "SELECT organization_id, count(*) FROM chunks GROUP BY organization_id")).all()}
    stored = {str(o): int(n) for o, n in session.execute(text(
        "SELECT organization_id, chunks FROM term_stats_state")).all()}
    for org in [o for o in stored if sizes.get(o, 0) <= limit]:
        session.execute(text("DELETE FROM term_stats WHERE organization_id = :o"), {"o": org})
        session.execute(text("DELETE FROM term_stats_state WHERE organization_id = :o"), {"o": org})
    return sorted(o for o, n in sizes.items()
                  if n > limit and (o not in stored or abs(n - stored[o]) > REFRESH_CHANGE * max(1, stored[o])))


def refresh_stale_term_stats(sizes: dict[str, int] | None = None) -> list[dict]:
    """The refresh after a load (``kbf db indexes --build``, the statistics refresh behind an
    ingest load): each organization that needs it, one transaction each. ``sizes`` as for
    ``stale_term_stats``."""
    from kbframework import tenancy
    from kbframework.db import session_scope

    with tenancy.system("refresh the stored word counts of the organizations that changed"):
        with session_scope() as s:
            orgs = stale_term_stats(s, sizes)
        return [refresh_term_stats(org) for org in orgs]
