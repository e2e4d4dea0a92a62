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

import hmac
import importlib
import json
import os
import secrets

from flask import Blueprint, current_app, g, render_template, request
from flask_login import current_user, login_required

from kbframework import (
    Forbidden,
    KBError,
    ValidationFailed,
    admin_required,
    check_connect_rate,
    connect_site,
    connected_sites,
    disconnect_site,
    new_connect_code,
    organization_context,
    take_connect_code,
    widget_settings,
)
from kbframework_wordpress import companion as cp
from kbframework_wordpress.connector import WordPressConnector

public_bp = Blueprint("kbf_wordpress_companion", __name__, url_prefix="/api/webhooks/v1/wordpress")
admin_api_bp = Blueprint("kbf_wordpress_codes", __name__, url_prefix="/api/admin/v1/wordpress")
admin_page_bp = Blueprint("kbf_wordpress_admin", __name__, url_prefix="/admin/wordpress",
                          template_folder="templates")

#: post types never worth syncing even when the site exposes them
SKIP_TYPES = {"attachment", "nav_menu_item", "product_variation"}


def platform_url() -> str:
    return (os.environ.get("KB_PUBLIC_URL") or request.host_url).rstrip("/")


# --------------------------------------------------------------------------- connect codes


@admin_api_bp.post("/connect-codes")
@admin_required
def create_code():
    return new_connect_code(current_user.organization_id, current_user.user_id, platform_url()), 201


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
    org_id = current_user.organization_id
    code = None
    g.org_tz = organization_context(org_id).timezone  # the admin layout shows times in it
    if request.method == "POST":
        if not current_user.is_admin:
            raise Forbidden("Only admins can connect a site.")
        code = new_connect_code(org_id, current_user.user_id, platform_url())
    sites = [{"id": r["id"], "name": r["name"], "url": r["config"].get("base_url"), "status": r["status"],
              "last_notice": r["last_webhook_at"], "connected_at": (r["config"]["companion"] or {}).get("connected_at")}
             for r in connected_sites(org_id, WordPressConnector.name)]
    return render_template("kbf_wordpress_connect.html", code=code, sites=sites,
                           ttl_minutes=code["ttl_seconds"] // 60 if code else None)


# --------------------------------------------------------------------------- exchange


@public_bp.post("/connect")
def exchange():
    check_connect_rate(request.remote_addr or "unknown")
    data = cp.clean_exchange(request.get_json(silent=True))
    record = take_connect_code(data["code"])  # consumed now, whatever happens next
    origin = cp.site_origin(data["site_url"])
    ctx = organization_context(record["org"])
    probe = {"base_url": data["site_url"], "username": data["username"], "app_password": data["app_password"]}
    client = WordPressConnector().client(probe, ctx)
    try:
        me = client.check_credentials()
        available = client.types()
    finally:
        client.close()
    wanted = [t for t in (data["post_types"] or ["post", "page"]) if t in available and t not in SKIP_TYPES]
    if not wanted:
        wanted = [t for t in ("post", "page") if t in available] or ["post"]
    signing_secret = secrets.token_urlsafe(32)
    host = origin.split("://", 1)[1]
    conn = connect_site(
        record["org"], WordPressConnector.name, match={"base_url": data["site_url"]}, origin=origin,
        name=data["site_name"] or host, key_name=f"WordPress: {host}",
        config={**probe, "auth_type": "application_password", "webhook_secret": signing_secret,
                "post_types": wanted},
        keep=("post_types",),  # a site connected again keeps the post types its admin chose
        connection={"site_url": data["site_url"], "app_password_uuid": data["app_password_uuid"],
                    "plugin_version": data["plugin_version"], "user": data["username"]})
    source_id, key_value = conn["source_id"], conn["assistant_key"]
    widget = widget_settings(key_value)
    base = record.get("url") or platform_url()
    return {"platform_url": base, "source_id": source_id, "signing_secret": signing_secret,
            "assistant_key": key_value, "notice_url": f"{base}/api/webhooks/v1/wordpress/{source_id}",
            "disconnect_url": f"{base}/api/webhooks/v1/wordpress/disconnect",
            "widget_url": f"{base}/widget.js?key={key_value}", "embed_url": f"{base}/embed/{key_value}",
            "post_types": list(conn["config"].get("post_types") or []), "authenticated_as": (me or {}).get("name"),
            "widget": {"color": widget.get("color"), "welcome": widget.get("welcome"),
                       "title": widget.get("title")}}, 201


@public_bp.post("/disconnect")
def disconnect():
    raw = request.get_data(cache=True)
    try:
        body = json.loads(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError):
        raise ValidationFailed("Send the signed JSON body.")
    if not isinstance(body, dict) or not isinstance(body.get("source_id"), str):
        raise ValidationFailed("Send the signed JSON body with 'source_id'.")

    def signed_by_the_site(stored: dict) -> None:
        secret = stored.get("webhook_secret") or ""
        sent = request.headers.get("X-KBF-Signature") or ""
        if not secret or not hmac.compare_digest(sent.encode("utf-8", "replace"),
                                                 cp.sign(raw, secret).encode("ascii")):
            raise KBError("The signature does not match.", code="bad_signature", status=401)
        why = cp.check_fresh(body, scope=body["source_id"])
        if why:
            raise KBError(why, code="bad_signature", status=401)

    disconnect_site(body["source_id"], WordPressConnector.name, signed_by_the_site)
    return {"ok": True, "disconnected": True}
