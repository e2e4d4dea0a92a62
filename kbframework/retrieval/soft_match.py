"""The soft-match leg: each question word's best match among a passage's words, in the
offline embedder's token table (a late-interaction score with static word vectors).

A paraphrase shares few words with its answer ("stop thieves taking my bicycle" → a U-lock),
and a static model's mean vector of a whole passage blurs the few words that would match: the
vector leg compares one average with another. Here each content word of the question is
compared with every word of the passage, one by one, and keeps its best cosine: "toddler"
meets "child" in a child carrier's description, "soup" meets "food" in a food jar's. A word's
best cosine counts from ``MIN_SIMILARITY`` on (below it, any passage has some loosely related
word), and the question's words weigh their rarity in the organization (idf), so

    score(passage) = Σ_w idf(w) · best_cos(w, passage) / Σ_w idf(w)     (best_cos < 0.4 → 0)

An exact word scores 1, a close neighbour (toddler → child 0.6) most of that. The leg re-scores
the chunks the vector and keyword legs found (it adds no candidate, so the pre-filter holds
and nothing is scanned) and joins the fusion as a third ranked list at ``WEIGHT``: it moves
documents that both other legs ranked loosely, it cannot bring in one they missed.

Word vectors are the embedder's own (``expansion.word_vector``: a word pooled from its tokens,
as the embedder pools a text), cached per process; a passage's words are its heading and text,
lower-cased, without English stop words. Nothing is downloaded and no model is added.
"""
from __future__ import annotations

import re
import threading

import numpy as np

from kbframework.retrieval.lexicon import STOP_WORDS

MIN_SIMILARITY = 0.4
WEIGHT = 0.5  # the leg's RRF weight beside the vector and keyword legs' 1
MAX_WORDS = 12  # question words compared
MAX_PASSAGE_WORDS = 400  # distinct words of one passage compared
# the per-process caches stay well inside a web process's memory: 20,000 chunks' word rows
# (≈ 1.6 KB each) and 50,000 word vectors (1 KB each at 256 dimensions, in one matrix)
MAX_CACHED_CHUNKS = 20_000
MAX_CACHED_WORDS = 50_000


_WORD = re.compile(r"[^\W\d_]{3,}")


class WordRows:
    """The process's word vectors as the rows of one matrix, and each chunk's words as row
    numbers, so a question's scoring is a handful of numpy calls over every candidate at once
    (one gather, one product, one maximum per chunk) instead of a Python loop over each
    passage's words. A row, once its word is published, never changes; the matrix grows by a
    copy, so a reader that took it after its rows were assigned holds every row it needs."""

    def __init__(self):
        self.rows: dict[str, int] = {}  # word → its row, -1 when the embedder has no vector for it
        self.matrix: np.ndarray | None = None
        self.size = 0
        self.chunks: dict = {}  # (organization, chunk id) → int32 rows of its words with a vector
        self.lock = threading.Lock()

    def row_numbers(self, ws, table) -> dict[str, int]:
        """{word: row} for ``ws``, the words new to the process embedded in one call."""
        from kbframework.retrieval.expansion import word_vectors

        rows = self.rows
        new = [w for w in dict.fromkeys(ws) if w not in rows]
        if new:
            made = word_vectors(new, table)
            with self.lock:
                for w, v in zip(new, made):
                    if w in rows:
                        continue
                    if v is None:
                        rows[w] = -1
                        continue
                    if self.matrix is None:
                        self.matrix = np.zeros((1024, v.shape[0]), np.float32)
                    elif self.size == self.matrix.shape[0]:
                        grown = np.zeros((self.size * 2, self.matrix.shape[1]), np.float32)
                        grown[:self.size] = self.matrix
                        self.matrix = grown
                    self.matrix[self.size] = v
                    rows[w] = self.size  # published after its row is written
                    self.size += 1
        return {w: rows[w] for w in ws}


_state_lock = threading.Lock()
_state = WordRows()


def word_rows() -> WordRows:
    """The process's ``WordRows``, started afresh when it holds more than ``MAX_CACHED_WORDS``
    words (a search in progress keeps the one it took); its chunks are forgotten past
    ``MAX_CACHED_CHUNKS``."""
    global _state
    st = _state
    if len(st.rows) > MAX_CACHED_WORDS:
        with _state_lock:
            if _state is st:
                _state = WordRows()
            st = _state
    elif len(st.chunks) > MAX_CACHED_CHUNKS:
        with st.lock:
            st.chunks.clear()
    return st


def forget() -> None:
    """Drop every cached word and chunk (tests; a process that wants its memory back)."""
    global _state
    with _state_lock:
        _state = WordRows()


def words(text: str, limit: int | None = None) -> list[str]:
    """The distinct words of a text (letters only, three or more, lower-cased, no stop words),
    in order of first appearance."""
    # dict.fromkeys keeps the first appearance of each: the de-duplication runs in C (a passage's
    # words, read for every new candidate, cost a loop in Python each)
    out = [w for w in dict.fromkeys(_WORD.findall((text or "").lower())) if w not in STOP_WORDS]
    return out[:limit] if limit else out


def best_share(sims: np.ndarray, idf: np.ndarray, min_similarity: float = MIN_SIMILARITY) -> float:
    """The score from the cosines of the question's words (rows) with a passage's words
    (columns): each row's best, from ``min_similarity`` on, idf-weighted. Pure."""
    if sims.size == 0 or float(idf.sum()) <= 0:
        return 0.0
    best = sims.max(axis=1)
    best = np.where(best >= min_similarity, np.minimum(best, 1.0), 0.0)
    return float((idf * best).sum() / idf.sum())


def score(q: np.ndarray, idf: np.ndarray, p: np.ndarray, min_similarity: float = MIN_SIMILARITY) -> float:
    """The soft-match score of one passage: ``q`` the question's word vectors (n × d, normalized),
    ``idf`` their weights (n), ``p`` the passage's word vectors (m × d, normalized). Pure."""
    if q.size == 0 or p.size == 0:
        return 0.0
    return best_share(q @ p.T, idf, min_similarity)


def rank(scores: dict, min_score: float = 0.0, order: dict | None = None) -> list[tuple[object, float]]:
    """(key, score) best first, above ``min_score``; ties by ``order`` (a key's position, lower
    first; the other legs' order when the leg gives it), then by key. Pure."""
    order = order or {}
    kept = [(k, s) for k, s in scores.items() if s > min_score]
    return sorted(kept, key=lambda x: (-x[1], order.get(x[0], len(order)), x[0]))


def vectors(ws: list[str], table) -> dict:
    """{word: its normalized vector} for the words that have one, cached per process."""
    st = word_rows()
    rows = st.row_numbers(ws, table)
    m = st.matrix
    return {w: m[r] for w, r in rows.items() if r >= 0}


def chunk_scores(q: np.ndarray, idf: np.ndarray, matrix: np.ndarray, chunk_rows: list[np.ndarray],
                 min_similarity: float = MIN_SIMILARITY) -> list[float]:
    """``score`` of each chunk at once: ``q`` the question's word vectors (n × d), ``idf`` their
    weights, ``matrix`` the word vectors, ``chunk_rows`` each chunk's words as row numbers of
    it. The rows every chunk uses are gathered once and multiplied once; each chunk's best
    cosine per question word is a maximum over its columns. Pure."""
    out = [0.0] * len(chunk_rows)
    total = float(idf.sum())
    live = [i for i, a in enumerate(chunk_rows) if a.size]
    if not live or q.size == 0 or total <= 0:
        return out
    used, where = np.unique(np.concatenate([chunk_rows[i] for i in live]), return_inverse=True)
    sims = (q @ matrix[used].T)[:, where]
    starts = np.cumsum([0] + [chunk_rows[i].size for i in live[:-1]])
    best = np.maximum.reduceat(sims, starts, axis=1)
    best = np.where(best >= min_similarity, np.minimum(best, 1.0), 0.0)
    for i, v in zip(live, (idf[:, None] * best).sum(axis=0) / total):
        out[i] = float(v)
    return out


def question_words(session, query: str) -> list[tuple[str, str]]:
    """(word, lexeme) of the question's content words: not stop words, not the gate's neutral
    words ("price", "tonight", "thing") except colours, not the word after "how" ("how long").
    A colour says nothing about whether the knowledge answers (the gate), but it is what the
    passage of a "sage green thermos" says that the other thermoses' do not."""
    from kbframework.retrieval.lexicon import stems as _stems
    from kbframework.retrieval.conversation import COLOURS
    from kbframework.retrieval.gate import NEUTRAL, _CONTRACTION_TAILS

    toks = _WORD.findall((query or "").lower())
    surface = []
    for i, w in enumerate(toks):
        if (i and toks[i - 1] == "how") or w in STOP_WORDS or w in surface:
            continue
        surface.append(w)
    stems = _stems(session, surface)
    out = []
    for w in surface:
        lx = stems.get(w) or ()
        if len(lx) == 1 and lx[0] not in _CONTRACTION_TAILS and (lx[0] not in NEUTRAL or w in COLOURS):
            out.append((w, lx[0]))
    return out[:MAX_WORDS]


def prepare(session, org_id, query: str, chunk_ids, texts: dict | None = None) -> dict | None:
    """What the leg needs that does not wait for the keyword leg: the question's words, their
    vectors and weights, and the words of the chunks already found (the vector leg's). The
    answer steps call it while the keyword leg is still running, so its round trips and
    Python overlap that leg's time in PostgreSQL; ``search`` does the rest. ``texts``: {chunk id:
    heading and text} as the vector leg's statement returned them (no round trip for those)."""
    from kbframework.retrieval.corpus_stats import document_frequency
    from kbframework.retrieval.expansion import token_table
    from kbframework.retrieval.gate import idf as gate_idf

    table = token_table()
    if table is None:
        return None
    st = word_rows()
    qw = question_words(session, query)
    qrows = st.row_numbers([w for w, _ in qw], table)
    qw = [(w, lx) for w, lx in qw if qrows[w] >= 0]
    if not qw:
        return {"table": table, "words": [], "state": st}
    dfs, n = document_frequency(session, org_id, sorted({lx for _, lx in qw}))
    weights = np.array([gate_idf(dfs.get(lx, 0), n) for _, lx in qw], dtype=np.float32)
    q = st.matrix[[qrows[w] for w, _ in qw]]
    prep = {"table": table, "words": qw, "weights": weights, "q": q, "chunks": {}, "state": st, "scores": {}}
    _read_chunks(session, org_id, list(chunk_ids), prep, texts)
    _score(prep, [c for c in chunk_ids if c in prep["chunks"]])  # these need nothing of the keyword leg
    return prep


def _score(prep: dict, chunk_ids: list) -> None:
    """Scores of chunks not scored yet for this question, into ``prep["scores"]`` (a chunk's
    score depends on its own words alone, so the vector leg's are scored while the keyword leg
    runs and only the keyword leg's others after it)."""
    todo = [c for c in dict.fromkeys(chunk_ids) if c not in prep["scores"]]
    if todo:
        # the matrix taken after every row these chunks use was assigned: it holds them all
        values = chunk_scores(prep["q"], prep["weights"], prep["state"].matrix, [prep["chunks"][c] for c in todo])
        prep["scores"].update(zip(todo, values))


def _read_chunks(session, org_id, chunk_ids: list, prep: dict, texts: dict | None = None) -> None:
    """Each chunk's words as rows of the word matrix (read once per process: a chunk's text
    never changes under its id, re-indexing writes new rows), into ``prep["chunks"]``. The text
    comes from ``texts`` ({chunk id: heading and text}, what the legs' statements returned)
    when it is there, else from one read of the chunks still missing."""
    from sqlalchemy import text

    st = prep["state"]
    per_chunk = prep["chunks"]
    org = str(org_id)
    for cid in chunk_ids:
        if cid not in per_chunk and (rows := st.chunks.get((org, cid))) is not None:
            per_chunk[cid] = rows
    missing = sorted(c for c in chunk_ids if c not in per_chunk)
    if not missing:
        return
    texts = texts or {}
    bodies = [(c, texts[c]) for c in missing if texts.get(c) is not None]
    unread = [c for c in missing if texts.get(c) is None]
    if unread:
        bodies += session.execute(text("SELECT id, coalesce(heading, '') || ' ' || content FROM chunks "
                                       "WHERE organization_id = :org AND id = ANY(:ids)"),
                                  {"org": org, "ids": unread}).all()
    fetched = {cid: words(body, MAX_PASSAGE_WORDS) for cid, body in bodies}
    # every new word of these chunks embedded in one call
    rows = st.row_numbers([w for ws in fetched.values() for w in ws], prep["table"])
    made = {}
    for cid, ws in fetched.items():
        r = np.fromiter((rows[w] for w in ws), dtype=np.int32, count=len(ws))
        made[cid] = r[r >= 0]
    per_chunk.update(made)
    with st.lock:
        # keyed by organization too: a chunk id is never reused by the sequence, but a
        # database emptied with RESTART IDENTITY (a test suite, a restore) starts it again
        st.chunks.update({(org, cid): r for cid, r in made.items()})


def search(session, org_id, query: str, candidates: dict, k: int = 20,
           prepared: dict | None = None, texts: dict | None = None) -> tuple[list, dict]:
    """The leg: ``candidates`` is {chunk id: document id} (the other legs' hits, in their order);
    returns their
    ``Hit`` list ranked by soft-match score (those above 0, at most ``k``) and a trace note.
    ``prepared``: ``prepare``'s result for the same question, if it ran; ``texts``: the candidates'
    heading and text as the legs returned them ({chunk id: text})."""
    from kbframework.retrieval.search import Hit

    if not candidates:
        return [], {"available": True, "words": []}
    prep = prepared if prepared is not None else prepare(session, org_id, query, (), texts)
    if prep is None:
        return [], {"available": False, "words": []}
    if not prep["words"]:
        return [], {"available": True, "words": []}
    _read_chunks(session, org_id, list(candidates), prep, texts)
    scored = [cid for cid in candidates if cid in prep["chunks"]]
    early = sum(1 for c in scored if c in prep["scores"])
    _score(prep, scored)
    scores = {cid: prep["scores"][cid] for cid in scored}
    # equal scores (the same words matched equally well) go to the chunk the vector and keyword
    # legs found first, not to the lower chunk id, which only says which writer thread was faster
    ranked = rank(scores, order={cid: i for i, cid in enumerate(candidates)})[:k]
    hits = [Hit(cid, str(candidates[cid]), i + 1, s, "soft") for i, (cid, s) in enumerate(ranked)]
    return hits, {"available": True, "words": [w for w, _ in prep["words"]], "scored": len(scores),
                  "scored_beside_keyword_leg": early if prepared is not None else 0,
                  "min_similarity": MIN_SIMILARITY, "prepared_beside_keyword_leg": prepared is not None}
