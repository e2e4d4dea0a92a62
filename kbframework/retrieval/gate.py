"""The answerability gate: one calibrated decision that the retrieved evidence answers the
question, made before any model is called.

A similarity floor alone cannot tell "do you sell gift vouchers?" (nearest note at 0.26, no word
in common) from a paraphrase whose answer shares no word with it. The gate weighs these signals
for each of the best documents and keeps the best document's score:

    similarity   cosine similarity of the document's best chunk to the question (vector leg)
    overlap      how much of the question's content the document holds: its content words,
                 stemmed (PostgreSQL's English lexemes), each weighted by its rarity in the
                 organization's knowledge (idf), a word also counting when one of the
                 organization's synonyms is there; the document is its chunks that either search
                 found plus its title, tags and categories
    title        the same share, found in the title, tags and categories alone: a question about
                 what a document *is* names it there
    agreement    whether the two searches agree: the document near the top of both
    lead         how far the best vector hit stands out from the rest of the vector list (ranks
                 6–20, the floor where the list is shorter): a question the knowledge is about
                 has a few close documents, one it is not about finds everything equally far
    unknown      the share of the question's weight carried by words no chunk of the organization
                 uses (scaled down for small knowledge bases, which cannot speak for a domain)

    score = Σ WEIGHTS[signal]·signal − WEIGHTS["unknown"]·unknown     (answer when ≥ threshold)

The weights and the default threshold are fitted by ``kbf eval gate --calibrate``
(``kbframework.retrieval.gate_calibration``) on one half of the development set
(``shared/data/retrieval_dev``, offline embedder) and of the demo questions, and checked on the
other half; ``CALIBRATION`` holds the figures the admin shows. An organization may set its own
threshold (``answer_threshold`` in its settings; ``synonyms`` widen the overlap). Questions the
filters answer by themselves ("what's on tonight?") and the documents a follow-up points at
pass without a score.
"""
from __future__ import annotations

import math
import re

from sqlalchemy import text

from kbframework.retrieval.corpus_stats import document_frequency

# fitted by `kbf eval gate --calibrate` on half A (see CALIBRATION); similarity keeps weight 1
WEIGHTS = {"similarity": 1.0, "overlap": 0.5, "title": 0.5, "agreement": 0.1, "lead": 1.0, "unknown": 1.5}
THRESHOLD = 0.1367
TOP_PASSAGES = 3
DEPTH = 20  # the gate reads each leg's first 20 hits, as deep as the product searches
LEAD_TAIL = (5, 20)  # the vector ranks the best hit is compared with
# a neighbour of a question word from the embedder's token table counts as this share of the
# word, times its similarity (the share the keyword leg gives it, ``expansion.WEIGHT``)
NEAR_SHARE = 0.8
# a word no chunk uses says "not our subject" only when there is enough knowledge to speak for
# a domain: the penalty grows with the number of chunks and is whole from this many on
KNOWLEDGE_OF_A_DOMAIN = 200
# written by `kbf eval gate --calibrate`; the admin's settings page shows it
CALIBRATION = {
    "threshold": THRESHOLD,
    "weights": dict(WEIGHTS),
    "fitted_on": "half A of the development set (with 30 more unanswerable questions) and of the demo questions",
    "retrieval_dev": {"unanswerable_fell_back": "9 of 10", "answerable_fell_back": "10 of 216 (4.6%)"},
    "demo": {"unanswerable_fell_back": "27 of 30", "answerable_fell_back": "1 of 30 (3.3%)"},
    "held_out": {"retrieval_dev": {"unanswerable_fell_back": "5 of 5", "answerable_fell_back": "3 of 108 (2.8%)"},
                 "demo": {"unanswerable_fell_back": "14 of 15", "answerable_fell_back": "0 of 15 (0.0%)"}},
}



# the tails of English contractions ("I've", "we'll") that the parser leaves as words
_CONTRACTION_TAILS = frozenset("ve ll re m s d t".split())
_TIME_TOKEN = re.compile(r"^\d{1,2}(?:[:.h]\d{2})?(?:am|pm|h)?$|^\d{1,2}(?:am|pm)$")


_HOW_FRAME = re.compile(r"\b(how)\s+[^\W\d_]+", re.I)


def question_frame(query: str) -> str:
    """The question without the word after "how": "how old", "how long", "how far" ask for a
    measure of the subject, they are not the subject ("how old do I have to be…" is an age
    question; the query expansion skips the same word). Pure."""
    return _HOW_FRAME.sub(r"\1", query or "")


def question_lexemes(session, query: str) -> list[str]:
    """The question's content lexemes. Numbers, clock times ("3am") and the tails of
    contractions are constraints or noise, not subjects; a hyphenated compound
    ("late-night", "black-and-white") counts through its parts, which PostgreSQL emits
    beside it, so it is neither counted twice nor taken for a word the knowledge lacks."""
    rows = session.execute(text("SELECT unnest(tsvector_to_array(to_tsvector('english', :q)))"),
                           {"q": question_frame(query)}).scalars().all()
    have = set(rows)
    out = []
    for r in rows:
        if not r or r.isdigit() or r in NEUTRAL or r in _CONTRACTION_TAILS or _TIME_TOKEN.match(r):
            continue
        if "-" in r and any(p in have for p in r.split("-") if p):
            continue
        out.append(r)
    return out


# words that say what the visitor wants to know about, not what it is about
NEUTRAL = frozenset("""
price cost much link url websit page ticket book stock avail size colour color date time start hour open
close get buy sell offer need want like look find show tell know give send share help pleas thank recommend
suggest best good nice realli anyth someth thing stuff item product event option kind type sort
somewher anywher everywher somebodi someon anyon everyon everyth noth nowher whatev
euro eur dollar usd pound gbp buck quid cheap cheaper expens pricier afford
one two three four five six seven eight nine ten twenti thirti forti fifti sixti seventi eighti nineti
hundr thousand
use work come go take make say mean happen let put keep tri see
went gone took taken made came got gotten said saw seen kept gave given told knew known sent shown meant
now today tonight tomorrow weekend week night even morn afternoon soon later earlier upcom next
""".split()) | frozenset(__import__("kbframework.retrieval.conversation", fromlist=["COLOURS"]).COLOURS)


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


def field_lexemes(session, org_id, doc_ids: list[str]) -> dict:
    """{document id: lexemes of its title, tags, categories, brand and genre}: what a
    document *is*, which its chunks may not spell out (a policy page tagged "returns")."""
    if not doc_ids:
        return {}
    rows = session.execute(text(
        "SELECT d.id::text, tsvector_to_array(to_tsvector('english', concat_ws(' ', d.title, "
        "array_to_string(coalesce(d.tags, '{}'::text[]), ' '), "
        "CASE WHEN jsonb_typeof(d.metadata->'categories') = 'array' THEN "
        "(SELECT string_agg(x, ' ') FROM jsonb_array_elements_text(d.metadata->'categories') x) END, "
        "CASE WHEN jsonb_typeof(d.metadata->'brand') = 'string' THEN d.metadata->>'brand' END, "
        "CASE WHEN jsonb_typeof(d.metadata->'genre') = 'string' THEN d.metadata->>'genre' END))) "
        "FROM documents d WHERE d.organization_id = :org AND d.id = ANY(CAST(:ids AS uuid[]))"),
        {"org": str(org_id), "ids": [str(d) for d in doc_ids]}).all()
    return {r[0]: set(r[1] or []) for r in rows}


def overlap(q_lex: list[str], p_lex: set, weights: dict, synonyms: dict | None = None,
            near: dict | None = None) -> float:
    """Share of the question's (rarity-weighted) content lexemes that the passage holds. A word
    the passage lacks counts in part when it holds one of the word's neighbours from the
    embedder's token table (``near``: {word: {neighbour: share}}), by that share."""
    if not q_lex:
        return 0.0
    total = sum(weights.get(w, 1.0) for w in q_lex)
    got = 0.0
    for w in q_lex:
        if w in p_lex or any(s in p_lex for s in (synonyms or {}).get(w, ())):
            got += weights.get(w, 1.0)
        elif near and near.get(w):
            got += weights.get(w, 1.0) * max((f for n, f in near[w].items() if n in p_lex), default=0.0)
    return got / total if total else 0.0


def agreement(fused_entry: dict, doc_ranks: dict) -> float:
    """1 when the passage's document is in the top 5 of both legs, 0.5 in both lists, else 0."""
    r = doc_ranks.get(fused_entry["document_id"], {})
    v, k = r.get("vector"), r.get("keyword")
    if v and k:
        return 1.0 if max(v, k) <= 5 else 0.5
    return 0.0


def lead(vector_hits: list, floor: float = 0.0) -> float:
    """The best document's similarity minus the mean of the documents at vector ranks 6–20
    (the floor standing in for ranks the list does not reach)."""
    best: dict = {}
    for h in vector_hits:
        if h.rank <= DEPTH:
            best[h.document_id] = max(best.get(h.document_id, -1.0), h.score)
    sims = sorted(best.values(), reverse=True)
    if not sims:
        return 0.0
    a, b = LEAD_TAIL
    tail = sims[a:b] + [floor] * max(0, (b - a) - len(sims[a:b]))
    return sims[0] - sum(tail) / len(tail)


def score(sim: float, ov: float, agree: float, unknown: float = 0.0, title: float = 0.0,
          lead_: float = 0.0, weights: dict | None = None) -> float:
    w = weights or WEIGHTS
    return (w["similarity"] * sim + w["overlap"] * ov + w["title"] * title + w["agreement"] * agree
            + w["lead"] * lead_ - w["unknown"] * unknown)


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
             top: int = TOP_PASSAGES, places: list[str] | None = None, floor: float = 0.0,
             weights: dict | None = None, named: list | None = None, expanded: dict | None = None) -> dict:
    """The gate's signals for the best ``top`` distinct documents of the fused ranking. The
    organization's own place names in the question ("in Castelmar") are constraints, not what
    the question is about: they count neither as overlap nor as unknown words, except for a
    document the question names exactly (``named``, the identity step's: the venue's own page
    for "can I park at Fábrica das Luzes?"), whose name is what the question is about.
    ``expanded``: the expand_query step's neighbours ({word: [{lexeme, similarity}]}); a
    neighbour in a passage counts as part of its word (``NEAR_SHARE`` × similarity), and a word
    no chunk uses but whose neighbours some do is unknown only in the rest of that share."""
    legs = {k: [h for h in v if h.rank <= DEPTH] for k, v in legs.items()}
    named_ = {str(d) for d in (named or [])}
    q_all = question_lexemes(session, query)
    drop = set(question_lexemes(session, " ".join(places))) if places else set()
    q_lex = [w for w in q_all if w not in drop] or q_all
    dfs, n = document_frequency(session, org_id, q_all) if q_all else ({}, 0)
    weights_ = {w: idf(dfs.get(w, 0), n) for w in q_all}
    syn = synonym_lexemes(session, synonyms, q_all)
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
    fields = field_lexemes(session, org_id, sorted(docs))
    by_doc: dict = {}
    for hits in legs.values():
        for h in hits:
            if h.document_id in docs:
                by_doc.setdefault(h.document_id, set()).update(lex.get(h.chunk_id, set()))
    # a word in a document's tags or categories is the organization's word even when no chunk says it
    in_fields = set().union(*fields.values()) if fields else set()
    near = {w: {n["lexeme"]: NEAR_SHARE * n["similarity"] for n in kept} for w, kept in (expanded or {}).items()}
    unknown = [w for w in q_lex if dfs.get(w, 0) == 0 and not syn.get(w) and w not in in_fields]
    unk = (sum(weights_[w] * (1.0 - max(near.get(w, {}).values(), default=0.0)) for w in unknown)
           / sum(weights_[w] for w in q_lex)) if q_lex else 0.0
    unk *= min(1.0, math.log1p(n) / math.log1p(KNOWLEDGE_OF_A_DOMAIN))
    ld = lead(legs.get("vector", []), floor)
    rows = []
    for f in picked:
        f_lex = fields.get(str(f["document_id"]), set())
        p_lex = by_doc.get(f["document_id"], set()) | lex.get(f["chunk_id"], set()) | f_lex
        mine = q_lex + [w for w in q_all if w in drop and w not in q_lex] if f["document_id"] in named_ else q_lex
        sim = max(best_sim.get(f["document_id"], 0.0), 0.0)
        ov = overlap(mine, p_lex, weights_, syn, near)
        tov = overlap(mine, f_lex, weights_, syn)
        ag = agreement(f, ranks)
        rows.append({"document_id": f["document_id"], "chunk_id": f["chunk_id"], "similarity": round(sim, 4),
                     "overlap": round(ov, 4), "title_overlap": round(tov, 4), "agreement": ag,
                     "matched": [w for w in mine if w in p_lex or any(x in p_lex for x in syn.get(w, ()))]})
    for r in rows:
        r["score"] = round(score(r["similarity"], r["overlap"], r["agreement"], unk, r["title_overlap"], ld,
                                 weights), 4)
    return {"lexemes": {w: round(weights_[w], 3) for w in q_lex}, "unknown_words": unknown,
            "unknown_share": round(unk, 4), "lead": round(ld, 4),
            "document_frequency": {w: dfs.get(w, 0) for w in q_all}, "passages": rows,
            "synonyms": {k: sorted(v) for k, v in syn.items()}}


def decide(feats: dict, threshold: float) -> tuple[bool, float]:
    best = max((p["score"] for p in feats.get("passages", [])), default=0.0)
    return best >= threshold, best
