"""The admin blueprint and what every page shares: security headers, error pages, the
organization's time zone, template filters, the navigation, and small form helpers."""
from __future__ import annotations

import json
from datetime import datetime, timezone
from zoneinfo import ZoneInfo

from flask import Blueprint, g, redirect, render_template, request, url_for
from flask_login import current_user
from werkzeug.exceptions import HTTPException

from kbframework.clock import utcnow
from kbframework.db import session_scope
from kbframework.errors import KBError, ValidationFailed
from kbframework.models import Organization
from kbframework.orgs.accounts import as_uuid
from kbframework.types import DOCUMENT_ROLES

bp = Blueprint("admin", __name__, url_prefix="/admin", template_folder="../templates",
               static_folder="../static")

NAV = (
    ("admin.dashboard", "Dashboard", "home"),
    ("admin.sources", "Sources", "plug"),
    ("admin.documents", "Documents", "file"),
    ("admin.knowledge", "Knowledge", "pen"),
    ("admin.chat", "Test chat", "chat"),
    ("admin.conversations", "Conversations", "talk"),
    ("admin.feedback", "Feedback", "thumb"),
    ("admin.zero_results", "Zero results", "search"),
    ("admin.keys", "Embed keys", "key"),
    ("admin.usage", "Usage", "chart"),
    ("admin.settings", "Settings", "gear"),
)
SECTION_OF = {  # which nav item an endpoint belongs to
    "admin.source_new": "admin.sources", "admin.source_detail": "admin.sources",
    "admin.document_detail": "admin.documents", "admin.knowledge_new": "admin.knowledge",
    "admin.knowledge_edit": "admin.knowledge", "admin.feedback_detail": "admin.feedback",
    "admin.conversation_detail": "admin.conversations",
}
CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: https: http:; "
       "connect-src 'self'; frame-ancestors 'none'; base-uri 'self'; form-action 'self'")


def org():
    return as_uuid(current_user.organization_id)


# --------------------------------------------------------------------------- request plumbing


@bp.before_request
def _load_org():
    g.org_tz = "UTC"
    if request.endpoint != "admin.static" and current_user.is_authenticated:
        with session_scope() as s:
            o = s.get(Organization, org())
            if o is not None:
                g.org_tz = o.timezone


@bp.after_request
def _headers(resp):
    if resp.mimetype == "text/html":
        resp.headers.setdefault("Content-Security-Policy", CSP)
        resp.headers.setdefault("X-Frame-Options", "DENY")
        resp.headers.setdefault("Referrer-Policy", "same-origin")
        resp.headers.setdefault("Cache-Control", "no-store")
    resp.headers.setdefault("X-Content-Type-Options", "nosniff")
    return resp


@bp.errorhandler(KBError)
def _kb_error(exc: KBError):
    if not current_user.is_authenticated:
        from kbframework.web.errors import error_response

        return error_response(exc.status, exc.code, exc.message)
    return render_template("admin_error.html", status=exc.status, message=exc.message,
                           details=exc.details or None), exc.status


@bp.errorhandler(HTTPException)
def _http_error(exc: HTTPException):
    messages = {404: "There is nothing here, or it belongs to another organization.",
                405: "That action cannot be done this way."}
    if not current_user.is_authenticated:
        from kbframework.web.errors import error_response

        return error_response(exc.code or 500, "http_error", exc.description or exc.name)
    return render_template("admin_error.html", status=exc.code,
                           message=messages.get(exc.code, exc.description)), exc.code


@bp.app_template_filter("dt")
def _dt(value, fmt: str = "%d %b %Y, %H:%M"):
    """A time in the organization's time zone."""
    if not value:
        return "—"
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            return value
    if isinstance(value, datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=timezone.utc)
        value = value.astimezone(ZoneInfo(getattr(g, "org_tz", "UTC") or "UTC"))
    return value.strftime(fmt)


@bp.app_template_filter("ago")
def _ago(value):
    if not value:
        return "never"
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            return value
    if value.tzinfo is None:
        value = value.replace(tzinfo=timezone.utc)
    secs = (utcnow() - value).total_seconds()
    if secs < 0:
        secs = -secs
        for n, unit in ((86400, "day"), (3600, "hour"), (60, "minute")):
            if secs >= n:
                k = int(secs // n)
                return f"in {k} {unit}{'s' if k != 1 else ''}"
        return "in a moment"
    for n, unit in ((86400 * 30, "month"), (86400, "day"), (3600, "hour"), (60, "minute")):
        if secs >= n:
            k = int(secs // n)
            return f"{k} {unit}{'s' if k != 1 else ''} ago"
    return "just now"


@bp.app_template_filter("num")
def _num(value):
    try:
        return f"{int(value):,}"
    except (TypeError, ValueError):
        return value


@bp.app_template_filter("money")
def _money(value):
    v = float(value or 0)
    return f"${v:,.4f}" if 0 < v < 1 else f"${v:,.2f}"


@bp.app_template_filter("tojson_pretty")
def _tojson_pretty(value):
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


@bp.app_context_processor
def _layout_context():
    if not request.blueprint == "admin":
        return {}
    active = SECTION_OF.get(request.endpoint, request.endpoint)
    is_admin = bool(getattr(current_user, "is_admin", False))
    return {"nav": NAV, "nav_active": active, "is_admin": is_admin, "readonly": not is_admin,
            "roles": DOCUMENT_ROLES}


def back(default_endpoint: str, **kw):
    """Redirect to the form's ``next`` (same-site paths only) or a default page."""
    nxt = request.form.get("next") or request.args.get("next") or ""
    if nxt.startswith("/") and not nxt.startswith("//"):
        return redirect(nxt)
    return redirect(url_for(default_endpoint, **kw))


def int_arg(name: str, default: int, lo: int = 1, hi: int = 10_000) -> int:
    try:
        v = int(request.args.get(name) or default)
    except ValueError:
        raise ValidationFailed(f"'{name}' must be a whole number.")
    return max(lo, min(hi, v))



def require_admin():
    if not current_user.is_admin:
        from kbframework.errors import Forbidden

        raise Forbidden("Only admins can change this; members have read-only access.")


def opt_int(v, label):
    if v in (None, ""):
        return None
    try:
        n = int(v)
    except ValueError:
        raise ValidationFailed(f"{label} must be a whole number of minutes.")
    if n < 0:
        raise ValidationFailed(f"{label} cannot be negative.")
    return n or None


def field_errors(exc: KBError) -> dict:
    det = exc.details or {}
    out = {}
    for k, v in det.items():
        if isinstance(v, dict):
            out[k] = [f"{kk}: {vv}" for kk, vv in v.items()]
        elif isinstance(v, list):
            out[k] = [str(x) for x in v]
        else:
            out[k] = [str(v)]
    return out
