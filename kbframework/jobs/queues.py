"""Redis connection and the four RQ queues: ingest, sync, webhook, reindex."""
from __future__ import annotations

import redis
from rq import Queue

from kbframework.errors import ServiceUnavailable

QUEUE_NAMES = ("webhook", "ingest", "sync", "reindex")  # a worker drains them in this order

_redis: redis.Redis | None = None
_url: str | None = None


def init_redis(url: str) -> redis.Redis:
    global _redis, _url
    if _redis is None or _url != url:
        _redis = redis.Redis.from_url(url)
        _url = url
    try:
        _redis.ping()
    except redis.RedisError as exc:
        raise ServiceUnavailable(f"Redis is not reachable at {url}: {exc}")
    return _redis


def get_redis() -> redis.Redis:
    if _redis is None:
        from kbframework.embedded import ensure_services

        _, url = ensure_services()
        init_redis(url)
    return _redis


def redis_url() -> str:
    """The URL of the Redis in use (connecting first if needed)."""
    get_redis()
    return _url


def redis_ok() -> bool:
    try:
        return bool(get_redis().ping())
    except (redis.exceptions.RedisError, OSError):
        return False


def redis_url_for_limits() -> str:
    url = redis_url()
    if url.startswith("unix://"):
        return "redis+unix://" + url[len("unix://"):]
    return url


def queue(name: str) -> Queue:
    if name not in QUEUE_NAMES:
        raise ValueError(f"unknown queue {name}")
    return Queue(name, connection=get_redis(), default_timeout=3600)


def enqueue_now(name: str, func, *args, job_id: str | None = None, **kwargs):
    """Put a job on its queue with its kind's timeout, retries and failure record
    (kbframework.jobs.policy); raises ``redis.RedisError`` when Redis is unreachable."""
    from kbframework.jobs.policy import enqueue_options

    opts = enqueue_options(name)
    opts["meta"] = {**opts["meta"], **(kwargs.pop("meta", None) or {})}
    opts.update(kwargs)
    return queue(name).enqueue(func, *args, job_id=job_id, **opts)


def enqueue(name: str, func, *args, job_id: str | None = None, hold: bool = True, for_organization=None,
            **kwargs):
    """Queue a job. When Redis is unreachable the job is held in PostgreSQL (the outbox) and a
    ``HeldJob`` (``.held`` is true) comes back: the caller's write stands and the job runs once
    Redis is back. ``hold=False`` raises ServiceUnavailable instead.

    The job runs in the organization of the caller's scope, or in ``for_organization`` (code
    running cross-organization names the organization the job belongs to); with neither it
    runs seeing no organization's rows (``kbframework.jobs.scope``)."""
    from kbframework.jobs.scope import with_organization

    kwargs["meta"] = with_organization(kwargs.get("meta"), for_organization)
    try:
        return enqueue_now(name, func, *args, job_id=job_id, **kwargs)
    except redis.RedisError as exc:
        if not hold or not isinstance(func, str):
            raise ServiceUnavailable(f"Could not queue the job: Redis is not reachable ({exc}).")
        from kbframework.jobs.outbox import hold as hold_job

        try:
            return hold_job(name, func, args, kwargs, job_id, f"Redis is not reachable: {exc}")
        except Exception as db_exc:
            raise ServiceUnavailable(f"Could not queue the job: Redis is not reachable ({exc}), and it "
                                     f"could not be kept for later ({type(db_exc).__name__}).")


def is_held(job) -> bool:
    return bool(getattr(job, "held", False))
def enqueue_unique(name: str, job_id: str, func, *args, **kwargs):
    """Queue ``func`` under ``job_id`` unless a job of that id is already waiting or running
    (index builds: many ingest batches ask, one build runs)."""
    from rq.exceptions import NoSuchJobError
    from rq.job import Job

    conn = get_redis()
    try:
        # the look and the queueing under one lock: two processes asking at once (the web tier
        # and a worker, or two workers) would otherwise both find no job and push the same id
        # twice, and the job would run twice
        with conn.lock(f"kbf:enqueue-unique:{job_id}", timeout=30, blocking_timeout=10):
            try:
                job = Job.fetch(job_id, connection=conn)
                if job.get_status(refresh=False) in ("queued", "started", "deferred", "scheduled"):
                    return job
            except NoSuchJobError:
                pass
            return enqueue(name, func, *args, job_id=job_id, **kwargs)
    except redis.exceptions.LockError as exc:
        raise ServiceUnavailable(f"Could not queue the job: its queueing lock was not released ({exc}).")
    except redis.RedisError as exc:
        raise ServiceUnavailable(f"Could not queue the job: Redis is not reachable ({exc}).")
