"""The admin's test chat, its answer traces, and rating an answer from there."""
from __future__ import annotations

from flask_login import current_user, login_required

from kbframework.db import session_scope
from kbframework.errors import ValidationFailed
from kbframework.orgs.accounts import as_uuid
from kbframework.review import feedback as fb
from kbframework.web.api.common import blueprint, body, org_id
from kbframework.web.auth import admin_required

bp = blueprint("chat", __name__)


@bp.post("/chat")
@login_required
def chat():
    from kbframework.retrieval.answer import answer

    data = body()
    question = data.get("question", data.get("message"))
    if not isinstance(question, str):
        raise ValidationFailed("Send the question as a string in 'question'.", code="empty_question")
    history = data.get("history") or []
    if not isinstance(history, list) or not all(
            isinstance(m, dict) and m.get("role") in ("user", "assistant") and isinstance(m.get("content"), str)
            for m in history):
        raise ValidationFailed("'history' must be a list of {role: 'user'|'assistant', content: text}.")
    from kbframework.text.inputs import BadInput, fits
    from kbframework.web.links import clean_answer_links

    try:  # the same lengths as the chat_logs columns
        session_id = fits(data.get("session_id"), "session_id", 100)
        mode = fits(data.get("mode"), "mode", 30)
    except BadInput as exc:
        raise ValidationFailed(str(exc))
    return clean_answer_links(answer(org_id(), question, mode=mode or None, history=history,
                                     channel="admin", user_id=as_uuid(current_user.user_id),
                                     session_id=session_id))


@bp.get("/chat-logs/<log_id>")
@login_required
def chat_log(log_id):
    with session_scope() as s:
        return fb.chat_log_to_dict(fb.get_chat_log(s, org_id(), log_id))


@bp.post("/chat-logs/<log_id>/feedback")
@admin_required
def rate_chat_log(log_id):
    """Rate an answer from the admin test chat (the same table the public widget writes)."""
    data = body()
    with session_scope() as s:
        row = fb.rate_answer(s, org_id(), log_id, data.get("rating"), data.get("comment"),
                             session=f"admin:{current_user.user_id}")
        return {"id": str(row.id), "rating": row.rating}, 201
