"""Two faults in how jobs are queued and stopped, against the real Redis: a job queued "once"
by two processes at the same moment ran twice, and a stop signal that came while the worker
was sweeping was swallowed by the sweep's own error handler, so the worker kept running."""
from __future__ import annotations

import threading
import uuid

import pytest
from rq.exceptions import StopRequested


def test_two_callers_queueing_the_same_unique_job_at_once_queue_it_once(kb_services, monkeypatch):
    from kbframework.jobs import queues

    real = queues.enqueue_now

    def slow_enqueue_now(*args, **kwargs):
        # the gap between "no such job yet" and the push, widened so the race is certain
        threading.Event().wait(0.05)
        return real(*args, **kwargs)

    monkeypatch.setattr(queues, "enqueue_now", slow_enqueue_now)
    job_id = f"test-unique-{uuid.uuid4().hex}"
    start = threading.Barrier(6)
    errors = []

    def caller():
        start.wait()
        try:
            queues.enqueue_unique("ingest", job_id, "builtins.len", [])
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=caller) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    q = queues.queue("ingest")
    try:
        assert not errors
        assert q.get_job_ids().count(job_id) == 1
    finally:
        q.remove(job_id)
        queues.get_redis().delete(f"rq:job:{job_id}")


def test_a_unique_job_is_queued_again_once_the_last_one_is_gone(kb_services):
    from kbframework.jobs import queues

    job_id = f"test-unique-{uuid.uuid4().hex}"
    q = queues.queue("ingest")
    try:
        first = queues.enqueue_unique("ingest", job_id, "builtins.len", [])
        assert queues.enqueue_unique("ingest", job_id, "builtins.len", []).id == first.id
        assert q.get_job_ids().count(job_id) == 1
        q.remove(job_id)
        queues.get_redis().delete(f"rq:job:{job_id}")
        queues.enqueue_unique("ingest", job_id, "builtins.len", [])
        assert q.get_job_ids().count(job_id) == 1
    finally:
        q.remove(job_id)
        queues.get_redis().delete(f"rq:job:{job_id}")


@pytest.mark.parametrize("where", ["recovery sweep", "scheduler locks"])
def test_a_stop_that_comes_during_a_sweep_stops_the_worker(kb_services, monkeypatch, where):
    from kbframework.jobs import heartbeat_worker, recovery
    from kbframework.jobs.queues import get_redis

    def stop_now(*args, **kwargs):
        raise StopRequested()  # what RQ's signal handler raises in an idle worker's main thread

    if where == "recovery sweep":
        monkeypatch.setattr(recovery, "sweep", stop_now)
    else:
        monkeypatch.setattr(heartbeat_worker, "release_dead_scheduler_locks", stop_now)
    worker = heartbeat_worker.HeartbeatWorker(["ingest"], connection=get_redis())
    with pytest.raises(StopRequested):
        worker.run_maintenance_tasks()
