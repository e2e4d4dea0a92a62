"""What an organization's knowledge holds, as both searches and the answerability gate read it:
chunks per embedding model (the vector leg's plan) and how many chunks use a word (the keyword
leg's BM25 idf, the gate's overlap). Both are cached per process (a minute, ten for words) and
forgotten by the process that ingests new chunks.

The word counts go through ``kbf_fulltext_match``'s sibling ``kbf_fulltext_df`` (migration
``0008_fulltext_search_functions``), which keeps the full-text index under row-level security:
counted through the policy, a new word in a 40,000-chunk organization cost 3 s."""
from __future__ import annotations

import threading
import time

from sqlalchemy import text

from kbframework.ingest.queue import on_ingested

TTL = 60.0  # chunk counts: the vector leg's plan follows a bulk load within a minute
# an organization above the exact-scan size is searched through its own indexes whatever a few
# percent more or fewer chunks say, and its count costs a scan of its rows (30–160 ms at 400,000
# chunks, 20–30 ms at 45,000 on two busy cores, paid by the first question of every minute):
# counted every ten minutes (above ``KB_EXACT_SCAN_MAX_ROWS``). The ingesting process forgets
# its counts at once either way
LARGE_TTL = 600.0
DF_TTL = 600.0  # word counts: an idf moves little in ten minutes, and a new word costs a lookup
DF_CAP = 2000  # a word in more chunks than this is common: its idf is near the floor anyway

_models: dict = {}
_df: dict = {}
_used: dict = {}
_lock = threading.Lock()


def _large() -> int:
    from kbframework.config import get_config

    return get_config().exact_scan_max_rows


def org_models(session, org_id) -> dict[str, int]:
    """{embedding_model: chunk count} for an organization."""
    key = str(org_id)
    now = time.monotonic()
    with _lock:
        hit = _models.get(key)
        if hit and now - hit[0] < (LARGE_TTL if sum(hit[1].values()) > _large() else TTL):
            return hit[1]
    rows = session.execute(text(
        "SELECT embedding_model, count(*) FROM chunks WHERE organization_id = :org "
        "AND embedding_model IS NOT NULL GROUP BY embedding_model"), {"org": key}).all()
    models = {m: n for m, n in rows}
    with _lock:
        _models[key] = (now, models)
    return models


def forget_counts(org_id=None) -> None:
    with _lock:
        if org_id is None:
            _models.clear()
            _df.clear()
            _used.clear()
        else:
            _models.pop(str(org_id), None)
            for cache in (_df, _used):
                for k in [k for k in cache if k[0] == str(org_id)]:
                    del cache[k]


on_ingested(forget_counts)  # new chunks make the cached counts stale


# a word's stored count (``term_stats``), else counted on the full-text index up to the word's own
# cap; when the organization's stored list is complete (no chunk written since it was counted:
# ``term_stats_state``), a word it lacks is used by no chunk, and is not looked up. The count
# runs only for the words the table does not answer, in one call of the function per cap for all
# of them (called once per word, each call planned its query anew: 0.1-0.3 ms a word, 10-40 ms for
# the hundred candidate words of a question's expansion). The third column says whether the
# count is the stored one.
STORED_OR_COUNTED = (
    "WITH st AS MATERIALIZED (SELECT coalesce((SELECT counted_changes = changes FROM term_stats_state "
    "WHERE organization_id = CAST(:org AS uuid)), false) AS complete), "
    "l AS MATERIALIZED (SELECT l.lexeme, l.cap, CASE WHEN st.complete THEN coalesce(ts.df, 0) ELSE ts.df END AS df "
    "FROM unnest(CAST(:lx AS text[]), CAST(:caps AS integer[])) AS l(lexeme, cap) CROSS JOIN st "
    "LEFT JOIN term_stats ts ON ts.organization_id = CAST(:org AS uuid) AND ts.lexeme = l.lexeme) "
    "SELECT lexeme, df, true FROM l WHERE df IS NOT NULL UNION ALL "
    "SELECT f.lexeme, f.df, false FROM kbf_fulltext_df(CAST(:org AS uuid), "
    "ARRAY(SELECT lexeme FROM l WHERE df IS NULL AND cap = 1), 1) f UNION ALL "
    "SELECT f.lexeme, f.df, false FROM kbf_fulltext_df(CAST(:org AS uuid), "
    "ARRAY(SELECT lexeme FROM l WHERE df IS NULL AND cap > 1), :cap) f")


def _fresh(cache: dict, key, now: float):
    hit = cache.get(key)
    return hit if hit and now - hit[0] < DF_TTL else None


def _look_up(session, key: str, counted: list[str], used: list[str], now: float) -> dict[str, tuple[int, bool]]:
    """One round trip for words not cached: ``counted`` need their count (up to DF_CAP), ``used``
    only whether a chunk uses them (a count up to 1). Returns {lexeme: (count, is its count)}: a
    stored count, a count up to DF_CAP and a count of 0 are the word's count whatever the cap, and
    are remembered as such; every answer is remembered as whether the word is used."""
    want = {lx: 1 for lx in used}
    want.update({lx: DF_CAP for lx in counted})
    if not want:
        return {}
    rows = session.execute(text(STORED_OR_COUNTED), {"org": key, "lx": list(want), "caps": list(want.values()),
                                                     "cap": DF_CAP}).all()
    out = {}
    with _lock:
        if len(_df) > 50000:
            _df.clear()
        if len(_used) > 50000:
            _used.clear()
        for lx, n, stored in rows:
            n = int(n)
            out[lx] = (n, want.get(lx) == DF_CAP or stored or n == 0)
            if out[lx][1]:
                _df[(key, lx)] = (now, n)
            _used[(key, lx)] = (now, n > 0)
    return out


def document_frequency(session, org_id, lexemes: list[str]) -> tuple[dict, int]:
    """({lexeme: chunks containing it}, embedded chunks of the organization): stored
    (``term_stats``), else counted up to DF_CAP."""
    key = str(org_id)
    now = time.monotonic()
    out, missing = {}, []
    with _lock:
        for lx in lexemes:
            hit = _fresh(_df, (key, lx), now)
            if hit:
                out[lx] = hit[1]
            else:
                missing.append(lx)
    if missing:
        out.update({lx: n for lx, (n, _) in _look_up(session, key, missing, [], now).items()})
    return out, sum(org_models(session, org_id).values())


def words_used(session, org_id, lexemes: list[str], counted: list[str] = ()) -> set[str]:
    """The lexemes at least one of the organization's chunks uses. The question expansion asks
    this of a hundred or more candidate words: one matching chunk answers it, where a count
    reads up to DF_CAP of them (at 40,000 chunks, 135 ms against a few for the whole list).
    ``counted``: words whose count (``document_frequency``) is looked up in the same round trip
    when it is not cached (the question's own words, which the keyword leg weighs next)."""
    key = str(org_id)
    now = time.monotonic()
    out, missing = set(), []
    with _lock:
        for lx in lexemes:
            hit = _fresh(_used, (key, lx), now) or _fresh(_df, (key, lx), now)
            if hit:
                if hit[1]:
                    out.add(lx)
            else:
                missing.append(lx)
        to_count = [lx for lx in dict.fromkeys(counted) if not _fresh(_df, (key, lx), now)]
    got = _look_up(session, key, to_count, [lx for lx in missing if lx not in set(to_count)], now)
    out.update(lx for lx in missing if got.get(lx, (0,))[0] > 0)
    return out
