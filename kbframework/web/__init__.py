"""The Flask host: ``create_app`` wires config, services, extensions and blueprints."""
from __future__ import annotations

import logging
import os
from datetime import timedelta

from flask import Flask

from kbframework.config import get_config
from kbframework.web.extensions import cors, limiter, login_manager

log = logging.getLogger("kbframework.web")


def secure_cookies() -> bool:
    """``KB_SECURE_COOKIES``: "1" / "0" decide; unset, cookies are ``Secure`` whenever the
    configured public URL (``KB_PUBLIC_URL``) is https."""
    explicit = (os.environ.get("KB_SECURE_COOKIES") or "").strip().lower()
    if explicit in ("1", "true", "yes", "on"):
        return True
    if explicit in ("0", "false", "no", "off"):
        return False
    return (os.environ.get("KB_PUBLIC_URL") or "").strip().lower().startswith("https://")


def _scope_requests(app) -> None:
    """Row-level security: a request sees no organization's rows until it is known whose
    request it is (the signed-in user, the public key, the webhook's source)."""
    from flask import g, session
    from flask_login import current_user

    from kbframework import tenancy

    @app.before_request
    def _nobody_yet():
        g._kb_scope_token = tenancy.set_scope(tenancy.NOBODY)
        if session.get("_user_id"):  # signed in: load the session now, which scopes the request
            current_user._get_current_object()

    @app.teardown_request
    def _scope_done(_exc):
        token = g.pop("_kb_scope_token", None)
        if token is not None:
            try:
                tenancy.reset(token)
            except ValueError:  # torn down in another context (a streamed response)
                pass


def create_app(test_config: dict | None = None) -> Flask:
    cfg = get_config()
    app = Flask(__name__, template_folder=None)
    app.config.update(
        SECRET_KEY=cfg.secret("flask_secret_key", "KB_SECRET_KEY"),
        SESSION_COOKIE_HTTPONLY=True,
        SESSION_COOKIE_SAMESITE="Lax",
        SESSION_COOKIE_SECURE=secure_cookies(),
        REMEMBER_COOKIE_SECURE=secure_cookies(),
        PERMANENT_SESSION_LIFETIME=timedelta(days=cfg.session_days),
        MAX_CONTENT_LENGTH=cfg.upload_max_bytes + 1024 * 1024,
        JSON_SORT_KEYS=False,
    )
    if test_config:
        app.config.update(test_config)

    # services first: a database or Redis that is down stops start-up with a clear message
    from kbframework.db import check_database, init_engine
    from kbframework.embedded import ensure_services

    db_url, redis_url = ensure_services(cfg)
    init_engine(db_url)
    check_database()
    app.config["KB_REDIS_URL"] = redis_url
    from kbframework.jobs.queues import init_redis

    init_redis(redis_url)

    from kbframework.hooks import registry

    registry.validate_startup()

    from kbframework.jobs.queues import redis_url_for_limits

    app.config.setdefault("RATELIMIT_STORAGE_URI", redis_url_for_limits())  # shared by every process
    login_manager.init_app(app)
    limiter.init_app(app)
    cors.init_app(app, resources={r"/api/embed/*": {"origins": []}})

    from kbframework.web import api, api_embed, auth, errors, webhooks

    errors.init_app(app)
    _scope_requests(app)
    from kbframework.web import inputs

    inputs.init_app(app)  # before CSRF and every route: refuse what no route can store
    auth.init_app(app)
    app.register_blueprint(auth.bp)
    api.register(app)
    app.register_blueprint(api_embed.bp)
    from kbframework.web import embed_pages
    app.register_blueprint(embed_pages.bp)
    app.register_blueprint(webhooks.bp)
    try:
        from kbframework.admin import views as admin_views

        app.register_blueprint(admin_views.bp)
    except ImportError as exc:  # the admin pages are optional for API-only deployments
        log.warning("admin pages not available: %s", exc)
    from kbframework.web import root
    app.register_blueprint(root.bp)
    from kbframework.hooks.manager import call_per_plugin, get_plugin_manager

    call_per_plugin(get_plugin_manager(), "kb_register_blueprints", app=app)  # a raising plugin is named

    @app.get("/healthz")
    def healthz():
        from kbframework.jobs.queues import redis_ok

        return {"ok": True, "redis": redis_ok()}

    return app
