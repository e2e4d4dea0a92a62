"""The few typed errors that cross module boundaries.

Each edge turns them into a clear message: JSON in the API, a line in the CLI, a message
in the admin, a failed-job record in a worker. ``status`` is the HTTP status to use and
``code`` the machine-readable word the API body carries. Every domain error, in the host
and in the plugins, derives from ``KBError`` and declares both, so what escapes a service
is never a 500 (``tests/test_error_edges.py`` holds the code to it).
"""
from __future__ import annotations


class KBError(Exception):
    status = 400
    code = "bad_request"

    def __init__(self, message: str, *, code: str | None = None, status: int | None = None,
                 details: dict | None = None):
        super().__init__(message)
        self.message = message
        if code:
            self.code = code
        if status:
            self.status = status
        self.details = details or {}

    def as_dict(self) -> dict:
        out = {"code": self.code, "message": self.message}
        if self.details:
            out["details"] = self.details
        return out


class ValidationFailed(KBError):
    status = 400
    code = "invalid_input"


class NotFound(KBError):
    status = 404
    code = "not_found"


class Forbidden(KBError):
    status = 403
    code = "forbidden"


class ConnectorAuthError(KBError):
    status = 400
    code = "connector_auth"


class SourceUnavailable(KBError):
    status = 502
    code = "source_unavailable"


class StartupError(KBError):
    status = 503
    code = "startup_error"


class ServiceUnavailable(KBError):
    status = 503
    code = "service_unavailable"


class EmbeddingError(KBError):
    status = 503
    code = "embedding_failed"


class LLMError(KBError):
    status = 503
    code = "llm_failed"
