"""The soft-match leg (kbframework/retrieval/soft_match.py): its pure parts."""
import numpy as np
import pytest

from kbframework.retrieval import expansion, soft_match


def _unit(*rows):
    m = np.array(rows, dtype=np.float32)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def test_words_are_distinct_lower_case_letters_without_stop_words():
    assert soft_match.words("My rucksack gets DRENCHED when it pours, my rucksack!") == [
        "rucksack", "gets", "drenched", "pours"]
    assert soft_match.words("Armazém 7 at 22:00, a 2-person tent") == ["armazém", "person", "tent"]
    assert soft_match.words("one two three four", limit=2) == ["one", "two"]
    assert soft_match.words("") == [] and soft_match.words(None) == []
    # the limit counts distinct words after the stop words are dropped
    assert soft_match.words("the tent, the tent pole and the bag", limit=2) == ["tent", "pole"]


def test_score_is_the_idf_weighted_share_of_each_words_best_cosine():
    q = _unit([1, 0, 0], [0, 1, 0])
    p = _unit([1, 0, 0], [0, 0.6, 0.8])  # the first word exactly, the second at 0.6
    assert soft_match.score(q, np.array([1.0, 1.0]), p) == pytest.approx(0.8)
    assert soft_match.score(q, np.array([3.0, 1.0]), p) == pytest.approx((3 * 1 + 0.6) / 4)


def test_a_best_cosine_below_the_minimum_counts_nothing():
    q = _unit([1, 0, 0], [0, 1, 0])
    p = _unit([1, 0, 0], [0, 0.3, 0.95])  # the second word's best match is loose
    assert soft_match.score(q, np.array([1.0, 1.0]), p, min_similarity=0.4) == pytest.approx(0.5)
    assert soft_match.score(q, np.array([1.0, 1.0]), p, min_similarity=0.2) > 0.5


def test_score_of_nothing_is_zero():
    q = _unit([1, 0])
    assert soft_match.score(q, np.array([1.0]), np.zeros((0, 2), np.float32)) == 0.0
    assert soft_match.score(np.zeros((0, 2), np.float32), np.array([]), _unit([1, 0])) == 0.0


def test_rank_keeps_positive_scores_best_first_ties_by_key():
    assert soft_match.rank({3: 0.5, 1: 0.5, 2: 0.9, 4: 0.0}) == [(2, 0.9), (1, 0.5), (3, 0.5)]


def test_rank_breaks_ties_by_the_given_order_before_the_key():
    scores = {3: 0.5, 1: 0.5, 2: 0.9, 5: 0.5}
    assert soft_match.rank(scores, order={3: 0, 2: 1, 1: 2}) == [(2, 0.9), (3, 0.5), (1, 0.5), (5, 0.5)]


@pytest.mark.skipif(expansion.token_table() is None, reason="WordLlama is not installed")
def test_a_paraphrase_word_meets_its_neighbour_in_the_token_table():
    table = expansion.token_table()
    vec = soft_match.vectors(["toddler", "child", "skillet"], table)
    q = np.stack([vec["toddler"]])
    near = soft_match.score(q, np.array([1.0]), np.stack([vec["child"]]))
    far = soft_match.score(q, np.array([1.0]), np.stack([vec["skillet"]]))
    assert near > far and near >= soft_match.MIN_SIMILARITY


def test_without_the_token_table_the_leg_is_empty_and_says_so(monkeypatch):
    monkeypatch.setattr(expansion, "token_table", lambda: None)
    assert soft_match.search(None, "org", "carry a toddler", {1: "d1"}) == ([], {"available": False, "words": []})


def test_best_share_reads_each_question_words_best_column():
    sims = np.array([[0.2, 0.9, 0.1], [0.45, 0.3, 0.35]], dtype=np.float32)
    assert soft_match.best_share(sims, np.array([1.0, 1.0])) == pytest.approx((0.9 + 0.45) / 2)
    assert soft_match.best_share(sims[:, :1], np.array([1.0, 1.0])) == pytest.approx(0.45 / 2)
    assert soft_match.best_share(np.zeros((2, 0)), np.array([1.0, 1.0])) == 0.0


def test_all_chunks_scored_at_once_match_each_scored_alone():
    rng = np.random.default_rng(3)
    matrix = rng.normal(size=(60, 16)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    matrix[1] = 0.5 * matrix[0] + 0.5 * matrix[1]  # some cosines above the floor, not all
    matrix[1] /= np.linalg.norm(matrix[1])
    q = matrix[[0, 5, 9]] * 0.9 + rng.normal(size=(3, 16)).astype(np.float32) * 0.1
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    idf = np.array([2.0, 1.0, 0.5], np.float32)
    chunks = [np.array([1, 2, 3], np.int32), np.array([], np.int32), np.array([0, 5, 9, 40], np.int32),
              np.array([7], np.int32), np.array([5, 1, 33, 2], np.int32)]
    got = soft_match.chunk_scores(q, idf, matrix, chunks)
    want = [soft_match.score(q, idf, matrix[c]) for c in chunks]
    assert got == pytest.approx(want, abs=1e-6)
    assert got[1] == 0.0 and got[2] > got[0] > 0.0  # the empty chunk scores nothing; exact words the most
    assert soft_match.chunk_scores(q, np.zeros(3, np.float32), matrix, chunks) == [0.0] * 5
    assert soft_match.chunk_scores(q, idf, matrix, []) == []


def test_the_word_rows_grow_and_keep_every_vector(monkeypatch):
    from kbframework.retrieval import expansion

    made = {}

    def fake(words, table):
        out = []
        for w in words:
            v = None if w.startswith("x") else np.full(4, float(len(made) + 1), np.float32)
            made[w] = v
            out.append(v)
        return out

    monkeypatch.setattr(expansion, "word_vectors", fake)
    st = soft_match.WordRows()
    first = st.row_numbers([f"w{i}" for i in range(1500)] + ["xno"], None)  # past the first 1,024 rows
    assert first["xno"] == -1 and st.size == 1500 and st.matrix.shape[0] >= 1500
    again = st.row_numbers(["w3", "w1499", "new"], None)
    assert again["w3"] == first["w3"] and st.size == 1501
    for w in ("w0", "w1023", "w1024", "w1499", "new"):
        assert np.array_equal(st.matrix[st.rows[w]], made[w])
