"""The jobs an operator (``kbf jobs``) or an admin (``GET /api/admin/v1/jobs``) can see:
queued, waiting for a retry, running, failed, and what each failure was."""
from __future__ import annotations

import logging
import re
import zlib
from datetime import datetime

log = logging.getLogger("kbframework.jobs")

_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")

# scheduled: waiting for a retry's backoff (or a webhook's coalescing delay); retried: finished
# after at least one failed attempt; held: in the outbox until Redis is reachable
STATES = ("queued", "scheduled", "running", "failed", "retried", "held")


def _iso(v) -> str | None:
    return v.isoformat(timespec="seconds") if isinstance(v, datetime) else v


def _first_id(args) -> str | None:
    """The organization, source or document a job works on: its first argument (or the first
    of a list of document ids)."""
    first = (args or [None])[0]
    if isinstance(first, list):
        first = first[0] if first else None
    first = str(first) if first is not None else None
    return first if first and _UUID.match(first) else None


def _describe(job, state: str, queue: str) -> dict:
    meta = job.meta or {}
    failures = meta.get("failures") or []
    reason = failures[-1]["reason"] if failures else None
    if state == "failed" and reason is None:
        from redis.exceptions import RedisError

        try:
            res = job.latest_result()
            exc = getattr(res, "exc_string", None) if res is not None else None
        except (RedisError, ValueError, zlib.error):  # a result RQ stored and cannot read back
            log.warning("could not read the last result of job %s", job.id, exc_info=True)
            exc = None
        if exc:
            reason = exc.strip().splitlines()[-1][:300]
    return {"id": job.id, "queue": queue, "state": state, "function": (job.func_name or "").rsplit(".", 1)[-1],
            "args": [a if isinstance(a, (str, int, float, bool)) or a is None else
                     (f"{len(a)} ids" if isinstance(a, list) else str(a)) for a in (job.args or [])],
            "organization_id": meta.get("organization_id"), "attempts": int(meta.get("attempts") or 0) + (
                1 if state == "running" else 0),
            "retried": len(failures) > (1 if state == "failed" else 0),
            "reason": reason, "next": meta.get("next_attempt"), "failures": failures,
            "enqueued_at": _iso(job.enqueued_at), "started_at": _iso(job.started_at),
            "ended_at": _iso(job.ended_at), "_first": _first_id(job.args)}


def list_jobs(states=STATES, limit: int = 200, organization_id: str | None = None) -> list[dict]:
    """Jobs by state, newest first within each state. ``organization_id`` keeps only the jobs
    whose arguments name that organization's sources, documents or itself."""
    from rq.job import Job
    from rq.registry import FailedJobRegistry, FinishedJobRegistry, ScheduledJobRegistry, StartedJobRegistry

    from kbframework.jobs.queues import QUEUE_NAMES, get_redis, queue

    r = get_redis()
    now = datetime.now().timestamp()
    out: list[dict] = []
    leases: dict = {}
    for name in QUEUE_NAMES:
        q = queue(name)
        groups = []
        if "running" in states:
            # read without RQ's cleanup: a listing (in a web request, in any organization's
            # scope) must not be where abandoned jobs are failed; the workers' sweep does that
            started = StartedJobRegistry(queue=q)
            leases = {}
            for member, score in r.zrange(started.key, 0, -1, withscores=True):
                job_id = (member.decode() if isinstance(member, bytes) else str(member)).split(":", 1)[0]
                leases[job_id] = max(score, leases.get(job_id, 0))
            groups.append(("running", list(leases)))
        if "queued" in states:
            groups.append(("queued", q.get_job_ids()))
        if "scheduled" in states:
            groups.append(("scheduled", ScheduledJobRegistry(queue=q).get_job_ids()))
        if "failed" in states:
            groups.append(("failed", FailedJobRegistry(queue=q).get_job_ids(0, limit - 1, desc=True)))
        if "retried" in states:
            groups.append(("retried", FinishedJobRegistry(queue=q).get_job_ids(0, 4 * limit - 1, desc=True)))
        for state, ids in groups:
            for job in Job.fetch_many(list(dict.fromkeys(ids))[:4 * limit], connection=r):
                if job is None or (state == "retried" and not (job.meta or {}).get("failures")):
                    continue
                row = _describe(job, state, name)
                if state == "running" and leases.get(job.id, float("inf")) < now:
                    row["reason"] = "no heartbeat: its worker seems gone; the next sweep retries it"
                out.append(row)
    if "held" in states:
        out.extend(held_jobs(limit))
    if organization_id is not None:
        tag_organization(out)
        out = [j for j in out if j.get("organization_id") == str(organization_id)]
    for j in out:
        j.pop("_first", None)
    return out


def held_jobs(limit: int = 200) -> list[dict]:
    from sqlalchemy import text

    from kbframework.db import get_engine

    with get_engine().connect() as conn:
        rows = conn.execute(text("SELECT id, queue, func, args, job_id, reason, created_at, attempts "
                                 "FROM job_outbox ORDER BY id LIMIT :n"), {"n": limit}).all()
    return [{"id": job_id or f"held-{row_id}", "queue": queue, "state": "held",
             "function": func.rsplit(".", 1)[-1],
             "args": [a if not isinstance(a, list) else f"{len(a)} ids" for a in (args or [])],
             "organization_id": None, "attempts": attempts, "retried": False, "reason": reason,
             "next": "queued once Redis answers", "failures": [], "enqueued_at": _iso(created_at),
             "started_at": None, "ended_at": None, "_first": _first_id(args)}
            for row_id, queue, func, args, job_id, reason, created_at, attempts in rows]


def tag_organization(jobs: list[dict]) -> None:
    """Fill ``organization_id`` from the database for jobs that did not carry it."""
    from sqlalchemy import text

    from kbframework.db import get_engine

    ids = {j["_first"] for j in jobs if j.get("_first")}
    if not ids:
        return
    with get_engine().connect() as conn:
        rows = conn.execute(text(
            "SELECT CAST(id AS text), CAST(organization_id AS text) FROM sources WHERE id = ANY(CAST(:i AS uuid[])) "
            "UNION ALL SELECT CAST(id AS text), CAST(organization_id AS text) FROM documents "
            "WHERE id = ANY(CAST(:i AS uuid[])) "
            "UNION ALL SELECT CAST(id AS text), CAST(id AS text) FROM organizations "
            "WHERE id = ANY(CAST(:i AS uuid[]))"), {"i": list(ids)}).all()
    owner = dict(rows)
    for j in jobs:
        if not j.get("organization_id") and j.get("_first") in owner:
            j["organization_id"] = owner[j["_first"]]
