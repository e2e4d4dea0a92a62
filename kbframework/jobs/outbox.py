"""Work accepted while Redis is unreachable waits in PostgreSQL (``job_outbox``).

A write that succeeded (a note saved, a file stored, a webhook receipt recorded) must not be
lost because its job could not be queued. ``hold`` stores the job in the same database as
the write; the sweeper that every worker runs (``kbframework.jobs.recovery.sweep``) puts it
on its queue once Redis answers again, oldest first.
"""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Callable

from sqlalchemy import text

log = logging.getLogger("kbframework.jobs")


@dataclass
class HeldJob:
    """What ``queues.enqueue`` returns when the job went to the outbox instead of Redis."""
    id: str
    queue: str
    held: bool = True

    def get_status(self, refresh: bool = True) -> str:
        return "held"


def hold(queue: str, func: str, args, kwargs: dict | None, job_id: str | None, reason: str) -> HeldJob:
    """Keep a job for later, with the organization it works for (the caller's scope unless the
    job's meta names one): the sweep that queues it later runs cross-organization."""
    from kbframework.db import get_engine
    from kbframework.jobs.scope import with_organization

    kwargs = {**(kwargs or {}), "meta": with_organization((kwargs or {}).get("meta"))}

    with get_engine().begin() as conn:
        row_id = conn.execute(text(
            "INSERT INTO job_outbox (queue, func, args, kwargs, job_id, reason) "
            "VALUES (:q, :f, CAST(:a AS jsonb), CAST(:k AS jsonb), :j, :r) RETURNING id"),
            {"q": queue, "f": func, "a": json.dumps(list(args), default=str),
             "k": json.dumps(kwargs or {}, default=str), "j": job_id, "r": reason[:2000]}).scalar_one()
    log.warning("Redis unreachable: %s job %s held in the outbox (row %s): %s", queue, func, row_id, reason)
    return HeldJob(id=job_id or f"held-{row_id}", queue=queue)


def pending() -> int:
    from kbframework.db import get_engine

    with get_engine().connect() as conn:
        return conn.execute(text("SELECT count(*) FROM job_outbox")).scalar_one()


def drain(put: Callable[..., object], limit: int = 500) -> int:
    """Queue held jobs in order with ``put`` (``queues.enqueue_now``: the outbox sits below the
    queues, which hold jobs here); stops at the first one Redis refuses. Returns how many went."""
    import redis

    from kbframework.db import get_engine

    moved = 0
    with get_engine().begin() as conn:
        rows = conn.execute(text(
            "SELECT id, queue, func, args, kwargs, job_id FROM job_outbox ORDER BY id "
            "LIMIT :n FOR UPDATE SKIP LOCKED"), {"n": limit}).all()
        for row_id, queue, func, args, kwargs, job_id in rows:
            try:
                put(queue, func, *(args or []), job_id=job_id, **(kwargs or {}))
            except redis.RedisError as exc:
                conn.execute(text("UPDATE job_outbox SET attempts = attempts + 1 WHERE id = :i"), {"i": row_id})
                log.warning("outbox: Redis still refuses jobs (%s); %s left", exc, len(rows) - moved)
                break
            conn.execute(text("DELETE FROM job_outbox WHERE id = :i"), {"i": row_id})
            moved += 1
    if moved:
        log.warning("outbox: %s held job(s) queued", moved)
    return moved
