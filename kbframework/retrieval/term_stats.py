"""Stored word counts (``term_stats``, migrations 0009 and 0013) for the keyword ranking and the
question expansion: BM25 needs each question word's chunk count, and the expansion asks of a
hundred neighbours of the question's words whether the organization uses them at all. Without
a stored answer each word is a lookup on the full-text index (up to ``DF_CAP`` heap visits in a
large organization; 9.5 ms of a small organization's 26 ms keyword leg among a million chunks).

Every organization's counts are stored, from ``ts_stat`` over its chunks. A stored list is
*complete* (it holds every word the chunks use, so a word it lacks is used by none) while no
chunk was written since it was counted: ingestion adds one to the organization's ``changes``
after its writes (``mark_changed``), a refresh records the ``changes`` it saw before counting
(``counted_changes``), and readers trust a missing word only while the two are equal.

When they are refreshed: an organization up to ``complete_list_max_chunks`` (the exact-scan
size; its count takes well under a second) after every load that wrote its chunks, by a job
queued behind the load (``kbframework.ingest.queue``); every
organization after loads (``kbf db indexes --build``, the statistics refresh behind an ingest
load) when its chunks moved by a tenth since its count, or it was never counted since 0013.
A larger organization written since its count is read as incomplete until then: its stored
counts still serve, and its missing words are looked up. Deleted chunks leave words counted
that no chunk uses any more: a lookup of such a word finds nothing, which costs the ranking
nothing. This module imports nothing of ingestion, so ingestion can call it; a process's cached
counts follow within their ten minutes."""
from __future__ import annotations

import logging
import time

from sqlalchemy import text

log = logging.getLogger("kbframework.term_stats")


REFRESH_CHANGE = 0.1  # a stored count is refreshed once the organization's chunks moved by a tenth
LOCK_SPACE = 0x6B62_7473  # the advisory locks' first key ("kbts"): one count per organization at a time


def complete_list_max_chunks() -> int:
    """Organizations up to the exact-scan size are counted again after every load that wrote
    their chunks (a few tens of milliseconds at 1,666 chunks, 0.65 s at 45,000), so their list
    stays complete; a larger one waits for a tenth's change."""
    from kbframework.config import get_config

    return get_config().exact_scan_max_rows


def mark_changed(session, org_ids) -> None:
    """Ingestion wrote chunks of these organizations (after its writes committed): their stored
    lists are no longer known to be complete. One statement; the rows in a fixed order, so two
    writers of the same organizations wait for each other instead of deadlocking."""
    orgs = sorted({str(o) for o in org_ids})
    if orgs:
        session.execute(text(
            "INSERT INTO term_stats_state (organization_id, chunks, words, seconds, changes) "
            "SELECT o, 0, 0, 0, 1 FROM unnest(CAST(:orgs AS uuid[])) AS o "
            "ON CONFLICT (organization_id) DO UPDATE SET changes = term_stats_state.changes + 1"), {"orgs": orgs})


def refresh_term_stats(org_id) -> dict:
    """Every word's chunk count in one organization, from ``ts_stat`` over its chunks, replacing
    the stored ones in one transaction (readers see the old counts or the new). It reads every
    tsvector of the organization through the shared buffers: whoever calls it loads the
    organization's own indexes again afterwards (``vector_index.prewarm_after_counts``)."""
    import uuid

    from kbframework.db import session_scope

    org = str(uuid.UUID(str(org_id)))  # a literal inside ts_stat's query text: only a real id
    t0 = time.perf_counter()
    with session_scope() as s:
        # one count of an organization at a time: two at once (its job behind a load on one
        # worker, the statistics refresh on another) would each delete the old list and the
        # second insert the words the first had just written (a unique violation); the second
        # waits here for the first to commit, then replaces its list (the lock ends with the
        # transaction)
        s.execute(text("SELECT pg_advisory_xact_lock(:space, hashtext(:org))"), {"space": LOCK_SPACE, "org": org})
        # the writes counted so far: read before ts_stat takes its snapshot, so a load that
        # commits meanwhile leaves the list marked incomplete (its count comes after)
        seen = s.execute(text("SELECT changes FROM term_stats_state WHERE organization_id = :org"),
                         {"org": org}).scalar() or 0
        s.execute(text("DELETE FROM term_stats WHERE organization_id = :org"), {"org": org})
        words = s.execute(text(
            "INSERT INTO term_stats (organization_id, lexeme, df) SELECT CAST(:org AS uuid), word, ndoc "
            "FROM ts_stat(:q)"), {"org": org, "q": f"SELECT tsv FROM chunks WHERE organization_id = '{org}'"}).rowcount
        chunks = s.execute(text("SELECT count(*) FROM chunks WHERE organization_id = :org"), {"org": org}).scalar()
        secs = round(time.perf_counter() - t0, 2)
        s.execute(text(
            "INSERT INTO term_stats_state (organization_id, chunks, words, seconds, refreshed_at, counted_changes) "
            "VALUES (:org, :n, :w, :secs, now(), :seen) ON CONFLICT (organization_id) DO UPDATE SET "
            "chunks = EXCLUDED.chunks, words = EXCLUDED.words, seconds = EXCLUDED.seconds, "
            "refreshed_at = EXCLUDED.refreshed_at, counted_changes = EXCLUDED.counted_changes"),
            {"org": org, "n": chunks, "w": words, "secs": secs, "seen": seen})
    log.info("stored %s word counts of organization %s (%s chunks) in %.1fs", words, org, chunks, secs)
    return {"organization_id": org, "words": words, "chunks": chunks, "seconds": secs, "complete_at": seen}


def stale_term_stats(session, sizes: dict[str, int] | None = None) -> list[str]:
    """Organizations whose stored counts are missing, were made when they held a tenth more or
    fewer chunks, or predate the record of writes (0013); and those up to
    ``complete_list_max_chunks`` written since their count. ``sizes``: {organization id:
    chunks}, when the caller counted them already (otherwise one pass over the chunks counts
    them)."""
    limit = complete_list_max_chunks()
    if sizes is None:
        sizes = {str(o): int(n) for o, n in session.execute(text(
            "SELECT organization_id, count(*) FROM chunks GROUP BY organization_id")).all()}
    stored = {str(o): (int(n), int(ch), c) for o, n, ch, c in session.execute(text(
        "SELECT organization_id, chunks, changes, counted_changes FROM term_stats_state")).all()}

    def stale(org: str, n: int) -> bool:
        if org not in stored:
            return True
        chunks, changes, counted = stored[org]
        return (counted is None or abs(n - chunks) > REFRESH_CHANGE * max(1, chunks)
                or (n <= limit and counted != changes))

    return sorted(o for o, n in sizes.items() if n > 0 and stale(o, n))


def refresh_if_incomplete(org_id, force: bool = False) -> dict | None:
    """After a load that wrote this organization's chunks (the job queued behind it): count its
    words again if it is up to ``complete_list_max_chunks`` and its list is not complete. None
    when there was nothing to do. ``force``: whatever the list says and the size (the load could
    not record its writes)."""
    import uuid

    from kbframework import tenancy
    from kbframework.db import session_scope

    org = str(uuid.UUID(str(org_id)))
    limit = complete_list_max_chunks()
    with tenancy.system("count the words of an organization's chunks after a load"):
        with session_scope() as s:
            n = s.execute(text("SELECT count(*) FROM (SELECT 1 FROM chunks WHERE organization_id = :org "
                               "LIMIT :cap) x"), {"org": org, "cap": limit + 1}).scalar()
            state = s.execute(text("SELECT changes, counted_changes FROM term_stats_state "
                                   "WHERE organization_id = :org"), {"org": org}).first()
        if n == 0 or (not force and (n > limit or (state is not None and state[1] == state[0]))):
            return None
        return refresh_term_stats(org)


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


def summary(session, sizes: dict[str, int] | None = None) -> dict:
    """What the stored word lists are now, for ``kbf db indexes``: organizations with chunks,
    how many of them have a complete list, how many were written since their count (a small one
    is counted again behind its load; a larger one's stored counts serve until a tenth's change),
    how many were never counted, and the words stored. ``sizes``: {organization id: chunks}, when
    the caller counted them already (one pass over the chunks fewer)."""
    limit = complete_list_max_chunks()
    if sizes is None:
        source, params = "SELECT organization_id, count(*) AS n FROM chunks GROUP BY organization_id", {}
    else:
        source = ("SELECT * FROM unnest(CAST(:orgs AS uuid[]), CAST(:ns AS bigint[])) AS x(organization_id, n) "
                  "WHERE n > 0")
        params = {"orgs": list(sizes), "ns": [int(n) for n in sizes.values()]}
    row = session.execute(text(
        f"WITH sizes AS ({source}) "
        "SELECT count(*), "
        "count(*) FILTER (WHERE st.counted_changes = st.changes), "
        "count(*) FILTER (WHERE st.counted_changes <> st.changes AND s.n <= :lim), "
        "count(*) FILTER (WHERE st.counted_changes <> st.changes AND s.n > :lim), "
        "count(*) FILTER (WHERE st.counted_changes IS NULL) "
        "FROM sizes s LEFT JOIN term_stats_state st ON st.organization_id = s.organization_id"),
        {"lim": limit, **params}).first()
    words = session.execute(text("SELECT count(*) FROM term_stats")).scalar()
    return {"organizations": int(row[0]), "complete": int(row[1]), "written_since_small": int(row[2]),
            "written_since_large": int(row[3]), "never_counted": int(row[4]), "words": int(words),
            "complete_list_max_chunks": limit}
