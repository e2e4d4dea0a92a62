"""Which embedding and LLM providers are active and installed, and a live check that each answers."""
from __future__ import annotations

import logging
import time

from kbframework.errors import KBError
from kbframework.hooks import registry

log = logging.getLogger("kbframework.review.providers")


def providers_info() -> dict:
    out = {}
    try:
        e = registry.embedder()
        out["embedding"] = {"name": e.name, "model": e.model, "dim": getattr(e, "dim", None),
                            "available": bool(e.available()), "needs_key": e.needs_key, "offline": e.is_offline}
    except KBError as exc:
        out["embedding"] = {"name": None, "error": exc.message, "available": False}
    try:
        llm = registry.llm()
        out["llm"] = {"name": llm.name, "model": llm.model, "available": bool(llm.available()),
                      "offline": llm.is_offline, "needs_key": llm.needs_key,
                      "streaming": llm.supports_streaming}
    except KBError as exc:
        out["llm"] = {"name": None, "error": exc.message, "available": False}
    out["installed"] = {"embedding": [p.name for p in registry.embedding_providers()],
                        "llm": [p.name for p in registry.llm_providers()]}
    return out


def check_providers() -> dict:
    """Ask each active provider one tiny question and report whether it answered."""
    out = providers_info()
    t0 = time.perf_counter()
    try:
        vec = registry.embedder().embed_batch(["ping"])[0]
        out["embedding"].update(ok=True, ms=round((time.perf_counter() - t0) * 1000, 1), dim_seen=len(vec))
    except Exception as exc:  # the check reports any failure of the provider
        log.warning("embedding provider check failed", exc_info=True)
        out["embedding"].update(ok=False, error=f"{type(exc).__name__}: {getattr(exc, 'message', exc)}")
    t0 = time.perf_counter()
    try:
        llm = registry.llm()
        msgs = [{"role": "system", "content": "Reply with the single word: pong."},
                {"role": "user", "content": "ping"}]
        if llm.quotes_passages:
            res = llm.complete(msgs, question="ping", passages=[
                {"n": 1, "title": "ping", "content": "Pong: the offline answerer quotes passages like this one."}])
        else:
            res = llm.complete(msgs, max_tokens=5, temperature=0)
        out["llm"].update(ok=True, ms=round((time.perf_counter() - t0) * 1000, 1),
                          reply=(res.text or "")[:80], used_llm=res.used_llm)
    except Exception as exc:  # the check reports any failure of the provider
        log.warning("LLM provider check failed", exc_info=True)
        out["llm"].update(ok=False, error=f"{type(exc).__name__}: {getattr(exc, 'message', exc)}")
    return out
