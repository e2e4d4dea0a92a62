"""A remote site connected by pasting one code, for connectors whose site runs a companion
plugin (the kbframework Connect plugin for WordPress is one).

Why this is the host's: connecting issues a website key, creates or takes over a source and
queues its first sync, all the host's data, and a connect code is a credential the host
keeps. The connector's plugin keeps only its protocol: what the remote plugin sends, how its
credentials are checked, how its requests are signed. It reaches these functions through
``kbframework.plugin_api``.

* **Connect codes**: ``kbfc1.<base64url(platform url)>.<token>``; the code carries the
  platform's URL (so the remote plugin knows where to go) and a random token. Only the
  token's SHA-256 is kept, in Redis, with a time to live; taking a code deletes it in the
  same transaction, so a code works once; attempts are rate-limited per client address.
* **The connection** is recorded in the source's config under ``companion``: the id of the
  website key it issued, when, and what the plugin adds (its version, the remote user...).
  Disconnecting revokes that key, forgets the source's secrets and disables it.
* **Nonces**: a signed request from the remote plugin carries one; ``first_use_of_nonce``
  remembers it for as long as the request's timestamp could pass, so a replay is refused.
"""
from __future__ import annotations

import base64
import binascii
import hashlib
import json
import secrets
import time
from datetime import timedelta
from typing import Callable, Iterable, Mapping, Optional

from sqlalchemy import select

from kbframework import tenancy
from kbframework.clock import iso, utcnow
from kbframework.errors import KBError, NotFound
from kbframework.models import AssistantKey, Source
from kbframework.orgs.accounts import as_uuid
from kbframework.security import decrypt_json, encrypt_json
from kbframework.types import SyncContext

CODE_PREFIX = "kbfc1"
CODE_TTL_SECONDS = 15 * 60
EXCHANGE_LIMIT_PER_MINUTE = 10  # attempts to take a code, per client address and minute
CONNECTION = "companion"  # the source config key that records the connection
_CODE_KEY = "kbf:connect:code:"
_RATE_KEY = "kbf:connect:rate:"
_NONCE_KEY = "kbf:connect:nonce:"


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


def new_connect_code(organization_id, user_id, platform_url: str, ttl: int = CODE_TTL_SECONDS) -> dict:
    """A one-time code that connects a site to ``organization_id``: ``{"code", "expires_at",
    "ttl_seconds"}``. Show it once; only its hash is kept."""
    platform_url = platform_url.rstrip("/")
    token = secrets.token_urlsafe(24)
    record = {"org": str(organization_id), "user": str(user_id) if user_id else None, "url": platform_url,
              "created": int(time.time())}
    _redis().set(_CODE_KEY + token_hash(token), json.dumps(record), ex=int(ttl))
    return {"code": f"{CODE_PREFIX}.{_b64(platform_url.encode())}.{token}",
            "expires_at": iso(utcnow() + timedelta(seconds=int(ttl))), "ttl_seconds": int(ttl)}


def parse_connect_code(code: str) -> tuple[str, str]:
    """(platform url, token) of a connect code; ``ConnectCodeInvalid`` if it is not one."""
    parts = str(code or "").strip().split(".")
    if len(parts) != 3 or parts[0] != CODE_PREFIX or not parts[2]:
        raise ConnectCodeInvalid("That is not a connect code: copy it again from the admin panel.")
    try:
        url = _unb64(parts[1]).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise ConnectCodeInvalid("That connect code is damaged: copy it again.")
    return url, parts[2]


def check_connect_rate(client: str, limit: int = EXCHANGE_LIMIT_PER_MINUTE) -> None:
    """Count one attempt to take a connect code from ``client`` (its address);
    ``TooManyAttempts`` beyond ``limit`` a minute. Call it first, before the request's input
    is even read, so malformed attempts count too."""
    minute = int(time.time() // 60)
    key = f"{_RATE_KEY}{client or 'unknown'}:{minute}"
    pipe = _redis().pipeline(transaction=True)
    pipe.incr(key)
    pipe.expire(key, 120)
    count, _ = pipe.execute()
    if int(count) > limit:
        raise TooManyAttempts("Too many connect attempts from this address; wait a minute and try again.",
                              details={"retry_after": 60 - int(time.time()) % 60})


def take_connect_code(code: str) -> dict:
    """Consume a connect code: its record ``{"org", "user", "url"}``; a code works once
    (``ConnectCodeInvalid`` after, and for an organization deleted since). In a request, the
    rest of the request is the code's organization's: the code names it."""
    from kbframework.db import session_scope
    from kbframework.models import Organization

    _url, token = parse_connect_code(code)
    pipe = _redis().pipeline(transaction=True)
    key = _CODE_KEY + token_hash(token)
    pipe.get(key)
    pipe.delete(key)
    raw, _ = pipe.execute()
    if raw is None:
        raise ConnectCodeInvalid("This connect code has expired or was already used: create a new one in the "
                                 "admin panel.")
    record = json.loads(raw)
    with tenancy.organization(record["org"]), session_scope() as s:
        if s.get(Organization, as_uuid(record["org"])) is None:
            raise ConnectCodeInvalid("The organization of this connect code no longer exists.")
    from flask import has_request_context

    if has_request_context():
        tenancy.set_scope(record["org"])
    return record


def first_use_of_nonce(scope: str, nonce: str, ttl: int) -> bool:
    """True the first time ``nonce`` is seen under ``scope`` (a source, a signing key) within
    ``ttl`` seconds; False for a replay. Check the request's signature first, so a forger
    cannot use up nonces."""
    return bool(_redis().set(f"{_NONCE_KEY}{scope}:{nonce}", "1", nx=True, ex=int(ttl)))


# --------------------------------------------------------------------------- the connection


def organization_context(organization_id) -> SyncContext:
    """What a connector is told about an organization (its time zone, which private networks
    its connectors may reach: the operator's allowance, narrowed by the organization), to
    check a site's credentials before anything is saved."""
    from kbframework.db import session_scope
    from kbframework.models import Organization
    from kbframework.sources.sync import org_context

    with tenancy.organization(as_uuid(organization_id)), session_scope() as s:
        if s.get(Organization, as_uuid(organization_id)) is None:
            raise NotFound("No such organization.")
        return org_context(s, organization_id)


def connected_sites(organization_id, source_type: str) -> list[dict]:
    """The organization's ``source_type`` sources that a connect code connected, oldest
    first: ``{"id", "name", "status", "config", "last_webhook_at", "created_at"}`` (the config
    without its secrets)."""
    from kbframework.db import session_scope

    with session_scope() as s:
        rows = s.scalars(select(Source).where(Source.organization_id == as_uuid(organization_id),
                                              Source.type == source_type).order_by(Source.created_at)).all()
        return [{"id": str(r.id), "name": r.name, "status": r.status, "config": dict(r.config or {}),
                 "last_webhook_at": r.last_webhook_at, "created_at": r.created_at}
                for r in rows if (r.config or {}).get(CONNECTION)]


def connect_site(organization_id, source_type: str, *, match: Mapping[str, str], origin: str, name: str,
                 key_name: str, config: dict, keep: Iterable[str] = (), connection: Optional[dict] = None) -> dict:
    """Connect a site whose code ``organization_id`` took: its source, its website key, its
    first full sync (queued). Returns ``{"source_id", "assistant_key", "config"}``.

    * the source: the organization's ``source_type`` source whose config has the values in
      ``match`` (one added by hand is taken over), else a new one named ``name``. Its config
      becomes ``config``, except the keys in ``keep`` that the existing source already has
      a value for (an admin's choice stands);
    * the key: the one this connection issued before while it is still active (``origin`` is
      added to its origins), else a new one named ``key_name`` limited to ``origin``;
    * ``config["companion"]`` records the connection: ``connection``, the key's id and the time.
    """
    from kbframework.db import session_scope
    from kbframework.jobs.queues import enqueue
    from kbframework.sources.config import create_source, update_source

    org_id = as_uuid(organization_id)
    with tenancy.organization(org_id), session_scope() as s:
        src = _find_source(s, org_id, source_type, match)
        key = _site_key(s, org_id, src, origin, key_name)
        record = {**(connection or {}), "key_id": str(key.id), "connected_at": iso(utcnow())}
        config = {**config, CONNECTION: record}
        if src is None:
            src = create_source(s, org_id, {"type": source_type, "config": config, "name": name})
        else:
            old = src.config or {}
            config.update({k: old[k] for k in keep if old.get(k)})
            src = update_source(s, org_id, src.id, {"config": config, "status": "active"})
        out = {"source_id": str(src.id), "assistant_key": key.key, "config": dict(src.config or {})}
    enqueue("sync", "kbframework.jobs.tasks.sync_source_job", out["source_id"], "full", for_organization=org_id)
    return out


def _find_source(s, org_id, source_type: str, match: Mapping[str, str]) -> Source | None:
    def same(value, wanted) -> bool:
        return str(value or "").rstrip("/") == str(wanted or "").rstrip("/")

    for src in s.scalars(select(Source).where(Source.organization_id == org_id, Source.type == source_type)):
        if all(same((src.config or {}).get(k), v) for k, v in match.items()):
            return src
    return None


def _site_key(s, org_id, src: Source | None, origin: str, name: str) -> AssistantKey:
    from kbframework.orgs.keys import create_key

    key_id = ((src.config or {}).get(CONNECTION) or {}).get("key_id") if src is not None else None
    k = s.get(AssistantKey, as_uuid(key_id)) if key_id else None
    if k is not None and k.organization_id == org_id and k.status == "active":
        if origin not in (k.allowed_origins or []):
            k.allowed_origins = list(k.allowed_origins or []) + [origin]
        return k
    return create_key(s, org_id, [origin], name=name[:200])


def disconnect_site(source_id, source_type: str, verify: Callable[[dict], None]) -> None:
    """End a site's connection, when the request proves it speaks for the site.

    ``verify(secrets)`` gets the source's decrypted secrets and raises unless the request is
    the site's (its signature under the webhook secret checks out); a source that is not a
    connected ``source_type`` source is ``NotFound``. Then the connection's key is revoked,
    the source forgets its secrets (a fresh webhook secret replaces them, so the plugin's
    copy signs nothing any more) and is disabled, and the time is recorded."""
    from kbframework.db import session_scope

    try:
        sid = as_uuid(source_id)
    except (ValueError, TypeError, KBError):
        raise NotFound("No such connection.")
    with tenancy.system("find a connected site's source by its id"), session_scope() as s:
        found = s.get(Source, sid)
        org_id = found.organization_id if found is not None else None
    if org_id is None:
        raise NotFound("No such connection.")
    with tenancy.organization(org_id), session_scope() as s:
        src = s.get(Source, sid)
        if src is None or src.type != source_type or not (src.config or {}).get(CONNECTION):
            raise NotFound("No such connection.")
        verify(decrypt_json(src.secrets))
        record = dict(src.config[CONNECTION])
        key_id = record.get("key_id")
        if key_id:
            k = s.get(AssistantKey, as_uuid(key_id))
            if k is not None and k.organization_id == src.organization_id:
                k.status, k.expires_at = "revoked", utcnow()
        src.secrets = encrypt_json({"webhook_secret": secrets.token_urlsafe(32)})
        record["disconnected_at"] = iso(utcnow())
        src.config = {**src.config, CONNECTION: record}
        src.status = "disabled"
