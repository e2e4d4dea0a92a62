"""The conversations page: every conversation, newest first, with filters; a conversation as
its turns, each with its trace and feedback; export of the filtered set; erasing one on a
visitor's request."""
from __future__ import annotations

import json

from flask import Response, flash, redirect, render_template, request, url_for
from flask_login import login_required
from sqlalchemy import select

from kbframework.db import session_scope
from kbframework.models import AssistantKey
from kbframework.orgs import conversations as conv

from kbframework.admin.views.base import bp, int_arg, org
from kbframework.admin.views.chat import trace_context
from kbframework.web.auth import admin_required


def _filters(s):
    return conv.parse_filters(request.args, conv.org_timezone(s, org()))


@bp.get("/conversations")
@login_required
def conversations():
    with session_scope() as s:
        f = _filters(s)
        result = conv.list_conversations(s, org(), f, page=int_arg("page", 1))
        keys = [{"id": str(k.id), "name": k.name, "status": k.status} for k in s.scalars(
            select(AssistantKey).where(AssistantKey.organization_id == org()).order_by(AssistantKey.created_at))]
    query = conv.public_filters(f)
    return render_template("admin_conversations.html", result=result, f=f, keys=keys, query=query,
                           channels=conv.CHANNELS,
                           page_url=lambda p: url_for("admin.conversations", **query, page=p))


@bp.get("/conversations/export.<fmt>")
@login_required
def conversations_export(fmt):
    if fmt not in ("csv", "json"):
        from kbframework.errors import NotFound

        raise NotFound("Export as .csv or .json.")
    with session_scope() as s:
        rows = conv.export_turns(s, org(), _filters(s))
    if fmt == "csv":
        body, mime = conv.to_csv(rows), "text/csv; charset=utf-8"
    else:
        body, mime = json.dumps(rows, ensure_ascii=False, indent=1), "application/json"
    return Response(body, mimetype=mime.split(";")[0], content_type=mime,
                    headers={"Content-Disposition": f'attachment; filename="conversations.{fmt}"'})


@bp.get("/conversations/view")
@login_required
def conversation_detail():
    conv_id = (request.args.get("id") or "").strip()
    with session_scope() as s:
        c, logs = conv.get_conversation(s, org(), conv_id)
        traces = {}
        for log in logs:
            debug = log.retrieval_debug or {}
            traces[str(log.id)] = {"debug": debug, "ctx": trace_context(s, debug), "log": {
                "id": str(log.id), "query": log.query, "model": log.model, "tokens_in": log.tokens_in,
                "tokens_out": log.tokens_out, "latency_ms": log.latency_ms, "reason": log.reason,
                "zero_result": log.zero_result, "channel": log.channel, "created_at": log.created_at,
                "flags": log.flags or []}}
    return render_template("admin_conversation.html", c=c, traces=traces, back=request.args.get("back") or "")


@bp.post("/conversations/erase")
@admin_required
def conversation_erase():
    from kbframework.orgs.privacy import erase_session

    conv_id = (request.form.get("id") or "").strip()
    with session_scope() as s:
        res = erase_session(s, org(), conv_id)
    if res["chat_logs"]:
        flash(f"Conversation erased: {res['chat_logs']} turn{'s' if res['chat_logs'] != 1 else ''} and "
              f"{res['feedback']} feedback deleted.", "ok")
    else:
        flash("Nothing to erase: that conversation is already gone.", "error")
    return redirect(url_for("admin.conversations"))
