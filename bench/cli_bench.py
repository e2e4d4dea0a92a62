"""CLI start-up: ``kbf --help`` and one ``kbf ask``, each beside the bare interpreter start-up
(``python -c pass``) as its floor. Targets on this machine: help under 0.2 s, ask under 1.0 s."""
from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

TARGETS = {"help": 0.2, "ask": 1.0}


def _env() -> dict:
    """An installed package runs from its compiled bytecode; with PYTHONDONTWRITEBYTECODE
    (set in some shells and CI) every run would recompile the host and measure the compiler."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def _median_seconds(cmd: list[str], runs: int) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        r = subprocess.run(cmd, capture_output=True, text=True, env=_env())
        times.append(time.perf_counter() - t0)
        if r.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed: {r.stderr[-500:]}")
    return statistics.median(times)


def run(runs: int = 5) -> dict:
    from kbframework.demo import seed_demo

    kbf = str(Path(sys.executable).parent / "kbf")
    org = seed_demo("bench@demo.local", "bench-password-1")["org"]
    subprocess.run([kbf, "ask", "--org", org, "warm up"], capture_output=True, env=_env())  # writes the .pyc
    floor = _median_seconds([sys.executable, "-c", "pass"], runs)
    out = {"floor_python_pass_s": round(floor, 3)}
    for name, cmd in (("help", [kbf, "--help"]), ("ask", [kbf, "ask", "--org", org, "What is the return policy?"])):
        s = _median_seconds(cmd, runs if name == "help" else max(3, runs // 2))
        out[f"{name}_s"] = round(s, 3)
        out[f"{name}_vs_floor"] = round(s / floor, 1) if floor else None
        out[f"{name}_target_s"] = TARGETS[name]
        print(f"kbf {name}: {s:.3f} s (floor python -c pass {floor:.3f} s, ×{s / floor:.1f}; "
              f"target {TARGETS[name]} s)", flush=True)
    return out
