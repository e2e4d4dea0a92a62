"""Protections of the public API (§12), all on the server:

- the key: unknown → 404; rotated and past its grace period → 401;
- origin allowlist on ``Origin`` (``Referer`` when Origin is absent); an empty list refuses
  everyone; CORS answers only an allowed origin, never ``*``;
- rate limits per key (minute and day) and per visitor IP (minute), counted in Redis so
  every web process shares them; 429 with ``Retry-After``;
- input caps on the message and the history.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from urllib.parse import urlsplit

from flask import Response, g, request
from sqlalchemy import select

from kbframework.db import session_scope
from kbframework.errors import KBError, NotFound, ValidationFailed
from kbframework.models import AssistantKey, Organization, Setting

DEFAULT_LIMITS = {"max_message_chars": 1000, "max_history_messages": 6, "max_history_chars": 6000}


@dataclass
class KeyInfo:
    id: object
    organization_id: object
    key: str
    origins: list[str]
    per_minute: int
    per_day: int
    per_ip_minute: int
    settings: dict = field(default_factory=dict)
    org_name: str = ""
    branding: dict = field(default_factory=dict)
    matched_origin: str | None = None


def normalize_origin(value: str | None) -> str | None:
    if not value:
        return None
    parts = urlsplit(value.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    port = f":{parts.port}" if parts.port and parts.port not in (80, 443) else ""
    return f"{parts.scheme}://{parts.hostname.lower()}{port}"


def load_key(key: str) -> KeyInfo:
    if not key or len(key) > 80:
        raise NotFound("Unknown assistant key.")
    with session_scope() as s:
        row = s.scalar(select(AssistantKey).where(AssistantKey.key == key))
        if row is None:
            raise NotFound("Unknown assistant key.")
        now = datetime.now(timezone.utc)
        if row.status == "revoked" or (row.status == "rotated" and (row.expires_at is None or row.expires_at <= now)):
            raise KBError("This assistant key has been rotated; update the embed snippet.",
                          code="key_expired", status=401)
        org = s.get(Organization, row.organization_id)
        st = s.scalar(select(Setting).where(Setting.organization_id == row.organization_id))
        return KeyInfo(row.id, row.organization_id, row.key, [o for o in (normalize_origin(x) for x in row.allowed_origins) if o],
                       row.rate_per_minute, row.rate_per_day, row.rate_per_ip_minute, row.settings or {},
                       org.name, ((st.extra if st else {}) or {}).get("branding", {}))


def request_origin() -> str | None:
    origin = request.headers.get("Origin")
    if origin and origin != "null":
        return normalize_origin(origin)
    return normalize_origin(request.headers.get("Referer"))


def client_ip() -> str:
    return request.remote_addr or "unknown"


def check_request(key: str, count: bool = True) -> KeyInfo:
    k = load_key(key)
    origin = request_origin()
    if origin is None or origin not in k.origins:
        raise KBError("This website is not allowed to use this assistant key.", code="origin_not_allowed",
                      status=403)
    k.matched_origin = origin
    g.kb_key = k
    if count:
        enforce_rate_limits(k)
    return k


def _hit(r, key: str, window: int) -> tuple[int, int]:
    bucket = int(time.time() // window)
    rk = f"kbf:rl:{key}:{window}:{bucket}"
    pipe = r.pipeline()
    pipe.incr(rk)
    pipe.expire(rk, window + 5)
    n = pipe.execute()[0]
    retry = window - int(time.time() % window)
    return n, max(1, retry)


def enforce_rate_limits(k: KeyInfo) -> None:
    from kbframework.queues import get_redis

    r = get_redis()
    checks = [(f"ip:{k.id}:{client_ip()}", 60, k.per_ip_minute, "visitor"),
              (f"key:{k.id}", 60, k.per_minute, "key"),
              (f"key:{k.id}", 86400, k.per_day, "key (daily)")]
    for name, window, limit, what in checks:
        if limit <= 0:
            continue
        n, retry = _hit(r, name, window)
        if n > limit:
            raise KBError(f"Too many messages for this {what}; try again in {retry} s.",
                          code="rate_limited", status=429, details={"retry_after": retry})


def cors(resp: Response, k: KeyInfo) -> Response:
    if k.matched_origin and request.headers.get("Origin"):
        resp.headers["Access-Control-Allow-Origin"] = k.matched_origin
        resp.headers["Vary"] = "Origin"
        resp.headers["Access-Control-Allow-Methods"] = "GET, POST, OPTIONS"
        resp.headers["Access-Control-Allow-Headers"] = "Content-Type, Accept"
        resp.headers["Access-Control-Max-Age"] = "600"
    return resp


def json_response(data: dict, status: int = 200) -> Response:
    return Response(json.dumps(data, default=str), status=status, mimetype="application/json")


def read_json() -> dict:
    data = request.get_json(silent=True)
    if data is None:
        raise KBError("The request body is not valid JSON.", code="malformed_json")
    if not isinstance(data, dict):
        raise ValidationFailed("The request body must be a JSON object.")
    return data


def input_limits(k: KeyInfo) -> dict:
    return {**DEFAULT_LIMITS, **{x: int(v) for x, v in (k.settings.get("limits") or {}).items()
                                 if x in DEFAULT_LIMITS}}


def clean_public_history(history, limits: dict) -> list[dict]:
    if history is None:
        return []
    if not isinstance(history, list):
        raise ValidationFailed("'history' must be a list of {role, content}.")
    if len(history) > limits["max_history_messages"] * 4:
        raise ValidationFailed("The history is too long.", code="history_too_long", status=413)
    out = []
    for m in history[-limits["max_history_messages"]:]:
        if isinstance(m, dict) and m.get("role") in ("user", "assistant") and isinstance(m.get("content"), str):
            out.append({"role": m["role"], "content": m["content"][:2000]})
    if sum(len(m["content"]) for m in out) > limits["max_history_chars"]:
        raise ValidationFailed("The history is too large.", code="history_too_long", status=413)
    return out


def public_config(k: KeyInfo) -> dict:
    b, st = k.branding or {}, k.settings or {}
    return {"title": st.get("title") or b.get("title") or k.org_name,
            "color": st.get("color") or b.get("color") or "#2f6fed",
            "logo": st.get("logo") or b.get("logo"),
            "welcome": st.get("welcome", b.get("welcome", f"Hi! Ask me anything about {k.org_name}.")),
            "placeholder": st.get("placeholder") or "Type your question…",
            "show_sources": st.get("show_sources", True) is not False,
            "position": st.get("position") or "bottom-right", "api": "v1"}


def check_budget(k: KeyInfo) -> None:
    """The hard budget stop (usage controls); a no-op until a budget is set."""
    try:
        from kbframework.budget import enforce_public_budget
    except ImportError:
        return
    enforce_public_budget(k.organization_id)
