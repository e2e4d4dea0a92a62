"""The platform side of the kbframework Connect WordPress plugin (``wordpress-plugin/``).

Why it exists: a site owner should connect a WordPress site by pasting one code, never by
copying application passwords and webhook secrets by hand.

* **Connect codes**: an admin asks for one on "Connect a WordPress site"; the code carries
  the platform's URL (so the plugin knows where to go) and a random token. Only the token's
  SHA-256 is kept, in Redis, with a time to live; exchanging it deletes it in the same
  transaction, so a code works once.
* **Exchange**: the plugin sends the code with an application password it created for us;
  we check that password against the site's REST API, create (or re-use) the WordPress
  source and a website key limited to the site's origin, and answer with what the plugin
  needs: the source id, the signing secret (the source's webhook secret), the key and the
  widget's brand colour and greeting.
* **Signed requests from the plugin** (notices and disconnect): HMAC-SHA256 of the raw body
  under the signing secret; the body carries ``ts`` (seconds) and ``nonce``; a request older
  or newer than ``MAX_SKEW`` seconds, or whose nonce was seen before, is refused.
"""
from __future__ import annotations

import base64
import binascii
import hashlib
import json
import secrets
import time
from datetime import datetime, timedelta, timezone
from typing import Optional
from urllib.parse import urlsplit

from kbframework.errors import KBError, ValidationFailed

CODE_PREFIX = "kbfc1"
CODE_TTL_SECONDS = 15 * 60
MAX_SKEW = 300  # seconds a signed request may be early or late
NONCE_TTL = 2 * MAX_SKEW + 60
EXCHANGE_LIMIT_PER_MINUTE = 10  # exchange attempts per client address and minute
_CODE_KEY = "kbf:wpconnect:code:"
_NONCE_KEY = "kbf:wpconnect:nonce:"
_RATE_KEY = "kbf:wpconnect:rate:"


class ConnectCodeInvalid(KBError):
    status = 400
    code = "connect_code_invalid"


class TooManyAttempts(KBError):
    status = 429
    code = "rate_limited"


def _redis():
    from kbframework.jobs.queues import get_redis

    return get_redis()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


# --------------------------------------------------------------------------- connect codes


def new_code(org_id, user_id, platform_url: str, ttl: int = CODE_TTL_SECONDS) -> dict:
    """A one-time connect code for ``org_id``: ``kbfc1.<base64url(platform url)>.<token>``."""
    platform_url = platform_url.rstrip("/")
    token = secrets.token_urlsafe(24)
    record = {"org": str(org_id), "user": str(user_id) if user_id else None, "url": platform_url,
              "created": int(time.time())}
    _redis().set(_CODE_KEY + token_hash(token), json.dumps(record), ex=int(ttl))
    expires = datetime.now(timezone.utc) + timedelta(seconds=int(ttl))
    return {"code": f"{CODE_PREFIX}.{_b64(platform_url.encode())}.{token}", "expires_at": expires.isoformat(),
            "ttl_seconds": int(ttl)}


def parse_code(code: str) -> tuple[str, str]:
    """(platform url, token) of a connect code; ``ConnectCodeInvalid`` if it is not one."""
    parts = str(code or "").strip().split(".")
    if len(parts) != 3 or parts[0] != CODE_PREFIX or not parts[2]:
        raise ConnectCodeInvalid("That is not a connect code: copy it again from “Connect a WordPress site”.")
    try:
        url = _unb64(parts[1]).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise ConnectCodeInvalid("That connect code is damaged: copy it again.")
    return url, parts[2]


def take_code(code: str) -> dict:
    """Consume a connect code (single use): its record, or ``ConnectCodeInvalid``."""
    _url, token = parse_code(code)
    pipe = _redis().pipeline(transaction=True)
    key = _CODE_KEY + token_hash(token)
    pipe.get(key)
    pipe.delete(key)
    raw, _ = pipe.execute()
    if raw is None:
        raise ConnectCodeInvalid("This connect code has expired or was already used: create a new one in the "
                                 "admin panel (Sources → Connect a WordPress site).")
    return json.loads(raw)


def check_rate(client: str, limit: int = EXCHANGE_LIMIT_PER_MINUTE) -> None:
    """At most ``limit`` exchange attempts per client address and minute."""
    minute = int(time.time() // 60)
    key = f"{_RATE_KEY}{client}:{minute}"
    pipe = _redis().pipeline(transaction=True)
    pipe.incr(key)
    pipe.expire(key, 120)
    count, _ = pipe.execute()
    if int(count) > limit:
        raise TooManyAttempts("Too many connect attempts from this address; wait a minute and try again.",
                              details={"retry_after": 60 - int(time.time()) % 60})


# --------------------------------------------------------------------------- signed requests


def sign(raw: bytes, secret: str) -> str:
    import hmac

    return "sha256=" + hmac.new(secret.encode("utf-8"), raw, hashlib.sha256).hexdigest()


def check_fresh(body: dict, scope: str, now: Optional[float] = None) -> Optional[str]:
    """None when ``ts`` is within ``MAX_SKEW`` and ``nonce`` is new (it is then remembered);
    else why the request is refused. Call it only after the signature checked out, so a
    forger cannot burn nonces."""
    now = time.time() if now is None else now
    ts, nonce = body.get("ts"), body.get("nonce")
    if isinstance(ts, bool) or not isinstance(ts, (int, float)):
        return "The notice has no timestamp ('ts')."
    if abs(now - float(ts)) > MAX_SKEW:
        return (f"The notice's timestamp is {int(now - float(ts))} s off the platform's clock (at most "
                f"{MAX_SKEW} s allowed): check the site's clock.")
    if not isinstance(nonce, str) or not 8 <= len(nonce) <= 100:
        return "The notice has no nonce."
    if not _redis().set(f"{_NONCE_KEY}{scope}:{nonce}", "1", nx=True, ex=NONCE_TTL):
        return "This notice was already received (replayed nonce)."
    return None


# --------------------------------------------------------------------------- exchange input


def site_origin(url: str) -> str:
    parts = urlsplit(str(url or "").strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValidationFailed("'site_url' must be the site's http(s) address.")
    port = f":{parts.port}" if parts.port and parts.port not in (80, 443) else ""
    return f"{parts.scheme}://{parts.hostname.lower()}{port}"


def clean_exchange(data) -> dict:
    if not isinstance(data, dict):
        raise ValidationFailed("Send a JSON object.")
    errors = {}
    for name in ("code", "site_url", "username", "app_password"):
        if not isinstance(data.get(name), str) or not data[name].strip():
            errors[name] = ["required"]
    types = data.get("post_types")
    if types is not None and (not isinstance(types, list) or not all(isinstance(t, str) for t in types)):
        errors["post_types"] = ["a list of post type slugs"]
    if errors:
        raise ValidationFailed("The connect request is missing fields.", details=errors)
    site_url = data["site_url"].strip().rstrip("/")
    site_origin(site_url)
    return {"code": data["code"].strip(), "site_url": site_url, "username": data["username"].strip()[:200],
            "app_password": data["app_password"].strip()[:200],
            "app_password_uuid": str(data.get("app_password_uuid") or "")[:64] or None,
            "post_types": [t for t in (types or []) if t][:30],
            "site_name": str(data.get("site_name") or "").strip()[:150],
            "plugin_version": str(data.get("plugin_version") or "")[:20]}
