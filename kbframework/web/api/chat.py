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
    if not isinstance(history, list):
        raise ValidationFailed("'history' must be a list of {role, content}.")
    from kbframework.web.links import clean_answer_links

    return clean_answer_links(answer(org_id(), question, mode=data.get("mode") or None, history=history,
                                     channel="admin", user_id=as_uuid(current_user.user_id),
                                     session_id=data.get("session_id")))


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
