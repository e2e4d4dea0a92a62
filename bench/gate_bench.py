"""The answerability gate's calibration, re-run: its signals for every development question
(with the 30 extra unanswerable ones) and demo question, the weights and threshold fitted on
half A, and the two rates on half B (held out) and on both halves, beside the rates of the
weights the product ships (``kbf eval gate --calibrate`` prints the same, with every miss).
Ranking changes move these figures: re-run after one and compare."""
from __future__ import annotations


def run() -> dict:
    from kbframework.retrieval.evaluation import run_gate_calibration
    from kbframework.retrieval.gate_calibration import DEFAULT_DATASET, format_calibration

    if not DEFAULT_DATASET.exists():
        return {"skipped": f"no dataset at {DEFAULT_DATASET}"}
    rep = run_gate_calibration(DEFAULT_DATASET, log=lambda m: print(m, flush=True))
    print(format_calibration(rep, show_misses=False), flush=True)
    out = {k: v for k, v in rep.items() if k != "cases"}
    shipped = rep["shipped_all"]
    out["targets"] = {
        f"{name}_{kind}": ok for name, r in shipped.items() for kind, ok in (
            ("unanswerable_fall_back_90pct", r["unanswerable_fell_back"] >= 0.9 * r["unanswerable"]),
            ("answerable_fall_back_5pct", r["answerable_fell_back"] <= 0.05 * r["answerable"]))
        if r["answerable"] or kind.startswith("unanswerable")}
    return out
