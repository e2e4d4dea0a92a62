"""The site root: ``/`` leads to the admin (the address ``make run`` prints should not be a
404), ``/favicon.ico`` is the admin's icon."""
from __future__ import annotations

from pathlib import Path

from flask import Blueprint, current_app, redirect, send_file

bp = Blueprint("root", __name__)


def _admin_static() -> Path | None:
    admin = current_app.blueprints.get("admin")
    return Path(admin.static_folder) if admin is not None and admin.static_folder else None


@bp.get("/")
def index():
    if "admin" in current_app.blueprints:
        return redirect("/admin/")
    return {"name": "kbframework", "admin": None, "api": "/api/admin/v1", "health": "/healthz"}


@bp.get("/favicon.ico")
def favicon():
    static = _admin_static()
    if static is None or not (static / "favicon.ico").is_file():
        return ("", 404)
    resp = send_file(static / "favicon.ico", mimetype="image/vnd.microsoft.icon", max_age=7 * 86400)
    return resp
