"""Public assistant keys: create, list, update, rotate with a grace period.

A key carries its allowed origins, its rate limits and its visitor-facing settings
(``settings``: title, color, logo, welcome, placeholder, show_sources, position, limits);
``clean_settings`` validates them, so nothing an admin types can break the widget.
"""
from __future__ import annotations

import re
import secrets
from datetime import datetime, timedelta, timezone

from sqlalchemy import select

from kbframework.orgs.accounts import as_uuid
from kbframework.errors import NotFound, ValidationFailed
from kbframework.models import AssistantKey
from kbframework.web.embed_security import DEFAULT_LIMITS, LIMIT_RANGES, normalize_origin

LIMIT_FIELDS = ("rate_per_minute", "rate_per_day", "rate_per_ip_minute")
POSITIONS = ("bottom-right", "bottom-left")
TEXT_SETTINGS = {"title": 80, "welcome": 500, "placeholder": 120}


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


def clean_limit(name: str, value) -> int:
    try:
        n = int(value)
    except (TypeError, ValueError):
        raise ValidationFailed(f"'{name}' must be a whole number.")
    if not 1 <= n <= 1_000_000:
        raise ValidationFailed(f"'{name}' must be between 1 and 1,000,000.")
    return n


def clean_settings(data: dict, base: dict | None = None) -> dict:
    """Validate visitor-facing settings and merge them over ``base``; a None value removes
    a setting (back to the organization's branding or the default)."""
    if not isinstance(data, dict):
        raise ValidationFailed("'settings' must be an object.")
    out = dict(base or {})
    for name, v in data.items():
        if v is None:
            out.pop(name, None)
            continue
        if name in TEXT_SETTINGS:
            if not isinstance(v, str) or len(v) > TEXT_SETTINGS[name]:
                raise ValidationFailed(f"'{name}' must be text of at most {TEXT_SETTINGS[name]} characters.")
            out[name] = v.strip() if name != "welcome" else v
        elif name == "color":
            if not isinstance(v, str) or not re.fullmatch(r"#(?:[0-9a-fA-F]{3}|[0-9a-fA-F]{6})", v.strip()):
                raise ValidationFailed("'color' must be a colour like #2f6fed.")
            out[name] = v.strip().lower()
        elif name == "logo":
            if not isinstance(v, str) or not re.match(r"https?://", v.strip()) or len(v) > 1000:
                raise ValidationFailed("'logo' must be an http(s) URL of an image.")
            out[name] = v.strip()
        elif name == "show_sources":
            if not isinstance(v, bool):
                raise ValidationFailed("'show_sources' must be true or false.")
            out[name] = v
        elif name == "position":
            if v not in POSITIONS:
                raise ValidationFailed(f"'position' must be one of: {', '.join(POSITIONS)}.")
            out[name] = v
        elif name == "limits":
            if not isinstance(v, dict):
                raise ValidationFailed("'limits' must be an object.")
            lim = dict(out.get("limits") or {})
            for ln, lv in v.items():
                if ln not in DEFAULT_LIMITS:
                    raise ValidationFailed(f"Unknown input limit '{ln}'; known: {', '.join(DEFAULT_LIMITS)}.")
                lo, hi = LIMIT_RANGES[ln]
                if lv is None:
                    lim.pop(ln, None)
                    continue
                if isinstance(lv, bool) or not isinstance(lv, int) or not lo <= lv <= hi:
                    raise ValidationFailed(f"'{ln}' must be a whole number between {lo} and {hi}.")
                lim[ln] = lv
            out["limits"] = lim
        else:
            raise ValidationFailed(f"Unknown key setting '{name}'.")
    return out


def create_key(s, org_id, origins: list[str], name: str = "Website", settings: dict | None = None,
               **limits) -> AssistantKey:
    k = AssistantKey(organization_id=as_uuid(org_id), name=name or "Website", key=new_key_value(),
                     allowed_origins=clean_origins(origins), settings=clean_settings(settings or {}),
                     status="active")
    for f in LIMIT_FIELDS:
        if limits.get(f) is not None:
            setattr(k, f, clean_limit(f, limits[f]))
    s.add(k)
    s.flush()
    return k


def update_key(s, org_id, key_id, *, origins: list[str] | None = None, name: str | None = None,
               settings: dict | None = None, **limits) -> AssistantKey:
    k = get_key(s, org_id, key_id)
    if origins is not None:
        k.allowed_origins = clean_origins(origins)
    if name is not None:
        if not name.strip():
            raise ValidationFailed("The key needs a name.")
        k.name = name.strip()[:200]
    for f in LIMIT_FIELDS:
        if limits.get(f) is not None:
            setattr(k, f, clean_limit(f, limits[f]))
    if settings:
        k.settings = clean_settings(settings, k.settings or {})
    k.updated_at = datetime.now(timezone.utc)
    s.flush()
    return k


def list_keys(s, org_id) -> list[AssistantKey]:
    return list(s.scalars(select(AssistantKey).where(AssistantKey.organization_id == as_uuid(org_id))
                          .order_by(AssistantKey.created_at)))


def get_key(s, org_id, key_id) -> AssistantKey:
    """By id, or by the public key value itself (``kb_pk_...``)."""
    if isinstance(key_id, str) and key_id.startswith("kb_pk_"):
        q = select(AssistantKey).where(AssistantKey.key == key_id)
    else:
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
    if grace < timedelta(0):
        raise ValidationFailed("The grace period cannot be negative.")
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
        raise ValidationFailed("Durations look like 0s, 30m, 24h or 7d.")
    n, unit = int(m.group(1)), m.group(2)
    if n > {"s": 366 * 86400, "m": 366 * 1440, "h": 366 * 24, "d": 366}[unit]:
        raise ValidationFailed("The grace period can be at most a year.")
    return timedelta(**{{"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}[unit]: n})


def key_to_dict(k: AssistantKey) -> dict:
    return {"id": str(k.id), "name": k.name, "key": k.key, "status": k.status,
            "allowed_origins": list(k.allowed_origins or []), "rate_per_minute": k.rate_per_minute,
            "rate_per_day": k.rate_per_day, "rate_per_ip_minute": k.rate_per_ip_minute,
            "expires_at": k.expires_at.isoformat() if k.expires_at else None,
            "settings": k.settings or {}, "created_at": k.created_at.isoformat() if k.created_at else None}
