"""A question's words as PostgreSQL's English configuration sees them, looked up together.

Three steps of the answer need the stems of the question's words and ask PostgreSQL for them:
the query expansion (each word's stem, and the stems of its neighbours in the token table), the
vector leg (``content_words``: the question without its stop words) and the keyword leg (the
whole question's lexemes). Asked one by one they cost four or five round trips a question;
``prefetch`` asks for all of them in one, before the first of those steps runs, and each step
then finds its answer here (``stems``, ``content_words``, ``query_lexemes``). A word's stems are
cached per process (a word always stems alike), a question's lexemes and content words per
question text; anything not cached is looked up as before, so a caller never depends on
``prefetch`` having run.
"""
from __future__ import annotations

import re
import threading

from sqlalchemy import text

# PostgreSQL's English stop words (tsearch_data/english.stop)
STOP_WORDS = frozenset("""
i me my myself we our ours ourselves you your yours yourself yourselves he him his himself she her
hers herself it its itself they them their theirs themselves what which who whom this that these
those am is are was were be been being have has had having do does did doing a an the and but if
or because as until while of at by for with about against between into through during before after
above below to from up down in out on off over under again further then once here there when where
why how all any both each few more most other some such no nor not only own same so than too very s
t can will just don should now
""".split())

_lock = threading.Lock()
_stem_cache: dict[str, tuple[str, ...]] = {}
_query_cache: dict[str, tuple[str, tuple[str, ...]]] = {}  # text → (content words, lexemes)
MAX_STEMS = 100_000
MAX_QUERIES = 5_000

# the question's content words: its whitespace-separated words that are not English stop words,
# in their order (NULL when none is left)
_CONTENT = ("(SELECT string_agg(w, ' ' ORDER BY i) FROM unnest(regexp_split_to_array(:q, '\\s+')) "
            "WITH ORDINALITY AS x(w, i) WHERE to_tsvector('english', w) <> ''::tsvector)")
_LEXEMES = "(SELECT coalesce(array_agg(lexeme ORDER BY lexeme), '{}') FROM unnest(to_tsvector('english', :q)))"
_STEMS = "SELECT w, tsvector_to_array(to_tsvector('english', w)) FROM unnest(CAST(:w AS text[])) w"


def _remember_stems(rows) -> None:
    with _lock:
        if len(_stem_cache) > MAX_STEMS:
            _stem_cache.clear()
        for w, a in rows:
            _stem_cache[w] = tuple(a or ())


def _remember_query(q: str, content: str | None, lexemes) -> None:
    with _lock:
        if len(_query_cache) > MAX_QUERIES:
            _query_cache.clear()
        _query_cache[q] = (content if content else q, tuple(lexemes or ()))


def question_words(query: str | None) -> list[str]:
    """The question's words of three letters or more, lower-cased, in order: the words whose
    stems the expansion and the soft-match leg ask for."""
    return [w for w in re.findall(r"[^\W\d_]+", (query or "").lower()) if len(w) >= 3]


def prefetch(session, query: str | None, words) -> None:
    """One round trip for what is not cached yet: the stems of ``words`` and, for ``query``, its
    content words and lexemes."""
    missing = sorted({w for w in words if w not in _stem_cache})
    q = query or ""
    want_query = query is not None and q not in _query_cache
    if not missing and not want_query:
        return
    if want_query:
        rows = session.execute(text(f"{_STEMS} UNION ALL SELECT NULL, ARRAY[{_CONTENT}] || {_LEXEMES}"),
                               {"w": missing, "q": q}).all()
        head = next(a for w, a in rows if w is None)  # [content words, lexeme, lexeme, …]
        _remember_query(q, head[0], head[1:])
        _remember_stems([(w, a) for w, a in rows if w is not None])
    else:
        _remember_stems(session.execute(text(_STEMS), {"w": missing}).all())


def stems(session, words: list[str]) -> dict[str, tuple[str, ...]]:
    """{word: its lexemes under the English configuration} (empty for a stop word)."""
    missing = sorted({w for w in words if w not in _stem_cache})
    if missing:
        _remember_stems(session.execute(text(_STEMS), {"w": missing}).all())
    return {w: _stem_cache.get(w, ()) for w in words}


def content_words(session, query: str) -> str:
    """The query without its English stop words ("my rucksack gets drenched when it pours" →
    "rucksack gets drenched pours"), in their order; the query itself when nothing is left."""
    q = query or ""
    hit = _query_cache.get(q)
    if hit is None:
        content = session.execute(text(f"SELECT {_CONTENT}"), {"q": q}).scalar()
        return content if content else query
    return hit[0] if hit[0] else query


def query_lexemes(session, query: str) -> list[str]:
    """The query's distinct lexemes (``to_tsvector('english', query)``), sorted."""
    q = query or ""
    hit = _query_cache.get(q)
    if hit is None:
        return list(session.execute(text(f"SELECT {_LEXEMES}"), {"q": q}).scalar() or [])
    return list(hit[1])
