"""What a web process loads when it starts, not inside its first visitor's answer.

A fresh gunicorn worker's first answer took 388 ms against about 50 ms for the next ones (1M
chunks, a small organization): the answer steps' modules, the offline embedding model and the
WordLlama token table the question expansion and the soft-match leg read were loaded by that
first question (about 160 ms of it; the rest is the organization's own first look-ups, which
no start-up can know). ``kbframework.wsgi`` calls ``warm_up`` once per worker, before the
worker accepts requests. Then everything loaded so far goes into the garbage collector's
permanent generation (``gc.freeze``): those objects live as long as the process, and a full
collection no longer walks them (one took 34 ms in 200 questions otherwise)."""
from __future__ import annotations

import gc
import logging
import time

log = logging.getLogger("kbframework.web")


def warm_up() -> dict:
    """Load the answer pipeline, an offline embedding model (a hosted one is not called: that
    would cost a request) and the token table; then freeze what is loaded. Never fails the
    start: whatever could not be loaded loads in the first answer, as before."""
    t0 = time.perf_counter()
    done: dict = {}
    try:
        import kbframework.retrieval.answer  # noqa: F401 (the answer steps and what they import)
        from kbframework.hooks import registry

        provider = registry.embedder()
        if getattr(provider, "is_offline", False):
            provider.embed_batch(["Warm up."])
            done["embedding_model"] = provider.model
        from kbframework.retrieval.expansion import token_table

        table = token_table()
        done["token_table_words"] = len(table[2]) if table is not None else 0
    except Exception as exc:  # the first answer meets the same failure and reports it
        log.warning("the web process could not load its models when it started: %s", exc)
        done["error"] = f"{type(exc).__name__}: {exc}"
    gc.collect()
    gc.freeze()
    done["frozen_objects"] = gc.get_freeze_count()
    done["seconds"] = round(time.perf_counter() - t0, 2)
    return done
