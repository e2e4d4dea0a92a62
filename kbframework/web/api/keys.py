"""Assistant keys: list, create, change, rotate with a grace period, revoke."""
from __future__ import annotations

from flask import request
from flask_login import login_required

from kbframework.db import session_scope
from kbframework.orgs import keys
from kbframework.web.api.common import blueprint, body, org_id
from kbframework.web.auth import admin_required

bp = blueprint("keys", __name__)


def public_base() -> str:
    return request.host_url.rstrip("/")


@bp.get("/keys")
@login_required
def list_keys():
    with session_scope() as s:
        usage = keys.key_usage(s, org_id())
        return {"items": [keys.key_view(k, public_base(), usage) for k in keys.list_keys(s, org_id())]}


@bp.post("/keys")
@admin_required
def post_key():
    with session_scope() as s:
        return keys.key_view(keys.create_key_from_input(s, org_id(), body()), public_base()), 201


@bp.put("/keys/<key_id>")
@admin_required
def put_key(key_id):
    with session_scope() as s:
        return keys.key_view(keys.update_key_from_input(s, org_id(), key_id, body()), public_base())


@bp.post("/keys/<key_id>/rotate")
@admin_required
def post_rotate(key_id):
    grace = keys.parse_duration(body().get("grace") or "24h")
    with session_scope() as s:
        old, new = keys.rotate_key(s, org_id(), key_id, grace)
        return {"old": keys.key_view(old, public_base()), "new": keys.key_view(new, public_base())}, 201


@bp.post("/keys/<key_id>/revoke")
@admin_required
def post_revoke(key_id):
    with session_scope() as s:
        return keys.key_view(keys.revoke_key(s, org_id(), key_id), public_base())
