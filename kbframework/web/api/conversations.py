"""Admin API v1: the conversation log (list, one conversation, export, erase)."""
from __future__ import annotations

import json

from flask import Response, request
from flask_login import login_required

from kbframework.db import session_scope
from kbframework.errors import ValidationFailed
from kbframework.orgs import conversations as conv
from kbframework.web.api.common import blueprint, org_id
from kbframework.web.auth import admin_required

bp = blueprint("conversations", __name__)


def _filters(s):
    return conv.parse_filters(request.args, conv.org_timezone(s, org_id()))


def _page(name, default):
    try:
        return int(request.args.get(name) or default)
    except ValueError:
        raise ValidationFailed(f"'{name}' must be a whole number.")


@bp.get("/conversations")
@login_required
def list_conversations():
    """``?channel=&key=&from=&to=&thumbs_down=1&zero_result=1&gated=1&q=&page=&per_page=``"""
    with session_scope() as s:
        return conv.list_conversations(s, org_id(), _filters(s), page=_page("page", 1),
                                       per_page=_page("per_page", 25))


@bp.get("/conversations/export")
@login_required
def export_conversations():
    """The filtered set as ``?format=csv`` or ``json`` (one row per turn)."""
    fmt = request.args.get("format", "json")
    if fmt not in ("csv", "json"):
        raise ValidationFailed("'format' must be csv or json.")
    with session_scope() as s:
        rows = conv.export_turns(s, org_id(), _filters(s))
    if fmt == "csv":
        return Response(conv.to_csv(rows), content_type="text/csv; charset=utf-8",
                        headers={"Content-Disposition": 'attachment; filename="conversations.csv"'})
    return Response(json.dumps({"items": rows}, ensure_ascii=False), content_type="application/json")


@bp.get("/conversations/<path:conv_id>")
@login_required
def get_conversation(conv_id):
    with session_scope() as s:
        c, logs = conv.get_conversation(s, org_id(), conv_id)
        debug = {str(x.id): x.retrieval_debug or {} for x in logs}
    for t in c["turns"]:
        t["debug"] = debug[t["id"]]
    return c


@bp.delete("/conversations/<path:conv_id>")
@admin_required
def erase_conversation(conv_id):
    """Erase a visitor's conversation and its feedback (privacy request)."""
    from kbframework.errors import NotFound
    from kbframework.orgs.privacy import erase_session

    with session_scope() as s:
        res = erase_session(s, org_id(), conv_id)
    if not res["chat_logs"]:
        raise NotFound("No such conversation in this organization.")
    return res
