"""Issue 16 target: the answer-time cost of row-level security (retrieval p95 at most 5 %
slower with the policies in force than without them).

The shared retrieval development set is loaded into a scratch organization; its queries go
through ``answer()`` in alternating rounds with row-level security on (connections in the
``kbf_tenant`` role, every transaction scoped to the organization) and off (the database
user, no scope settings), after one warm-up round of each, so a shared machine's load
drifts into both sides alike.
"""
from __future__ import annotations

import time

from bench.retrieval_bench import DATA, RETRIEVAL_STEPS, _pct

ROUNDS = 3


def _mode(on: bool) -> None:
    from kbframework import db, tenancy

    tenancy.ENABLED = on
    db.get_engine().dispose()  # pooled connections were opened in the other mode
    if db._fast is not None:
        db._fast.dispose()


def run() -> dict:
    from kbframework import tenancy
    from kbframework.retrieval.evaluation import drop_org, load_corpus, read_dataset, reference_now
    from kbframework.retrieval.answer import answer

    if not DATA.exists():
        return {"skipped": f"no dataset at {DATA}"}
    ds = read_dataset(DATA)
    now = reference_now(ds.timezone)
    org = load_corpus(ds, now, log=lambda m: print(m, flush=True))
    samples: dict[bool, dict[str, list[float]]] = {True: {"retrieval": [], "answer": []},
                                                   False: {"retrieval": [], "answer": []}}
    try:
        for rnd in range(ROUNDS + 1):
            for on in (True, False) if rnd % 2 == 0 else (False, True):
                _mode(on)
                for q in ds.queries:
                    with tenancy.organization(org):
                        t0 = time.perf_counter()
                        res = answer(org, q["text"], mode="search", history=q.get("history"), channel="cli",
                                     now=now)
                        wall = (time.perf_counter() - t0) * 1000
                    if rnd == 0:
                        continue  # warm-up
                    t = res["debug"]["timings_ms"]
                    samples[on]["retrieval"].append(sum(t.get(k, 0.0) for k in RETRIEVAL_STEPS))
                    samples[on]["answer"].append(wall)
    finally:
        _mode(True)
        with tenancy.system("bench: drop the scratch organization"):
            drop_org(org)
    out = {"queries_per_mode": len(samples[True]["retrieval"]), "rounds": ROUNDS}
    for key in ("retrieval", "answer"):
        on, off = _pct(samples[True][key], 0.95), _pct(samples[False][key], 0.95)
        out[f"{key}_p95_ms_rls_on"] = on
        out[f"{key}_p95_ms_rls_off"] = off
        out[f"{key}_p95_ratio"] = round(on / off, 3) if off else None
    out["target_retrieval_p95_ratio_max"] = 1.05
    out["retrieval_p95_ok"] = out["retrieval_p95_ratio"] is not None and out["retrieval_p95_ratio"] <= 1.05
    return out
