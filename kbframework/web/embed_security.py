"""Protections of the public API, all enforced on the server:

- the key: unknown → 404; rotated and past its grace period (or revoked) → 401;
- origin allowlist on ``Origin`` (``Referer`` only when Origin is absent; ``Origin: null`` is a
  mismatch); an empty list refuses every origin; CORS answers only the matched origin, never ``*``.
  The app's own origin counts as allowed for a key that allows at least one website: that is the
  full-page embed (``/embed/<key>``), itself protected by ``frame-ancestors``;
- rate limits per key (per minute and per rolling day) and per visitor IP (per minute), as a
  sliding-window log in Redis (one atomic Lua script), so every web process shares them and the
  counts are exact; a refused request does not use up quota; 429 with ``Retry-After``;
- input caps: body size, message length, history length and size.
"""
from __future__ import annotations

import json
import logging
import os
import re
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone

from flask import Response, g, request
from sqlalchemy import select

from kbframework.db import session_scope
from kbframework.errors import KBError, NotFound, ValidationFailed
from kbframework.models import AssistantKey, Organization, Setting
from kbframework.orgs.origins import DEFAULT_LIMITS, LIMIT_RANGES, normalize_origin  # noqa: F401

log = logging.getLogger("kbframework.embed")

API_VERSIONS = ("v1",)
ASSISTANT_TURN_CHARS = 1500       # an assistant turn in the history is cut to this (it is our own text)
FEEDBACK_PER_IP_MINUTE = 30


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
    status: str = "active"
    matched_origin: str | None = None
    system_prompt: str | None = None  # the organization's own; only ever used to keep it from leaking


class OriginNotAllowed(KBError):
    status = 403
    code = "origin_not_allowed"


class RateLimited(KBError):
    status = 429
    code = "rate_limited"

    def __init__(self, message: str, retry_after: int):
        super().__init__(message, details={"retry_after": retry_after})
        self.retry_after = retry_after


# --------------------------------------------------------------------------- keys


def load_key(key: str) -> KeyInfo:
    if not key or len(key) > 80:
        raise NotFound("Unknown assistant key.")
    from flask import has_request_context

    from kbframework import tenancy

    with tenancy.system("find a public assistant key by its value"), session_scope() as s:
        info = _load_key(s, key)
    if has_request_context():
        tenancy.set_scope(info.organization_id)  # from here on the request is that organization's
    return info


def _load_key(s, key: str) -> KeyInfo:
    """The key row and what the widget needs from its organization."""
    row = s.scalar(select(AssistantKey).where(AssistantKey.key == key))
    if row is None:
        raise NotFound("Unknown assistant key.")
    now = datetime.now(timezone.utc)
    if row.status == "revoked" or (row.status == "rotated" and (row.expires_at is None or row.expires_at <= now)):
        raise KBError("This assistant key has been replaced; update the embed snippet with the new key.",
                      code="key_expired", status=401)
    org = s.get(Organization, row.organization_id)
    st = s.scalar(select(Setting).where(Setting.organization_id == row.organization_id))
    origins = [o for o in (normalize_origin(x) for x in (row.allowed_origins or [])) if o]
    return KeyInfo(row.id, row.organization_id, row.key, origins,
                   row.rate_per_minute, row.rate_per_day, row.rate_per_ip_minute, dict(row.settings or {}),
                   org.name, branding_of(st), row.status,
                   system_prompt=st.system_prompt if st else None)


def branding_of(st) -> dict:
    """The organization's widget branding settings as the widget's ``{title, color, logo, welcome}``."""
    if st is None:
        return {}
    out = {k: getattr(st, f"branding_{k}", None) for k in ("title", "color", "logo", "welcome")}
    return {k: v for k, v in out.items() if v}


# --------------------------------------------------------------------------- origins


def request_origin() -> str | None:
    """The calling site: ``Origin``, else (only when Origin is absent) ``Referer``."""
    origin = request.headers.get("Origin")
    if origin is not None:
        return normalize_origin(origin)  # "null" (sandboxed frame, file://) → None → refused
    return normalize_origin(request.headers.get("Referer"))


def self_origins() -> set[str]:
    """This server's own origin(s): the host the browser asked for (http and https, so a
    TLS-terminating proxy needs no extra setting) and ``KB_PUBLIC_URL`` when set."""
    out = set()
    host = request.host
    for scheme in ("http", "https"):
        o = normalize_origin(f"{scheme}://{host}")
        if o:
            out.add(o)
    public = normalize_origin(os.environ.get("KB_PUBLIC_URL"))
    if public:
        out.add(public)
    return out


def origin_allowed(k: KeyInfo, origin: str | None) -> bool:
    if origin is None or not k.origins:
        return False
    return origin in k.origins or origin in self_origins()


def client_ip() -> str:
    """The visitor's IP. Behind N reverse proxies set ``KB_TRUSTED_PROXY_HOPS=N``: the address
    the nearest trusted proxy saw is taken from ``X-Forwarded-For``."""
    try:
        hops = int(os.environ.get("KB_TRUSTED_PROXY_HOPS") or 0)
    except ValueError:
        hops = 0
    if hops > 0:
        chain = [x.strip() for x in request.headers.get("X-Forwarded-For", "").split(",") if x.strip()]
        if len(chain) >= hops:
            return chain[-hops]
    return request.remote_addr or "unknown"


def check_request(key: str, count: bool = True, bucket: str = "chat") -> KeyInfo:
    """Key, origin and (when ``count``) rate limits. Order: unknown key 404, expired 401,
    origin 403, then 429."""
    k = load_key(key)
    origin = request_origin()
    if not origin_allowed(k, origin):
        log.info("embed: refused origin %r for key %s", request.headers.get("Origin") or request.headers.get("Referer"),
                 k.id)
        raise OriginNotAllowed("This website is not allowed to use this assistant key.")
    k.matched_origin = origin
    g.kb_key = k
    if count:
        if bucket == "feedback":
            enforce_feedback_limit(k)
        else:
            enforce_rate_limits(k)
    return k


# --------------------------------------------------------------------------- rate limits

# KEYS: the buckets; ARGV[1]: this request's member; ARGV[2i], ARGV[2i+1]: window (ms), limit of KEYS[i].
# All buckets are checked first; the request is recorded in every bucket only when all pass.
_SLIDING_LOG = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local which, wait = 0, 0
for i = 1, #KEYS do
  local window = tonumber(ARGV[2 * i])
  local limit = tonumber(ARGV[2 * i + 1])
  redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', now - window)
  local n = redis.call('ZCARD', KEYS[i])
  if n >= limit then
    local w = window
    if limit > 0 then
      local e = redis.call('ZRANGE', KEYS[i], n - limit, n - limit, 'WITHSCORES')
      w = tonumber(e[2]) + window - now
    end
    if w > wait then which, wait = i, w end
  end
end
if which > 0 then return {which, wait} end
for i = 1, #KEYS do
  redis.call('ZADD', KEYS[i], now, ARGV[1])
  redis.call('PEXPIRE', KEYS[i], tonumber(ARGV[2 * i]))
end
return {0, 0}
"""
_script = None


def _ip_tag(ip: str) -> str:
    """Rate limits key on a keyed hash of the address, never the address itself."""
    from kbframework.orgs.privacy import address_tag

    return address_tag(ip)


def hit(buckets: list[tuple[str, int, int]]) -> tuple[int, int]:
    """``buckets`` = [(redis key, window seconds, limit)]. Returns (0, 0) when the request is
    allowed (and recorded), else (index of the refusing bucket (1-based), Retry-After seconds)."""
    global _script
    from kbframework.jobs.queues import get_redis

    r = get_redis()
    if _script is None or _script[0] is not r:
        _script = (r, r.register_script(_SLIDING_LOG))
    argv: list = [uuid.uuid4().hex]
    for _, window, limit in buckets:
        argv += [int(window * 1000), max(0, int(limit))]
    which, wait_ms = _script[1](keys=[b[0] for b in buckets], args=argv)
    which, wait_ms = int(which), int(wait_ms)
    return which, (max(1, -(-wait_ms // 1000)) if which else 0)


def enforce_rate_limits(k: KeyInfo) -> None:
    ip = _ip_tag(client_ip())
    checks = [(f"kbf:rl:ip:{k.id}:{ip}:60", 60, k.per_ip_minute, "Too many messages from you"),
              (f"kbf:rl:key:{k.id}:60", 60, k.per_minute, "This chat is very busy"),
              (f"kbf:rl:key:{k.id}:86400", 86400, k.per_day, "This chat has reached its daily limit")]
    which, retry = hit([c[:3] for c in checks])
    if which:
        raise RateLimited(f"{checks[which - 1][3]}; try again in {retry} s.", retry)


def enforce_feedback_limit(k: KeyInfo) -> None:
    which, retry = hit([(f"kbf:rl:fb:{k.id}:{_ip_tag(client_ip())}:60", 60, FEEDBACK_PER_IP_MINUTE)])
    if which:
        raise RateLimited(f"Too much feedback from you; try again in {retry} s.", retry)


# --------------------------------------------------------------------------- responses


def cors(resp: Response, k: KeyInfo | None) -> Response:
    """CORS for the matched, allowed origin only (never ``*``, never a refused origin)."""
    resp.headers.add("Vary", "Origin")
    origin = request.headers.get("Origin")
    if k is not None and k.matched_origin and origin and normalize_origin(origin) == k.matched_origin:
        resp.headers["Access-Control-Allow-Origin"] = origin
        resp.headers["Access-Control-Allow-Methods"] = "GET, POST, OPTIONS"
        resp.headers["Access-Control-Allow-Headers"] = "Content-Type, Accept"
        resp.headers["Access-Control-Expose-Headers"] = "Retry-After"
        resp.headers["Access-Control-Max-Age"] = "600"
    return resp


def json_response(data: dict, status: int = 200) -> Response:
    resp = Response(json.dumps(data, default=str), status=status, mimetype="application/json")
    resp.headers["Cache-Control"] = "no-store"
    resp.headers["X-Content-Type-Options"] = "nosniff"
    return resp


def error_response(exc: KBError) -> Response:
    err = exc.as_dict()
    retry = (exc.details or {}).get("retry_after") if exc.status == 429 else None
    if retry is not None:
        err["retry_after"] = retry
    resp = json_response({"error": err}, exc.status)
    if retry is not None:
        resp.headers["Retry-After"] = str(retry)
    return cors(resp, g.get("kb_key"))


def read_json(k: KeyInfo | None = None) -> dict:
    limit = input_limits(k)["max_body_bytes"] if k is not None else DEFAULT_LIMITS["max_body_bytes"]
    if request.content_length is not None and request.content_length > limit:
        raise ValidationFailed(f"The request is too large (at most {limit} bytes).", code="payload_too_large",
                               status=413)
    raw = request.get_data(cache=True)
    if len(raw) > limit:
        raise ValidationFailed(f"The request is too large (at most {limit} bytes).", code="payload_too_large",
                               status=413)
    try:
        data = json.loads(raw.decode("utf-8")) if raw else None
    except (UnicodeDecodeError, ValueError):
        data = None
    if data is None:
        raise KBError("The request body is not valid JSON.", code="malformed_json")
    if not isinstance(data, dict):
        raise ValidationFailed("The request body must be a JSON object.")
    return data


# --------------------------------------------------------------------------- input caps


def input_limits(k: KeyInfo | None) -> dict:
    out = dict(DEFAULT_LIMITS)
    for name, v in ((k.settings.get("limits") if k else None) or {}).items():
        if name in DEFAULT_LIMITS:
            try:
                lo, hi = LIMIT_RANGES[name]
                out[name] = min(hi, max(lo, int(v)))
            except (TypeError, ValueError):
                pass
    return out


def check_message(message, limits: dict) -> str:
    if not isinstance(message, str) or not message.strip():
        raise ValidationFailed("Send the visitor's message as a non-empty string in 'message'.",
                               code="empty_question")
    if len(message) > limits["max_message_chars"]:
        raise ValidationFailed(f"The message is too long (at most {limits['max_message_chars']} characters).",
                               code="message_too_long", status=413)
    return message


def clean_public_history(history, limits: dict) -> list[dict]:
    """At most ``max_history_messages`` entries of {role: user|assistant, content: text}; a visitor
    turn longer than a message may be is refused; assistant turns are cut to 1,500 characters;
    all contents together at most ``max_history_chars``."""
    if history is None:
        return []
    if not isinstance(history, list):
        raise ValidationFailed("'history' must be a list of {role, content}.", code="invalid_history")
    if len(history) > limits["max_history_messages"]:
        raise ValidationFailed(f"The history is too long (at most {limits['max_history_messages']} messages).",
                               code="history_too_long", status=413)
    out = []
    for m in history:
        if not (isinstance(m, dict) and m.get("role") in ("user", "assistant") and isinstance(m.get("content"), str)):
            raise ValidationFailed("Each history entry must be {role: 'user'|'assistant', content: text}.",
                                   code="invalid_history")
        content = m["content"]
        if m["role"] == "user" and len(content) > limits["max_message_chars"]:
            raise ValidationFailed("A message in the history is too long.", code="history_too_long", status=413)
        out.append({"role": m["role"], "content": content[:ASSISTANT_TURN_CHARS]})
    if sum(len(m["content"]) for m in out) > limits["max_history_chars"]:
        raise ValidationFailed(f"The history is too large (at most {limits['max_history_chars']} characters).",
                               code="history_too_long", status=413)
    return out


# --------------------------------------------------------------------------- public settings


def widget_settings(key: str) -> dict:
    """What the widget of assistant key ``key`` shows (title, colour, welcome...): a plugin
    that puts the widget on a site hands it to that site's own settings page."""
    return public_config(load_key(key))


def public_config(k: KeyInfo) -> dict:
    """What the widget and the embed page may know: branding and texts, nothing internal.
    Key settings win over the organization's branding (the ``branding_*`` settings)."""
    b, st = k.branding or {}, k.settings or {}
    checks = {"title": lambda v: v[:80], "placeholder": lambda v: v[:120],
              "color": lambda v: v if re.fullmatch(r"#(?:[0-9a-fA-F]{3}|[0-9a-fA-F]{6})", v) else None,
              "logo": lambda v: v if re.match(r"https?://", v) else None,
              "position": lambda v: v if v in ("bottom-right", "bottom-left") else None}

    def pick(name, default=None):
        for src in (st, b):  # key settings first, then the organization's branding
            v = src.get(name)
            if isinstance(v, str) and v.strip():
                v = checks[name](v.strip())
                if v:
                    return v
        return default

    welcome = st["welcome"] if isinstance(st.get("welcome"), str) else \
        b["welcome"] if isinstance(b.get("welcome"), str) else f"Hi! Ask me anything about {k.org_name}."
    return {"title": pick("title", k.org_name or "Chat"),
            "color": pick("color", "#2f6fed"),
            "logo": pick("logo"),
            "welcome": welcome[:500],
            "placeholder": pick("placeholder", "Type your question…"),
            "show_sources": st.get("show_sources", True) is not False,
            "position": pick("position", "bottom-right"),
            "api": API_VERSIONS[-1]}

