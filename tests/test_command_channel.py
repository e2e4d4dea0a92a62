"""A worker's stop never waits a minute on its command channel (RQ's pubsub thread), and the
in-process drain opens none: a drain that took a minute to return once left a webhook job
scheduled past the companion test's wait."""
from __future__ import annotations

import threading
import time

from kbframework.jobs.heartbeat_worker import HeartbeatWorker
from kbframework.jobs.queues import get_redis, queue

# the pubsub thread polls for 60 s; a stop that waits for it takes about that long
HUNG = 20.0


def _wait(pred, seconds=5.0):
    end = time.monotonic() + seconds
    while not pred():
        assert time.monotonic() < end, "condition not reached"
        time.sleep(0.02)


def _channel_asleep(worker) -> None:
    """The race, made certain: the unsubscribe confirmation is read while the thread still
    runs, so it goes back to wait for a subscription (its 60-second poll)."""
    worker.subscribe()
    _wait(lambda: worker.pubsub.subscribed)
    worker.pubsub.unsubscribe()
    _wait(lambda: not worker.pubsub.subscribed)
    time.sleep(0.3)  # the thread is back in get_message, waiting on the subscription event


def test_a_worker_stop_returns_promptly_even_when_its_channel_thread_is_asleep(kb_services):
    worker = HeartbeatWorker([queue("webhook")], connection=get_redis())
    _channel_asleep(worker)
    thread = worker.pubsub_thread
    assert thread.is_alive()
    done = threading.Event()
    t0 = time.monotonic()
    threading.Thread(target=lambda: (worker.unsubscribe(), done.set()), daemon=True).start()
    assert done.wait(HUNG), "the worker's stop waited on its command channel's sleeping thread"
    assert time.monotonic() - t0 < HUNG


def test_a_worker_stop_closes_an_awake_channel(kb_services):
    worker = HeartbeatWorker([queue("webhook")], connection=get_redis())
    worker.subscribe()
    _wait(lambda: worker.pubsub.subscribed)
    assert worker.pubsub_channel_name.encode() in get_redis().pubsub_channels("rq:pubsub:*")
    worker.unsubscribe()
    assert not worker.pubsub_thread.is_alive()
    assert worker.pubsub_channel_name.encode() not in get_redis().pubsub_channels("rq:pubsub:*")


def channels_job(key: str) -> None:
    r = get_redis()
    r.set(key, b",".join(r.pubsub_channels("rq:pubsub:*")) or b"none")


def test_the_in_process_drain_listens_on_no_channel(kb_clean, kb_drain):
    key = f"kbf:test:channels:{time.time_ns()}"
    queue("ingest").enqueue("tests.test_command_channel.channels_job", key)
    kb_drain()
    assert get_redis().get(key) == b"none"  # while the job ran, no worker channel was open


def test_an_awake_channel_ends_even_when_the_stop_is_preempted_after_its_unsubscribe(kb_services):
    """The loaded-machine race, made certain: the stopping thread loses its core right after
    sending the unsubscribe, and the channel thread reads the confirmation first."""
    worker = HeartbeatWorker([queue("webhook")], connection=get_redis())
    worker.subscribe()
    _wait(lambda: worker.pubsub.subscribed)
    send = worker.pubsub.unsubscribe

    def preempted_unsubscribe(*args, **kwargs):
        result = send(*args, **kwargs)
        _wait(lambda: not worker.pubsub.subscribed)
        time.sleep(0.3)  # the channel thread has read the reply and looped back
        return result

    worker.pubsub.unsubscribe = preempted_unsubscribe
    worker.unsubscribe()
    assert not worker.pubsub_thread.is_alive()
