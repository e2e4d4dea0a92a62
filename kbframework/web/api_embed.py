"""Public embed API v1: what a visitor's browser calls. No debug data ever leaves here."""
from __future__ import annotations

import json
import queue as _queue
import threading
import uuid

from flask import Blueprint, Response, request, stream_with_context
from sqlalchemy import select

from kbframework.db import session_scope
from kbframework.errors import KBError, NotFound, ValidationFailed
from kbframework.models import ChatFeedback, ChatLog
from kbframework.web import embed_security as sec

bp = Blueprint("api_embed", __name__)

PUBLIC_FIELDS = ("message_id", "answer", "cards", "sources", "alternatives")
PUBLIC_SOURCE_FIELDS = ("n", "document_id", "document_title", "chunk_id", "source_type", "source_url",
                        "external_id", "pages", "snippet")


def public_view(result: dict, session_id: str | None, show_sources: bool = True) -> dict:
    out = {k: result[k] for k in PUBLIC_FIELDS if k in result}
    out["sources"] = [{k: src.get(k) for k in PUBLIC_SOURCE_FIELDS} for src in result.get("sources", [])] \
        if show_sources else []
    if out.get("alternatives"):
        alt = out["alternatives"]
        out["alternatives"] = {"label": alt["label"], "cards": alt["cards"],
                               "sources": [{k: src.get(k) for k in PUBLIC_SOURCE_FIELDS}
                                           for src in alt.get("sources", [])] if show_sources else []}
    out["session_id"] = session_id
    return out


@bp.route("/api/embed/v1/<key>/config", methods=["GET", "OPTIONS"])
def config(key):
    k = sec.check_request(key, count=False)
    if request.method == "OPTIONS":
        return sec.cors(Response(status=204), k)
    return sec.cors(sec.json_response(sec.public_config(k)), k)


@bp.route("/api/embed/v1/<key>/chat", methods=["POST", "OPTIONS"])
def chat(key):
    k = sec.check_request(key, count=request.method == "POST")
    if request.method == "OPTIONS":
        return sec.cors(Response(status=204), k)
    data = sec.read_json()
    message = data.get("message", data.get("question"))
    if not isinstance(message, str) or not message.strip():
        raise ValidationFailed("Send the visitor's message as a non-empty string in 'message'.",
                               code="empty_question")
    limits = sec.input_limits(k)
    if len(message) > limits["max_message_chars"]:
        raise ValidationFailed(f"The message is too long (at most {limits['max_message_chars']} characters).",
                               code="message_too_long", status=413)
    history = sec.clean_public_history(data.get("history"), limits)
    session_id = str(data.get("session_id") or uuid.uuid4())[:100]
    show_sources = k.settings.get("show_sources", True) is not False
    sec.check_budget(k)
    from kbframework.retrieval.answer import answer

    kwargs = dict(history=history, channel="public", assistant_key_id=k.id, session_id=session_id,
                  max_chars=limits["max_message_chars"])
    wants_stream = bool(data.get("stream")) and "text/event-stream" in request.headers.get("Accept", "")
    if not wants_stream:
        result = answer(k.organization_id, message, **kwargs)
        return sec.cors(sec.json_response(public_view(result, session_id, show_sources)), k)

    q: _queue.Queue = _queue.Queue()
    org_id = k.organization_id

    def work():
        try:
            res = answer(org_id, message, on_token=lambda t: q.put(("token", {"t": t})), **kwargs)
            q.put(("done", public_view(res, session_id, show_sources)))
        except KBError as exc:
            q.put(("error", {"error": exc.as_dict()}))
        except Exception:
            q.put(("error", {"error": {"code": "internal_error", "message": "Something went wrong."}}))
        q.put(None)

    threading.Thread(target=work, daemon=True).start()

    def events():
        while True:
            item = q.get()
            if item is None:
                return
            ev, payload = item
            yield f"event: {ev}\ndata: {json.dumps(payload)}\n\n"

    resp = Response(stream_with_context(events()), mimetype="text/event-stream")
    resp.headers["Cache-Control"] = "no-cache"
    resp.headers["X-Accel-Buffering"] = "no"
    return sec.cors(resp, k)


@bp.route("/api/embed/v1/<key>/feedback", methods=["POST", "OPTIONS"])
def feedback(key):
    k = sec.check_request(key, count=False)
    if request.method == "OPTIONS":
        return sec.cors(Response(status=204), k)
    data = sec.read_json()
    rating = data.get("rating")
    if rating not in ("up", "down"):
        raise ValidationFailed("'rating' must be 'up' or 'down'.")
    comment = data.get("comment")
    if comment is not None and (not isinstance(comment, str) or len(comment) > 2000):
        raise ValidationFailed("'comment' must be text of at most 2,000 characters.")
    try:
        mid = uuid.UUID(str(data.get("message_id")))
    except ValueError:
        raise ValidationFailed("'message_id' must be the id returned with the answer.")
    with session_scope() as s:
        log = s.scalar(select(ChatLog).where(ChatLog.id == mid, ChatLog.organization_id == k.organization_id))
        if log is None:
            raise NotFound("No such message.")
        s.add(ChatFeedback(organization_id=k.organization_id, chat_log_id=mid, rating=rating,
                           comment=(comment or "").strip() or None,
                           user_session_id=str(data.get("session_id") or "")[:100] or None))
    return sec.cors(sec.json_response({"ok": True}), k)
