"""``kbf worker``: an RQ worker that runs jobs in its own process (no fork per job), so the
embedding model and plugins load once. Every worker may run RQ's scheduler for delayed jobs
and retries (one at a time); with ``--with-scheduler`` it also runs our periodic jobs
(expiry, each source's reconciliation, the recovery sweep).

``kbf worker --processes N`` runs N such workers under one supervisor (``run_pool``): a
worker runs one job at a time on one core, so a machine with more cores needs more processes
to ingest at its speed. The children stay in the supervisor's process group, so one signal or
one kill to the group reaches all of them, as it reached the single worker before."""
from __future__ import annotations

import logging
from rq import SimpleWorker

from kbframework.jobs.command_channel import NoCommandChannel
from kbframework.jobs.scope import ScopedJobs

log = logging.getLogger("kbframework.jobs.worker")

EXPIRY_EVERY = 300  # seconds


def default_processes(fallback: int = 1) -> int:
    """``KB_WORKER_PROCESSES``, else ``fallback``: a lone ``kbf worker`` stays one process
    unless asked; ``kbf run`` falls back to one per core. A value that is not a whole number of
    at least one raises ValueError with a message for the operator."""
    import os

    raw = os.environ.get("KB_WORKER_PROCESSES", "").strip()
    if not raw:
        return max(1, fallback)
    if not raw.isdigit() or int(raw) < 1:
        raise ValueError(f"KB_WORKER_PROCESSES must be a whole number of at least 1, not {raw!r}.")
    return int(raw)


def run_pool(processes: int, queue_names: list[str], burst: bool = False, with_scheduler: bool = False) -> int:
    """Supervise ``processes`` workers (``kbf worker --processes 1``); the periodic jobs run in
    the first only. A stop signal is passed on to each child once (RQ ignores the copy a child
    also gets from the terminal's process group) and the supervisor waits for their warm stops.
    Without ``--burst`` a child that dies on its own is started again after a pause; with it,
    the supervisor returns when every child has drained the queues, with the worst exit code."""
    import os
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    kbf = str(Path(sys.executable).parent / "kbf")
    env = {**os.environ, "KB_WORKER_POOL_SIZE": str(processes), "KB_WORKER_PARENT": str(os.getpid())}

    def start(i: int):
        cmd = [kbf, "worker", "--processes", "1", "--queues", ",".join(queue_names)]
        if burst:
            cmd.append("--burst")
        if with_scheduler and i == 0:
            cmd.append("--with-scheduler")
        return subprocess.Popen(cmd, env=env)

    children = {i: start(i) for i in range(processes)}
    stopping = []

    def stop(signum, frame):
        if stopping:
            return
        stopping.append(signum)
        for child in children.values():
            if child.poll() is None:
                try:
                    child.send_signal(signal.SIGTERM)
                except ProcessLookupError:
                    pass

    old = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    codes: dict[int, int] = {}
    try:
        while children:
            for i, child in list(children.items()):
                code = child.poll()
                if code is None:
                    continue
                del children[i]
                if burst or stopping:
                    codes[i] = code
                else:
                    log.warning("worker process %d (pid %d) stopped with exit code %s; starting it again",
                                i, child.pid, code)
                    time.sleep(2)
                    if not stopping:
                        children[i] = start(i)
            time.sleep(0.2)
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
    return max((abs(c) for c in codes.values()), default=0)


def run_worker(queue_names: list[str], burst: bool = False, with_scheduler: bool = False) -> None:
    from kbframework.jobs.boot import boot
    from kbframework.jobs.queues import get_redis, queue

    boot()
    _stop_when_orphaned("KB_WORKER_PARENT")
    from kbframework import tenancy

    # a job sees the rows of the organization it was queued for (kbframework.jobs.scope); one
    # queued without an organization sees nothing unless its function declares a system scope
    tenancy.use_nobody_default(f"the worker for {', '.join(queue_names)}")
    if "ingest" in queue_names:
        from kbframework.ingest.queue import warm_up

        warm_up()  # the embedding model loads now, once, not inside the first job
    child = None
    if with_scheduler and not burst:
        child = _start_scheduler()
    from kbframework.jobs.heartbeat_worker import HeartbeatWorker

    w = HeartbeatWorker([queue(n) for n in queue_names], connection=get_redis())
    try:
        # RQ's scheduler (delayed webhook jobs, retries after their backoff) may run in every
        # worker: RQ lets one hold it at a time, and another takes over when that one dies
        w.work(burst=burst, with_scheduler=True, logging_level="WARNING")
    finally:
        if child is not None:
            _stop_scheduler(child)


def _start_scheduler():
    """RQ's CronScheduler (``kbf scheduler``) in its own process and session. Its own session
    keeps a signal sent to the worker's process group (Ctrl-C, a supervisor's stop) from
    reaching it a second time: it hears exactly one stop, from this worker, or from itself when
    it sees the worker gone (a second signal could interrupt it half-way through its shutdown)."""
    import atexit
    import os
    import subprocess
    import sys
    from pathlib import Path

    env = {**os.environ, "KB_SCHEDULER_PARENT": str(os.getpid())}
    child = subprocess.Popen([str(Path(sys.executable).parent / "kbf"), "scheduler"], start_new_session=True,
                             env=env)
    atexit.register(_stop_scheduler, child)
    return child


def _stop_scheduler(child) -> None:
    """One termination, waited for; a kill only when it does not stop in time."""
    import subprocess

    if child.poll() is not None:
        return
    child.terminate()
    try:
        child.wait(30)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait(5)


def run_cron() -> None:
    """The periodic jobs, scheduled by RQ's CronScheduler: expiry every five minutes, every
    minute a check that enqueues each source's reconciliation when its interval is due, and
    hourly the retention purge of old conversations."""
    from rq.cron import CronScheduler

    from kbframework.jobs import tasks as jobs
    from kbframework.jobs.boot import boot
    from kbframework.jobs.queues import get_redis

    boot()
    from kbframework import tenancy

    # it only queues the periodic jobs; each job declares its own scope where it runs
    tenancy.use_nobody_default("the scheduler")
    _stop_when_orphaned("KB_SCHEDULER_PARENT")
    cron = CronScheduler(connection=get_redis(), logging_level="WARNING")
    cron.register(jobs.expire_job, "reindex", interval=EXPIRY_EVERY)
    cron.register(jobs.reconcile_due_job, "sync", interval=60)
    cron.register(jobs.recover_job, "sync", interval=60)
    from kbframework.orgs.privacy import PURGE_EVERY

    cron.register(jobs.retention_job, "reindex", interval=PURGE_EVERY)
    cron.start()


def _stop_when_orphaned(variable: str) -> None:
    """Started by a worker (``KB_SCHEDULER_PARENT``) or by a pool's supervisor
    (``KB_WORKER_PARENT``), the process stops itself, once and gracefully, when its parent is
    gone, even if it died by SIGKILL and could tell no one."""
    import os
    import signal

    from kbframework.jobs.owners import when_parent_gone

    parent = os.environ.get(variable)
    if parent and parent.isdigit():
        # SIGTERM to itself: the process's own handler (RQ's, CronScheduler's) stops it cleanly
        when_parent_gone(int(parent), lambda: os.kill(os.getpid(), signal.SIGTERM), "kbf-orphan-watchdog")


class BurstWorker(NoCommandChannel, ScopedJobs, SimpleWorker):
    """``run_burst``'s in-process worker: jobs run in their organization, like ``kbf worker``'s.
    It returns when the queues are empty, so it listens for no commands."""


def run_burst(queue_names=("webhook", "ingest", "sync", "reindex")) -> None:
    """Drain the queues once in this process (tests and `make run` seeding use it). Each job
    runs in the organization it was queued for; one queued without keeps this process's scope."""
    from kbframework.jobs.queues import get_redis, queue
    from rq.registry import ScheduledJobRegistry

    r = get_redis()
    qs = [queue(n) for n in queue_names]
    for q in qs:  # delayed jobs (webhook coalescing) run now rather than after their delay
        reg = ScheduledJobRegistry(queue=q)
        for job_id in reg.get_job_ids():
            job = q.fetch_job(job_id)
            reg.remove(job_id)
            if job is not None:
                q.enqueue_job(job)
    BurstWorker(qs, connection=r).work(burst=True, logging_level="WARNING")
