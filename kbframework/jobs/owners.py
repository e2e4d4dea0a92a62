"""Who runs a sync run, and whether they still live.

A run records its owner: the RQ job running it, or ``pid:<host>:<pid>`` when it runs in a
process of its own (the CLI, a test). The sync writes the owner; recovery later asks whether
that owner is alive before it closes the run, and the worker asks the same of a scheduler
process holding a lock. Neither depends on the other: both depend on this.
"""
from __future__ import annotations

import os
import socket
from datetime import datetime, timedelta

from kbframework.clock import utcnow

INLINE_RUN_STALE = timedelta(hours=6)  # a CLI run on another machine we cannot ask


def inline_owner() -> str:
    """The owner recorded on a sync run that runs in this process rather than a job."""
    return f"pid:{socket.gethostname()}:{os.getpid()}"


def owner_alive(connection, owner: str | None, started_at: datetime | None) -> bool:
    now = utcnow()
    if not owner:
        return started_at is not None and now - started_at < INLINE_RUN_STALE
    if owner.startswith("pid:"):
        _, host, pid = owner.split(":", 2)
        if host == socket.gethostname() and pid.isdigit():
            return pid_alive(int(pid))
        return started_at is not None and now - started_at < INLINE_RUN_STALE
    return job_alive(connection, owner)


def job_alive(connection, job_id: str) -> bool:
    """True while the job is started and its worker's heartbeat lease has not run out."""
    from rq.exceptions import NoSuchJobError
    from rq.job import Job
    from rq.registry import StartedJobRegistry

    try:
        job = Job.fetch(job_id, connection=connection)
    except NoSuchJobError:
        return False
    if job.get_status(refresh=False) != "started":
        return False
    reg = StartedJobRegistry(job.origin, connection=connection)
    now = utcnow().timestamp()
    for member, score in connection.zrange(reg.key, 0, -1, withscores=True):
        member = member.decode() if isinstance(member, bytes) else str(member)
        if member.split(":", 1)[0] == job_id and score > now:
            return True
    return False


def when_parent_gone(parent: int, action, name: str, every: float = 0.5) -> None:
    """Run ``action`` once, from a daemon thread, when this process's parent ``parent`` is gone
    (it is then re-parented), even if the parent died by SIGKILL and could tell no one."""
    import threading
    import time

    def watch():
        while os.getppid() == parent:
            time.sleep(every)
        action()

    threading.Thread(target=watch, name=name, daemon=True).start()


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` on this host still runs (a zombie does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True
