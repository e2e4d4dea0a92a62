"""The answer steps' look-ups around the two searches, through the real services: the question's
words are asked for once (``retrieval.lexicon``), a word count's fallback counts every word in
one call, and the soft-match leg reads its candidates' text from the legs' own statements.
Each batched look-up must give exactly what the one-by-one look-ups gave."""
from __future__ import annotations

import threading
import uuid

import pytest
from sqlalchemy import event, text

from kbframework import tenancy
from kbframework.db import get_engine, session_scope
from kbframework.retrieval import corpus_stats, lexicon, soft_match
from kbframework.retrieval.answer import answer
from tests.retrieval_support import NOW, PRODUCTS, SUPPORT, seed, set_settings

QUESTION = "My rucksack gets drenched when it pours: is there a cover for it?"


class Statements:
    """The statements the engine sends while inside the block."""

    def __init__(self):
        self.seen: list[str] = []
        self._lock = threading.Lock()

    def _catch(self, conn, cursor, statement, parameters, context, executemany):
        with self._lock:
            self.seen.append(tenancy.without_scope(statement))

    def __enter__(self):
        event.listen(get_engine(), "before_cursor_execute", self._catch)
        return self

    def __exit__(self, *exc):
        event.remove(get_engine(), "before_cursor_execute", self._catch)


def forget_words():
    lexicon._stem_cache.clear()
    lexicon._query_cache.clear()
    corpus_stats.forget_counts()
    soft_match.forget()


def one_by_one(s, query: str):
    """What the steps looked up one statement at a time before."""
    lexemes = s.execute(text("SELECT coalesce(array_agg(lexeme ORDER BY lexeme), '{}') "
                             "FROM unnest(to_tsvector('english', :q))"), {"q": query}).scalar()
    words = s.execute(text("SELECT w FROM unnest(regexp_split_to_array(:q, '\\s+')) WITH ORDINALITY AS x(w, i) "
                           "WHERE to_tsvector('english', w) <> ''::tsvector ORDER BY i"), {"q": query}).scalars().all()
    return list(lexemes), (" ".join(words) if words else query)


@pytest.mark.parametrize("query", [QUESTION, "what is it?", "", "  e-mail   the state-of-the-art  café's menu "])
def test_one_round_trip_gives_the_stems_content_words_and_lexemes_the_single_look_ups_gave(kb_clean, query):
    forget_words()
    with session_scope() as s:
        lexemes, content = one_by_one(s, query)
        words = [w for w in query.lower().replace(":", " ").replace("?", " ").split() if w]
        singly = {w: tuple(s.execute(text("SELECT tsvector_to_array(to_tsvector('english', :w))"),
                                     {"w": w}).scalar() or ()) for w in words}
        with Statements() as st:
            lexicon.prefetch(s, query, words)
            assert len(st.seen) == 1
            # then nothing more is asked
            assert lexicon.query_lexemes(s, query) == lexemes
            assert lexicon.content_words(s, query) == content
            assert lexicon.stems(s, words) == singly
            assert len(st.seen) == 1
    forget_words()
    with session_scope() as s:  # without the prefetch, each answers on its own
        assert lexicon.query_lexemes(s, query) == lexemes
        assert lexicon.content_words(s, query) == content
        assert lexicon.stems(s, words) == singly


def test_the_expansion_step_asks_for_the_question_words_the_legs_need(kb_org):
    seed(kb_org["id"], PRODUCTS + SUPPORT)
    set_settings(kb_org["id"], extra={"query_planner": False})
    forget_words()
    with Statements() as st:
        res = answer(kb_org["id"], "a red dress for a summer wedding", mode="search", now=NOW)
    names = [s["name"] for s in res["debug"]["steps"]]
    assert "expand_query" in names and "soft_match" in names  # the steps are all still there, by name
    assert not any("regexp_split_to_array" in x and "UNION" not in x for x in st.seen), \
        "the vector leg's content words were looked up on their own"
    assert not any(x.startswith("SELECT (SELECT coalesce(array_agg(lexeme") for x in st.seen), \
        "the keyword leg's lexemes were looked up on their own"
    assert not any(x.startswith("SELECT id, coalesce(heading, '') || ' ' || content FROM chunks") for x in st.seen), \
        "the soft-match leg read its chunks' text in a round trip of its own"
    assert res["sources"] and res["sources"][0]["document_title"] == "Red Summer Dress"


def test_a_batched_count_is_the_one_by_one_count(kb_org):
    seed(kb_org["id"], PRODUCTS + SUPPORT)
    org = kb_org["id"]
    words = ["dress", "red", "linen", "denim", "return", "zebra", "qwertyuiop", "summer"]
    with tenancy.organization(org), session_scope() as s:
        single = {lx: s.execute(text("SELECT df FROM kbf_fulltext_df(CAST(:o AS uuid), ARRAY[CAST(:l AS text)], :c)"),
                                {"o": org, "l": lx, "c": corpus_stats.DF_CAP}).scalar() for lx in words}
        corpus_stats.forget_counts()
        dfs, n = corpus_stats.document_frequency(s, org, words)
        assert dfs == single and n > 0
        corpus_stats.forget_counts()
        used = corpus_stats.words_used(s, org, words[4:], counted=words[:4])
        assert used == {lx for lx in words[4:] if single[lx] > 0}
        with Statements() as st:  # the counted words' counts came with it; the unused words' zero too
            assert corpus_stats.document_frequency(s, org, words[:4] + ["zebra", "qwertyuiop"])[0] == \
                {lx: single[lx] for lx in words[:4] + ["zebra", "qwertyuiop"]}
            assert not any("kbf_fulltext_df" in x for x in st.seen)
        # a used word counted up to 1 is not taken for its count
        corpus_stats.forget_counts()
        corpus_stats.words_used(s, org, ["dress"])
        assert corpus_stats.document_frequency(s, org, ["dress"])[0] == {"dress": single["dress"]}


def test_the_soft_match_leg_scores_the_same_from_the_legs_texts_as_from_its_own_read(kb_org):
    seed(kb_org["id"], PRODUCTS + SUPPORT)
    org = kb_org["id"]
    with tenancy.organization(org), session_scope() as s:
        rows = s.execute(text("SELECT id, document_id, coalesce(heading, '') || ' ' || content FROM chunks "
                              "WHERE organization_id = :o ORDER BY id"), {"o": org}).all()
        cands = {r[0]: str(r[1]) for r in rows}
        texts = {r[0]: r[2] for r in rows}
        forget_words()
        read, _ = soft_match.search(s, org, "a crimson gown for the evening", cands)
        forget_words()
        with Statements() as st:
            given, _ = soft_match.search(s, org, "a crimson gown for the evening", cands, texts=texts)
            assert not any("content FROM chunks" in x for x in st.seen)
        forget_words()
        with Statements() as st:  # without them, one read for the chunks
            soft_match.search(s, org, "a crimson gown for the evening", cands)
            assert sum("content FROM chunks" in x for x in st.seen) == 1
    assert [(h.chunk_id, round(h.score, 6)) for h in given] == [(h.chunk_id, round(h.score, 6)) for h in read]
    assert given and given[0].document_id == cands[given[0].chunk_id]
    assert uuid.UUID(given[0].document_id)


def test_chunks_scored_beside_the_keyword_leg_rank_as_when_all_are_scored_after_it(kb_org):
    seed(kb_org["id"], PRODUCTS + SUPPORT)
    org = kb_org["id"]
    q = "a crimson gown for the evening"
    with tenancy.organization(org), session_scope() as s:
        rows = s.execute(text("SELECT id, document_id FROM chunks WHERE organization_id = :o ORDER BY id"),
                         {"o": org}).all()
        cands = {r[0]: str(r[1]) for r in rows}
        after, _ = soft_match.search(s, org, q, cands)
        early = list(cands)[::2]  # as if these were the vector leg's, scored while the keyword leg ran
        prep = soft_match.prepare(s, org, q, early)
        assert set(prep["scores"]) == {c for c in early if c in prep["chunks"]}
        beside, dbg = soft_match.search(s, org, q, cands, prepared=prep)
    assert 0 < dbg["scored_beside_keyword_leg"] < dbg["scored"]
    assert [(h.chunk_id, round(h.score, 6)) for h in beside] == [(h.chunk_id, round(h.score, 6)) for h in after]


def test_the_expansion_counts_the_neighbours_it_keeps_for_the_keyword_leg(kb_org):
    """The keyword leg weighs each kept neighbour by its count: the expansion's one round trip
    brings them, so the leg does not ask again."""
    from kbframework.retrieval import expansion

    seed(kb_org["id"], [{"title": "Tarn Little Peak Carrier", "role": "product",
                         "body": "# Tarn Little Peak Carrier\n\nA frame pack that carries a child on mountain trails."}])
    org = kb_org["id"]
    forget_words()
    with tenancy.organization(org), session_scope() as s:
        got = expansion.expand(s, org, "something for my toddler on walks")
        kept = sorted(got["weights"])
        assert kept, "the question was expected to find neighbours in this knowledge"
        with Statements() as st:
            dfs, _ = corpus_stats.document_frequency(s, org, kept)
            assert not [x for x in st.seen if "term_stats" in x or "kbf_fulltext_df" in x]  # all counted already
    assert all(dfs[lx] > 0 for lx in kept)
