"""Evaluation harness: ``kbf eval retrieval`` and ``kbf eval temporal``.

``retrieval`` loads a qrels-style set (BEIR/TREC shape: ``corpus.jsonl``, ``queries.jsonl``,
``qrels.tsv``; see shared/data/retrieval_dev/README.md) into a scratch organization through
the normal ingestion pipeline, runs every query through the product's own retrieval steps
(rewrite → filters → pre-filter → vector ‖ keyword → RRF) and scores each method:

    vector   the vector leg alone
    keyword  the full-text leg alone
    soft     the soft-match leg alone (the first two legs' chunks re-scored word by word)
    hybrid   the legs fused with RRF (what the product serves)

Metrics are per document (a document's best chunk counts): nDCG@10 with graded gains (the
grade as gain, log2 discount, queries without judgements left out, as BEIR does),
recall@10 and recall@50 (documents with grade ≥ 1) and MRR@10. The scratch organization is
dropped afterwards unless ``keep=True``.

``temporal`` checks phrase → range cases: a JSON list of
``{query, now, timezone, expect_start, expect_end}`` (``expect_start: null`` means "no temporal
intent"), optionally ``night_cutoff`` and ``weekend_starts_friday``.
"""
from __future__ import annotations

import json
import math
import time as _time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, time, timedelta, timezone
from pathlib import Path
from zoneinfo import ZoneInfo

from sqlalchemy import text

from kbframework.errors import KBError

METHODS = ("vector", "keyword", "soft", "hybrid")
DEPTH = 50  # each leg returns this many chunks so recall@50 can be measured


# --------------------------------------------------------------------------- dataset


@dataclass
class Dataset:
    path: Path
    corpus: list[dict]
    queries: list[dict]
    qrels: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def timezone(self) -> str:
        for d in self.corpus:
            if d.get("timezone"):
                return d["timezone"]
        return "UTC"


def _jsonl(path: Path) -> list[dict]:
    out = []
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise KBError(f"{path.name} line {i} is not JSON: {exc}")
    return out


def read_dataset(path) -> Dataset:
    path = Path(path)
    if not path.is_dir():
        raise KBError(f"No such dataset folder: {path}")
    missing = [n for n in ("corpus.jsonl", "queries.jsonl", "qrels.tsv") if not (path / n).exists()]
    if missing:
        raise KBError(f"{path} is missing {', '.join(missing)} (expected corpus.jsonl, queries.jsonl, qrels.tsv).")
    corpus = _jsonl(path / "corpus.jsonl")
    queries = _jsonl(path / "queries.jsonl")
    for d in corpus:
        if "_id" not in d or "text" not in d:
            raise KBError("Every corpus row needs '_id' and 'text'.")
    qrels: dict[str, dict[str, int]] = {}
    for i, line in enumerate((path / "qrels.tsv").read_text(encoding="utf-8").splitlines(), 1):
        cols = line.strip().split("\t")
        if not line.strip() or (i == 1 and not cols[-1].lstrip("-").isdigit()):
            continue  # blank line or header
        if len(cols) < 3:
            raise KBError(f"qrels.tsv line {i}: expected query-id, corpus-id, score.")
        try:
            grade = int(cols[-1])
        except ValueError:
            raise KBError(f"qrels.tsv line {i}: the score must be an integer.")
        qrels.setdefault(cols[0], {})[cols[1]] = grade
    return Dataset(path, corpus, queries, qrels)


def reference_now(tz: str = "Europe/Lisbon", weekday: int = 2, at: time = time(15, 0),
                  before: datetime | None = None) -> datetime:
    """The most recent ``weekday`` (Monday=0; default Wednesday) at ``at`` local time."""
    zone = ZoneInfo(tz)
    local = (before or datetime.now(timezone.utc)).astimezone(zone)
    day = local.date() - timedelta(days=(local.weekday() - weekday) % 7)
    ref = datetime.combine(day, at, tzinfo=zone)
    if ref > local:
        ref = datetime.combine(day - timedelta(days=7), at, tzinfo=zone)
    return ref.astimezone(timezone.utc)


def event_times(doc: dict, now: datetime) -> tuple[datetime | None, datetime | None]:
    """Offsets → times, as the dataset README says (local date of now + offset, DST-aware)."""
    if doc.get("start_offset_days") is None:
        return None, None
    zone = ZoneInfo(doc.get("timezone") or "UTC")
    local_now = now.astimezone(zone)
    start = datetime.combine(local_now.date() + timedelta(days=int(doc["start_offset_days"])),
                             time.fromisoformat(doc.get("start_local_time") or "20:00"), tzinfo=zone)
    end = start + timedelta(minutes=int(doc.get("duration_minutes") or 0)) if doc.get("duration_minutes") else None
    return start, end


def to_draft(doc: dict, now: datetime):
    """One corpus row as a connector would hand it over (a DocumentDraft)."""
    from kbframework.types import DOCUMENT_ROLES, DocumentDraft

    meta = dict(doc.get("metadata") or {})
    if "stock_status" in meta and "in_stock" not in meta:
        meta["in_stock"] = meta["stock_status"] != "outofstock"  # as WooCommerce's is_in_stock()
    start, end = event_times(doc, now)
    role = doc.get("role") if doc.get("role") in DOCUMENT_ROLES else "article"
    tags = meta.get("tags") if isinstance(meta.get("tags"), list) else []
    return DocumentDraft(
        title=doc.get("title") or doc["_id"], normalized_content=doc["text"], raw_content=doc["text"],
        type=doc.get("type") or "manual", document_role=role, external_id=doc["_id"],
        source_url=meta.get("url"), primary_image_url=meta.get("image_url"), tags=[str(t) for t in tags],
        metadata=meta, event_start=start, event_end=end,
        venue=meta.get("venue") if isinstance(meta.get("venue"), str) else None,
        city=meta.get("city") if isinstance(meta.get("city"), str) else None)


def load_corpus(ds: Dataset, now: datetime, log=print) -> str:
    """A scratch organization holding the corpus, indexed through the normal pipeline."""
    from kbframework.ingest.queue import queue_ingest
    from kbframework.orgs.accounts import create_org, ensure_source
    from kbframework.db import session_scope
    from kbframework.sources.apply import apply_draft

    t0 = _time.perf_counter()
    with session_scope() as s:
        org = create_org(s, f"Evaluation {ds.path.name}", ds.timezone, f"eval-{uuid.uuid4().hex[:10]}")
        src = ensure_source(s, org.id, "manual", "Evaluation corpus")
        ids = []
        for d in ds.corpus:
            doc, _ = apply_draft(s, src, to_draft(d, now), force=True)
            ids.append(doc.id)
        org_id = str(org.id)
    results = queue_ingest(ids, inline=True)
    failed = [r for r in results if r.action == "error"]
    if failed:
        log(f"warning: {len(failed)} documents failed to index: {failed[0].error}")
    with session_scope() as s:  # events that ended before "now" expire, as the scheduler would
        s.execute(text("UPDATE documents SET status = 'expired' WHERE organization_id = :org "
                       "AND event_end IS NOT NULL AND event_end < :now"), {"org": org_id, "now": now})
    # fresh statistics after a bulk load, as autovacuum would gather within a minute or so:
    # without them the first queries get poor plans (vector leg ~1 s instead of ~3 ms)
    from kbframework.db import get_engine

    with get_engine().connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(text("ANALYZE documents"))
        conn.execute(text("ANALYZE chunks"))
    log(f"loaded {len(ids)} documents ({sum(r.chunks for r in results)} chunks) into a scratch "
        f"organization in {_time.perf_counter() - t0:.1f} s")
    return org_id


def drop_org(org_id: str) -> None:
    from kbframework.db import session_scope
    from kbframework.retrieval.search import forget_counts

    with session_scope() as s:
        s.execute(text("DELETE FROM organizations WHERE id = :id"), {"id": org_id})
    forget_counts(org_id)


# --------------------------------------------------------------------------- retrieval


_ext_cache: dict = {}


def _external_ids(s, org_id: str) -> dict:
    if org_id not in _ext_cache:
        _ext_cache.clear()
        _ext_cache[org_id] = dict(s.execute(text(
            "SELECT id::text, external_id FROM documents WHERE organization_id = :o"), {"o": org_id}).all())
    return _ext_cache[org_id]


def retrieve(org_id, question: str, *, history=None, now: datetime, methods=METHODS, depth: int = DEPTH,
             use_filters: bool = True, use_rewrite: bool = True) -> tuple[dict, dict]:
    """The product's own retrieval steps (``STEPS`` up to the answerability gate, no LLM, no log).
    Returns ({method: [document ids]}, debug)."""
    from kbframework.db import session_scope
    from kbframework.retrieval.search import rrf
    from kbframework.retrieval.steps import Turn, run_steps

    t = Turn(org_id=org_id, question=question, mode="search", history=history, now=now, k_vector=depth,
             k_keyword=depth, use_filters=use_filters, use_rewrite=use_rewrite, retrieval_only=True)
    with session_scope() as s:
        run_steps(s, t)
        ext = _external_ids(s, str(t.ctx.org.id)) if t.legs else {}
    legs = t.legs
    out = {}
    extra = ["hybrid-2legs"] if "hybrid" in methods and "listing" in legs else []
    for m in list(methods) + extra:
        if m == "hybrid":
            ranked = t.boosted  # fusion, boosts, identity and referents: what the product serves
        elif m == "hybrid-2legs":  # the same fusion without the listing leg, for an honest comparison
            ranked = rrf({k: v for k, v in legs.items() if k != "listing"}, weights=t.weights)
        else:
            ranked = [{"document_id": h.document_id} for h in legs.get(m, [])]
        seen, docs_ = set(), []
        for f in ranked:
            did = ext.get(f["document_id"], f["document_id"])
            if did not in seen:
                seen.add(did)
                docs_.append(did)
        out[m] = docs_
    date = next((p for p in t.parts if p.field == "date_range" and not getattr(p, "dropped", None)), None)
    g = t.debug.get("gate") or {}
    return out, {"query": t.query, "rewrite": t.rewrite_how, "filters": t.pf.describe() if t.pf else {},
                 "parts": [p.field for p in t.parts], "date_phrase": date.matched if date else None,
                 "kind": t.kind.kind, "answerable": t.answerable, "gate": {
                     "score": g.get("score"), "why": g.get("why"), "unknown_words": g.get("unknown_words"),
                     "document_frequency": g.get("document_frequency"), "text": t.text_q,
                     "unknown_share": g.get("unknown_share"),
                     "passages": [{k: p[k] for k in ("similarity", "overlap", "agreement", "score", "matched")}
                                  for p in g.get("passages", [])]}}


# --------------------------------------------------------------------------- metrics


def ndcg_at(ranked: list[str], rels: dict[str, int], k: int = 10) -> float:
    dcg = sum(rels.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranked[:k]))
    ideal = sorted((g for g in rels.values() if g > 0), reverse=True)[:k]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


def recall_at(ranked: list[str], rels: dict[str, int], k: int) -> float:
    relevant = {d for d, g in rels.items() if g > 0}
    return len(relevant & set(ranked[:k])) / len(relevant) if relevant else 0.0


def mrr_at(ranked: list[str], rels: dict[str, int], k: int = 10) -> float:
    for i, d in enumerate(ranked[:k]):
        if rels.get(d, 0) > 0:
            return 1.0 / (i + 1)
    return 0.0


def _mean(xs) -> float:
    xs = list(xs)
    return sum(xs) / len(xs) if xs else 0.0


def run_retrieval_eval(path, methods=METHODS, *, now: datetime | None = None, use_filters: bool = True,
                       use_rewrite: bool = True, keep: bool = False, org_id: str | None = None,
                       log=print) -> dict:
    """Load, run every judged query with every method, score. Returns a JSON-able report."""
    ds = read_dataset(path)
    bad = [m for m in methods if m not in METHODS]
    if bad:
        raise KBError(f"Unknown method {bad[0]!r}; use one of {', '.join(METHODS)}.")
    now = now or reference_now(ds.timezone)
    own = org_id is None
    org_id = org_id or load_corpus(ds, now, log)
    try:
        per: dict = {m: [] for m in methods}
        per2: list = []
        listing = {"queries": 0}
        no_answer = {"queries": 0, "returned_nothing": 0}
        window = {"queries": 0, "phrase_found": 0, "empty_window_skipped": 0,
                  "out_of_window_events_in_top10": 0, "in_window_recall@50": []}
        events = {d["_id"] for d in ds.corpus if d.get("role") == "event"}
        t0 = _time.perf_counter()
        for q in ds.queries:
            rels = ds.qrels.get(q["_id"])
            ranked, dbg = retrieve(org_id, q["text"], history=q.get("history"), now=now, methods=methods,
                                   use_filters=use_filters, use_rewrite=use_rewrite)
            if not rels:
                no_answer["queries"] += 1
                no_answer["returned_nothing"] += int(not ranked[methods[-1]])
                continue
            if use_filters and "expected_in_window" in q:
                # time-aware score (README): judged events outside the phrase's window are not
                # wanted any more; pages and products keep their grades
                inside = set(q["expected_in_window"])
                window["queries"] += 1
                exp = (q.get("expected_time_phrase") or "").lower()
                window["phrase_found"] += int(bool(exp) and exp in (dbg.get("date_phrase") or "").lower())
                top = ranked[methods[-1]]
                window["out_of_window_events_in_top10"] += sum(
                    1 for d in top[:10] if d in events and d in rels and d not in inside)
                if inside:
                    window["in_window_recall@50"].append(len(inside & set(top[:50])) / len(inside))
                rels = {d: g for d, g in rels.items() if d not in events or d in inside}
                if not rels:
                    window["empty_window_skipped"] += 1
                    continue
            listing["queries"] += int("hybrid-2legs" in ranked)
            for m in methods:
                r = ranked[m]
                if m == "hybrid":  # what the fusion alone gives, without the listing leg
                    r2 = ranked.get("hybrid-2legs", r)
                    per2.append({"id": q["_id"], "kind": q.get("kind", ""), "ndcg@10": ndcg_at(r2, rels, 10),
                                 "recall@10": recall_at(r2, rels, 10), "recall@50": recall_at(r2, rels, 50),
                                 "mrr@10": mrr_at(r2, rels, 10)})
                per[m].append({"id": q["_id"], "kind": q.get("kind", ""), "ndcg@10": ndcg_at(r, rels, 10),
                               "recall@10": recall_at(r, rels, 10), "recall@50": recall_at(r, rels, 50),
                               "mrr@10": mrr_at(r, rels, 10)})
        secs = _time.perf_counter() - t0
        gate_report = _gate_rates(path, org_id, now) if use_filters and use_rewrite else None
    finally:
        if own and not keep:
            drop_org(org_id)
    window["in_window_recall@50"] = round(_mean(window["in_window_recall@50"]), 4)
    report = {"dataset": str(ds.path), "now": now.isoformat(), "judged_queries": len(per[methods[0]]),
              "filters": use_filters, "rewrite": use_rewrite, "seconds": round(secs, 1), "methods": {},
              "no_answer": no_answer, "time_window": window if window["queries"] else None,
              "gate": gate_report}
    if keep and own:
        report["organization_id"] = org_id
    for m in methods:
        rows = per[m]
        kinds = sorted({r["kind"] for r in rows})
        report["methods"][m] = {
            **{k: round(_mean(r[k] for r in rows), 4) for k in ("ndcg@10", "recall@10", "recall@50", "mrr@10")},
            "by_kind": {kd: round(_mean(r["ndcg@10"] for r in rows if r["kind"] == kd), 4) for kd in kinds}}
    report["per_query"] = {m: {r["id"]: round(r["ndcg@10"], 4) for r in per[m]} for m in methods}
    if listing["queries"]:
        report["listing_leg"] = {"queries": listing["queries"], "hybrid_without_listing": {
            k: round(_mean(r[k] for r in per2), 4) for k in ("ndcg@10", "recall@10", "recall@50", "mrr@10")}}
    return report


def _gate_rates(path, org_id: str, now: datetime) -> dict:
    """The gate's two rates as the product decides them: every query once more through the
    steps up to the gate at the product's own depth (the legs above run deeper, for recall@50),
    with the shipped weights and threshold. Queries whose time window holds no judged event are
    left out (falling back is right for them), as the time-aware nDCG leaves them out."""
    from kbframework.retrieval.gate_calibration import dataset_cases

    cases, left_out = dataset_cases(read_dataset(path), org_id, now, log=lambda m: None)
    ans = [c for c in cases if c.answerable]
    un = [c for c in cases if not c.answerable]
    return {"unanswerable": len(un), "unanswerable_fell_back": sum(not c.product_passed for c in un),
            "answerable": len(ans), "answerable_fell_back": sum(not c.product_passed for c in ans),
            "answerable_fell_back_ids": [c.id for c in ans if not c.product_passed],
            "unanswerable_passed_ids": [c.id for c in un if c.product_passed], "left_out_empty_window": left_out}


def _pct(a: int, b: int) -> str:
    return f"{100.0 * a / b:.1f}%" if b else "—"


def format_retrieval_report(rep: dict) -> str:
    lines = [f"dataset {rep['dataset']} · {rep['judged_queries']} judged queries · now {rep['now']} · "
             f"filters {'on' if rep['filters'] else 'off'} · rewriting {'on' if rep['rewrite'] else 'off'}",
             "", f"{'method':<9} {'nDCG@10':>8} {'R@10':>7} {'R@50':>7} {'MRR@10':>7}"]
    for m, r in rep["methods"].items():
        lines.append(f"{m:<9} {r['ndcg@10']:>8.4f} {r['recall@10']:>7.4f} {r['recall@50']:>7.4f} {r['mrr@10']:>7.4f}")
    if rep.get("listing_leg"):
        r = rep["listing_leg"]["hybrid_without_listing"]
        lines.append(f"{'(2 legs)':<9} {r['ndcg@10']:>8.4f} {r['recall@10']:>7.4f} {r['recall@50']:>7.4f} "
                     f"{r['mrr@10']:>7.4f}   hybrid without the listing leg "
                     f"(used for {rep['listing_leg']['queries']} constraint-only queries)")
    kinds = sorted({k for r in rep["methods"].values() for k in r["by_kind"]})
    if kinds:
        lines += ["", "nDCG@10 by query kind:", f"{'kind':<13}" + "".join(f"{m:>9}" for m in rep["methods"])]
        for kd in kinds:
            lines.append(f"{kd:<13}" + "".join(f"{r['by_kind'].get(kd, 0):>9.4f}" for r in rep["methods"].values()))
    tw = rep.get("time_window")
    if tw:
        lines += ["", f"time phrases ({tw['queries']} queries with an expected window; scored against the judged "
                      f"documents inside it): phrase found {tw['phrase_found']}/{tw['queries']}, "
                      f"in-window recall@50 {tw['in_window_recall@50']:.4f}, judged out-of-window events in the "
                      f"top 10: {tw['out_of_window_events_in_top10']}, empty windows left out: "
                      f"{tw['empty_window_skipped']}"]
    g = rep.get("gate")
    if g:
        un = g["unanswerable"]
        lines += ["", f"answerability gate: {g['unanswerable_fell_back']} of {un} unanswerable queries fall back "
                      f"({_pct(g['unanswerable_fell_back'], un)}; target ≥ 90%), {g['answerable_fell_back']} of "
                      f"{g['answerable']} answerable ones do ({_pct(g['answerable_fell_back'], g['answerable'])}; "
                      f"target ≤ 5%)" + (f"; left out (empty time window): {', '.join(g['left_out_empty_window'])}"
                                         if g.get("left_out_empty_window") else "")]
    lines.append(f"\n{rep['seconds']} s for the queries")
    return "\n".join(lines)


# --------------------------------------------------------------------------- temporal


def _parse_dt(v, what: str, i: int):
    if v is None:
        return None
    try:
        dt = datetime.fromisoformat(str(v).replace("Z", "+00:00"))
    except ValueError:
        raise KBError(f"case {i}: {what} is not an ISO date-time: {v!r}")
    return dt if dt.tzinfo else dt.replace(tzinfo=timezone.utc)


def run_temporal_eval(cases) -> dict:
    """``cases``: a path to a JSON list or the list itself. Every case passes or fails."""
    from kbframework.retrieval.temporal import parse_temporal

    if not isinstance(cases, list):
        p = Path(cases)
        if not p.exists():
            raise KBError(f"No such file: {p}")
        try:
            cases = json.loads(p.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise KBError(f"{p} is not JSON: {exc}")
    if not isinstance(cases, list):
        raise KBError("The cases file must hold a JSON list of {query, now, timezone, expect_start, expect_end}.")
    results = []
    for i, c in enumerate(cases, 1):
        if not isinstance(c, dict) or not isinstance(c.get("query"), str) or "now" not in c:
            raise KBError(f"case {i}: needs at least 'query' and 'now'.")
        now = _parse_dt(c["now"], "now", i)
        exp_s, exp_e = _parse_dt(c.get("expect_start"), "expect_start", i), _parse_dt(c.get("expect_end"), "expect_end", i)
        intent = parse_temporal(c["query"], now, c.get("timezone") or "UTC", c.get("night_cutoff") or time(5, 0),
                                bool(c.get("weekend_starts_friday")))
        if exp_s is None:
            ok = intent is None
        else:
            ok = intent is not None and intent.start == exp_s and (exp_e is None or intent.end == exp_e)
        results.append({"query": c["query"], "ok": ok,
                        "expected": [exp_s.isoformat() if exp_s else None, exp_e.isoformat() if exp_e else None],
                        "got": [intent.start.isoformat(), intent.end.isoformat()] if intent else None,
                        "phrase": intent.phrase if intent else None})
    passed = sum(r["ok"] for r in results)
    return {"cases": len(results), "passed": passed, "failed": len(results) - passed, "results": results}


def format_temporal_report(rep: dict) -> str:
    lines = []
    for r in rep["results"]:
        if r["ok"]:
            continue
        got = " → ".join(r["got"]) if r["got"] else "no temporal intent"
        exp = " → ".join(x or "…" for x in r["expected"]) if r["expected"][0] else "no temporal intent"
        lines.append(f"FAIL {r['query']!r}: expected {exp}, got {got}")
    lines.append(f"{rep['passed']} of {rep['cases']} cases pass")
    return "\n".join(lines)


# --------------------------------------------------------------------------- the answerability gate

DEMO_GATE_QUESTIONS = Path(__file__).resolve().parent.parent / "demo" / "gate_questions.json"


def load_demo(now: datetime, log=print) -> str:
    """A scratch organization holding the demo knowledge, through the normal pipeline."""
    from kbframework.db import session_scope
    from kbframework.demo import DATA, _event_times
    from kbframework.orgs.accounts import create_org, ensure_source
    from kbframework.ingest.queue import queue_ingest
    from kbframework.sources.apply import apply_draft
    from kbframework.types import DocumentDraft

    data = json.loads(Path(DATA).read_text(encoding="utf-8"))
    tz = data["organization"]["timezone"]
    with session_scope() as s:
        org = create_org(s, "Evaluation demo", tz, f"eval-demo-{uuid.uuid4().hex[:10]}")
        src = ensure_source(s, org.id, "manual", "Demo knowledge")
        ids = []
        for i, d in enumerate(data["documents"]):
            start = end = None
            if d.get("when"):
                start, end = _event_times(d["when"], tz, now)
            draft = DocumentDraft(title=d["title"], normalized_content=d["body"], raw_content=d["body"], type="manual",
                                  document_role=d["role"], external_id=f"demo-{i}", tags=d.get("tags", []),
                                  source_url=d.get("source_url"), metadata=d.get("metadata", {}),
                                  event_start=start, event_end=end, venue=d.get("venue"), city=d.get("city"))
            doc, _ = apply_draft(s, src, draft, force=True)
            ids.append(doc.id)
        org_id = str(org.id)
    queue_ingest(ids, inline=True)
    log(f"loaded the demo knowledge ({len(ids)} documents) into a scratch organization")
    return org_id


def run_gate_eval(path=DEMO_GATE_QUESTIONS, *, org_id: str | None = None, now: datetime | None = None,
                  log=print) -> dict:
    """Ask every question of a gate set through ``answer()`` (offline answerer, no LLM): how many
    answerable ones fall back (they should not) and how many unanswerable ones do (they should)."""
    from kbframework.retrieval.answer import answer

    p = Path(path)
    if not p.exists():
        raise KBError(f"No such file: {p}")
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise KBError(f"{p} is not JSON: {exc}")
    if not isinstance(data.get("answerable"), list) or not isinstance(data.get("unanswerable"), list):
        raise KBError("The gate set needs 'answerable' ([{q, expect}]) and 'unanswerable' ([question]) lists.")
    now = now or datetime.now(timezone.utc)
    own = org_id is None
    org_id = org_id or load_demo(now, log)
    rows = []
    try:
        for item in data["answerable"]:
            res = answer(org_id, item["q"], mode="search", channel="cli", now=now)
            titles = [s["document_title"] for s in res["sources"]]
            rows.append({"q": item["q"], "answerable": True, "fell_back": res["debug"]["reason"] is not None,
                         "expected_first": bool(titles) and titles[0] == item.get("expect"),
                         "expected_cited": item.get("expect") in titles,
                         "score": (res["debug"].get("gate") or {}).get("score")})
        for q in data["unanswerable"]:
            res = answer(org_id, q, mode="search", channel="cli", now=now)
            rows.append({"q": q, "answerable": False, "fell_back": res["debug"]["reason"] is not None,
                         "score": (res["debug"].get("gate") or {}).get("score")})
    finally:
        if own:
            drop_org(org_id)
    ans = [r for r in rows if r["answerable"]]
    un = [r for r in rows if not r["answerable"]]
    return {"questions": str(p), "answerable": len(ans), "answerable_fell_back": sum(r["fell_back"] for r in ans),
            "answerable_expected_cited": sum(r["expected_cited"] for r in ans),
            "unanswerable": len(un), "unanswerable_fell_back": sum(r["fell_back"] for r in un), "rows": rows}


def format_gate_report(rep: dict) -> str:
    lines = [f"{r['q']!r}: {'fell back' if r['fell_back'] else 'answered'} (score {r['score']})"
             for r in rep["rows"] if r["fell_back"] == r["answerable"]]
    lines.append(f"answerable: {rep['answerable_fell_back']} of {rep['answerable']} fall back "
                 f"({_pct(rep['answerable_fell_back'], rep['answerable'])}; target ≤ 5%), the expected document is "
                 f"cited for {rep['answerable_expected_cited']}")
    lines.append(f"unanswerable: {rep['unanswerable_fell_back']} of {rep['unanswerable']} fall back "
                 f"({_pct(rep['unanswerable_fell_back'], rep['unanswerable'])}; target ≥ 90%)")
    return "\n".join(lines)


def run_gate_calibration(dataset=None, *, questions=None, now: datetime | None = None, log=print) -> dict:
    """``kbf eval gate --calibrate``: the development set (when given; with its extra unanswerable
    questions for the bundled one) and the demo questions, each in a scratch organization,
    through the gate; the weights fitted on half A and checked on half B
    (``gate_calibration``)."""
    from kbframework.retrieval import gate
    from kbframework.retrieval.gate_calibration import DEFAULT_DATASET, DEV_EXTRA, dataset_cases, demo_cases, report

    cases, left_out = [], []
    if dataset:
        ds = read_dataset(dataset)
        dnow = now or reference_now(ds.timezone)
        org = load_corpus(ds, dnow, log)
        try:
            extra = DEV_EXTRA if Path(dataset).resolve() == DEFAULT_DATASET.resolve() else None
            got, left_out = dataset_cases(ds, org, dnow, log, extra=extra)
            cases += got
        finally:
            drop_org(org)
    p = Path(questions or DEMO_GATE_QUESTIONS)
    if not p.exists():
        raise KBError(f"No such file: {p}")
    data = json.loads(p.read_text(encoding="utf-8"))
    if not isinstance(data.get("answerable"), list) or not isinstance(data.get("unanswerable"), list):
        raise KBError("The gate set needs 'answerable' ([{q, expect}]) and 'unanswerable' ([question]) lists.")
    demo_now = now or datetime.now(timezone.utc)
    org = load_demo(demo_now, log)
    try:
        cases += demo_cases(org, demo_now, data)
    finally:
        drop_org(org)
    return report(cases, left_out, {"weights": dict(gate.WEIGHTS), "threshold": gate.THRESHOLD})
