"""CLI start-up: ``kbf --help`` and one ``kbf ask``, each beside the bare interpreter start-up
(``python -c pass``) as its floor. Targets on this machine: help under 0.2 s, ask under 1.0 s.

Each figure is a median of wall-clock seconds and, beside it, of the CPU seconds the command
itself used (user + system): on a shared machine the wall clock also counts the time spent
waiting for a core, the CPU seconds do not. The ask is split into the answer pipeline (the
traced steps, from ``kbf ask --json``), the query embedding inside it, and the rest: starting
Python, importing, connecting."""
from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

TARGETS = {"help": 0.2, "ask": 1.0}
QUESTION = "What is the return policy?"


def _env() -> dict:
    """An installed package runs from its compiled bytecode; with PYTHONDONTWRITEBYTECODE
    (set in some shells and CI) every run would recompile the host and measure the compiler."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _run(cmd: list[str]) -> tuple[float, float, str]:
    """(wall seconds, CPU seconds, stdout) of one run."""
    cpu0, t0 = _children_cpu(), time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, env=_env())
    wall, cpu = time.perf_counter() - t0, _children_cpu() - cpu0
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed: {r.stderr[-500:]}")
    return wall, cpu, r.stdout


def _medians(cmd: list[str], runs: int) -> tuple[float, float]:
    got = [_run(cmd)[:2] for _ in range(runs)]
    return statistics.median(w for w, _ in got), statistics.median(c for _, c in got)


def _pipeline(kbf: str, org: str, runs: int) -> tuple[float, float]:
    """Median seconds of the answer pipeline and of its query embedding, as ``--json`` traces them."""
    totals, embeds = [], []
    for _ in range(runs):
        timings = json.loads(_run([kbf, "ask", "--org", org, "--json", QUESTION])[2])["debug"]["timings_ms"]
        totals.append(timings["total"] / 1000)
        embeds.append(timings.get("embed_query", 0.0) / 1000)
    return statistics.median(totals), statistics.median(embeds)


def run(runs: int = 5) -> dict:
    from kbframework.demo import seed_demo

    kbf = str(Path(sys.executable).parent / "kbf")
    org = seed_demo("bench@demo.local", "bench-password-1")["org"]
    _run([kbf, "ask", "--org", org, "warm up"])  # writes the .pyc and warms the database's caches
    out = {"load_average_1m": round(os.getloadavg()[0], 2)}
    floor, floor_cpu = _medians([sys.executable, "-c", "pass"], runs)
    out.update(floor_python_pass_s=round(floor, 3), floor_python_pass_cpu_s=round(floor_cpu, 3))
    for name, cmd in (("help", [kbf, "--help"]), ("ask", [kbf, "ask", "--org", org, QUESTION])):
        wall, cpu = _medians(cmd, runs if name == "help" else max(3, runs // 2))
        out[f"{name}_s"], out[f"{name}_cpu_s"] = round(wall, 3), round(cpu, 3)
        out[f"{name}_vs_floor"] = round(wall / floor, 1) if floor else None
        out[f"{name}_target_s"] = TARGETS[name]
        print(f"kbf {name}: {wall:.3f} s, CPU {cpu:.3f} s (floor python -c pass {floor:.3f} s, "
              f"CPU {floor_cpu:.3f} s; ×{wall / floor:.1f}; target {TARGETS[name]} s)", flush=True)
    pipeline, embed = _pipeline(kbf, org, max(3, runs // 2))
    out.update(ask_pipeline_s=round(pipeline, 3), ask_embed_query_s=round(embed, 3),
               ask_outside_pipeline_s=round(out["ask_s"] - pipeline, 3))
    print(f"kbf ask: the answer pipeline {pipeline:.3f} s (embedding the query {embed:.3f} s); "
          f"starting, importing and connecting {out['ask_s'] - pipeline:.3f} s "
          f"(load average {out['load_average_1m']})", flush=True)
    return out
