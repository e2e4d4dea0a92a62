"""The answerability gate: one calibrated decision that the retrieved evidence answers the
question, made before any model is called.

A similarity floor alone cannot tell "do you sell gift vouchers?" (nearest note at 0.26, no word
in common) from a paraphrase whose answer shares no word with it. The gate weighs three
signals for each of the best passages and keeps the best passage's score:

    similarity   cosine similarity of the passage to the question (vector leg; 0 when absent)
    overlap      how much of the question's content the passage holds: its content words,
                 stemmed (PostgreSQL's English lexemes), each weighted by its rarity in the
                 organization's knowledge (a word no document uses weighs most), a word also
                 counting when one of the organization's synonyms is there
    unknown      the share of that weight carried by words no chunk of the organization uses
                 (scaled down for small knowledge bases, which cannot speak for a domain)
    agreement    whether the two searches agree: the passage's document near the top of both

    score = W_SIM·similarity + W_OVERLAP·overlap + W_AGREE·agreement − W_UNKNOWN·unknown
    (answer when ≥ threshold)

The weights and the default threshold were calibrated on the development set
(``shared/data/retrieval_dev``, offline embedder) and on the demo questions; ``CALIBRATION``
holds the figures the admin shows. An organization may set its own threshold
(``answer_threshold`` in its settings; ``synonyms`` widen the overlap). Questions that the filters answer by themselves
("what's on tonight?"), documents the question names exactly, and the documents a follow-up
points at pass without a score.
"""
from __future__ import annotations

import math
import threading
import time

from sqlalchemy import text

W_SIM, W_OVERLAP, W_AGREE, W_UNKNOWN = 1.0, 1.0, 0.05, 1.0
THRESHOLD = 0.29
TOP_PASSAGES = 3
DF_CAP = 2000
# a word no chunk uses says "not our subject" only when there is enough knowledge to speak for
# a domain: the penalty grows with the number of chunks and is whole from this many on
KNOWLEDGE_OF_A_DOMAIN = 200
# measured by ``kbf eval retrieval`` (retrieval_dev) and tests/test_answerability.py (demo questions)
CALIBRATION = {
    "threshold": THRESHOLD,
    "weights": {"similarity": W_SIM, "overlap": W_OVERLAP, "agreement": W_AGREE, "unknown": W_UNKNOWN},
    "retrieval_dev": {"unanswerable_fell_back": "9 of 10", "answerable_fell_back": "23 of 217 (10.6%)"},
    "demo": {"unanswerable_fell_back": "27 of 30", "answerable_fell_back": "2 of 30 (6.7%)"},
}

_df_cache: dict = {}
_lock = threading.Lock()
_DF_TTL = 60.0


def question_lexemes(session, query: str) -> list[str]:
    rows = session.execute(text("SELECT unnest(tsvector_to_array(to_tsvector('english', :q)))"),
                           {"q": query or ""}).scalars().all()
    return [r for r in rows if r and not r.isdigit() and r not in NEUTRAL]


# words that say what the visitor wants to know about, not what it is about
NEUTRAL = frozenset("""
price cost much link url websit page ticket book stock avail size colour color date time start hour open
close get buy sell offer need want like look find show tell know give send share help pleas thank recommend
suggest best good nice realli anyth someth thing stuff item product event option kind type sort
euro eur dollar usd pound gbp buck quid cheap cheaper expens pricier afford
one two three four five six seven eight nine ten twenti thirti forti fifti sixti seventi eighti nineti
hundr thousand
use work come go take make say mean happen let put keep tri see
now today tonight tomorrow weekend week night even morn afternoon soon later earlier
""".split()) | frozenset(__import__("kbframework.retrieval.conversation", fromlist=["COLOURS"]).COLOURS)


def document_frequency(session, org_id, lexemes: list[str]) -> tuple[dict, int]:
    """({lexeme: chunks containing it (capped)}, chunks of the organization), cached a minute."""
    key = str(org_id)
    now = time.monotonic()
    out, missing = {}, []
    with _lock:
        for lx in lexemes:
            hit = _df_cache.get((key, lx))
            if hit and now - hit[0] < _DF_TTL:
                out[lx] = hit[1]
            else:
                missing.append(lx)
        total = _df_cache.get((key, None))
    if missing:
        rows = session.execute(text(
            "SELECT l, (SELECT count(*) FROM (SELECT 1 FROM chunks c WHERE c.organization_id = :org "
            f"AND c.tsv @@ to_tsquery('simple', quote_literal(l)) LIMIT {DF_CAP}) x) "
            "FROM unnest(CAST(:lx AS text[])) l"), {"org": key, "lx": missing}).all()
        with _lock:
            for lx, n in rows:
                out[lx] = int(n)
                _df_cache[(key, lx)] = (now, int(n))
    if total is None or now - total[0] >= _DF_TTL:
        n = session.execute(text("SELECT count(*) FROM chunks WHERE organization_id = :org"), {"org": key}).scalar()
        total = (now, int(n or 0))
        with _lock:
            if len(_df_cache) > 50000:
                _df_cache.clear()
            _df_cache[(key, None)] = total
    return out, total[1]


def idf(df: int, n: int) -> float:
    return math.log((n + 1) / (df + 0.5)) + 0.1 if n else 1.0


def synonym_lexemes(session, synonyms: dict | None, lexemes: list[str]) -> dict:
    """{question lexeme: other lexemes that count for it}, from the organization's synonyms
    ({"voucher": ["gift card"], …}, either way round)."""
    if not synonyms or not isinstance(synonyms, dict):
        return {}
    pairs = []
    for k, vals in synonyms.items():
        for v in (vals if isinstance(vals, list) else [vals]):
            if isinstance(k, str) and isinstance(v, str):
                pairs.append((k, v))
    if not pairs:
        return {}
    words = sorted({w for p in pairs for w in p})
    rows = session.execute(text(
        "SELECT w, tsvector_to_array(to_tsvector('english', w)) FROM unnest(CAST(:w AS text[])) w"),
        {"w": words}).all()
    lx = {w: set(a or []) for w, a in rows}
    out: dict = {}
    for a, b in pairs:
        for x, y in ((a, b), (b, a)):
            for q in lx.get(x, ()):
                if q in lexemes:
                    out.setdefault(q, set()).update(lx.get(y, ()))
    return out


def with_synonyms(query: str, synonyms: dict | None) -> str:
    """The search text with the organization's synonyms of its words added ("vouchers" →
    "vouchers gift card"), so both searches can find what the organization calls it."""
    if not synonyms or not isinstance(synonyms, dict):
        return query
    from kbframework.retrieval.phrases import tokens

    have = {t for t, _, _ in tokens(query)}
    extra: list[str] = []
    for k, vals in synonyms.items():
        group = [k] + [b for b in (vals if isinstance(vals, list) else [vals]) if isinstance(b, str)]
        if isinstance(k, str):
            for word in group:
                if isinstance(word, str) and {t for t, _, _ in tokens(word)} <= have and tokens(word):
                    extra += [w for w in group if w != word and w.lower() not in query.lower() and w not in extra]
    return f"{query} {' '.join(extra)}" if extra else query


def passage_lexemes(session, org_id, chunk_ids: list[int]) -> dict:
    if not chunk_ids:
        return {}
    rows = session.execute(text("SELECT id, tsvector_to_array(tsv) FROM chunks "
                                "WHERE organization_id = :org AND id = ANY(:ids)"),
                           {"org": str(org_id), "ids": list(chunk_ids)}).all()
    return {r[0]: set(r[1] or []) for r in rows}


def overlap(q_lex: list[str], p_lex: set, weights: dict, synonyms: dict | None = None) -> float:
    """Share of the question's (rarity-weighted) content lexemes that the passage holds."""
    if not q_lex:
        return 0.0
    total = sum(weights.get(w, 1.0) for w in q_lex)
    got = sum(weights.get(w, 1.0) for w in q_lex
              if w in p_lex or any(s in p_lex for s in (synonyms or {}).get(w, ())))
    return got / total if total else 0.0


def agreement(fused_entry: dict, doc_ranks: dict) -> float:
    """1 when the passage's document is in the top 5 of both legs, 0.5 in both lists, else 0."""
    r = doc_ranks.get(fused_entry["document_id"], {})
    v, k = r.get("vector"), r.get("keyword")
    if v and k:
        return 1.0 if max(v, k) <= 5 else 0.5
    return 0.0


def score(sim: float, ov: float, agree: float, unknown: float = 0.0) -> float:
    return W_SIM * sim + W_OVERLAP * ov + W_AGREE * agree - W_UNKNOWN * unknown


def doc_ranks(legs: dict) -> dict:
    """{document id: {leg: best rank of any of its chunks}}."""
    out: dict = {}
    for leg, hits in legs.items():
        for h in hits:
            d = out.setdefault(h.document_id, {})
            if leg not in d or h.rank < d[leg]:
                d[leg] = h.rank
    return out


def features(session, org_id, query: str, fused: list[dict], legs: dict, synonyms: dict | None = None,
             top: int = TOP_PASSAGES, places: list[str] | None = None) -> dict:
    """The gate's signals for the best ``top`` distinct documents of the fused ranking. The
    organization's own place names in the question ("in Castelmar") are constraints, not what
    the question is about, so they count for neither overlap nor unknown words."""
    q_lex = question_lexemes(session, query)
    if places:
        drop = set(question_lexemes(session, " ".join(places)))
        q_lex = [w for w in q_lex if w not in drop] or q_lex
    dfs, n = document_frequency(session, org_id, q_lex) if q_lex else ({}, 0)
    weights = {w: idf(dfs.get(w, 0), n) for w in q_lex}
    syn = synonym_lexemes(session, synonyms, q_lex)
    picked, seen = [], set()
    for f in fused:
        if f["document_id"] in seen:
            continue
        seen.add(f["document_id"])
        picked.append(f)
        if len(picked) >= top:
            break
    # a document's best vector similarity, over all of its chunks in the vector leg
    best_sim: dict = {}
    for h in legs.get("vector", []):
        best_sim[h.document_id] = max(best_sim.get(h.document_id, -1.0), h.score)
    ranks = doc_ranks({k: v for k, v in legs.items() if k in ("vector", "keyword")})
    # every chunk of a picked document that either leg found counts for its overlap
    chunk_ids = {f["chunk_id"] for f in picked}
    docs = {f["document_id"] for f in picked}
    for hits in legs.values():
        chunk_ids.update(h.chunk_id for h in hits if h.document_id in docs)
    lex = passage_lexemes(session, org_id, sorted(chunk_ids))
    by_doc: dict = {}
    for hits in legs.values():
        for h in hits:
            if h.document_id in docs:
                by_doc.setdefault(h.document_id, set()).update(lex.get(h.chunk_id, set()))
    rows = []
    for f in picked:
        p_lex = by_doc.get(f["document_id"], set()) | lex.get(f["chunk_id"], set())
        sim = max(best_sim.get(f["document_id"], 0.0), 0.0)
        ov = overlap(q_lex, p_lex, weights, syn)
        ag = agreement(f, ranks)
        rows.append({"document_id": f["document_id"], "chunk_id": f["chunk_id"], "similarity": round(sim, 4),
                     "overlap": round(ov, 4), "agreement": ag,
                     "matched": [w for w in q_lex if w in p_lex or any(x in p_lex for x in syn.get(w, ()))]})
    unknown = [w for w in q_lex if dfs.get(w, 0) == 0 and not syn.get(w)]
    unk = (sum(weights[w] for w in unknown) / sum(weights.values())) if q_lex else 0.0
    unk *= min(1.0, math.log1p(n) / math.log1p(KNOWLEDGE_OF_A_DOMAIN))
    for r in rows:
        r["score"] = round(score(r["similarity"], r["overlap"], r["agreement"], unk), 4)
    return {"lexemes": {w: round(weights[w], 3) for w in q_lex}, "unknown_words": unknown,
            "unknown_share": round(unk, 4),
            "document_frequency": {w: dfs.get(w, 0) for w in q_lex}, "passages": rows,
            "synonyms": {k: sorted(v) for k, v in syn.items()}}


def decide(feats: dict, threshold: float) -> tuple[bool, float]:
    best = max((p["score"] for p in feats.get("passages", [])), default=0.0)
    return best >= threshold, best
