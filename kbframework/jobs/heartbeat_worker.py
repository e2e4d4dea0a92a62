"""The worker class behind ``kbf worker``: RQ's in-process ``SimpleWorker`` (models and
plugins load once) with a heartbeat that keeps beating while a job runs.

RQ's SimpleWorker cannot beat while its only thread runs the job, so it registers every job
as alive for the job's whole timeout plus a minute: a worker killed mid-job left its job
``started`` for about an hour. Here a thread renews the job's registration every few seconds
with a short lease (``KB_JOB_HEARTBEAT_SECONDS``); when the process dies the lease runs out
and the next sweep, on any worker, retries or fails the job. The worker also sweeps often
(``KB_JOB_SWEEP_SECONDS``), not every ten minutes, and its sweep runs our recovery
(``kbframework.jobs.recovery.sweep``) after RQ's own registry cleanup.

Each job runs in the organization recorded when it was queued (``kbframework.jobs.scope``);
the process itself sees no organization's rows.
"""
from __future__ import annotations

import logging
import os
import socket
import threading

from rq import SimpleWorker
from rq.exceptions import StopRequested
from rq.scheduler import RQScheduler
from rq.timeouts import JobTimeoutException, UnixSignalDeathPenalty

from kbframework.jobs import policy
from kbframework.jobs.command_channel import BoundedCommandChannel
from kbframework.jobs.owners import pid_alive, when_parent_gone
from kbframework.jobs.policy import TimeLimitExceeded
from kbframework.jobs.scope import ScopedJobs

log = logging.getLogger("kbframework.worker")


_armed = threading.local()


class TimeLimit(UnixSignalDeathPenalty):
    """The job body's limit raises TimeLimitExceeded; other limits (callbacks) stay RQ's."""

    def __init__(self, timeout, exception=JobTimeoutException, **kwargs):
        if exception is JobTimeoutException and getattr(_armed, "job", False):
            _armed.job = False
            exception = TimeLimitExceeded
        super().__init__(timeout, exception, **kwargs)


class OwnedScheduler(RQScheduler):
    """RQ's scheduler, forked from its worker, that does not outlive it.

    The fork inherits the worker's open Redis sockets. When the worker is SIGKILLed those
    sockets stay open in the fork, so Redis keeps the worker's blocking pop as a live client
    and hands it the next job pushed to that queue, which nobody will ever read: the job is
    lost, ``queued`` for ever. So the fork first closes its copies of the worker's sockets
    (only its copies: in another process redis-py closes without shutting the connection
    down), and it stops itself, releasing its locks, as soon as the worker is gone."""

    def __init__(self, *args, inherited_pool=None, **kwargs):
        super().__init__(*args, **kwargs)
        self._inherited_pool = inherited_pool
        self._owner = os.getpid()

    def work(self):
        close_inherited_connections(self._inherited_pool)
        self._inherited_pool = None
        when_parent_gone(self._owner, self._owner_gone, "kbf-scheduler-owner")
        super().work()

    def _owner_gone(self) -> None:
        log.warning("the worker (pid %d) of scheduler pid %d is gone: stopping", self._owner, os.getpid())
        self.request_stop()


def close_inherited_connections(pool) -> None:
    """Close this process's copies of a forked parent's Redis connections. Not through
    ``pool.disconnect()``: in a child it first resets the pool, dropping them unclosed."""
    if pool is None:
        return
    conns = [*getattr(pool, "_available_connections", ()), *getattr(pool, "_in_use_connections", ()),
             *getattr(pool, "_connections", ())]
    for conn in conns:
        if conn is None:
            continue
        try:
            conn.disconnect()
        except Exception as exc:  # a socket already closed: nothing of ours to keep open
            log.debug("closing an inherited Redis connection: %s", exc)


class HeartbeatWorker(BoundedCommandChannel, ScopedJobs, SimpleWorker):
    death_penalty_class = TimeLimit

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("maintenance_interval", max(1, int(policy.sweep_seconds())))
        super().__init__(*args, **kwargs)

    def _start_scheduler(self, burst=False, logging_level="INFO", date_format=None, log_format=None):
        # RQ 3's own method, with OwnedScheduler in place of RQScheduler
        from rq.defaults import DEFAULT_LOGGING_DATE_FORMAT, DEFAULT_LOGGING_FORMAT

        self.scheduler = OwnedScheduler(
            self.queues,
            connection=self.connection,
            logging_level=logging_level if logging_level is not None else self.log.level,
            date_format=date_format or DEFAULT_LOGGING_DATE_FORMAT,
            log_format=log_format or DEFAULT_LOGGING_FORMAT,
            serializer=self.serializer,
            inherited_pool=self.connection.connection_pool,
        )
        self.scheduler.acquire_locks()
        if self.scheduler.acquired_locks:
            if burst:
                try:
                    self.scheduler.register_birth()
                    self.scheduler.enqueue_scheduled_jobs()
                finally:
                    self.scheduler.release_locks()
                    self.scheduler.register_death()
            else:
                self.scheduler.start()

    @property
    def dequeue_timeout(self) -> int:
        # wake up at least once per sweep even when no job arrives, so sweeps run on idle workers
        return max(1, min(super().dequeue_timeout, int(policy.sweep_seconds())))

    def perform_job(self, *args, **kwargs):
        _armed.job = True  # the first limit set up from here on is the job's own
        try:
            return super().perform_job(*args, **kwargs)
        finally:
            _armed.job = False

    def get_heartbeat_ttl(self, job, working_time: float = 0.0) -> int:
        return policy.heartbeat_seconds()

    def execute_job(self, job, queue):
        stop = threading.Event()
        beat = threading.Thread(target=self._beat, args=(job, stop), name="kbf-heartbeat", daemon=True)
        beat.start()
        try:
            return super().execute_job(job, queue)
        finally:
            stop.set()
            beat.join(timeout=5)

    def _beat(self, job, stop: threading.Event) -> None:
        every = max(0.5, policy.heartbeat_seconds() / 4)
        while not stop.wait(every):
            execution = next(iter(list(self.executions.values())), None)
            if execution is None or execution.job_id != job.id:
                continue
            try:
                self.maintain_heartbeats(job, execution)
            except Exception as exc:  # Redis away for a moment: the next beat tries again
                log.warning("job %s: heartbeat failed: %s", job.id, exc)

    def run_maintenance_tasks(self):
        # RQ answers a stop signal that comes while the worker is not busy by raising
        # StopRequested wherever the main thread is, often inside a sweep: it must reach RQ's
        # work loop, not the sweeps' own "never stop the worker" handlers, or the stop is lost
        try:
            release_dead_scheduler_locks(self.connection, [q.name for q in self.queues])
        except StopRequested:
            raise
        except Exception as exc:
            log.warning("could not check the scheduler locks: %s", exc)
        super().run_maintenance_tasks()
        if self.scheduler is not None and (not self.scheduler._process or not self.scheduler._process.is_alive()):
            self.scheduler.acquire_locks(auto_start=True)  # a lock freed above: take over at once
        try:
            from kbframework.jobs.recovery import sweep

            sweep(self.connection)
        except StopRequested:
            raise
        except Exception as exc:  # never let recovery stop the worker
            log.warning("recovery sweep failed: %s", exc)


def release_dead_scheduler_locks(connection, queue_names) -> list[str]:
    """RQ's scheduler (which runs retries when their backoff is over) holds a lock per queue
    for a minute after its process dies. A lock held by a scheduler process that no longer
    exists on this host is released, so a live worker's scheduler takes over at once."""
    from rq.scheduler import SCHEDULER_KEY_TEMPLATE, SCHEDULER_LOCKING_KEY_TEMPLATE

    host = socket.gethostname()
    freed = []
    for name in queue_names:
        key = SCHEDULER_LOCKING_KEY_TEMPLATE % name
        owner = connection.get(key)
        if not owner:
            continue
        owner = owner.decode() if isinstance(owner, bytes) else str(owner)
        info = connection.hgetall(SCHEDULER_KEY_TEMPLATE % owner)
        info = {(k.decode() if isinstance(k, bytes) else k): (v.decode() if isinstance(v, bytes) else v)
                for k, v in info.items()}
        if info.get("hostname") != host or not str(info.get("pid") or "").isdigit():
            continue  # another machine's scheduler, or not yet registered: its lock expires by itself
        if pid_alive(int(info["pid"])):
            continue
        # delete only if it still names the dead scheduler
        connection.eval("if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end "
                        "return 0", 1, key, owner)
        freed.append(name)
    if freed:
        log.warning("released the scheduler lock of a dead scheduler for %s", ", ".join(freed))
    return freed

