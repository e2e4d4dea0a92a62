"""Retrieval and answer, one request: ``answer()`` runs the named steps of
``kbframework.retrieval.steps.STEPS`` in order, each one traced (``debug["steps"]``: name,
milliseconds, output), and returns ``{message_id, answer, cards, sources, mode, debug}``.
Evidence the gate does not trust: no LLM call, the preset's fallback text, ``debug.reason``.
"""
from __future__ import annotations

import logging
from datetime import datetime, timezone
from typing import Callable, Optional

from kbframework.config import get_config
from kbframework.db import read_session_scope, read_url, session_scope
from kbframework.errors import ValidationFailed
from kbframework.retrieval.steps import (  # noqa: F401  (the names callers have always imported from here)
    CHAR_BUDGET, INJECTION, KEYWORD_K, LLM_FAILURE_TEXT, STEPS, VECTOR_K, OrgContext, Turn, _POOL, _jsonable,
    _keyword_leg, _vocabulary, build_cards, build_sources, call_llm, embed_query, filter_context, load_context,
    _budget_stop, _log_budget_stop, passage_view, rewrite_query, run_steps, select_context, strip_unknown_links)

log = logging.getLogger("kbframework.answer")


def answer(org_id, question: str, *, mode: str | None = None, history=None, channel: str = "admin",
           user_id=None, assistant_key_id=None, session_id: str | None = None,
           now: datetime | None = None, on_token: Optional[Callable[[str], None]] = None,
           max_chars: int | None = None) -> dict:
    question = (question or "").strip() if isinstance(question, str) else None
    max_chars = max_chars or get_config().max_question_chars
    if not question:
        raise ValidationFailed("The question is empty.", code="empty_question")
    if len(question) > max_chars:
        raise ValidationFailed(f"The question is too long ({len(question)} characters; at most {max_chars}).",
                               code="question_too_long", status=413)
    t = Turn(org_id=org_id, question=question, mode=mode, history=history, channel=channel, user_id=user_id,
             assistant_key_id=assistant_key_id, session_id=session_id, now=now or datetime.now(timezone.utc),
             on_token=on_token)
    with session_scope() as s:
        if read_url() is None:
            run_steps(s, t)
        else:  # retrieval reads from the replica; everything written goes to the primary (s)
            t.writer = s
            with read_session_scope() as r:
                run_steps(r, t)
        if t.done:  # the budget stop answered
            return t.result
        t.debug["reason"] = t.result.get("reason")
        t.debug["steps"] = t.trace.as_list()
        t.debug["timings_ms"] = t.trace.timings()
        debug = _jsonable(t.debug)
        t.chat_log.retrieval_debug = debug
        t.chat_log.latency_ms = t.debug["timings_ms"]["total"]
    out = {"message_id": str(t.message_id), "answer": t.result["answer"], "cards": t.result["cards"],
           "sources": t.result["sources"], "mode": t.ctx.mode, "debug": debug}
    if t.result.get("alternatives") is not None:
        out["alternatives"] = t.result["alternatives"]
    return out
