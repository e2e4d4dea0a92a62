"""Hybrid search: a pre-filter in SQL, a vector leg, a keyword leg, Reciprocal Rank Fusion.

The multi-tenant trap (DESIGN.md): an HNSW scan filtered by organization returns at most
``ef_search`` candidates *before* the filter, so a small organization in a big table loses
recall. We therefore pick per query: an exact scan of the organization's own rows when it
holds few chunks for the model (or the pre-filter is selective), and the HNSW index with a
raised ``hnsw.ef_search`` otherwise. Each embedding model has its own partial expression
index ``(embedding::vector(dim)) WHERE embedding_model = '<model>'``; the ORDER BY of the
HNSW path repeats that expression exactly, and the exact path deliberately does not.
"""
from __future__ import annotations

import hashlib
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import text

from kbframework.config import get_config
from kbframework.ingest.queue import on_ingested

SERVABLE_STATUSES = ("active", "syncing", "error")  # error/syncing keep their last good chunks
RRF_K = 60
KEYWORD_CANDIDATES = 400
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
            # overlap: starts before the range ends and ends after it starts; no end → by start
            conds.append("(d.event_start IS NULL OR (d.event_start < :range_end AND "
                         "CASE WHEN d.event_end IS NULL THEN d.event_start >= :range_start "
                         "ELSE d.event_end > :range_start END))")
            p.update(range_start=self.date_start, range_end=self.date_end)
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

    def describe(self) -> dict:
        out = {"organization_id": str(self.organization_id), "now": self.now.isoformat()}
        for k in ("date_start", "date_end", "start_after", "start_before"):
            v = getattr(self, k)
            if v is not None:
                out[k] = v.isoformat()
        for k in ("past", "price_min", "price_max", "categories", "tags", "in_stock", "city",
                  "venue", "roles", "source_types", "label_groups"):
            v = getattr(self, k)
            if v not in (None, [], False):
                out[k] = v
        return out


@dataclass
class Hit:
    chunk_id: int
    document_id: str
    rank: int
    score: float  # cosine similarity for the vector leg, ts_rank_cd for the keyword leg
    leg: str
    model: str | None = None


def bind(sql: str, params: dict):
    from sqlalchemy import bindparam

    stmt = text(sql)
    expanding = [k for k, v in params.items() if isinstance(v, tuple)]
    if expanding:
        stmt = stmt.bindparams(*[bindparam(k, expanding=True) for k in expanding])
    return stmt


def count_candidates(session, pf: Prefilter) -> int:
    where, p = pf.sql()
    return session.execute(bind(f"SELECT count(*) FROM documents d WHERE {where}", p), p).scalar()


# --------------------------------------------------------------------------- vector leg

_count_cache: dict = {}
_count_lock = threading.Lock()


def org_models(session, org_id) -> dict[str, int]:
    """{embedding_model: chunk count} for an organization, cached for a minute."""
    key = str(org_id)
    now = time.monotonic()
    with _count_lock:
        hit = _count_cache.get(key)
        if hit and now - hit[0] < 60:
            return hit[1]
    rows = session.execute(text(
        "SELECT embedding_model, count(*) FROM chunks WHERE organization_id = :org "
        "AND embedding_model IS NOT NULL GROUP BY embedding_model"), {"org": key}).all()
    models = {m: n for m, n in rows}
    with _count_lock:
        _count_cache[key] = (now, models)
    return models


def forget_counts(org_id=None) -> None:
    with _count_lock:
        if org_id is None:
            _count_cache.clear()
        else:
            _count_cache.pop(str(org_id), None)


on_ingested(forget_counts)  # new chunks make the cached counts stale


def index_name(model: str) -> str:
    return "ix_chunks_hnsw_" + hashlib.sha1(model.encode()).hexdigest()[:12]


_ensured: set = set()


def ensure_vector_index(conn, model: str, dim: int) -> None:
    """Create the model's partial HNSW index once per process (idempotent in SQL too)."""
    if model in _ensured:
        return
    safe = model.replace("'", "''")
    conn.execute(text(
        f"CREATE INDEX IF NOT EXISTS {index_name(model)} ON chunks USING hnsw "
        f"((embedding::vector({int(dim)})) vector_cosine_ops) WITH (m = 16, ef_construction = 64) "
        f"WHERE embedding_model = '{safe}'"))
    _ensured.add(model)


def vector_search(session, pf: Prefilter, model: str, dim: int, qvec, k: int = 20,
                  floor: float = 0.0, force: str | None = None) -> tuple[list[Hit], dict]:
    """Top-k chunks of one embedding model by cosine similarity; returns hits and a plan note."""
    cfg = get_config()
    counts = org_models(session, pf.organization_id)
    n = counts.get(model, 0)
    use_index = force == "hnsw" or (force is None and n > cfg.exact_scan_max_rows and not pf.selective)
    where, p = pf.sql()
    p.update(q=_vec_literal(qvec), k=k)
    safe = model.replace("'", "''")
    if use_index:
        session.execute(text(f"SET LOCAL hnsw.ef_search = {max(k, cfg.hnsw_ef_search)}"))
        dist = f"(c.embedding::vector({int(dim)})) <=> CAST(:q AS vector({int(dim)}))"
    else:
        dist = "c.embedding <=> CAST(:q AS vector)"
    sql = (f"SELECT c.id, c.document_id, 1 - ({dist}) AS sim FROM chunks c "
           f"JOIN documents d ON d.id = c.document_id "
           f"WHERE c.embedding_model = '{safe}' AND c.organization_id = :org AND {where} "
           f"ORDER BY {dist} LIMIT :k")
    rows = session.execute(bind(sql, p), p).all()
    hits = [Hit(r[0], str(r[1]), i + 1, float(r[2]), "vector", model) for i, r in enumerate(rows)]
    kept = [h for h in hits if h.score >= floor]
    for i, h in enumerate(kept):
        h.rank = i + 1
    plan = {"model": model, "org_chunks": n, "plan": "hnsw" if use_index else "exact",
            "ef_search": max(k, cfg.hnsw_ef_search) if use_index else None,
            "below_floor": len(hits) - len(kept), "floor": floor}
    return kept, plan


def _vec_literal(v) -> str:
    return "[" + ",".join(f"{float(x):.6g}" for x in v) + "]"


# --------------------------------------------------------------------------- keyword leg


def keyword_search(session, pf: Prefilter, query: str, k: int = 20) -> tuple[list[Hit], dict]:
    """Full text in tiers, each ranked by ts_rank_cd: chunks matching every term (websearch
    syntax: quotes and -exclusions work), then any two terms, then any term. A later tier only
    runs when the earlier ones found fewer than k chunks, so common words never force ranking
    the whole organization."""
    lexemes = session.execute(text(
        "SELECT coalesce(array_agg(lexeme ORDER BY length(lexeme) DESC), '{}') "
        "FROM unnest(to_tsvector('english', :q))"), {"q": query}).scalar() or []
    if not lexemes:
        return [], {"tiers": [], "lexemes": []}
    quoted = ["'" + lx.replace("'", "''") + "'" for lx in lexemes[:8]]
    tiers = [("all_terms", None)]
    if len(quoted) >= 3:
        pairs = [f"({a} & {b})" for i, a in enumerate(quoted[:5]) for b in quoted[i + 1:5]]
        tiers.append(("two_terms", " | ".join(pairs)))
    if len(quoted) >= 2:
        tiers.append(("any_term", " | ".join(quoted)))
    where, p = pf.sql()
    hits: list[Hit] = []
    seen: set[int] = set()
    used = []
    bonus = {"all_terms": 2.0, "two_terms": 1.0, "any_term": 0.0}
    for name, tq in tiers:
        if len(hits) >= k:
            break
        q = "websearch_to_tsquery('english', :qtext)" if tq is None else "CAST(:tq AS tsquery)"
        params = {**p, "qtext": query, "tq": tq, "k": k, "seen": list(seen) or [0]}
        # ranking reads every matching row's tsvector; a broad fallback tier ranks at most
        # KEYWORD_CANDIDATES of its matches (the strict tier is rarely that broad)
        sql = (f"SELECT m.id, m.document_id, ts_rank_cd(m.tsv, {q}, 32) AS r FROM ("
               "SELECT c.id, c.document_id, c.tsv FROM chunks c JOIN documents d ON d.id = c.document_id "
               f"WHERE c.organization_id = :org AND c.tsv @@ {q} AND {where} AND c.id <> ALL(:seen) "
               f"LIMIT {KEYWORD_CANDIDATES}) m ORDER BY r DESC, m.id LIMIT :k")
        rows = session.execute(bind(sql, params), params).all()
        used.append({"tier": name, "hits": len(rows)})
        for r in rows:
            if len(hits) >= k:
                break
            if r[0] in seen:
                continue
            seen.add(r[0])
            hits.append(Hit(r[0], str(r[1]), len(hits) + 1, float(r[2]) + bonus[name], "keyword"))
    return hits, {"tiers": used, "lexemes": lexemes[:8]}


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
    """§19: preferred role ×1.3, next ×1.1, others ×1.0; a re-rank, never a filter."""
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
