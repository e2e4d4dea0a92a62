"""`kbf worker --processes N`: N real worker processes under one supervisor, on the real
Redis. Two jobs that each wait for the other finish only if two processes run them at once;
a stop to the supervisor alone stops every child; a child that dies is started again; a
supervisor killed outright does not leave its children running."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
KBF = str(Path(sys.executable).parent / "kbf")


def rendezvous_job(key: str, wait: float = 30.0) -> int:
    """Adds this process to the set ``key`` and waits until two processes are in it: with one
    worker process the second job never starts while the first waits, and the set stays at one."""
    from kbframework.jobs.queues import get_redis

    r = get_redis()
    r.sadd(key, os.getpid())
    r.expire(key, 300)
    deadline = time.time() + wait
    while time.time() < deadline and r.scard(key) < 2:
        time.sleep(0.1)
    return os.getpid()


def _env(kb_services, **extra) -> dict:
    return {**os.environ, "KB_DATA_DIR": str(kb_services.data_dir), "DATABASE_URL": "", "REDIS_URL": "",
            "KB_JOB_SWEEP_SECONDS": "1", "KB_JOB_HEARTBEAT_SECONDS": "3",
            "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p), **extra}


def _worker_children(pid: int) -> list[int]:
    """The supervisor's `kbf worker --processes 1` children, read from /proc."""
    kids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            args = [a.decode(errors="replace") for a in (stat.parent / "cmdline").read_bytes().split(b"\0") if a]
        except (OSError, IndexError):
            continue
        if int(fields[1]) == pid and fields[0] != "Z" and "worker" in args and "--processes" in args:
            kids.append(int(stat.parent.name))
    return sorted(kids)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (ProcessLookupError, OSError):
        return False


def _wait(pred, seconds: float, what: str):
    deadline = time.time() + seconds
    while time.time() < deadline:
        got = pred()
        if got:
            return got
        time.sleep(0.2)
    raise AssertionError(f"waited {seconds:.0f} s for {what}")


@pytest.fixture
def pool(kb_services):
    procs = []

    def start(*args, **extra):
        p = subprocess.Popen([KBF, "worker", *args], env=_env(kb_services, **extra), start_new_session=True,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        procs.append(p)
        return p

    yield start
    for p in procs:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait(10)


def test_two_worker_processes_run_two_jobs_at_once(kb_services):
    from rq.job import Job

    from kbframework.jobs.queues import enqueue, get_redis

    key = f"test-rendezvous-{uuid.uuid4().hex}"
    jobs = [enqueue("ingest", "tests.test_worker_processes.rendezvous_job", key) for _ in range(2)]
    r = subprocess.run([KBF, "worker", "--processes", "2", "--burst", "--queues", "ingest"],
                       env=_env(kb_services), capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    pids = {Job.fetch(j.id, connection=get_redis()).return_value() for j in jobs}
    assert len(pids) == 2, f"both jobs ran in one process: {pids}"
    assert get_redis().scard(key) == 2


def test_the_pool_size_comes_from_the_environment_and_a_bad_one_is_refused(kb_services):
    r = subprocess.run([KBF, "worker", "--burst", "--queues", "ingest"], env=_env(kb_services, KB_WORKER_PROCESSES="two"),
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2
    assert "KB_WORKER_PROCESSES must be a whole number" in r.stderr and "Traceback" not in r.stderr
    r = subprocess.run([KBF, "worker", "--processes", "0"], env=_env(kb_services), capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 2 and "--processes" in r.stderr


def test_a_stop_to_the_supervisor_alone_stops_every_child(pool):
    sup = pool("--processes", "2", "--queues", "ingest")
    kids = _wait(lambda: (k := _worker_children(sup.pid)) and len(k) == 2 and k, 60, "two worker processes")
    time.sleep(3)  # the children past their start-up, in RQ's loop
    os.kill(sup.pid, signal.SIGTERM)  # not the group: a supervisor's stop to the one pid it knows
    assert sup.wait(60) == 0, sup.stderr.read()
    for k in kids:
        _wait(lambda: not _alive(k), 30, f"child {k} to stop")


def test_a_child_that_dies_is_started_again(pool):
    sup = pool("--processes", "2", "--queues", "ingest")
    kids = _wait(lambda: (k := _worker_children(sup.pid)) and len(k) == 2 and k, 60, "two worker processes")
    os.kill(kids[0], signal.SIGKILL)
    again = _wait(lambda: (k := _worker_children(sup.pid)) and len(k) == 2 and kids[0] not in k and k, 60,
                  "the dead child to be replaced")
    assert kids[1] in again and sup.poll() is None


def test_a_killed_supervisor_does_not_leave_its_children_running(pool):
    sup = pool("--processes", "2", "--queues", "ingest")
    kids = _wait(lambda: (k := _worker_children(sup.pid)) and len(k) == 2 and k, 60, "two worker processes")
    os.kill(sup.pid, signal.SIGKILL)  # only the supervisor: the children must notice by themselves
    sup.wait(10)
    for k in kids:
        _wait(lambda: not _alive(k), 60, f"orphaned child {k} to stop")
