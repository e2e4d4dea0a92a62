"""Public assistant keys: create, list, rotate with a grace period."""
from __future__ import annotations

import re
import secrets
from datetime import datetime, timedelta, timezone

from sqlalchemy import select

from kbframework.accounts import as_uuid
from kbframework.errors import NotFound, ValidationFailed
from kbframework.models import AssistantKey
from kbframework.web.embed_security import normalize_origin


def new_key_value() -> str:
    return "kb_pk_" + secrets.token_urlsafe(18)


def clean_origins(origins: list[str]) -> list[str]:
    out = []
    for o in origins or []:
        n = normalize_origin(o)
        if n is None:
            raise ValidationFailed(f"'{o}' is not a website origin like https://shop.example.com")
        if n not in out:
            out.append(n)
    return out


def create_key(s, org_id, origins: list[str], name: str = "Website", **limits) -> AssistantKey:
    k = AssistantKey(organization_id=as_uuid(org_id), name=name or "Website", key=new_key_value(),
                     allowed_origins=clean_origins(origins), settings={}, status="active")
    for f in ("rate_per_minute", "rate_per_day", "rate_per_ip_minute"):
        if limits.get(f) is not None:
            setattr(k, f, int(limits[f]))
    s.add(k)
    s.flush()
    return k


def list_keys(s, org_id) -> list[AssistantKey]:
    return list(s.scalars(select(AssistantKey).where(AssistantKey.organization_id == as_uuid(org_id))
                          .order_by(AssistantKey.created_at)))


def get_key(s, org_id, key_id) -> AssistantKey:
    q = select(AssistantKey).where(AssistantKey.id == as_uuid(key_id))
    if org_id is not None:
        q = q.where(AssistantKey.organization_id == as_uuid(org_id))
    k = s.scalar(q)
    if k is None:
        raise NotFound("No such key.")
    return k


def rotate_key(s, org_id, key_id, grace: timedelta) -> tuple[AssistantKey, AssistantKey]:
    old = get_key(s, org_id, key_id)
    if old.status != "active":
        raise ValidationFailed("Only an active key can be rotated.")
    new = AssistantKey(organization_id=old.organization_id, name=old.name, key=new_key_value(),
                       allowed_origins=list(old.allowed_origins), rate_per_minute=old.rate_per_minute,
                       rate_per_day=old.rate_per_day, rate_per_ip_minute=old.rate_per_ip_minute,
                       settings=dict(old.settings or {}), status="active")
    s.add(new)
    s.flush()
    old.status = "rotated"
    old.expires_at = datetime.now(timezone.utc) + grace
    old.replaced_by_id = new.id
    return old, new


def parse_duration(text: str) -> timedelta:
    m = re.fullmatch(r"\s*(\d+)\s*([smhd])\s*", text or "")
    if not m:
        raise ValidationFailed("Durations look like 30m, 24h or 7d.")
    n, unit = int(m.group(1)), m.group(2)
    return timedelta(**{{"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}[unit]: n})


def key_to_dict(k: AssistantKey) -> dict:
    return {"id": str(k.id), "name": k.name, "key": k.key, "status": k.status,
            "allowed_origins": list(k.allowed_origins or []), "rate_per_minute": k.rate_per_minute,
            "rate_per_day": k.rate_per_day, "rate_per_ip_minute": k.rate_per_ip_minute,
            "expires_at": k.expires_at.isoformat() if k.expires_at else None,
            "settings": k.settings or {}, "created_at": k.created_at.isoformat() if k.created_at else None}
