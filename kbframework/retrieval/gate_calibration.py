"""Fitting the answerability gate's weights and threshold: ``kbf eval gate --calibrate``.

The gate's score is a weighted sum of a few signals (``gate.features``). Fitting those weights
to every question we have would only tell us how well we can memorise them, so the questions
are split in two halves, stably (by a hash of each question's id, stratified by set and by
answerable/unanswerable): the weights and threshold are chosen on half A and the rates are
measured on half B, which took no part in the choice, and on both halves together.

The questions are the development set's (``shared/data/retrieval_dev``: judged queries are
answerable, the ``no_answer`` ones are not; a query whose time window holds no judged event is
left out, as the time-aware nDCG leaves it out), 30 more unanswerable questions written for that
corpus (``bench/data/retrieval_dev_unanswerable.json``: five no_answer queries per half are too
few to fit on), and the demo's (``kbframework/demo/gate_questions.json``). Each is run once
through the product's own steps up to the gate, at the product's depth, and its signals are
recorded; the fit then replays the decision for every candidate weighting without searching
again.

The choice on half A: among a small grid of weightings (similarity keeps weight 1, the scale)
and every threshold between two neighbouring scores, the one of least cost wins: the share of
answerable questions that fall back (the mean of the sets' shares) over its target of 5%, plus
the share of unanswerable questions answered (all sets together) over its target of 10%, so
that an error weighs as much as its target says; ties go to the widest gap around the
threshold, then to the smaller weights. Nothing here runs in the product, which reads no
judgement: it only ever sees the weights and the threshold.
"""
from __future__ import annotations

import hashlib
import itertools
import json
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path


SIGNALS = ("similarity", "overlap", "title", "agreement", "lead")
GRID = {"overlap": (0.5, 1.0, 1.5, 2.0), "title": (0.0, 0.25, 0.5), "agreement": (0.0, 0.05, 0.1, 0.2),
        "lead": (0.0, 0.5, 1.0), "unknown": (0.5, 1.0, 1.5, 2.0)}
TARGET_UNANSWERABLE = 0.9
TARGET_ANSWERABLE = 0.05
# beside the checkout, as the bench finds it
DEFAULT_DATASET = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "retrieval_dev"
# more unanswerable questions for that corpus, so each half has more than its five no_answer queries
DEV_EXTRA = Path(__file__).resolve().parents[2] / "bench" / "data" / "retrieval_dev_unanswerable.json"


@dataclass
class Case:
    """One question and what the gate saw for it."""

    set: str
    id: str
    question: str
    answerable: bool
    path: str  # "scored", or "passed" (filters/follow-up), or "fell_back" (nothing to score)
    passages: list = field(default_factory=list)  # [{similarity, overlap, title, agreement}]
    unknown: float = 0.0
    lead: float = 0.0
    policy_page: bool = False
    product_passed: bool = False  # what the product decided with its shipped weights
    detail: dict = field(default_factory=dict)

    def score(self, w: dict) -> float:
        base = max((sum(w[k] * p[k] for k in SIGNALS if k != "lead") for p in self.passages), default=-9.0)
        return base + w["lead"] * self.lead - w["unknown"] * self.unknown

    def passes(self, w: dict, threshold: float) -> bool:
        if self.path != "scored":
            return self.path == "passed"
        return self.score(w) >= threshold or self.policy_page


def gate_case(org_id, question: str, *, now: datetime, history=None, set_name: str = "", case_id: str = "",
              answerable: bool = True) -> Case:
    """Run the product's steps up to the gate for one question and keep the gate's signals."""
    from kbframework.db import session_scope
    from kbframework.retrieval.steps import Turn, run_steps

    t = Turn(org_id=org_id, question=question, mode="search", history=history, now=now, retrieval_only=True)
    with session_scope() as s:
        run_steps(s, t)
    g = t.debug.get("gate") or {}
    if "passages" in g:
        path = "scored"
    else:
        path = "passed" if t.answerable else "fell_back"
    ps = [{"similarity": p["similarity"], "overlap": p["overlap"], "title": p.get("title_overlap", 0.0),
           "agreement": p["agreement"]} for p in g.get("passages", [])]
    detail = {"search_text": t.text_q, "why": g.get("why"), "unknown_words": g.get("unknown_words"),
              "lexemes": g.get("lexemes"), "matched": [p.get("matched") for p in g.get("passages", [])],
              "score": g.get("score")}
    return Case(set_name, case_id, question, answerable, path, ps, float(g.get("unknown_share") or 0.0),
                float(g.get("lead") or 0.0), bool(g.get("policy_page")), bool(t.answerable), detail)


def dataset_cases(ds, org_id: str, now: datetime, log=print, extra=None) -> tuple[list[Case], list[str]]:
    """Every query of a qrels-style set (``evaluation.Dataset``), as gate cases (and ``extra``'s
    unanswerable questions for the same corpus, as the set "retrieval_dev_extra"); and the ids
    left out (empty windows)."""
    cases, left_out = [], []
    for q in ds.queries:
        rels = ds.qrels.get(q["_id"])
        if rels and "expected_in_window" in q and not q["expected_in_window"] and _only_events(ds, rels):
            left_out.append(q["_id"])  # nothing judged is on in that window: falling back is right
            continue
        cases.append(gate_case(org_id, q["text"], now=now, history=q.get("history"), set_name="retrieval_dev",
                               case_id=q["_id"], answerable=bool(rels)))
    if extra and Path(extra).exists():
        for i, q in enumerate(json.loads(Path(extra).read_text(encoding="utf-8"))["unanswerable"]):
            cases.append(gate_case(org_id, q, now=now, set_name="retrieval_dev_extra", case_id=f"x{i:02d}",
                                   answerable=False))
    log(f"{len(cases)} development questions through the gate ({len(left_out)} with an empty time window left out)")
    return cases, left_out


def _only_events(ds, rels: dict) -> bool:
    roles = {d["_id"]: d.get("role") for d in ds.corpus}
    return all(roles.get(d) == "event" for d in rels)


def demo_cases(org_id: str, now: datetime, data: dict) -> list[Case]:
    """The demo's gate questions ({answerable: [{q, expect}], unanswerable: [question]})."""
    out = [gate_case(org_id, a["q"], now=now, set_name="demo", case_id=f"a{i:02d}", answerable=True)
           for i, a in enumerate(data["answerable"])]
    out += [gate_case(org_id, q, now=now, set_name="demo", case_id=f"u{i:02d}", answerable=False)
            for i, q in enumerate(data["unanswerable"])]
    return out


# --------------------------------------------------------------------------- split, rates, fit


def split(cases: list[Case]) -> tuple[list[Case], list[Case]]:
    """Halves A and B: within each (set, answerable) group, ordered by a hash of the id, alternating."""
    a, b = [], []
    groups: dict = {}
    for c in cases:
        groups.setdefault((c.set, c.answerable), []).append(c)
    for key in sorted(groups, key=str):
        ordered = sorted(groups[key], key=lambda c: hashlib.sha1(f"{c.set}:{c.id}".encode()).hexdigest())
        for i, c in enumerate(ordered):
            (a if i % 2 == 0 else b).append(c)
    return a, b


def rates(cases: list[Case], w: dict, threshold: float) -> dict:
    out: dict = {}
    for c in cases:
        r = out.setdefault(c.set, {"answerable": 0, "answerable_fell_back": 0, "unanswerable": 0,
                                   "unanswerable_fell_back": 0, "answerable_fell_back_ids": [],
                                   "unanswerable_passed_ids": []})
        fell = not c.passes(w, threshold)
        if c.answerable:
            r["answerable"] += 1
            r["answerable_fell_back"] += fell
            if fell:
                r["answerable_fell_back_ids"].append(c.id)
        else:
            r["unanswerable"] += 1
            r["unanswerable_fell_back"] += fell
            if not fell:
                r["unanswerable_passed_ids"].append(c.id)
    return out


def _arrays(cases: list[Case]):
    import numpy as np

    n, k = len(cases), max([len(c.passages) for c in cases] + [1])
    P = np.full((n, k, 4), np.nan)
    for i, c in enumerate(cases):
        for j, p in enumerate(c.passages):
            P[i, j] = [p[x] for x in SIGNALS if x != "lead"]
    sets = sorted({c.set for c in cases})
    return {"P": P, "lead": np.array([c.lead for c in cases]), "unknown": np.array([c.unknown for c in cases]),
            "scored": np.array([c.path == "scored" for c in cases]), "passed": np.array([c.path == "passed" for c in cases]),
            "policy": np.array([c.policy_page for c in cases]), "answerable": np.array([c.answerable for c in cases]),
            "set": np.array([sets.index(c.set) for c in cases]), "sets": len(sets)}


def _scores(A: dict, w: dict):
    import numpy as np

    lin = sum(w[x] * A["P"][:, :, i] for i, x in enumerate(x for x in SIGNALS if x != "lead"))
    base = np.where(np.isnan(lin), -9.0, lin).max(axis=1)
    return base + w["lead"] * A["lead"] - w["unknown"] * A["unknown"]


def _costs(A: dict, S, T):
    """At every threshold of T, the two error rates, each over its target, summed: the mean
    over sets of the share of answerable questions that fall back, over 5%, plus the share of
    all unanswerable questions that are answered, over 10%. Meeting both targets costs at most
    2, and an error weighs as much as its target says."""
    import numpy as np

    passes = A["passed"][None, :] | (A["scored"][None, :] & (A["policy"][None, :] | (S[None, :] >= T[:, None])))
    un = ~A["answerable"]
    answered = passes[:, un].sum(axis=1) / max(1, un.sum())
    fell, sets = np.zeros(len(T)), 0
    for k in range(A["sets"]):
        ans = (A["set"] == k) & A["answerable"]
        if ans.any():
            fell += (~passes[:, ans]).sum(axis=1) / ans.sum()
            sets += 1
    return fell / max(1, sets) / TARGET_ANSWERABLE + answered / (1 - TARGET_UNANSWERABLE)


def cost(cases: list[Case], w: dict, threshold: float) -> float:
    """The fit's objective at one weighting and threshold (see ``_costs``)."""
    import numpy as np

    A = _arrays(cases)
    return float(_costs(A, _scores(A, w), np.array([threshold]))[0])


def fit(cases: list[Case], grid: dict | None = None) -> dict:
    """The weighting and threshold of least cost on ``cases`` (half A). The threshold sits
    halfway between two neighbouring scores; ties go to the widest gap around the threshold,
    then to the smaller weights."""
    import numpy as np

    grid = grid or GRID
    keys = sorted(grid)
    A = _arrays(cases)
    best = None
    for combo in itertools.product(*(grid[k] for k in keys)):
        w = {"similarity": 1.0, **dict(zip(keys, combo))}
        S = _scores(A, w)
        u = np.unique(np.round(S[A["scored"]], 6))
        T = np.concatenate([[u[0] - 0.01], (u[1:] + u[:-1]) / 2, [u[-1] + 0.01]])
        C = _costs(A, S, T)
        gaps = np.append(np.diff(u), 0.02)[np.searchsorted(u, T).clip(0, len(u) - 1)] if len(u) > 1 else np.full(len(T), 0.02)
        for i in np.flatnonzero(np.isclose(C, C.min())):
            key = (round(float(C[i]), 6), -round(float(gaps[i]), 6), combo)
            if best is None or key < best[0]:
                best = (key, w, round(float(T[i]), 4))
    return {"weights": best[1], "threshold": best[2], "cost": best[0][0]}


def _fmt_rate(a: int, b: int) -> str:
    return f"{a} of {b} ({100.0 * a / b:.1f}%)" if b else "—"


def summary(r: dict) -> dict:
    """The admin's wording of one set's rates."""
    return {"unanswerable_fell_back": f"{r['unanswerable_fell_back']} of {r['unanswerable']}",
            "answerable_fell_back": _fmt_rate(r["answerable_fell_back"], r["answerable"])}


def report(cases: list[Case], left_out: list[str], shipped: dict) -> dict:
    """Fit on half A, check on half B; the shipped weighting beside it."""
    a, b = split(cases)
    fitted = fit(a)
    return {"questions": len(cases), "left_out_empty_window": left_out, "fitted_on_A": fitted, "shipped": shipped,
            "A": rates(a, fitted["weights"], fitted["threshold"]),
            "B": rates(b, fitted["weights"], fitted["threshold"]),
            "all": rates(cases, fitted["weights"], fitted["threshold"]),
            "shipped_all": rates(cases, shipped["weights"], shipped["threshold"]), "cases": cases}


def format_calibration(rep: dict, show_misses: bool = True) -> str:
    fw, ft = rep["fitted_on_A"]["weights"], rep["fitted_on_A"]["threshold"]
    lines = [f"{rep['questions']} questions; half A fits, half B checks"
             + (f"; left out (empty time window): {', '.join(rep['left_out_empty_window'])}"
                if rep["left_out_empty_window"] else ""),
             "fitted on A: threshold " + f"{ft}, weights " + ", ".join(f"{k} {v:g}" for k, v in fw.items())]
    for name in ("A", "B", "all", "shipped_all"):
        label = {"A": "half A (fitted)", "B": "half B (held out)", "all": "both halves",
                 "shipped_all": "shipped weights, both halves"}[name]
        parts = []
        for s, r in sorted(rep[name].items()):
            parts.append(f"{s}: unanswerable {_fmt_rate(r['unanswerable_fell_back'], r['unanswerable'])} fall back "
                         f"(target ≥ 90%), answerable {_fmt_rate(r['answerable_fell_back'], r['answerable'])} "
                         f"(target ≤ 5%)")
        lines.append(f"{label}: " + "; ".join(parts))
    if show_misses:
        half = {id(c): "A" for c in split(rep["cases"])[0]}
        lines.append("\nmisses with the fitted weights (similarity, overlap, title, agreement per document; "
                     "lead and unknown per question):")
        for c in rep["cases"]:
            if c.passes(fw, ft) == c.answerable:
                continue
            docs = " | ".join(f"{p['similarity']:.2f} {p['overlap']:.2f} {p['title']:.2f} {p['agreement']:g}"
                              for p in c.passages) or "—"
            kind = "answerable fell back" if c.answerable else "unanswerable answered"
            lines.append(f"  [{half.get(id(c), 'B')}] {c.set} {c.id} {kind}: {c.question!r} "
                         f"path {c.path}, score {c.score(fw):.3f}; docs {docs}; lead {c.lead:.3f}, unknown "
                         f"{c.unknown:.3f} {c.detail.get('unknown_words') or ''}; matched {c.detail.get('matched')}")
    lines.append("\nto ship: gate.WEIGHTS = " + json.dumps(fw) + f"; gate.THRESHOLD = {ft}")
    return "\n".join(lines)
