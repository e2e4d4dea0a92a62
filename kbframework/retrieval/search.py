"""Hybrid search: a pre-filter in SQL, a vector leg, a keyword leg, Reciprocal Rank Fusion.

The multi-tenant trap (DESIGN.md): an HNSW scan filtered by organization returns at most
``ef_search`` candidates *before* the filter, so a small organization in a big table loses
recall. Per query: an exact scan of the organization's own rows when it holds few chunks
for the model (or the pre-filter is selective), else the organization's own HNSW index for
the model (``retrieval.vector_index``: a partial expression index ``(embedding_half::halfvec(dim))
WHERE embedding_model = '<model>' AND organization_id = '<org>'``, which the literal conditions
here let the planner choose), walked with pgvector 0.8's iterative index scan
(``hnsw.iterative_scan = relaxed_order``) so a selective pre-filter still gets enough rows.
Both paths read the compact ``embedding_half`` kept in the row, take a few times k
candidates and re-rank them by the exact full-precision distance. The HNSW path repeats the
index expression exactly, and the exact path deliberately does not.
"""
from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy import text

from kbframework.config import get_config
from kbframework.retrieval.corpus_stats import DF_CAP, document_frequency, forget_counts, org_models  # noqa: F401

SERVABLE_STATUSES = ("active", "syncing", "error")  # error/syncing keep their last good chunks
RRF_K = 60
KEYWORD_CANDIDATES = 400
# matches a tier reads from the full-text index when few are filtered out: its candidates twice
# over (room for the documents the pre-filter refuses) and the chunks the earlier tiers hold. A
# function's rows are all read before the first is used, so each one read costs its heap visit:
# five times the candidates cost the 400,000-chunk organization's all-words tier 13 ms of 28
MATCHES_PER_TIER = 2 * KEYWORD_CANDIDATES
FILTERED_ROLES = ("product", "event")  # price/category/stock filters describe these roles


@dataclass
class Prefilter:
    """Everything that restricts which documents may answer; applied before both legs."""

    organization_id: str
    now: datetime
    date_start: datetime | None = None
    date_end: datetime | None = None
    past: bool = False
    price_min: float | None = None
    price_max: float | None = None
    categories: list[str] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)
    in_stock: bool | None = None
    city: str | None = None
    venue: str | None = None
    roles: list[str] = field(default_factory=list)
    source_types: list[str] = field(default_factory=list)
    # tag/category conditions: every group must match, any label within a group ("red" AND
    # "dress"-or-"Dresses"); when empty, ``categories`` and ``tags`` are one group each
    label_groups: list[list[str]] = field(default_factory=list)
    # "anything later?" after a list of events: events starting after (before) a moment
    start_after: datetime | None = None
    start_before: datetime | None = None
    # "the cheapest …", "the earliest …": the order of the listing (price_asc, price_desc,
    # start_asc, start_desc); it restricts nothing
    order: str | None = None
    # how many documents passed, as ``count_candidates`` found it (capped): the vector leg
    # reads it to choose between its plans; None until counted
    counted: int | None = field(default=None, compare=False)

    @property
    def selective(self) -> bool:
        return bool(self.date_start or self.start_after or self.start_before or self.price_min is not None or self.price_max is not None
                    or self.categories or self.tags or self.label_groups or self.city or self.venue or self.roles
                    or self.source_types)

    @property
    def has_filters(self) -> bool:
        return self.selective or self.in_stock is not None or self.past

    def sql(self) -> tuple[str, dict]:
        """WHERE conditions on ``documents d`` and their parameters."""
        conds = ["d.organization_id = :org", "d.status IN :servable", "d.chunk_count > 0",
                 "(d.expires_at IS NULL OR d.expires_at > :now)"]
        # an explicit question about the past ("last weekend") may see events that have expired
        servable = SERVABLE_STATUSES + (("expired",) if self.past else ())
        p: dict = {"org": str(self.organization_id), "servable": servable, "now": self.now}
        if self.past:
            conds[3] = "(d.expires_at IS NULL OR d.expires_at > :now OR d.event_start IS NOT NULL)"
        if self.date_start is not None:
            # overlap: starts before the range ends and ends after it starts; no end → by start.
            # A night that began before a day the visitor names and ran past its cut-off
            # (Sunday 22:00 – Monday 06:00) belongs to the evening it started, not to "Monday";
            # what is under way in a range that holds now ("tonight" at 01:00) still counts
            conds.append("(d.event_start IS NULL OR (d.event_start < :range_end AND "
                         "CASE WHEN d.event_end IS NULL THEN d.event_start >= :range_start "
                         "ELSE d.event_end > :range_start AND (d.event_start >= :range_start "
                         "OR d.event_end > :spill_until) END))")
            p.update(range_start=self.date_start, range_end=self.date_end,
                     spill_until=spill_until(self.date_start, self.date_end, self.now))
        elif not self.past:
            conds.append("(d.event_start IS NULL OR coalesce(d.event_end, d.event_start) >= :now)")
        if self.start_after is not None:
            conds.append("(d.event_start IS NULL OR d.event_start > :start_after)")
            p["start_after"] = self.start_after
        if self.start_before is not None:
            conds.append("(d.event_start IS NULL OR d.event_start < :start_before)")
            p["start_before"] = self.start_before
        price = "coalesce(kb_num(d.metadata->>'price_min'), kb_num(d.metadata->>'price'))"
        if self.price_max is not None:
            conds.append(f"(d.document_role NOT IN :frole OR {price} <= :price_max)")
            p["price_max"] = self.price_max
        if self.price_min is not None:
            conds.append("(d.document_role NOT IN :frole OR coalesce(kb_num(d.metadata->>'price_max'), "
                         "kb_num(d.metadata->>'price')) >= :price_min)")
            p["price_min"] = self.price_min
        for i, group in enumerate(self.label_groups or (self.categories, self.tags)):
            if group:
                conds.append(
                    f"(d.document_role NOT IN :frole OR EXISTS (SELECT 1 FROM unnest(coalesce(d.tags, "
                    f"'{{}}'::text[]) || ARRAY(SELECT jsonb_array_elements_text(CASE WHEN jsonb_typeof("
                    f"d.metadata->'categories') = 'array' THEN d.metadata->'categories' ELSE '[]'::jsonb "
                    f"END))) t WHERE lower(t) = ANY(:grp{i})))")
                p[f"grp{i}"] = [g.lower() for g in group]
        if self.in_stock:
            conds.append("(d.document_role <> 'product' OR (d.metadata->>'in_stock') = 'true')")
        if self.city:
            conds.append("(d.document_role <> 'event' OR lower(d.city) = lower(:city))")
            p["city"] = self.city
        if self.venue:
            conds.append("(d.document_role <> 'event' OR lower(d.venue) = lower(:venue))")
            p["venue"] = self.venue
        if self.roles:
            conds.append("d.document_role IN :roles")
            p["roles"] = tuple(self.roles)
        if self.source_types:
            conds.append("d.type IN :stypes")
            p["stypes"] = tuple(self.source_types)
        if any(":frole" in c for c in conds):
            p["frole"] = FILTERED_ROLES
        return " AND ".join(conds), p

    def chunk_condition(self, chunk: str = "c") -> tuple[str, dict]:
        """The pre-filter as a condition on a chunk row: a probe of its document by primary
        key. ``OFFSET 0`` keeps the probe a per-row filter instead of a join: as a join, the
        planner would start from the documents, whose filtered count it underestimates many
        times over (the row-level-security policy's OR, the expiry and event ORs), and walk
        every document's chunks by ``document_id`` — an index scan of a vector or full-text
        index then never happens (650 ms instead of 12 ms for 40,000 chunks)."""
        where, p = self.sql()
        return (f"EXISTS (SELECT 1 FROM documents d WHERE d.id = {chunk}.document_id AND {where} "
                f"OFFSET 0)"), p

    def describe(self) -> dict:
        out = {"organization_id": str(self.organization_id), "now": self.now.isoformat()}
        for k in ("date_start", "date_end", "start_after", "start_before"):
            v = getattr(self, k)
            if v is not None:
                out[k] = v.isoformat()
        for k in ("past", "price_min", "price_max", "categories", "tags", "in_stock", "city",
                  "venue", "roles", "source_types", "label_groups", "order"):
            v = getattr(self, k)
            if v is not None and v is not False and v != []:  # a price of 0 ("free") is shown
                out[k] = v
        return out


# how long into a named day a night that began the evening before must still run to be part
# of that day (a festival running on), rather than the previous night's late end
NIGHT_SPILL = timedelta(hours=6)


def spill_until(range_start: datetime, range_end: datetime, now: datetime) -> datetime:
    """For a range that does not hold ``now``, the end an earlier-starting event must pass."""
    holds_now = range_start <= now < range_end
    return range_start if holds_now else range_start + NIGHT_SPILL


@dataclass
class Hit:
    chunk_id: int
    document_id: str
    rank: int
    score: float  # cosine similarity for the vector leg, ts_rank_cd for the keyword leg
    leg: str
    model: str | None = None
    # the chunk's heading and text, when the leg's statement returned them (the soft-match leg
    # reads its words from here instead of a round trip of its own)
    text: str | None = field(default=None, repr=False, compare=False)


def bind(sql: str, params: dict):
    from sqlalchemy import bindparam

    stmt = text(sql)
    expanding = [k for k, v in params.items() if isinstance(v, tuple)]
    if expanding:
        stmt = stmt.bindparams(*[bindparam(k, expanding=True) for k in expanding])
    return stmt


PREFILTER_CAP = 1000


def count_candidates(session, pf: Prefilter, cap: int = PREFILTER_CAP) -> int:
    """How many documents pass the pre-filter, counted only up to ``cap`` (the answer needs
    to know there is at least one; the trace shows "1000+" beyond), so a large organization
    never pays a count of all its rows before the searches start."""
    where, p = pf.sql()
    p = {**p, "cap": int(cap)}
    pf.counted = session.execute(bind(f"SELECT count(*) FROM (SELECT 1 FROM documents d WHERE {where} "
                                      f"LIMIT :cap) x", p), p).scalar()
    return pf.counted


# --------------------------------------------------------------------------- vector leg

def _max_scan_tuples() -> int:
    """How far an iterative scan may walk before giving up (pgvector's default is 20,000)."""
    import os

    try:
        return int(os.environ.get("KB_HNSW_MAX_SCAN_TUPLES", "20000"))
    except ValueError:
        return 20000


RERANK_FACTOR = 2  # candidates fetched per wanted hit, then re-ranked by the exact distance


def vector_plan(session, pf: Prefilter, model: str, force: str | None = None) -> str:
    """Which of the three plans answers: ``hnsw`` (the organization's own index for the model,
    iterative scan, the pre-filter probed per candidate) for an organization with more than
    ``KB_EXACT_SCAN_MAX_ROWS`` chunks of the model whose pre-filter lets many documents
    through; ``exact_documents`` (the documents that pass, then their chunks) when few pass;
    ``exact`` (every chunk of the organization, each probing its document) otherwise. "Few"
    is the pre-filter's own capped count when it ran (under ``PREFILTER_CAP`` documents),
    else whether the pre-filter is selective at all."""
    from kbframework.retrieval.vector_index import has_index

    if force == "hnsw":
        return "hnsw"
    few = pf.counted < PREFILTER_CAP if pf.counted is not None else pf.selective
    if force == "exact":
        return "exact_documents" if few else "exact"
    n = org_models(session, pf.organization_id).get(model, 0)
    if n > get_config().exact_scan_max_rows and not few and has_index(session, model, pf.organization_id):
        return "hnsw"
    return "exact_documents" if few else "exact"


def vector_sql(pf: Prefilter, model: str, dim: int, qvec, k: int, plan: str, only_model: bool = False,
               *, ef_search: int | None = None, rerank_factor: int | None = None,
               iterative: str = "relaxed_order") -> tuple[str, dict, dict]:
    """The vector leg as one statement (its index settings included, so one round trip):
    (sql, parameters, the settings it applies).

    ``only_model``: the organization's chunks are all of this one model (``org_models``), so
    an exact scan need not compare ``embedding_model`` on every row. That short varchar
    sits in TOAST (the table's ``toast_tuple_target`` pushes every longer value out of the
    row), and reading it back is most of an exact scan's time (4,500 chunks: 60 ms against
    10 ms). The scan then checks only the dimension, which is in the row, and the model is
    checked on the few candidates; if another model's chunks arrived since the count was
    cached, they cost candidates for a minute, never a wrong hit.

    ``ef_search``, ``rerank_factor``, ``iterative``: the configured values unless given (the
    scale bench measures recall and latency for each)."""
    if iterative not in ("relaxed_order", "strict_order", "off"):
        raise ValueError(f"hnsw.iterative_scan has no mode {iterative!r}")
    cfg = get_config()
    d = int(dim)
    cand = max(k * (rerank_factor or RERANK_FACTOR), k)
    safe = model.replace("'", "''")
    settings: dict = {}
    model_cond, model_check = f"c.embedding_model = '{safe}'", ""
    if plan == "hnsw":
        settings = {"hnsw.ef_search": max(cand, ef_search or cfg.hnsw_ef_search), "hnsw.iterative_scan": iterative,
                    "hnsw.max_scan_tuples": _max_scan_tuples()}
        # the index expression, repeated exactly, and the model's partial-index predicate
        approx = f"(c.embedding_half::halfvec({d})) <=> CAST(:q AS halfvec({d}))"
    else:
        approx = "c.embedding_half <=> CAST(:q AS halfvec)"
        if only_model:
            model_cond, model_check = f"vector_dims(c.embedding_half) = {d}", f" AND x.embedding_model = '{safe}'"
    if plan == "exact_documents":
        where, p = pf.sql()
        source = (f"documents d JOIN chunks c ON c.document_id = d.id AND c.organization_id = d.organization_id "
                  f"WHERE {where} AND c.organization_id = :org AND {model_cond}")
    else:
        cond, p = pf.chunk_condition("c")
        source = f"chunks c WHERE {model_cond} AND c.organization_id = :org AND {cond}"
    p = {**p, "q": _vec_literal(qvec), "k": int(k), "cand": cand}
    # relaxed order returns candidates slightly out of order: the outer query sorts them by
    # the exact full-precision distance (read from TOAST for these few rows only)
    sql = (f"WITH cand AS MATERIALIZED (SELECT c.id, c.document_id FROM {source} "
           f"ORDER BY {approx} LIMIT :cand) "
           f"SELECT cand.id, cand.document_id, 1 - (x.embedding <=> CAST(:q AS vector)) AS sim, "
           f"coalesce(x.heading, '') || ' ' || x.content AS body "
           f"FROM cand JOIN chunks x ON x.id = cand.id AND x.organization_id = :org{model_check} "
           f"ORDER BY sim DESC, cand.id LIMIT :k")
    if settings:
        sql = "".join(f"SET LOCAL {name} = {value}; " for name, value in settings.items()) + sql
    return sql, p, settings


def vector_search(session, pf: Prefilter, model: str, dim: int, qvec, k: int = 20,
                  floor: float = 0.0, force: str | None = None) -> tuple[list[Hit], dict]:
    """Top-k chunks of one embedding model by cosine similarity; returns hits and a plan note."""
    plan = vector_plan(session, pf, model, force)
    counts = org_models(session, pf.organization_id)
    sql, p, settings = vector_sql(pf, model, dim, qvec, k, plan, only_model=set(counts) == {model})
    rows = session.execute(bind(sql, p), p).all()
    hits = [Hit(r[0], str(r[1]), i + 1, float(r[2]), "vector", model, r[3]) for i, r in enumerate(rows)]
    kept = [h for h in hits if h.score >= floor]
    for i, h in enumerate(kept):
        h.rank = i + 1
    note = {"model": model, "org_chunks": counts.get(model, 0),
            "plan": "hnsw" if plan == "hnsw" else "exact", "access": plan,
            "ef_search": settings.get("hnsw.ef_search"), "iterative_scan": settings.get("hnsw.iterative_scan"),
            "candidates": p["cand"], "rerank": "exact", "below_floor": len(hits) - len(kept), "floor": floor}
    return kept, note


def _vec_literal(v) -> str:
    return "[" + ",".join(f"{float(x):.6g}" for x in v) + "]"


# --------------------------------------------------------------------------- keyword leg


# BM25 over the weighted tsvector (migration 0007_weighted_fulltext writes title A, headings B,
# body C); ts_rank's weights of the fields: a title word counts as three body words, a
# heading word as one and a half
BM25_K1 = 1.2
BM25_B = 0.75
TITLE_RANK, HEADING_RANK, BODY_RANK = 1.0, 0.5, 1.0 / 3
MAX_TERMS = 12


def bm25_idf(df: int, n: int) -> float:
    """Robertson-Sparck Jones idf, never negative: a word in every chunk weighs almost nothing."""
    return math.log(1.0 + (max(n, df) - df + 0.5) / (df + 0.5))


def keyword_search(session, pf: Prefilter, query: str, k: int = 20,
                   expansion: dict[str, float] | None = None) -> tuple[list[Hit], dict]:
    """Full text ranked by BM25 over the chunk's weighted fields (title over headings over body).

    ts_rank_cd knows neither how rare a word is nor how long a chunk is, so "tent" in a
    tent's title and "tent" in a line of a camping FAQ scored alike, and a question's
    commonest word could carry a passage. Here each of the question's words weighs its idf
    in the organization (``corpus_stats.document_frequency``, cached ten minutes, which the
    answerability gate reads after), term frequency saturates (k1) and is normalized by the
    chunk's length (b).

    The candidates are gathered in tiers, so a broad question in a large organization still
    ranks every chunk that holds all of its words: chunks matching every term (websearch syntax:
    quotes and -exclusions work), then any two of the rarest terms, then any term; each tier
    reads at most KEYWORD_CANDIDATES chunks, none an earlier tier holds, and a looser tier runs
    only while the earlier ones came back short of that many. One statement, one round trip; every branch is
    scoped to the organization by the composite ``(organization_id, tsv)`` GIN index, so no
    other tenant's rows are touched.

    ``expansion``: {lexeme: factor}, neighbours of the question's words from the offline
    embedder's token table (``retrieval.expansion``); they join the any-term tier only, each
    weighing factor × its own idf, so they find paraphrases without outranking the question's
    own words.

    The matching itself is ``kbf_fulltext_match`` (migration 0008): under row-level security
    ``@@`` cannot use the index, the function can, and it applies the policy's own test to the
    organization it is asked for. Without a selective pre-filter nearly every match passes it,
    so each tier takes at most MATCHES_PER_TIER matches from the index (and as many more as the
    earlier tiers hold chunks); with one (a date
    window, a price, a city…) the tier takes every match and the pre-filter picks."""
    from kbframework.retrieval.lexicon import query_lexemes

    lexemes = query_lexemes(session, query)  # looked up by the expansion step with the other words
    if not lexemes:
        return [], {"tiers": [], "lexemes": []}
    extra = {lx: f for lx, f in (expansion or {}).items() if lx not in lexemes and f > 0}
    dfs, n = document_frequency(session, pf.organization_id, list(lexemes) + sorted(extra))
    idf = {lx: bm25_idf(dfs.get(lx, 0), n) for lx in lexemes}
    # the rarest words first: they say most about what is asked
    terms = sorted(lexemes, key=lambda lx: (-idf[lx], lx))[:MAX_TERMS]
    quoted = ["'" + lx.replace("'", "''") + "'" for lx in terms]
    expanded = sorted(extra, key=lambda lx: (-extra[lx], lx))[:MAX_TERMS]
    for lx in expanded:
        idf[lx] = bm25_idf(dfs.get(lx, 0), n) * extra[lx]
    quoted_expanded = ["'" + lx.replace("'", "''") + "'" for lx in expanded]
    # the looser tiers look words up in the index only when they are not common (in fewer
    # than DF_CAP chunks): a common word's posting list is long (a tenth of a large
    # organization), reading it costs more than all the rest, and a chunk it alone brings in
    # ranks low anyway; when every word is common, the rarest one stands for them. In an
    # organization of a few thousand chunks no word is common, and nothing changes.
    findable = [qt for lx, qt in zip(terms, quoted) if dfs.get(lx, 0) < DF_CAP] or quoted[:1]
    findable_any = findable + [qt for lx, qt in zip(expanded, quoted_expanded) if dfs.get(lx, 0) < DF_CAP]
    quoted_any = quoted + quoted_expanded
    strict = "websearch_to_tsquery('english', :qtext)"
    tiers = [("all_terms", strict)]
    pairs = [f"({a} & {b})" for i, a in enumerate(findable[:5]) for b in findable[i + 1:5]] if len(quoted) >= 3 else []
    if pairs:
        tiers.append(("two_terms", "CAST(:tq_two AS tsquery)"))
    if len(quoted_any) >= 2:
        tiers.append(("any_term", "CAST(:tq_any AS tsquery)"))
    where, p = pf.chunk_condition("c")
    params = {**p, "qtext": query,
              "tq_two": " | ".join(pairs) or None, "tq_any": " | ".join(findable_any), "k": k,
              "idf": [idf[lx] for lx in terms + expanded]}
    # each tier is its own materialized set. A looser tier leaves out the chunks an earlier one
    # already holds by their ids (a test of the earlier tier's query would read each of their
    # tsvectors from TOAST again: 2,000 rows and 23 ms in a 400,000-chunk organization whose
    # every two-word match also held every word), and it runs only while every earlier tier
    # came back short of KEYWORD_CANDIDATES: once that many chunks hold every word of the
    # question (or two of its rarest), a chunk with fewer of them does not reach the top k
    branches = []
    for t, (_name, q) in enumerate(tiers):
        params[f"matches{t}"] = None if pf.selective else MATCHES_PER_TIER + t * KEYWORD_CANDIDATES
        gate = "".join(f" AND (SELECT count(*) FROM cand{e}) < {KEYWORD_CANDIDATES}" for e in range(t))
        seen = "".join(f" AND m.id NOT IN (SELECT id FROM cand{e})" for e in range(t))
        # `|| ''` detoasts the tsvector once here, not once per scoring call below
        branches.append(
            f"cand{t} AS MATERIALIZED (SELECT {t} AS tier, c.id, c.document_id, c.tsv || ''::tsvector AS tsv "
            f"FROM kbf_fulltext_match(CAST(:org AS uuid), {q}, :matches{t}) m JOIN chunks c ON c.id = m.id "
            f"WHERE c.organization_id = :org{gate}{seen} AND {where} LIMIT {KEYWORD_CANDIDATES})")
    # BM25 without unnesting every chunk's tsvector: ts_rank of one word (normalization 0) is
    # that word's occurrences, the best-weighted one counted whole and the others less and
    # less (1/4, 1/9, …); scaled so one body occurrence is 1 and a title occurrence
    # TITLE_RANK / BODY_RANK, it is BM25's term frequency, saturated by k1 and normalized by
    # the chunk's length (its lexemes) against the candidates' mean (b)
    # each candidate's score is a sum over the question's words computed beside it, not a join of
    # every candidate with every word grouped back (a sort of thousands of rows: 20 of 89 ms for
    # 800 candidates of a 400,000-chunk organization); a candidate no word matches has no score.
    # Materialized: inlined, the score was computed twice a candidate (for the filter and the sort)
    sql = (f"WITH {', '.join(branches)}, "
           f"cand AS MATERIALIZED ({' UNION ALL '.join(f'SELECT * FROM cand{t}' for t in range(len(tiers)))}), "
           "terms AS MATERIALIZED (SELECT CAST(q AS tsquery) AS q, idf FROM unnest(CAST(:tq AS text[]), "
           "CAST(:idf AS float8[])) AS t(q, idf)), "
           "avgdl AS (SELECT greatest(avg(length(tsv)), 1)::float8 AS dl FROM cand), "
           "scored AS MATERIALIZED (SELECT cand.tier, cand.id, cand.document_id, "
           "(SELECT sum(w.idf * w.f * (:k1 + 1) / (w.f + :k1 * (1 - :b + :b * length(cand.tsv) / avgdl.dl))) "
           "FROM (SELECT terms.idf, ts_rank(CAST(:w AS float4[]), cand.tsv, terms.q, 0) * :scale AS f "
           "FROM terms WHERE cand.tsv @@ terms.q) w) AS score FROM cand CROSS JOIN avgdl) "
           f"SELECT top.tier, top.id, top.document_id, top.score, ARRAY[{', '.join(f'(SELECT count(*) FROM cand{t})' for t in range(len(tiers)))}], "
           "coalesce(c.heading, '') || ' ' || c.content "
           "FROM (SELECT tier, id, document_id, score FROM scored WHERE score IS NOT NULL "
           "ORDER BY score DESC, id LIMIT :k) top JOIN chunks c ON c.id = top.id AND c.organization_id = :org "
           "ORDER BY top.score DESC, top.id")
    params.update(tq=quoted_any, w=[BODY_RANK, BODY_RANK, HEADING_RANK, TITLE_RANK], scale=1.64493406685 / BODY_RANK,
                  k1=BM25_K1, b=BM25_B)
    rows = session.execute(bind(sql, params), params).all()
    hits: list[Hit] = []
    per_tier = {name: 0 for name, _ in tiers}
    for r in rows:
        per_tier[tiers[r[0]][0]] += 1
        hits.append(Hit(r[1], str(r[2]), len(hits) + 1, float(r[3]), "keyword", text=r[5]))
    counts = list(rows[0][4]) if rows else [0] * len(tiers)
    used = []
    for t, (name, c) in enumerate(per_tier.items()):
        row = {"tier": name, "hits": c, "candidates": int(counts[t])}
        if any(n >= KEYWORD_CANDIDATES for n in counts[:t]):
            row["skipped"] = "an earlier tier filled the candidates"
        used.append(row)
    out = {"tiers": used, "lexemes": terms, "idf": {lx: round(idf[lx], 3) for lx in terms},
           "ranking": "bm25", "queries": 1}
    if expanded:
        out["expanded"] = {lx: round(idf[lx], 3) for lx in expanded}
    return hits, out


# --------------------------------------------------------------------------- fusion


def rrf(legs: dict[str, list[Hit]], k: int = RRF_K, weights: dict | None = None) -> list[dict]:
    """Reciprocal Rank Fusion: score = Σ w_leg / (k + rank) over the lists a chunk appears in
    (every weight 1 unless ``weights`` tilts a leg)."""
    fused: dict[int, dict] = {}
    for leg, hits in legs.items():
        w = float((weights or {}).get(leg, 1.0))
        for h in hits:
            f = fused.setdefault(h.chunk_id, {"chunk_id": h.chunk_id, "document_id": h.document_id,
                                              "score": 0.0, "ranks": {}, "leg_scores": {}})
            f["score"] += w / (k + h.rank)
            f["ranks"][leg] = h.rank
            f["leg_scores"][leg] = round(h.score, 6)
    out = sorted(fused.values(), key=lambda f: (-f["score"], min(f["ranks"].values()), f["chunk_id"]))
    for i, f in enumerate(out):
        f["rank"] = i + 1
        f["score"] = round(f["score"], 8)
    return out


def apply_role_boost(fused: list[dict], roles: dict[str, str], priority: list[str]) -> list[dict]:
    """The mode's role priority after fusion: preferred role ×1.3, next ×1.1, others ×1.0; a
    re-rank, never a filter, so a better match of another role still shows, just lower."""
    factors = {}
    for i, role in enumerate(priority or []):
        factors[role] = 1.3 if i == 0 else 1.1 if i == 1 else 1.0
    out = []
    for f in fused:
        g = dict(f)
        role = roles.get(f["document_id"])
        g["boost"] = factors.get(role, 1.0)
        g["boosted_score"] = round(f["score"] * g["boost"], 8)
        out.append(g)
    out.sort(key=lambda f: (-f["boosted_score"], f["rank"]))
    for i, f in enumerate(out):
        f["final_rank"] = i + 1
    return out
