"""Query expansion from the offline embedder's token table (kbframework/retrieval/expansion.py)."""
import pytest

from kbframework.retrieval import expansion


def test_pick_keeps_only_words_the_organization_uses():
    cands = {"toddler": [("child", "child", 0.61), ("kid", "kid", 0.49), ("infant", "infant", 0.4)]}
    got = expansion.pick(cands, {"toddler", "carri"}, {"child": 3, "kid": 0, "infant": 2}, per_word=3)
    assert [n["lexeme"] for n in got["toddler"]] == ["child", "infant"]


def test_pick_drops_the_words_own_forms_the_questions_stems_and_neutral_words():
    cands = {"jog": [("jogging", "jog", 0.9), ("jogger", "jogger", 0.8), ("run", "run", 0.62),
                     ("price", "price", 0.6), ("dark", "dark", 0.55)]}
    got = expansion.pick(cands, {"jog", "dark"}, {"jog": 1, "jogger": 1, "run": 5, "price": 9, "dark": 4},
                         neutral=frozenset({"price"}))
    assert [n["lexeme"] for n in got["jog"]] == ["run"]


def test_pick_caps_per_word_and_never_repeats_a_neighbour():
    cands = {"movi": [("film", "film", 0.84), ("cinema", "cinema", 0.66), ("screen", "screen", 0.5)],
             "flick": [("film", "film", 0.7), ("show", "show", 0.5)]}
    df = {"film": 2, "cinema": 1, "screen": 1, "show": 4}
    got = expansion.pick(cands, {"movi", "flick"}, df, per_word=2)
    assert [n["lexeme"] for n in got["movi"]] == ["film", "cinema"]
    assert [n["lexeme"] for n in got["flick"]] == ["show"]


def test_pick_with_nothing_usable_is_empty():
    assert expansion.pick({"perfum": [("fragrance", "fragranc", 0.7)]}, {"perfum"}, {"fragranc": 0}) == {}


def test_weights_scale_by_similarity_and_keep_the_largest():
    exp = {"a": [{"word": "x", "lexeme": "x", "similarity": 0.5}],
           "b": [{"word": "x", "lexeme": "x", "similarity": 0.75}, {"word": "y", "lexeme": "y", "similarity": 0.6}]}
    assert expansion.weights(exp, factor=0.8) == {"x": 0.6, "y": 0.48}


@pytest.mark.skipif(expansion.token_table() is None, reason="WordLlama is not installed")
def test_nearest_words_from_the_token_table():
    table = expansion.token_table()
    near = dict(expansion.nearest_words("movie", table))
    assert "film" in near and near["film"] >= expansion.MIN_SIMILARITY
    assert "movie" not in near
    assert "child" in dict(expansion.nearest_words("toddler", table))
    assert all(s >= 0.9 for _, s in expansion.nearest_words("movie", table, min_similarity=0.9))


@pytest.mark.skipif(expansion.token_table() is None, reason="WordLlama is not installed")
def test_nearest_many_is_nearest_words_for_each_word():
    table = expansion.token_table()
    words = ["movie", "toddler", "laugh", "zzqx"]
    many = expansion.nearest_many(words, table)
    for w in words:
        assert many[w] == expansion.nearest_words(w, table), w


def test_words_vectorized_in_one_call_are_each_words_own_vector_even_when_the_tokenizer_pads():
    table = expansion.token_table()
    if table is None:
        pytest.skip("WordLlama is not installed")
    table[0].enable_padding()  # what the embedder does to the shared tokenizer
    words = ["toddler", "a", "carabiner", "naïve", "", "qqqzzzxxx", "child", "mountaineering"]
    for w, v in zip(words, expansion.word_vectors(words, table)):
        one = expansion.word_vector(w, table)
        assert (v is None) == (one is None), w
        assert v is None or (v == one).all(), w


def test_likely_kept_is_what_pick_keeps_when_every_candidate_is_used():
    cands = {"movi": [("film", "film", 0.84), ("cinema", "cinema", 0.66), ("screen", "screen", 0.5),
                      ("price", "price", 0.5), ("movies", "movi", 0.9)],
             "cheap": [("film", "film", 0.6), ("budget", "budget", 0.55)]}
    got = expansion.likely_kept(cands, {"movi", "cheap"}, frozenset({"price"}), per_word=2)
    assert got == ["film", "cinema", "budget"]  # two a word, the word's own form, a neutral word, a repeat left out
    every = {lx: 1 for cs in cands.values() for _, lx, _ in cs}
    assert got == [n["lexeme"] for kept in expansion.pick(cands, {"movi", "cheap"}, every, frozenset({"price"}),
                                                          per_word=2).values() for n in kept]
