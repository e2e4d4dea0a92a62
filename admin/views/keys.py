"""Embed keys: create, change, rotate with a grace period, revoke."""
from __future__ import annotations

from flask import flash, redirect, render_template, request, url_for
from flask_login import login_required

from kbframework.db import session_scope
from kbframework.errors import ValidationFailed
from kbframework.orgs import keys as keys_mod
from kbframework.web.auth import admin_required
from kbframework.admin.views.base import bp, org


GRACE_CHOICES = (("1h", "1 hour"), ("24h", "24 hours"), ("7d", "7 days"), ("30d", "30 days"))


@bp.get("/keys")
@login_required
def keys():
    with session_scope() as s:
        usage = keys_mod.key_usage(s, org())
        items = [keys_mod.key_view(k, request.host_url, usage) for k in keys_mod.list_keys(s, org())]
    items.sort(key=lambda k: (not k["usable"], k["status"] != "active", k["created_at"] or ""))
    return render_template("admin_keys.html", keys=items, grace_choices=GRACE_CHOICES,
                           new_key=request.args.get("new"))


def _key_form() -> dict:
    f = request.form
    data = {"name": f.get("name", ""), "allowed_origins": f.get("allowed_origins", "")}
    for k in keys_mod.LIMIT_FIELDS:
        data[k] = f.get(k, "")
    return data


@bp.post("/keys")
@admin_required
def key_create():
    with session_scope() as s:
        k = keys_mod.create_key_from_input(s, org(), _key_form())
        kid = k.id
    flash("Key created. Copy the snippet below into your website.", "ok")
    return redirect(url_for("admin.keys", new=str(kid)) + f"#key-{kid}")


@bp.post("/keys/<key_id>")
@admin_required
def key_update(key_id):
    data = _key_form()
    data["settings"] = {"show_sources": request.form.get("show_sources") == "on",
                        "position": request.form.get("position") or "bottom-right"}
    if data["settings"]["position"] not in ("bottom-right", "bottom-left"):
        raise ValidationFailed("Position must be bottom-right or bottom-left.")
    with session_scope() as s:
        keys_mod.update_key_from_input(s, org(), key_id, data)
    flash("Key saved.", "ok")
    return redirect(url_for("admin.keys") + f"#key-{key_id}")


@bp.post("/keys/<key_id>/rotate")
@admin_required
def key_rotate(key_id):
    grace = request.form.get("grace") or "24h"
    if grace not in dict(GRACE_CHOICES):
        raise ValidationFailed("Choose a grace period from the list.")
    with session_scope() as s:
        old, new = keys_mod.rotate_key(s, org(), key_id, keys_mod.parse_duration(grace or "24h"))
        nid = new.id
    flash(f"Key rotated. The old key keeps working for {dict(GRACE_CHOICES)[grace]}; put the new snippet on "
          f"your website before then.", "ok")
    return redirect(url_for("admin.keys", new=str(nid)) + f"#key-{nid}")


@bp.post("/keys/<key_id>/revoke")
@admin_required
def key_revoke(key_id):
    with session_scope() as s:
        keys_mod.revoke_key(s, org(), key_id)
    flash("Key revoked: it stops working now.", "ok")
    return redirect(url_for("admin.keys"))
