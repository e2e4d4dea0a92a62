"""Login with flask-login over server-side sessions (revocable), and CSRF for session POSTs.

The cookie carries a random session token; the database keeps its hash, so an admin (or a
logout) revokes a session at once, everywhere.
"""
from __future__ import annotations

import hmac
import secrets
from dataclasses import dataclass
from functools import wraps

from flask import (Blueprint, current_app, redirect, render_template_string, request,
                   session, url_for)
from flask_login import UserMixin, current_user, login_required, login_user, logout_user

from kbframework import tenancy
from kbframework.orgs import accounts
from kbframework.config import get_config
from kbframework.db import session_scope
from kbframework.errors import Forbidden, KBError, ValidationFailed
from kbframework.models import Membership, User
from kbframework.orgs.privacy import truncate_address
from kbframework.web.extensions import login_manager

bp = Blueprint("auth", __name__)

UNSAFE = ("POST", "PUT", "PATCH", "DELETE")


@dataclass
class LoginUser(UserMixin):
    token: str
    user_id: str
    email: str
    organization_id: str
    organization_name: str
    organization_slug: str
    role: str

    def get_id(self):
        return self.token

    @property
    def is_admin(self) -> bool:
        return self.role == "admin"


@login_manager.user_loader
def _load(token: str):
    lu = _load_session(token)
    if lu is not None:
        tenancy.set_scope(lu.organization_id)  # the rest of the request sees this organization only
    return lu


def _load_session(token: str):
    with tenancy.system("find a login session by its token"), session_scope() as s:
        row = accounts.load_session(s, token)
        if row is None:
            return None
        user = s.get(User, row.user_id)
        m = s.query(Membership).filter_by(user_id=row.user_id, organization_id=row.organization_id).first()
        if user is None or not user.is_active or m is None:
            return None
        return LoginUser(token, str(user.id), user.email, str(m.organization_id), m.organization.name,
                         m.organization.slug, m.role)


@login_manager.unauthorized_handler
def _unauthorized():
    if request.path.startswith("/api/"):
        raise KBError("Log in first (your session may have expired).", code="unauthorized", status=401)
    return redirect(url_for("auth.login", next=request.full_path if request.query_string else request.path))


def csrf_token() -> str:
    tok = session.get("_csrf")
    if not tok:
        tok = session["_csrf"] = secrets.token_urlsafe(32)
    return tok


def init_app(app):
    app.jinja_env.globals["csrf_token"] = csrf_token

    @app.before_request
    def _csrf_protect():
        if request.method not in UNSAFE:
            return
        path = request.path
        if path.startswith(("/api/embed/", "/api/webhooks/")) or current_app.config.get("KB_CSRF_DISABLED"):
            return
        if path == "/api/admin/v1/login" and request.is_json:
            return  # a cross-site form cannot send JSON without a CORS preflight
        sent = request.headers.get("X-CSRF-Token") or request.form.get("csrf_token")
        expected = session.get("_csrf")
        if not expected or not sent or not hmac.compare_digest(sent, expected):
            raise KBError("The form expired or was not sent from this site (CSRF check failed). "
                          "Reload the page and try again.", code="csrf_failed", status=403)


def admin_required(fn):
    """Members are read-only; writes need the admin role."""
    @wraps(fn)
    @login_required
    def wrapper(*a, **kw):
        if not current_user.is_admin:
            raise Forbidden("Only admins can change this; members have read-only access.")
        return fn(*a, **kw)
    return wrapper


LOGIN_PAGE = """<!doctype html><html lang=en><meta charset=utf-8>
<meta name=viewport content="width=device-width,initial-scale=1"><title>Sign in · kbframework</title><link rel="icon" href="/favicon.ico" sizes="any">
<style>
body{font:16px/1.5 system-ui,sans-serif;background:#f4f5f7;margin:0;display:grid;place-items:center;min-height:100vh;color:#1f2328}
form{background:#fff;padding:2rem;border-radius:12px;box-shadow:0 4px 24px #0001;width:min(22rem,90vw)}
h1{font-size:1.3rem;margin:0 0 1rem} label{display:block;margin:.8rem 0 .2rem;font-weight:600;font-size:.9rem}
input{width:100%;box-sizing:border-box;padding:.6rem;border:1px solid #ccd;border-radius:8px;font:inherit}
button{margin-top:1.2rem;width:100%;padding:.7rem;border:0;border-radius:8px;background:#2f6fed;color:#fff;font:inherit;font-weight:600;cursor:pointer}
.err{background:#fdecea;color:#8a1c1c;padding:.6rem;border-radius:8px;margin-bottom:.5rem}
</style>
<form method=post action="{{ url_for('auth.login') }}">
<h1>Sign in to kbframework</h1>
{% if error %}<div class=err role=alert>{{ error }}</div>{% endif %}
<input type=hidden name=csrf_token value="{{ csrf_token() }}"><input type=hidden name=next value="{{ next or '' }}">
<label for=email>E-mail</label><input id=email name=email type=email autocomplete=username required value="{{ email or '' }}">
<label for=password>Password</label><input id=password name=password type=password autocomplete=current-password required>
<button type=submit>Sign in</button></form></html>"""


def _credentials(email, password) -> tuple[str, str]:
    """Both login routes take the same two strings; anything else is a clear 400."""
    if not isinstance(email, str) or not isinstance(password, str):
        raise ValidationFailed("Send 'email' and 'password' as text.", code="invalid_credentials_format")
    if len(email) > 320 or len(password) > 1024:
        raise ValidationFailed("The e-mail address or password is too long.", code="invalid_credentials_format")
    return email, password


def _throttled_login(email: str, password: str) -> LoginUser | None:
    """Throttle (per address, per account), then check the password; see login_throttle."""
    from kbframework.web import login_throttle
    from kbframework.web.embed_security import client_ip

    login_throttle.before_attempt(email, client_ip())
    lu = _do_login(email, password)
    if lu is None:
        login_throttle.record_failure(email)
    else:
        login_throttle.record_success(email)
    return lu


def _do_login(email: str, password: str) -> LoginUser | None:
    with tenancy.system("sign in: find the user's memberships, start a session"), session_scope() as s:
        user = accounts.authenticate(s, email, password)
        if user is None:
            return None
        ms = accounts.memberships(s, user.id)
        if not ms:
            return None
        m = ms[0]
        token = accounts.start_session(s, user, m.organization_id, get_config().session_days,
                                       truncate_address(request.remote_addr), request.headers.get("User-Agent"))
        return LoginUser(token, str(user.id), user.email, str(m.organization_id), m.organization.name,
                         m.organization.slug, m.role)


@bp.route("/login", methods=["GET", "POST"])
def login():
    from kbframework.web.login_throttle import LoginThrottled

    if request.method == "GET":
        nxt = request.args.get("next")
        return render_template_string(LOGIN_PAGE, next=nxt if isinstance(nxt, str) and len(nxt) < 2000 else None)
    try:
        lu = _throttled_login(*_credentials(request.form.get("email", ""), request.form.get("password", "")))
    except (LoginThrottled, ValidationFailed) as exc:
        return render_template_string(LOGIN_PAGE, error=exc.message, email=(request.form.get("email") or "")[:320]), \
            exc.status, ({"Retry-After": str(exc.retry_after)} if isinstance(exc, LoginThrottled) else {})
    if lu is None:
        return render_template_string(LOGIN_PAGE, error="Wrong e-mail or password.",
                                      email=request.form.get("email")), 401
    session.clear()
    login_user(lu)
    csrf_token()
    nxt = request.form.get("next") or ""
    return redirect(nxt if nxt.startswith("/") and not nxt.startswith("//") else "/admin/")


@bp.post("/api/admin/v1/login")
def api_login():
    data = request.get_json(silent=False)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ValidationFailed("The request body must be a JSON object with 'email' and 'password'.")
    lu = _throttled_login(*_credentials(data.get("email", ""), data.get("password", "")))
    if lu is None:
        raise KBError("Wrong e-mail or password.", code="invalid_credentials", status=401)
    session.clear()
    login_user(lu)
    return {"user": {"email": lu.email, "role": lu.role},
            "organization": {"id": lu.organization_id, "name": lu.organization_name,
                             "slug": lu.organization_slug},
            "csrf_token": csrf_token()}


@bp.route("/logout", methods=["POST"])
def logout():
    if current_user.is_authenticated:
        with session_scope() as s:
            accounts.revoke_session(s, current_user.token)
    logout_user()
    session.clear()
    if request.path.startswith("/api/"):
        return {"ok": True}
    return redirect(url_for("auth.login"))


bp.add_url_rule("/api/admin/v1/logout", "api_logout", logout, methods=["POST"])
