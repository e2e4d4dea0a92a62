"""The platform side of the kbframework Connect WordPress plugin (``wordpress-plugin/``): its
protocol. The connection itself (connect codes, the source, the website key, disconnecting)
is the host's, reached through ``kbframework.plugin_api``.

Why it exists: a site owner should connect a WordPress site by pasting one code, never by
copying application passwords and webhook secrets by hand.

* **Exchange**: the plugin sends the code with an application password it created for us;
  we check that password against the site's REST API, and the host creates (or re-uses)
  the WordPress source and a website key limited to the site's origin; the answer carries
  what the plugin needs: the source id, the signing secret (the source's webhook secret),
  the key and the widget's brand colour and greeting.
* **Signed requests from the plugin** (notices and disconnect): HMAC-SHA256 of the raw body
  under the signing secret; the body carries ``ts`` (seconds) and ``nonce``; a request older
  or newer than ``MAX_SKEW`` seconds, or whose nonce was seen before, is refused.
"""
from __future__ import annotations

import hashlib
import time
from typing import Optional
from urllib.parse import urlsplit

from kbframework import ValidationFailed, first_use_of_nonce

MAX_SKEW = 300  # seconds a signed request may be early or late
NONCE_TTL = 2 * MAX_SKEW + 60


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
    if not first_use_of_nonce(scope, nonce, NONCE_TTL):
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
