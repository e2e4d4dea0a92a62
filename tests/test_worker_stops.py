"""Stopping a worker, again and again, never breaks the next `kbf` command.

A real `kbf worker --with-scheduler` is started and stopped the way a supervisor or Ctrl-C
does it (a termination to its whole process group), five times; each time the scheduler
child must be gone, and a fresh `kbf services status` must find the embedded servers
healthy. The scheduler runs in its own session, so it hears one stop, not two."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

KBF = str(Path(sys.executable).parent / "kbf")


def _env(kb_services) -> dict:
    return {**os.environ, "KB_DATA_DIR": str(kb_services.data_dir), "DATABASE_URL": "", "REDIS_URL": ""}


def _children(pid: int, scheduler_only: bool = True) -> list[int]:
    """The worker's `kbf scheduler` child (not RQ's own forked helpers), or with
    ``scheduler_only=False`` every live child, read from /proc: `ps` cuts its lines to
    $COLUMNS, and a long checkout path then hides the command's end."""
    kids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            argv = (stat.parent / "cmdline").read_bytes().split(b"\0")
        except (OSError, IndexError):
            continue
        args = [a.decode(errors="replace") for a in argv if a]
        if int(fields[1]) != pid or fields[0] == "Z":
            continue
        if not scheduler_only or (len(args) >= 2 and args[-1] == "scheduler" and args[-2].endswith("kbf")):
            kids.append(int(stat.parent.name))
    return kids


def _wait_gone(pid: int, message: str, seconds: float = 10.0) -> None:
    deadline = time.time() + seconds
    while time.time() < deadline and _alive(pid):
        time.sleep(0.1)
    assert not _alive(pid), message


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is gone for our purposes
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def test_repeated_worker_stops_leave_the_services_usable(kb_services):
    env = _env(kb_services)
    for round_ in range(5):
        proc = subprocess.Popen([KBF, "worker", "--with-scheduler"], env=env, start_new_session=True,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.time() + 60
        kids = []
        while time.time() < deadline and not kids:
            kids = _children(proc.pid)
            time.sleep(0.2)
        assert kids, f"round {round_}: the scheduler child did not start"
        time.sleep(1.0 + round_ * 0.3)  # stop at a different moment of the child's start-up each time
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            raise AssertionError(f"round {round_}: the worker did not stop on one termination")
        for k in kids:
            _wait_gone(k, f"round {round_}: the scheduler child {k} outlived its worker")
        res = subprocess.run([KBF, "services", "status"], env=env, capture_output=True, text=True, timeout=120)
        assert res.returncode == 0, f"round {round_}: {res.stdout}\n{res.stderr}"
        assert "postgres: running" in res.stdout and "redis: running" in res.stdout, res.stdout


def test_a_killed_worker_takes_its_scheduler_with_it(kb_services):
    proc = subprocess.Popen([KBF, "worker", "--with-scheduler"], env=_env(kb_services), start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    kids = []
    deadline = time.time() + 60
    while time.time() < deadline and not kids:
        kids = _children(proc.pid)
        time.sleep(0.2)
    assert kids
    os.kill(proc.pid, signal.SIGKILL)  # only the worker: the kernel tells the child
    proc.wait(10)
    for k in kids:
        _wait_gone(k, "the scheduler child outlived a killed worker", seconds=30)


def marker_job(key: str) -> str:
    from kbframework.jobs.queues import get_redis

    get_redis().set(key, "ran", ex=300)
    return key


def test_a_job_queued_just_after_a_worker_is_killed_is_not_lost(kb_services):
    """RQ forks its scheduler from the worker, and the fork inherits the worker's Redis sockets.
    If the fork outlives a SIGKILLed worker, Redis still sees the worker's blocking pop as a live
    client and hands it the next job, which nobody reads: lost, ``queued`` for ever."""
    import uuid

    from rq.job import Job

    from kbframework.jobs.queues import enqueue, get_redis

    root = str(Path(__file__).resolve().parents[1])
    env = {**_env(kb_services), "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)}
    proc = subprocess.Popen([KBF, "worker", "--queues", "ingest"], env=env, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    forks = []
    try:
        deadline = time.time() + 60
        while time.time() < deadline and not forks:
            # without --with-scheduler, the worker's only child is the process RQ forks for its scheduler
            forks = _children(proc.pid, scheduler_only=False)
            time.sleep(0.2)
        assert forks, "the worker did not fork its scheduler"
        blocked = lambda: [c for c in get_redis().client_list() if c.get("cmd") in ("blpop", "bzpopmin", "blmove")]
        deadline = time.time() + 60
        while time.time() < deadline and not blocked():
            time.sleep(0.2)
        assert blocked(), "the worker never waited for a job"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        key = f"test-marker-{uuid.uuid4().hex}"
        job = enqueue("ingest", "tests.test_worker_stops.marker_job", key)
        r = subprocess.run([KBF, "worker", "--burst", "--queues", "ingest"], env=env, capture_output=True, text=True,
                           timeout=300)
        assert r.returncode == 0, r.stderr
        assert get_redis().get(key) == b"ran", \
            f"the job queued after the kill never ran: {Job.fetch(job.id, connection=get_redis()).get_status()}"
        for k in forks:
            _wait_gone(k, "RQ's scheduler fork outlived its killed worker")
    finally:
        for k in forks + [proc.pid]:
            try:
                os.kill(k, signal.SIGKILL)
            except ProcessLookupError:
                pass
