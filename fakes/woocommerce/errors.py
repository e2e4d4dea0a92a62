"""WordPress' error answers: the JSON body of a REST error, ``rest_invalid_param``, and the
HTML pages a broken or resting site serves instead of JSON."""
from __future__ import annotations

from typing import Optional

NO_ROUTE = {"code": "rest_no_route",
            "message": "No route was found matching the URL and request method",
            "data": {"status": 404}}

FATAL_MESSAGE = ('<p>There has been a critical error on this website.</p><p>'
                 '<a href="https://wordpress.org/documentation/article/faq-troubleshooting/">'
                 'Learn more about troubleshooting WordPress.</a></p>')

MAINTENANCE_HTML = ('<!DOCTYPE html><html><head><meta charset="utf-8"><title>Maintenance</title>'
                    '</head><body><h1>Briefly unavailable for scheduled maintenance. '
                    'Check back in a minute.</h1></body></html>')


class ApiError(Exception):
    def __init__(self, status: int, code: str, message: str, data: Optional[dict] = None,
                 headers: Optional[dict] = None):
        super().__init__(message)
        self.status = status
        self.body = {"code": code, "message": message, "data": {"status": status, **(data or {})}}
        self.headers = headers or {}


def invalid_params(errors: dict[str, tuple[str, str]]) -> ApiError:
    """WordPress' ``rest_invalid_param`` (WP_REST_Request::has_valid_params)."""
    return ApiError(
        400, "rest_invalid_param", "Invalid parameter(s): " + ", ".join(errors),
        {"params": {k: msg for k, (code, msg) in errors.items()},
         "details": {k: {"code": code, "message": msg, "data": None}
                     for k, (code, msg) in errors.items()}})
