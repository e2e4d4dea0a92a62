"""Public embed API v1: what a visitor's browser calls. No debug data ever leaves here.

- ``GET  /api/embed/v1/<key>/config``   the widget's public settings
- ``POST /api/embed/v1/<key>/chat``     {message, history?, session_id?, stream?} → answer, cards, sources;
  with ``"stream": true`` and ``Accept: text/event-stream``: SSE ``token`` events, then ``done``
  (the same JSON) or ``error``
- ``POST /api/embed/v1/<key>/feedback`` {message_id, rating: up|down, comment?, session_id?} → chat_feedback

Every route checks the key, the origin (403) and, for chat and feedback, the rate limits (429);
see ``embed_security``. Errors are JSON ``{"error": {code, message}}`` with CORS for allowed origins.
"""
from __future__ import annotations

import contextvars
import json
import logging
import queue as _queue
import threading
import uuid

from flask import Blueprint, Response, g, request, stream_with_context
from sqlalchemy import select

from kbframework.db import session_scope
from kbframework.errors import KBError, NotFound, ValidationFailed
from kbframework.models import ChatFeedback, ChatLog
from kbframework.addresses import safe_link
from kbframework.text.inputs import bad_char
from kbframework.retrieval.prompt import LEAK_REFUSAL, LeakGuard, leaks, system_fragments
from kbframework.web import embed_security as sec

log = logging.getLogger("kbframework.embed")

bp = Blueprint("api_embed", __name__)

PUBLIC_FIELDS = ("message_id", "answer", "cards", "sources", "alternatives")
# what makes an answer traceable for a visitor: which chunk of which document, and where it lives
PUBLIC_SOURCE_FIELDS = ("n", "document_id", "document_title", "chunk_id", "source_type", "source_url",
                        "external_id", "pages", "snippet")
HIDDEN_CARD_FIELDS = {"debug", "score", "scores", "rank", "ranks", "prompt", "metadata",
                      "normalized_content", "raw_content", "retrieval_debug"}


def public_card(card: dict) -> dict | None:
    """Cards are built on the server from document columns; keep plain values and the CTA only."""
    if not isinstance(card, dict):
        return None
    out = {}
    for k, v in card.items():
        if k in HIDDEN_CARD_FIELDS or k.startswith("_"):
            continue
        if k == "cta":
            out[k] = {"label": v.get("label"), "url": safe_link(v.get("url"))} \
                if isinstance(v, dict) and safe_link(v.get("url")) else None
        elif k in ("url", "image"):
            out[k] = safe_link(v)
        elif v is None or isinstance(v, (str, int, float, bool)):
            out[k] = v
    return out


def public_sources(sources, show: bool) -> list[dict]:
    if not show:
        return []
    out = []
    for src in sources or []:
        if isinstance(src, dict):
            item = {k: src.get(k) for k in PUBLIC_SOURCE_FIELDS}
            item["source_url"] = safe_link(item.get("source_url"))  # checked again on the way out
            out.append(item)
    return out


def public_view(result: dict, session_id: str | None, show_sources: bool = True) -> dict:
    """The only shape that leaves: an allowlist of fields, no ``debug``, no prompt, no scores."""
    out = {"message_id": result.get("message_id"), "answer": result.get("answer") or "",
           "cards": [c for c in (public_card(c) for c in result.get("cards") or []) if c],
           "sources": public_sources(result.get("sources"), show_sources)}
    alt = result.get("alternatives")
    if isinstance(alt, dict) and (alt.get("cards") or alt.get("sources")):
        out["alternatives"] = {"label": alt.get("label"),
                               "cards": [c for c in (public_card(c) for c in alt.get("cards") or []) if c],
                               "sources": public_sources(alt.get("sources"), show_sources)}
    out["session_id"] = session_id
    return out


@bp.errorhandler(KBError)
def _embed_error(exc: KBError):
    """JSON errors with CORS for allowed origins (so the widget can read a 429) and Retry-After."""
    key = (request.view_args or {}).get("key")
    if g.get("kb_key") is None and isinstance(key, str) and bad_char(key) is None and exc.code in ("invalid_characters", "json_too_deep",
                                                                          "payload_too_large", "invalid_input"):
        try:  # refused at the edge, before the key was checked: still answer the allowed origin
            sec.check_request(key, count=False)
        except KBError:
            pass
    return sec.error_response(exc)


def _preflight(k):
    return sec.cors(Response(status=204), k)


@bp.route("/api/embed/<version>/<key>/config", methods=["GET", "OPTIONS"])
def config(version, key):
    _version(version)
    k = sec.check_request(key, count=False)
    if request.method == "OPTIONS":
        return _preflight(k)
    resp = sec.json_response(sec.public_config(k))
    resp.headers["Cache-Control"] = "private, max-age=60"
    return sec.cors(resp, k)


def _version(version: str) -> None:
    if version not in sec.API_VERSIONS:
        raise NotFound(f"Unknown API version '{version}'; this server speaks {', '.join(sec.API_VERSIONS)}.")


@bp.route("/api/embed/<version>/<key>/chat", methods=["POST", "OPTIONS"])
def chat(version, key):
    _version(version)
    if request.method == "OPTIONS":
        return _preflight(sec.check_request(key, count=False))
    k = sec.check_request(key, count=True)
    data = sec.read_json(k)
    limits = sec.input_limits(k)
    message = sec.check_message(data.get("message", data.get("question")), limits)
    history = sec.clean_public_history(data.get("history"), limits)
    sid = data.get("session_id")
    session_id = sid[:100] if isinstance(sid, str) and sid.strip() else str(uuid.uuid4())
    show_sources = k.settings.get("show_sources", True) is not False
    from kbframework.retrieval.answer import answer

    kwargs = dict(history=history, channel="public", assistant_key_id=k.id, session_id=session_id,
                  max_chars=limits["max_message_chars"])
    wants_stream = data.get("stream") is True and "text/event-stream" in request.headers.get("Accept", "")
    fragments = _instruction_fragments(k)
    if not wants_stream:
        result = _withhold_leak(answer(k.organization_id, message, **kwargs), fragments, leaked=None)
        return sec.cors(sec.json_response(public_view(result, session_id, show_sources)), k)

    q: _queue.Queue = _queue.Queue()
    org_id = k.organization_id

    guard = LeakGuard(fragments)

    def on_token(t):
        safe = guard.feed(t)
        if safe:
            q.put(("token", {"t": safe}))

    def work():
        try:
            res = answer(org_id, message, on_token=on_token, **kwargs)
            tail = guard.finish()
            if tail:
                q.put(("token", {"t": tail}))
            res = _withhold_leak(res, fragments, leaked=guard.leaked)
            q.put(("done", public_view(res, session_id, show_sources)))
        except KBError as exc:
            q.put(("error", {"error": {"code": exc.code, "message": exc.message}}))
        except Exception:
            log.exception("embed: streaming answer failed")
            q.put(("error", {"error": {"code": "internal_error", "message": "Something went wrong."}}))
        finally:
            q.put(None)

    ctx = contextvars.copy_context()  # the answer runs in the request's organization scope
    threading.Thread(target=ctx.run, args=(work,), daemon=True, name="kbf-embed-answer").start()

    def events():
        yield ": stream\n\n"  # opens the response at once (time to first byte)
        while True:
            item = q.get()
            if item is None:
                return
            ev, payload = item
            yield f"event: {ev}\ndata: {json.dumps(payload, default=str)}\n\n"

    resp = Response(stream_with_context(events()), mimetype="text/event-stream")
    resp.headers["Cache-Control"] = "no-cache, no-store"
    resp.headers["X-Accel-Buffering"] = "no"
    return sec.cors(resp, k)


def _instruction_fragments(k) -> list[str]:
    from kbframework.hooks import registry

    templates = [k.system_prompt or ""] + [p.prompt_template or "" for p in registry.presets().values()]
    return system_fragments(templates)


def _withhold_leak(result: dict, fragments: list[str], leaked: bool | None) -> dict:
    """The system prompt is never returned to a public caller: an answer that quotes it is
    replaced (and the chat log flagged for the admin)."""
    if leaked is None:
        leaked = leaks(result.get("answer") or "", fragments)
    if not leaked:
        return result
    log.warning("embed: an answer quoted the system prompt; withheld (message %s)", result.get("message_id"))
    try:
        from sqlalchemy import cast, literal, update
        from sqlalchemy.dialects.postgresql import JSONB

        with session_scope() as s:
            s.execute(update(ChatLog).where(ChatLog.id == uuid.UUID(str(result["message_id"]))).values(
                flags=ChatLog.flags.op("||")(cast(literal(json.dumps(["system_prompt_withheld"])), JSONB)),
                final_answer=LEAK_REFUSAL))
    except Exception as exc:  # the refusal still goes out
        log.warning("could not flag the chat log: %s", exc)
    return {**result, "answer": LEAK_REFUSAL}


@bp.route("/api/embed/<version>/<key>/feedback", methods=["POST", "OPTIONS"])
def feedback(version, key):
    _version(version)
    if request.method == "OPTIONS":
        return _preflight(sec.check_request(key, count=False))
    k = sec.check_request(key, count=True, bucket="feedback")
    data = sec.read_json(k)
    rating = data.get("rating")
    if rating not in ("up", "down"):
        raise ValidationFailed("'rating' must be 'up' or 'down'.")
    comment = data.get("comment", data.get("optional_comment"))
    if comment is not None and (not isinstance(comment, str) or len(comment) > 2000):
        raise ValidationFailed("'comment' must be text of at most 2,000 characters.")
    comment = (comment or "").strip() or None
    try:
        mid = uuid.UUID(str(data.get("message_id")))
    except ValueError:
        raise ValidationFailed("'message_id' must be the id returned with the answer.")
    sid = data.get("session_id")
    sid = sid[:100] if isinstance(sid, str) and sid.strip() else None
    with session_scope() as s:
        log_row = s.scalar(select(ChatLog).where(ChatLog.id == mid, ChatLog.organization_id == k.organization_id,
                                                 ChatLog.channel == "public"))
        if log_row is None:
            raise NotFound("No such message.")
        sid = sid or log_row.session_id
        fb = s.scalar(select(ChatFeedback).where(ChatFeedback.chat_log_id == mid,
                                                 ChatFeedback.user_session_id == sid)) if sid else None
        if fb is None:  # one rating per message and visitor session; a second click changes it
            fb = ChatFeedback(organization_id=k.organization_id, chat_log_id=mid, user_session_id=sid)
            s.add(fb)
        fb.rating, fb.comment = rating, comment
        s.flush()
        fid = str(fb.id)
    return sec.cors(sec.json_response({"ok": True, "feedback_id": fid}), k)
