"""How long each kind of job may run, how soon a dead worker's job is noticed, and how often
it is tried again.

A job's worker proves it is alive with a heartbeat every few seconds (``HeartbeatWorker``);
when the heartbeat stops for ``KB_JOB_HEARTBEAT_SECONDS`` the job is abandoned and retried
with backoff, so a killed worker costs minutes, not RQ's default hour. The timeouts per kind
bound a job that hangs while its worker is alive. Every figure can be changed by the
environment (the tests shrink them to seconds).
"""
from __future__ import annotations

import os
from dataclasses import dataclass

KINDS = ("webhook", "ingest", "sync", "reindex")

# seconds a job of each kind may run before it is stopped (and retried)
DEFAULT_TIMEOUTS = {"webhook": 120, "ingest": 900, "sync": 1800, "reindex": 1800}


def _number(name: str, default: float) -> float:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise SystemExit(f"{name} must be a number of seconds, got {raw!r}")
    if value <= 0:
        raise SystemExit(f"{name} must be more than 0, got {raw!r}")
    return value


class TimeLimitExceeded(BaseException):
    """Raised inside a job at its kind's time limit. Not an ``Exception``: jobs record a
    failing item and carry on (``except Exception``), which would swallow RQ's own timeout
    and let a hung job run on without any limit."""


@dataclass(frozen=True)
class JobPolicy:
    kind: str
    timeout: int  # seconds before the job is stopped
    retries: int  # further attempts after the first
    backoff: tuple[int, ...]  # seconds before each retry


def heartbeat_seconds() -> int:
    """Without a heartbeat for this long, a started job counts as abandoned."""
    return max(2, int(_number("KB_JOB_HEARTBEAT_SECONDS", 60)))


def sweep_seconds() -> float:
    """How often a worker looks for abandoned jobs, stuck runs and work held in the outbox."""
    return _number("KB_JOB_SWEEP_SECONDS", 30)


def backoff() -> tuple[int, ...]:
    raw = os.environ.get("KB_JOB_RETRY_BACKOFF", "").strip()
    if not raw:
        return (30, 120, 300)
    try:
        out = tuple(max(1, int(float(x))) for x in raw.split(",") if x.strip())
    except ValueError:
        raise SystemExit(f"KB_JOB_RETRY_BACKOFF must be seconds separated by commas, got {raw!r}")
    return out or (30, 120, 300)


def policy(kind: str) -> JobPolicy:
    if kind not in KINDS:
        raise ValueError(f"unknown job kind {kind}")
    timeout = int(_number(f"KB_JOB_TIMEOUT_{kind.upper()}", DEFAULT_TIMEOUTS[kind]))
    retries = int(_number("KB_JOB_RETRIES", 3)) if os.environ.get("KB_JOB_RETRIES", "").strip() != "0" else 0
    return JobPolicy(kind, timeout, retries, backoff())


def enqueue_options(kind: str) -> dict:
    """Keyword arguments for ``Queue.enqueue``: timeout, retries with backoff, the callback
    that records each failure, a failed job kept a week so ``kbf jobs`` can show it, and the
    organization of the current scope, which the worker runs the job in."""
    from rq import Callback, Retry

    from kbframework.jobs.scope import with_organization

    p = policy(kind)
    opts = {"job_timeout": p.timeout, "failure_ttl": 7 * 24 * 3600,
            "on_failure": Callback("kbframework.jobs.recovery.job_failed"),
            "meta": with_organization({"kind": kind, "attempts": 0})}
    if p.retries:
        opts["retry"] = Retry(max=p.retries, interval=list(p.backoff))
    return opts
