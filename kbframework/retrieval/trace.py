"""A small tracer for the answer pipeline: every step records what it produced and how long it
took, in order, so the debug JSON, the chat log and the admin debug panel all read one record
and can never disagree about names or order.

    trace = Trace()
    with trace.step("rrf") as step:
        fused = rrf(legs)
        step.output = {"chunks": len(fused)}
    trace.as_list()   # [{"name": "rrf", "ms": 0.41, "output": {"chunks": 12}}]

A step that raises is still recorded (with its error) before the exception travels on.
"""
from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass, field


@dataclass
class StepRecord:
    name: str
    ms: float | None = None
    output: object = None
    error: str | None = None

    def as_dict(self) -> dict:
        out = {"name": self.name, "ms": self.ms, "output": self.output}
        if self.error:
            out["error"] = self.error
        return out


@dataclass
class Trace:
    steps: list[StepRecord] = field(default_factory=list)
    started: float = field(default_factory=time.perf_counter)

    @contextmanager
    def step(self, name: str):
        rec = StepRecord(name)
        self.steps.append(rec)
        t0 = time.perf_counter()
        try:
            yield rec
        except Exception as exc:
            rec.error = f"{type(exc).__name__}: {exc}"
            raise
        finally:
            rec.ms = round((time.perf_counter() - t0) * 1000, 2)

    def add(self, name: str, ms: float, output=None) -> None:
        """Record a step that was timed elsewhere (a leg that ran in another thread)."""
        self.steps.append(StepRecord(name, round(ms, 2), output))

    def timings(self) -> dict:
        """{step name: ms} in order, plus the total since the trace began."""
        out: dict = {}
        for r in self.steps:
            out[r.name] = round(out.get(r.name, 0.0) + (r.ms or 0.0), 2)
        out["total"] = round((time.perf_counter() - self.started) * 1000, 2)
        return out

    def names(self) -> list[str]:
        return [r.name for r in self.steps]

    def as_list(self) -> list[dict]:
        return [r.as_dict() for r in self.steps]
