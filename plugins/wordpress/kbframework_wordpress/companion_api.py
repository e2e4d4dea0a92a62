"""Routes of the WordPress companion plugin's connection (see ``companion.py`` for why).

* ``GET|POST /admin/wordpress/connect``: the admin page "Connect a WordPress site" (POST
  makes a one-time code and shows it once), with the sites connected so far.
* ``POST /api/admin/v1/wordpress/connect-codes`` (admin, CSRF): the same code as JSON.
* ``POST /api/webhooks/v1/wordpress/connect``: the plugin's exchange (no session, no CSRF:
  the code is the credential; rate-limited per address, single use).
* ``POST /api/webhooks/v1/wordpress/disconnect``: signed by the plugin; revokes the key,
  forgets the application password and the signing secret and disables the source.

Notices ("post N changed") go to the ordinary webhook receiver of the source,
``/api/webhooks/v1/wordpress/<source_id>`` (``webhook.py`` checks them).
"""
from __future__ import annotations

import importlib
import json
import secrets
from datetime import datetime, timezone

from flask import Blueprint, current_app, g, render_template, request
from flask_login import current_user, login_required
from sqlalchemy import select

from kbframework.orgs.accounts import as_uuid
from kbframework import tenancy
from kbframework.db import session_scope
from kbframework.errors import Forbidden, KBError, NotFound, ValidationFailed
from kbframework.models import AssistantKey, Organization, Setting, Source
from kbframework.security import decrypt_json, encrypt_json
from kbframework.types import SyncContext
from kbframework.web.auth import admin_required
from kbframework_wordpress import companion as cp

public_bp = Blueprint("kbf_wordpress_companion", __name__, url_prefix="/api/webhooks/v1/wordpress")
admin_api_bp = Blueprint("kbf_wordpress_codes", __name__, url_prefix="/api/admin/v1/wordpress")
admin_page_bp = Blueprint("kbf_wordpress_admin", __name__, url_prefix="/admin/wordpress",
                          template_folder="templates")

#: post types never worth syncing even when the site exposes them
SKIP_TYPES = {"attachment", "nav_menu_item", "product_variation"}


def platform_url() -> str:
    import os

    return (os.environ.get("KB_PUBLIC_URL") or request.host_url).rstrip("/")


def _org_ctx(s, org_id) -> SyncContext:
    org = s.get(Organization, org_id)
    if org is None:
        raise cp.ConnectCodeInvalid("The organization of this connect code no longer exists.")
    st = s.scalar(select(Setting).where(Setting.organization_id == org_id))
    return SyncContext(organization_id=str(org_id), timezone=org.timezone,
                       allow_private_network=bool(st and st.allow_private_network))


def connected_sites(s, org_id) -> list[Source]:
    rows = s.scalars(select(Source).where(Source.organization_id == org_id, Source.type == "wordpress")
                     .order_by(Source.created_at)).all()
    return [r for r in rows if (r.config or {}).get("companion")]


# --------------------------------------------------------------------------- connect codes


@admin_api_bp.post("/connect-codes")
@admin_required
def create_code():
    return cp.new_code(current_user.organization_id, current_user.user_id, platform_url()), 201


@admin_page_bp.context_processor
def _layout():
    """The admin layout's navigation, read from the admin blueprint's module when it has one."""
    nav = ()
    host = current_app.blueprints.get("admin")
    if host is not None:
        try:
            nav = getattr(importlib.import_module(host.import_name), "NAV", ())
        except ImportError:  # pragma: no cover - the admin package is optional
            nav = ()
    is_admin = bool(getattr(current_user, "is_admin", False))
    return {"nav": nav, "nav_active": "admin.sources", "is_admin": is_admin, "readonly": not is_admin}


@admin_page_bp.after_request
def _headers(resp):
    if resp.mimetype == "text/html":
        resp.headers.setdefault("Content-Security-Policy", "default-src 'self'; script-src 'self'; "
                                "style-src 'self'; img-src 'self' data:; frame-ancestors 'none'; "
                                "base-uri 'self'; form-action 'self'")
        resp.headers.setdefault("X-Frame-Options", "DENY")
        resp.headers.setdefault("Cache-Control", "no-store")
    return resp


@admin_page_bp.route("/connect", methods=["GET", "POST"])
@login_required
def connect_page():
    org_id = as_uuid(current_user.organization_id)
    code = None
    with session_scope() as s:
        org = s.get(Organization, org_id)
        g.org_tz = org.timezone if org else "UTC"
    if request.method == "POST":
        if not current_user.is_admin:
            raise Forbidden("Only admins can connect a site.")
        code = cp.new_code(org_id, current_user.user_id, platform_url())
    with session_scope() as s:
        sites = [{"id": str(r.id), "name": r.name, "url": (r.config or {}).get("base_url"), "status": r.status,
                  "last_notice": r.last_webhook_at, "connected_at": (r.config["companion"] or {}).get("connected_at")}
                 for r in connected_sites(s, org_id)]
    return render_template("kbf_wordpress_connect.html", code=code, sites=sites,
                           ttl_minutes=cp.CODE_TTL_SECONDS // 60)


# --------------------------------------------------------------------------- exchange


def _find_site(s, org_id, site_url: str):
    for src in s.scalars(select(Source).where(Source.organization_id == org_id, Source.type == "wordpress")):
        if str((src.config or {}).get("base_url") or "").rstrip("/") == site_url:
            return src
    return None


def _site_key(s, org_id, src, origin: str, host: str) -> AssistantKey:
    from kbframework.orgs.keys import create_key

    key_id = ((src.config or {}).get("companion") or {}).get("key_id") if src is not None else None
    k = s.get(AssistantKey, as_uuid(key_id)) if key_id else None
    if k is not None and k.organization_id == org_id and k.status == "active":
        if origin not in (k.allowed_origins or []):
            k.allowed_origins = list(k.allowed_origins or []) + [origin]
        return k
    return create_key(s, org_id, [origin], name=f"WordPress: {host}"[:200])


@public_bp.post("/connect")
def exchange():
    from kbframework.hooks import registry
    from kbframework.sources.config import create_source, update_source
    from kbframework.web import embed_security as sec

    cp.check_rate(request.remote_addr or "unknown")
    data = cp.clean_exchange(request.get_json(silent=True))
    record = cp.take_code(data["code"])  # consumed now, whatever happens next
    org_id = as_uuid(record["org"])
    tenancy.set_scope(org_id)  # the code names the organization: the rest of the request is its
    origin = cp.site_origin(data["site_url"])
    connector = registry.source_type("wordpress")
    with session_scope() as s:
        ctx = _org_ctx(s, org_id)
    probe = {"base_url": data["site_url"], "username": data["username"], "app_password": data["app_password"]}
    client = connector.client(probe, ctx)
    try:
        me = client.check_credentials()
        available = client.types()
    finally:
        client.close()
    wanted = [t for t in (data["post_types"] or ["post", "page"]) if t in available and t not in SKIP_TYPES]
    if not wanted:
        wanted = [t for t in ("post", "page") if t in available] or ["post"]
    now = datetime.now(timezone.utc).isoformat()
    signing_secret = secrets.token_urlsafe(32)
    host = origin.split("://", 1)[1]
    with session_scope() as s:
        src = _find_site(s, org_id, data["site_url"])
        key = _site_key(s, org_id, src, origin, host)
        s.flush()
        companion = {"site_url": data["site_url"], "key_id": str(key.id), "connected_at": now,
                     "app_password_uuid": data["app_password_uuid"], "plugin_version": data["plugin_version"],
                     "user": data["username"]}
        config = {**probe, "auth_type": "application_password", "webhook_secret": signing_secret,
                  "companion": companion}
        if src is None:
            config["post_types"] = wanted
            src = create_source(s, org_id, {"type": "wordpress", "config": config,
                                            "name": data["site_name"] or host})
        else:
            types = list((src.config or {}).get("post_types") or [])
            config["post_types"] = types or wanted
            src = update_source(s, org_id, src.id, {"config": config, "status": "active"})
        source_id, key_value, post_types = str(src.id), key.key, list(src.config.get("post_types") or [])
    from kbframework.jobs.queues import enqueue

    enqueue("sync", "kbframework.jobs.tasks.sync_source_job", source_id, "full")
    widget = sec.public_config(sec.load_key(key_value))
    base = record.get("url") or platform_url()
    return {"platform_url": base, "source_id": source_id, "signing_secret": signing_secret,
            "assistant_key": key_value, "notice_url": f"{base}/api/webhooks/v1/wordpress/{source_id}",
            "disconnect_url": f"{base}/api/webhooks/v1/wordpress/disconnect",
            "widget_url": f"{base}/widget.js?key={key_value}", "embed_url": f"{base}/embed/{key_value}",
            "post_types": post_types, "authenticated_as": (me or {}).get("name"),
            "widget": {"color": widget.get("color"), "welcome": widget.get("welcome"),
                       "title": widget.get("title")}}, 201


@public_bp.post("/disconnect")
def disconnect():
    import hmac

    raw = request.get_data(cache=True)
    try:
        body = json.loads(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError):
        raise ValidationFailed("Send the signed JSON body.")
    if not isinstance(body, dict) or not isinstance(body.get("source_id"), str):
        raise ValidationFailed("Send the signed JSON body with 'source_id'.")
    try:
        sid = as_uuid(body["source_id"])
    except (ValueError, TypeError, KBError):
        raise NotFound("No such connection.")
    with tenancy.system("find a connected WordPress site's source by its id"), session_scope() as s:
        found = s.get(Source, sid)
        org_id = found.organization_id if found is not None else None
    if org_id is None:
        raise NotFound("No such connection.")
    tenancy.set_scope(org_id)  # the signature below proves the caller speaks for this source
    with session_scope() as s:
        src = s.get(Source, sid)
        if src is None or src.type != "wordpress" or not (src.config or {}).get("companion"):
            raise NotFound("No such connection.")
        stored = decrypt_json(src.secrets)
        secret = stored.get("webhook_secret") or ""
        sent = request.headers.get("X-KBF-Signature") or ""
        if not secret or not hmac.compare_digest(sent.encode("utf-8", "replace"),
                                                 cp.sign(raw, secret).encode("ascii")):
            raise KBError("The signature does not match.", code="bad_signature", status=401)
        why = cp.check_fresh(body, scope=str(sid))
        if why:
            raise KBError(why, code="bad_signature", status=401)
        companion = dict(src.config["companion"])
        key_id = companion.get("key_id")
        if key_id:
            k = s.get(AssistantKey, as_uuid(key_id))
            if k is not None and k.organization_id == src.organization_id:
                k.status, k.expires_at = "revoked", datetime.now(timezone.utc)
        stored.pop("app_password", None)
        stored["webhook_secret"] = secrets.token_urlsafe(32)  # the plugin's copy no longer signs
        src.secrets = encrypt_json(stored)
        companion["disconnected_at"] = datetime.now(timezone.utc).isoformat()
        src.config = {**src.config, "companion": companion}
        src.status = "disabled"
    return {"ok": True, "disconnected": True}
