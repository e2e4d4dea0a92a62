"""A worker's command channel (RQ's pubsub thread for "stop this job", "shut down") that
never holds up the worker's stop.

RQ 3 stops the channel with ``unsubscribe()``, ``thread.stop()`` and ``join(timeout=1)``,
written when ``stop()`` only cleared a flag. From redis-py 6 ``stop()`` itself joins the
thread with no bound, and the thread can be asleep for its whole 60-second poll: when the
unsubscribe confirmation arrives before the flag is cleared, the thread goes back to waiting
for a subscription that will never come. Seen as a burst drain that took a minute to return
(the WordPress companion test timed out waiting for a webhook job still scheduled behind
it) and as a worker's warm stop that took a minute longer than its job, past a supervisor's
patience. Here the join is bounded again; a thread still asleep is a daemon that closes its
own connection when it wakes.
"""
from __future__ import annotations

import logging

log = logging.getLogger("kbframework.jobs.command_channel")

STOP_WAIT_SECONDS = 1.0
# an awake thread (reading its socket) ends as soon as it reads the unsubscribe reply; under a
# fully loaded machine that read can wait a second or more for a core, so it gets longer
AWAKE_WAIT_SECONDS = 10.0


def _clear_running_flag(thread) -> None:
    try:
        thread.stop(timeout=0)
    except TypeError:  # redis-py before 6: stop() only clears the flag
        thread.stop()


def stop_channel(pubsub, thread, wait: float = STOP_WAIT_SECONDS,
                 awake_wait: float = AWAKE_WAIT_SECONDS) -> bool:
    """Stop ``thread`` and unsubscribe; True when the thread ended.

    The flag is cleared *before* the unsubscribe is sent, so the thread that reads the
    confirmation finds it cleared and ends: no race with the reply (RQ's order, unsubscribe
    then stop, lost it on a loaded machine and sent the thread back to its 60-second poll).
    A thread already waiting for a subscription is given only ``wait``.
    """
    awake = bool(pubsub.subscribed)
    _clear_running_flag(thread)
    if thread.is_alive():
        pubsub.unsubscribe()
    thread.join(timeout=awake_wait if awake else wait)
    if thread.is_alive():
        log.info("the command channel's thread is still asleep; it closes its connection when it wakes")
        return False
    pubsub.close()
    return True


class BoundedCommandChannel:
    """Mixin for an RQ worker class: its stop waits at most a second for the command channel."""

    def unsubscribe(self):
        if self.pubsub_thread:
            stop_channel(self.pubsub, self.pubsub_thread)


class NoCommandChannel:
    """Mixin for a worker that drains the queues once in the caller's process and returns: no
    one sends it commands, so it opens no channel, no thread and no connection for them."""

    def subscribe(self):
        return None
