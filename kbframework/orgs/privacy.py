"""Visitors' privacy: how long conversations are kept, erasing one on request, and visitor
addresses that are never stored in the clear.

- Conversations (chat logs) and their feedback are deleted once older than the organization's
  ``retention_days`` setting (default 90); the scheduler runs :func:`purge_expired` hourly.
- :func:`erase_session` deletes one visitor's conversation (every turn of a session id) and
  all feedback given in it, for ``kbf privacy erase`` and the admin's conversation page.
- :func:`address_tag` is what is kept of a visitor's IP address for rate limiting: a keyed
  hash (HMAC with a server key), so the address cannot be recovered from it;
  :func:`truncate_address` is what a login session keeps (the network, not the host).
"""
from __future__ import annotations

import hashlib
import hmac
import ipaddress
import logging
from datetime import datetime, timedelta, timezone

from sqlalchemy import delete, or_, select

from kbframework.models import ChatFeedback, ChatLog, Organization, Setting

log = logging.getLogger("kbframework.orgs.privacy")

DEFAULT_RETENTION_DAYS = 90
PURGE_EVERY = 3600  # seconds between two purges by the scheduler


_keys: dict = {}


def _key() -> bytes:
    """The server's address key (``KB_ADDRESS_KEY``, else generated once in the data folder)."""
    from kbframework.config import get_config

    cfg = get_config()
    if cfg.data_dir not in _keys:
        _keys[cfg.data_dir] = cfg.secret("address_key", "KB_ADDRESS_KEY").encode()
    return _keys[cfg.data_dir]


def address_tag(ip: str) -> str:
    """A visitor address as a keyed hash: stable for rate limits, not reversible."""
    return hmac.new(_key(), (ip or "").encode(), hashlib.sha256).hexdigest()[:24]


def truncate_address(ip: str | None) -> str | None:
    """203.0.113.77 → 203.0.113.0, 2001:db8:1:2::5 → 2001:db8:1::; not an address → None."""
    if not ip:
        return None
    try:
        addr = ipaddress.ip_address(ip.strip())
    except ValueError:
        return None
    prefix = 24 if addr.version == 4 else 48
    return str(ipaddress.ip_network(f"{addr}/{prefix}", strict=False).network_address)


def erase_session(s, org_id, session_id: str) -> dict:
    """Delete every turn of one conversation and all feedback given in it."""
    from kbframework.errors import ValidationFailed

    session_id = (session_id or "").strip()
    if not session_id:
        raise ValidationFailed("Name the conversation's session id.")
    log_ids = list(s.scalars(select(ChatLog.id).where(ChatLog.organization_id == org_id,
                                                       or_(ChatLog.session_id == session_id,
                                                           ChatLog.id == _as_uuid(session_id)))))
    fb = s.execute(delete(ChatFeedback).where(ChatFeedback.organization_id == org_id, or_(
        ChatFeedback.user_session_id == session_id, ChatFeedback.chat_log_id.in_(log_ids or [None])))).rowcount
    n = s.execute(delete(ChatLog).where(ChatLog.id.in_(log_ids or [None]))).rowcount if log_ids else 0
    return {"session_id": session_id, "chat_logs": n, "feedback": fb}


def _as_uuid(v):
    import uuid

    try:
        return uuid.UUID(str(v))
    except ValueError:
        return None


def purge_expired(now: datetime | None = None) -> dict:
    """Delete conversations and feedback older than each organization's retention."""
    from kbframework import tenancy
    from kbframework.db import session_scope

    now = now or datetime.now(timezone.utc)
    out = {}
    with tenancy.system("retention purge of every organization"), session_scope() as s:
        rows = s.execute(select(Organization.id, Organization.slug, Setting.retention_days)
                         .outerjoin(Setting, Setting.organization_id == Organization.id)).all()
        for oid, slug, days in rows:
            cutoff = now - timedelta(days=int(days or DEFAULT_RETENTION_DAYS))
            fb = s.execute(delete(ChatFeedback).where(ChatFeedback.organization_id == oid,
                                                      ChatFeedback.created_at < cutoff)).rowcount
            logs = s.execute(delete(ChatLog).where(ChatLog.organization_id == oid,
                                                   ChatLog.created_at < cutoff)).rowcount
            if fb or logs:
                out[slug] = {"chat_logs": logs, "feedback": fb, "older_than": cutoff.isoformat()}
    if out:
        log.info("retention purge: %s", out)
    return {"purged": out}
