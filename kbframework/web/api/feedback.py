"""Answer feedback under review, and the questions that found nothing."""
from __future__ import annotations

from flask import request
from flask_login import login_required

from kbframework.clock import iso
from kbframework.db import session_scope
from kbframework.errors import ValidationFailed
from kbframework.review import feedback as fb
from kbframework.review.zero_results import zero_results
from kbframework.web.api.common import blueprint, body, int_arg, org_id
from kbframework.web.auth import admin_required

bp = blueprint("feedback", __name__)


@bp.get("/feedback")
@login_required
def list_feedback():
    a = request.args
    with session_scope() as s:
        return fb.feedback_list(s, org_id(), rating=a.get("rating") or None, date_from=a.get("from"),
                                date_to=a.get("to"), source_type=a.get("source_type") or None,
                                state=a.get("state") or None, page=int_arg(a.get("page"), 1),
                                per_page=int_arg(a.get("per_page"), 25))


@bp.get("/feedback/<feedback_id>")
@login_required
def feedback_detail(feedback_id):
    with session_scope() as s:
        item, log = fb.get_feedback(s, org_id(), feedback_id)
        out = fb.feedback_to_dict(item, log)
        out["debug"] = log.retrieval_debug or {}
        out["cited_documents"] = fb.cited_documents(s, org_id(), log)
        return out


@bp.post("/feedback/<feedback_id>/addressed")
@admin_required
def mark_addressed(feedback_id):
    flag = body().get("addressed", True)
    with session_scope() as s:
        item = fb.set_addressed(s, org_id(), feedback_id, bool(flag))
        return {"id": str(item.id), "addressed_at": iso(item.addressed_at)}


@bp.get("/zero-results")
@login_required
def list_zero_results():
    days = int_arg(request.args.get("days"), 7)
    if not 1 <= days <= 366:
        raise ValidationFailed("'days' must be between 1 and 366.")
    with session_scope() as s:
        return zero_results(s, org_id(), days=days, channel=request.args.get("channel") or None)
