"""Public assistant keys: create, list, update, rotate with a grace period.

A key carries its allowed origins, its rate limits and its visitor-facing settings
(``settings``: title, color, logo, welcome, placeholder, show_sources, position, limits);
``clean_settings`` validates them, so nothing an admin types can break the widget.
"""
from __future__ import annotations

import re
import secrets
from datetime import timedelta

from sqlalchemy import select

from kbframework.orgs.accounts import as_uuid
from kbframework.clock import utcnow
from kbframework.errors import NotFound, ValidationFailed
from kbframework.models import AssistantKey
from kbframework.orgs.origins import DEFAULT_LIMITS, LIMIT_RANGES, normalize_origin

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
            from kbframework.addresses import safe_link

            if not isinstance(v, str) or safe_link(v) is None or len(v) > 1000:
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
    if settings is not None:
        k.settings = clean_settings(settings, k.settings or {})
    k.updated_at = utcnow()
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
    old.expires_at = utcnow() + grace
    old.replaced_by_id = new.id
    return old, new


def parse_duration(text: str) -> timedelta:
    m = re.fullmatch(r"\s*(\d+)\s*([smhd])\s*", text or "") if isinstance(text, str) and len(text) < 40 else None
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


def revoke_key(s, org_id, key_id) -> AssistantKey:
    k = get_key(s, org_id, key_id)
    k.status = "revoked"
    k.expires_at = utcnow()
    return k


# --------------------------------------------------------------------------- from form or JSON input


def parse_origins(value) -> list[str]:
    """Origins as a list, or as text with one per line or comma-separated (the admin form)."""
    if value is None:
        return []
    if isinstance(value, str):
        value = value.replace(",", "\n").split("\n")
    if not isinstance(value, list):
        raise ValidationFailed("'allowed_origins' must be a list of origins like https://shop.example.com.")
    return [str(v).strip() for v in value if str(v).strip()]


def parse_limits(data: dict) -> dict:
    """The rate-limit fields present in ``data`` (blank means unchanged), as whole numbers."""
    out = {}
    for f in LIMIT_FIELDS:
        v = data.get(f)
        if v in (None, ""):
            continue
        try:
            n = int(v)
        except (TypeError, ValueError):
            raise ValidationFailed(f"'{f.replace('_', ' ')}' must be a whole number.")
        if not 1 <= n <= 1_000_000:
            raise ValidationFailed(f"'{f.replace('_', ' ')}' must be between 1 and 1,000,000.")
        out[f] = n
    return out


def create_key_from_input(s, org_id, data: dict) -> AssistantKey:
    origins = parse_origins(data.get("allowed_origins"))
    if not origins:
        raise ValidationFailed("Add at least one allowed website origin, e.g. https://shop.example.com.")
    name = str(data.get("name") or "Website").strip()[:200] or "Website"
    return create_key(s, org_id, origins, name, settings=data.get("settings") or {}, **parse_limits(data))


def update_key_from_input(s, org_id, key_id, data: dict) -> AssistantKey:
    """Only the fields present change; settings go through ``clean_settings`` like every path."""
    get_key(s, org_id, key_id)  # another organization's key is a 404 before any input error
    name = origins = None
    if "name" in data:
        name = str(data["name"] or "").strip()
        if not name:
            raise ValidationFailed("The key needs a name.")
    if "allowed_origins" in data:
        origins = parse_origins(data["allowed_origins"])
        if not origins:
            raise ValidationFailed("Keep at least one allowed website origin.")
    return update_key(s, org_id, key_id, origins=origins, name=name, settings=data.get("settings"),
                      **parse_limits(data))


def snippets(base: str, key: str) -> dict:
    """The two ways to put a key's assistant on a website: the widget script and an iframe."""
    base = base.rstrip("/")
    return {"widget": f'<script src="{base}/widget.js?key={key}" async></script>',
            "iframe": (f'<iframe src="{base}/embed/{key}" title="Chat assistant" loading="lazy" '
                       f'style="width:100%;height:640px;border:0;border-radius:12px"></iframe>')}


def key_view(k: AssistantKey, base: str, usage: dict | None = None) -> dict:
    """A key as the admin shows it: its fields, its embed snippets (the current key only: a
    replaced or revoked one must not be pasted anywhere), whether it still works, when it last
    answered and how much this month (``usage`` from :func:`key_usage`)."""
    out = key_to_dict(k)
    out["snippets"] = snippets(base, k.key) if k.status == "active" else None
    out["replaced_by_id"] = str(k.replaced_by_id) if k.replaced_by_id else None
    out["usable"] = k.status == "active" or (k.status == "rotated" and k.expires_at is not None
                                             and k.expires_at > utcnow())
    u = (usage or {}).get(k.id) or {}
    out["last_used_at"] = u["last_used_at"].isoformat() if u.get("last_used_at") else None
    out["usage"] = {"month": u.get("month"), "answers": u.get("answers", 0), "tokens": u.get("tokens", 0),
                    "answers_total": u.get("answers_total", 0)}
    return out


def key_usage(s, oid) -> dict:
    """Per key: when it last answered, and its answers and answer tokens this month."""
    from sqlalchemy import func

    from kbframework.clock import month_bounds
    from kbframework.models import ChatLog
    from kbframework.orgs.accounts import org_timezone

    start, _, label = month_bounds(org_timezone(s, oid))
    this_month = ChatLog.created_at >= start
    rows = s.execute(select(ChatLog.assistant_key_id, func.max(ChatLog.created_at), func.count(),
                            func.count().filter(this_month),
                            func.coalesce(func.sum(ChatLog.tokens_in + ChatLog.tokens_out).filter(this_month), 0))
                     .where(ChatLog.organization_id == oid, ChatLog.assistant_key_id.isnot(None))
                     .group_by(ChatLog.assistant_key_id)).all()
    return {r[0]: {"last_used_at": r[1], "answers_total": r[2], "answers": r[3], "tokens": int(r[4]), "month": label}
            for r in rows}
