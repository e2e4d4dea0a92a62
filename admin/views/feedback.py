"""Feedback review and the questions that found nothing."""
from __future__ import annotations

from flask import flash, render_template, request, url_for
from flask_login import login_required
from sqlalchemy import select

from kbframework.db import session_scope
from kbframework.models import Source
from kbframework.review import feedback as fb_service
from kbframework.review.zero_results import zero_results as zero_results_service
from kbframework.web.auth import admin_required
from kbframework.admin.views.base import back, bp, int_arg, org
from kbframework.admin.views.chat import trace_context


@bp.get("/feedback")
@login_required
def feedback():
    a = request.args
    f = {"rating": a.get("rating", ""), "state": a.get("state", ""), "from": a.get("from", ""),
         "to": a.get("to", ""), "source_type": a.get("source_type", "")}
    with session_scope() as s:
        result = fb_service.feedback_list(s, org(), rating=f["rating"] or None, date_from=f["from"] or None,
                                     date_to=f["to"] or None, source_type=f["source_type"] or None,
                                     state=f["state"] or None, page=int_arg("page", 1))
        stypes = sorted({r[0] for r in s.execute(select(Source.type).where(Source.organization_id == org()))})
    query = {k: v for k, v in f.items() if v}
    return render_template("admin_feedback.html", result=result, f=f, source_types=stypes,
                           page_url=lambda p: url_for("admin.feedback", **query, page=p))


@bp.get("/feedback/<feedback_id>")
@login_required
def feedback_detail(feedback_id):
    with session_scope() as s:
        fb, log = fb_service.get_feedback(s, org(), feedback_id)
        item = fb_service.feedback_to_dict(fb, log)
        cited = fb_service.cited_documents(s, org(), log)
        debug = log.retrieval_debug or {}
        ctx = trace_context(s, debug)
        info = {"id": str(log.id), "query": log.query, "model": log.model, "tokens_in": log.tokens_in,
                "tokens_out": log.tokens_out, "latency_ms": log.latency_ms, "reason": log.reason,
                "zero_result": log.zero_result, "channel": log.channel, "created_at": log.created_at,
                "flags": log.flags or []}
    return render_template("admin_feedback_detail.html", fb=item, cited=cited, debug=debug, ctx=ctx, log=info)


@bp.post("/feedback/<feedback_id>/addressed")
@admin_required
def feedback_addressed(feedback_id):
    flag = request.form.get("addressed", "1") == "1"
    with session_scope() as s:
        fb_service.set_addressed(s, org(), feedback_id, flag)
    flash("Marked as addressed." if flag else "Reopened.", "ok")
    return back("admin.feedback_detail", feedback_id=feedback_id)


# --------------------------------------------------------------------------- zero results


@bp.get("/zero-results")
@login_required
def zero_results():
    days = int_arg("days", 7, 1, 366)
    with session_scope() as s:
        result = zero_results_service(s, org(), days=days)
    return render_template("admin_zero_results.html", result=result, days=days)
