"""Errors at the HTTP edge: JSON bodies for API routes, a plain page elsewhere, never a traceback."""
from __future__ import annotations

import logging

from flask import jsonify, render_template_string, request
from werkzeug.exceptions import HTTPException

from kbframework.errors import KBError

log = logging.getLogger("kbframework.web")

PAGE = """<!doctype html><meta charset=utf-8><title>{{ title }}</title>
<style>body{font:16px system-ui;margin:4rem auto;max-width:40rem;color:#222}</style>
<h1>{{ title }}</h1><p>{{ message }}</p><p><a href="/admin/">Back to the admin</a></p>"""


def wants_json() -> bool:
    return request.path.startswith("/api/") or request.path.startswith("/healthz") or \
        request.accept_mimetypes.best == "application/json"


def error_response(status: int, code: str, message: str, details: dict | None = None, headers=None):
    if wants_json():
        body = {"error": {"code": code, "message": message}}
        if details:
            body["error"]["details"] = details
        resp = jsonify(body)
    else:
        resp = render_template_string(PAGE, title=f"{status}", message=message)
    return resp, status, headers or {}


def init_app(app):
    @app.errorhandler(KBError)
    def _kb(exc: KBError):
        if exc.status >= 500:  # the server's failure, not the caller's: the operator must hear of it
            log.warning("%s on %s %s: %s", exc.code, request.method, request.path, exc.message)
        retry = (exc.details or {}).get("retry_after") if exc.status == 429 else None
        return error_response(exc.status, exc.code, exc.message, exc.details or None,
                              headers={"Retry-After": str(retry)} if retry else None)

    @app.errorhandler(HTTPException)
    def _http(exc: HTTPException):
        code = {400: "bad_request", 401: "unauthorized", 403: "forbidden", 404: "not_found",
                405: "method_not_allowed", 413: "payload_too_large", 415: "unsupported_media_type",
                429: "rate_limited"}.get(exc.code, "http_error")
        headers = {}
        if exc.code == 429:
            retry = getattr(exc, "retry_after", None)
            if exc.response is not None and exc.response.headers.get("Retry-After"):
                retry = exc.response.headers["Retry-After"]
            headers["Retry-After"] = str(retry or 60)
        message = exc.description or exc.name
        if exc.code == 400 and "JSON" in (message or ""):
            code = "malformed_json"
        return error_response(exc.code or 500, code, message, headers=headers)

    from redis.exceptions import ConnectionError as RedisConnectionError
    from redis.exceptions import TimeoutError as RedisTimeoutError
    from sqlalchemy.exc import OperationalError

    @app.errorhandler(OperationalError)
    def _db_down(exc):
        log.error("database unavailable on %s %s: %s", request.method, request.path, exc.orig)
        return error_response(503, "service_unavailable", "The database is not reachable; please try again shortly.",
                              headers={"Retry-After": "5"})

    @app.errorhandler(RedisConnectionError)
    @app.errorhandler(RedisTimeoutError)
    def _redis_down(exc):
        log.error("redis unavailable on %s %s: %s", request.method, request.path, exc)
        return error_response(503, "service_unavailable", "The queue service (Redis) is not reachable; please try "
                              "again shortly.", headers={"Retry-After": "5"})

    @app.errorhandler(Exception)
    def _any(exc: Exception):
        log.exception("unhandled error on %s %s", request.method, request.path)
        return error_response(500, "internal_error", "Something went wrong on our side; it has been logged.")
