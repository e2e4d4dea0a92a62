"""Query expansion for the keyword leg from the offline embedder's own token table.

WordLlama is a static-embedding model: every token of its (Llama-2) vocabulary has one vector,
and a text's vector is the mean of its tokens'. So the table is also a small thesaurus: the
whole-word tokens nearest to "toddler" are "child" and "kid", to "movie" "film" and "cinema",
to "laugh" "comedy". A paraphrase that shares no word with its answer ("carry a toddler on
mountain walks" → "Child Carrier") gets words the keyword leg can find.

Per question: each content word (stemmed by PostgreSQL's English configuration, not a stop
word, not one of the gate's neutral words) is pooled from its tokens as the embedder pools a
text; the nearest whole-word tokens above ``MIN_SIMILARITY`` are its neighbours, at most
``PER_WORD`` of them, and only those the organization's chunks actually use (document frequency
> 0) are kept. A neighbour with the word's own stem, or a stem the question already has, adds
nothing and is dropped. The keyword leg adds the neighbours to its any-term tier only, each
weighing ``WEIGHT`` × its similarity × its own idf, so a chunk holding the question's own words
still ranks first.

Nothing is downloaded: the table is the installed wheel's safetensors file, read once per
process and kept normalized (about 9,000 whole-word rows × 256 floats, 9 MB); a question costs
one matrix-vector product per content word not seen before (then cached) and the cached stem and
document-frequency look-ups of its neighbours.
"""
from __future__ import annotations

import logging
import re
import threading

import numpy as np

MIN_SIMILARITY = 0.5
PER_WORD = 3
WEIGHT = 0.8  # a neighbour's share of its own idf in the keyword leg's BM25
MAX_WORDS = 8  # content words expanded per question
_SEARCH = 24  # nearest tokens looked at per word before the organization's filter

_WORD_TOKEN = re.compile(r"^[a-z]{3,}$")
_lock = threading.Lock()
_table: dict = {}
log = logging.getLogger("kbframework.retrieval")


def token_table():
    """(tokenizer, normalized whole-word matrix, the words of its rows, the full table), or
    None when WordLlama is not installed. Loaded once per process."""
    with _lock:
        if "t" in _table:
            return _table["t"]
        try:
            from kbframework.ingest.tokens import wordllama_dir, wordllama_tokenizer
            from kbframework.providers.wordllama_embedder import WEIGHTS, map_tensor

            root, tok = wordllama_dir(), wordllama_tokenizer()
            if root is None or tok is None:
                _table["t"] = None
                return None
            full = map_tensor(root / "weights" / "l2_supercat_256.safetensors", WEIGHTS)
        except Exception as exc:  # a broken wheel: no expansion, the searches still run
            log.warning("query expansion is off: the WordLlama token table could not be read (%s)", exc)
            _table["t"] = None
            return None
        ids, words = [], []
        for piece, i in tok.get_vocab().items():
            if piece.startswith("\u2581") and _WORD_TOKEN.match(piece[1:]) and i < full.shape[0]:
                ids.append(i)
                words.append(piece[1:])
        order = np.argsort(ids)
        ids = [ids[i] for i in order]
        words = [words[i] for i in order]
        mat = np.asarray(full[ids], dtype=np.float32)
        norms = np.linalg.norm(mat, axis=1, keepdims=True)
        mat = mat / np.maximum(norms, 1e-9)
        _table["t"] = (tok, np.ascontiguousarray(mat), words, full)
        return _table["t"]


def word_vector(word: str, table) -> np.ndarray | None:
    """The word pooled from its tokens, as the embedder pools a text, normalized."""
    return word_vectors([word], table)[0]


def word_vectors(words: list[str], table) -> list[np.ndarray | None]:
    """``word_vector`` of each word, the same vectors bit for bit, the words tokenized in one
    call (a passage's new words, a hundred at a time, cost 0.1 ms each one by one). The
    tokenizer is the embedder's, which pads a batch to its longest text: the attention mask
    says which ids are the word's."""
    tok, _, _, full = table
    rows = full.shape[0]
    out = []
    for enc in tok.encode_batch(list(words), add_special_tokens=False):
        ids = [i for i, m in zip(enc.ids, enc.attention_mask) if m and 0 <= i < rows]
        if not ids:
            out.append(None)
            continue
        v = np.asarray(full[ids], dtype=np.float32).mean(axis=0)
        n = float(np.sqrt(v.dot(v)))  # what np.linalg.norm computes for a vector, without its checks
        out.append(v / n if n > 0 else None)
    return out


def nearest_words(word: str, table, k: int = _SEARCH, min_similarity: float | None = None) -> list[tuple[str, float]]:
    """The whole-word tokens nearest to ``word`` (not the word itself), best first."""
    min_similarity = MIN_SIMILARITY if min_similarity is None else min_similarity
    v = word_vector(word, table)
    if v is None:
        return []
    _, mat, words, _ = table
    sims = mat @ v
    k = min(k, len(words))
    top = np.argpartition(-sims, k - 1)[:k]
    top = top[np.argsort(-sims[top])]
    w = word.lower()
    return [(words[i], round(float(sims[i]), 4)) for i in top if sims[i] >= min_similarity and words[i] != w]


def nearest_many(words: list[str], table, k: int = _SEARCH) -> dict[str, list[tuple[str, float]]]:
    """``nearest_words`` for each word, cached per process: the table does not change, so a word's
    neighbours are computed once (one matrix-vector product, ~0.4 ms; a product with a thin
    matrix of several words is slower than that many of them)."""
    out = {}
    for w in words:
        hit = _near_cache.get((w, k, MIN_SIMILARITY))
        if hit is None:
            hit = nearest_words(w, table, k)
            with _lock:
                if len(_near_cache) > 50_000:
                    _near_cache.clear()
                _near_cache[(w, k, MIN_SIMILARITY)] = hit
        out[w] = hit
    return out


_near_cache: dict = {}


def pick(candidates: dict[str, list[tuple[str, str, float]]], question_lexemes: set[str], df: dict[str, int],
         neutral: frozenset | set = frozenset(), per_word: int | None = None) -> dict[str, list[dict]]:
    """The neighbours kept for each question word: ``candidates`` is {word lexeme: [(neighbour,
    its lexeme, similarity), …]} best first; a neighbour is kept when the organization's chunks
    use its lexeme (``df`` > 0), it is not a stem the question already has, not the word's own
    stem, not a neutral word, and not already kept for another word. Pure: the unit tests call it."""
    per_word = PER_WORD if per_word is None else per_word
    out: dict[str, list[dict]] = {}
    taken = set(question_lexemes)
    for lx, cands in candidates.items():
        kept = []
        for word, nlx, sim in cands:
            if not nlx or nlx in taken or nlx in neutral or nlx == lx or df.get(nlx, 0) <= 0:
                continue
            if nlx.startswith(lx) or lx.startswith(nlx):  # the same word in another form
                continue
            kept.append({"word": word, "lexeme": nlx, "similarity": sim})
            taken.add(nlx)
            if len(kept) >= per_word:
                break
        if kept:
            out[lx] = kept
    return out


def likely_kept(candidates: dict[str, list[tuple[str, str, float]]], question_lexemes: set[str],
                neutral: frozenset | set = frozenset(), per_word: int | None = None) -> list[str]:
    """The lexemes ``pick`` keeps if the organization uses every candidate: each word's first
    ``per_word`` that pass its other tests. Pure."""
    return [n["lexeme"] for kept in pick(candidates, question_lexemes, _EVERY_WORD, neutral, per_word).values()
            for n in kept]


class _Every(dict):
    """A count of 1 for every word: ``pick`` as if the organization used them all."""

    def get(self, key, default=None):
        return 1


_EVERY_WORD = _Every()


def weights(expansion: dict[str, list[dict]], factor: float | None = None) -> dict[str, float]:
    """{neighbour lexeme: the share of its idf it weighs} for the keyword leg."""
    factor = WEIGHT if factor is None else factor
    out: dict[str, float] = {}
    for kept in expansion.values():
        for n in kept:
            out[n["lexeme"]] = max(out.get(n["lexeme"], 0.0), round(factor * n["similarity"], 4))
    return out


def expand(session, org_id, query: str) -> dict:
    """The expansion of one question: {"words": {lexeme: [{word, lexeme, similarity}]},
    "weights": {lexeme: factor}}; empty when WordLlama is not installed."""
    from kbframework.retrieval.corpus_stats import words_used
    from kbframework.retrieval.gate import NEUTRAL, _CONTRACTION_TAILS
    from kbframework.retrieval import lexicon
    from kbframework.retrieval.lexicon import STOP_WORDS, prefetch, query_lexemes

    table = token_table()
    if not query:
        return {"words": {}, "weights": {}, "available": table is not None}
    surface = []
    tokens = re.findall(r"[^\W\d_]+", query.lower())
    for i, w in enumerate(tokens):
        # "how long", "how far", "how often": a question's frame, not its subject ("long" → length
        # would find a floor-length dress for "how long does delivery take?")
        if i and tokens[i - 1] == "how":
            continue
        if len(w) >= 3 and w not in surface:
            surface.append(w)
    # one round trip for every stem the answer steps ask for: the question's words (every word
    # of three letters or more, as the soft-match leg reads them too), the neighbours of those
    # that are not stop words (found before their stems are known: the product is cheap and
    # cached), and the whole question's content words and lexemes (the vector and keyword legs')
    near = nearest_many([w for w in surface if w not in STOP_WORDS], table) if table is not None else {}
    prefetch(session, query, lexicon.question_words(query) + [n for c in near.values() for n, _ in c])
    if table is None:
        return {"words": {}, "weights": {}, "available": False}
    stems = lexicon.stems(session, surface)
    q_lex = {lx for w in surface for lx in stems[w]}
    words = []
    for w in surface:
        lx = stems[w]
        if len(lx) != 1 or lx[0] in NEUTRAL or lx[0] in _CONTRACTION_TAILS:
            continue  # a stop word, a neutral word ("price", "tonight"), or one PostgreSQL splits
        words.append((w, lx[0]))
    words = words[:MAX_WORDS]
    near.update(nearest_many([w for w, _ in words if w not in near], table))
    near = {lx: near[w] for w, lx in words}
    n_stems = lexicon.stems(session, sorted({n for c in near.values() for n, _ in c}))
    candidates = {lx: [(n, n_stems[n][0], s) for n, s in c if len(n_stems[n]) == 1] for lx, c in near.items()}
    all_lx = sorted({c[1] for cs in candidates.values() for c in cs})
    # the question's own words' counts in the same round trip: the keyword leg weighs them next;
    # and those of the neighbours that will be kept if the organization uses them, which the
    # keyword leg weighs too (a count of a word no chunk uses costs what the used-or-not probe
    # does; otherwise the keyword leg counted them in a round trip of its own)
    counted = list(query_lexemes(session, query)) + likely_kept(candidates, q_lex, NEUTRAL)
    used = words_used(session, org_id, all_lx, counted=counted) if all_lx else set()
    kept = pick(candidates, q_lex, {lx: 1 for lx in used}, NEUTRAL)
    return {"words": kept, "weights": weights(kept), "available": True}
