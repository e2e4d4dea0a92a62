"""The one input-normalisation layer at the HTTP edge, run before every route.

Whatever the route -- admin API, public API, webhooks, admin pages -- a request is refused
with a 400 and a clear message (JSON for the APIs, a page elsewhere) when its path, query
string, form fields or JSON body contain a NUL character or a lone surrogate, when its JSON
nests deeper than ``MAX_JSON_DEPTH`` levels, or when a JSON body is larger than
``KB_MAX_JSON_BYTES`` (default 2 MB; file uploads have their own limit). A JSON body that
passed is cached, so the route's ``get_json`` does not parse it again. Database errors
caused by a value (too long for its column, not valid for its type) are a 400 too, as a
last safety net behind the routes' own checks.
"""
from __future__ import annotations

import json
import logging

from flask import request

from kbframework.config import _int
from kbframework.errors import ValidationFailed
from kbframework.text.inputs import MAX_JSON_DEPTH, BadInput, check_text, check_value, json_depth_ok

log = logging.getLogger("kbframework.web")

FORM_TYPES = ("multipart/form-data", "application/x-www-form-urlencoded")


class InvalidInput(ValidationFailed):
    status = 400
    code = "invalid_input"


def _refuse(message: str, code: str = "invalid_input", status: int = 400):
    raise InvalidInput(message, code=code, status=status)


def check_request() -> None:
    try:
        _check()
    except BadInput as exc:
        _refuse(str(exc), code="invalid_characters")


def _check() -> None:
    check_text(request.path, "The address")
    for k, v in (request.view_args or {}).items():
        if isinstance(v, str):
            check_text(v, "The address")
    for k, v in request.args.items(multi=True):
        check_text(k, "A query parameter name")
        check_text(v, f"The query parameter '{k[:40]}'")
    if request.method in ("GET", "HEAD", "OPTIONS"):
        return
    mimetype = request.mimetype or ""
    if mimetype in FORM_TYPES:
        if mimetype == "application/x-www-form-urlencoded":
            # keep the raw bytes readable after parsing: a webhook's signature is computed
            # over them (WooCommerce's ping is such a form body)
            request.get_data(cache=True)
        for k, v in request.form.items(multi=True):
            check_text(k, "A form field name")
            check_text(v, f"The form field '{k[:40]}'")
        for k, f in request.files.items(multi=True):
            if f.filename:
                check_text(f.filename, "The file name")
        return
    length = request.content_length
    limit = _int("KB_MAX_JSON_BYTES", 2 * 1024 * 1024)
    if not (request.is_json or request.path.startswith("/api/")):
        return
    if length is not None and length > limit and not request.path.startswith("/api/webhooks/"):
        _refuse(f"The request body is too large (at most {limit} bytes of JSON).", code="payload_too_large",
                status=413)
    raw = request.get_data(cache=True)
    if not raw:
        return
    if len(raw) > limit and not request.path.startswith("/api/webhooks/"):
        _refuse(f"The request body is too large (at most {limit} bytes of JSON).", code="payload_too_large",
                status=413)
    if not json_depth_ok(raw):
        _refuse(f"The JSON body is nested too deeply (at most {MAX_JSON_DEPTH} levels).", code="json_too_deep")
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        return  # not JSON: the route answers with its own "not valid JSON" message
    check_value(data)
    if request.is_json:
        request._cached_json = (data, data)  # the routes read this instead of parsing again


def init_app(app) -> None:
    app.before_request(check_request)

    from sqlalchemy.exc import DataError

    from kbframework.web.errors import error_response

    @app.errorhandler(DataError)
    def _data_error(exc):
        log.warning("a value the database refused on %s %s: %s", request.method, request.path,
                    str(getattr(exc, "orig", exc)).strip()[:300])
        return error_response(400, "invalid_input", "A value in the request is too long or not valid for its "
                                                    "field; check the lengths and formats and send it again.")
