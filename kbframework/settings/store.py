"""Reading and changing an organization's declared settings. Every writer (admin form, admin
API, ``kbf org set``) goes through :func:`apply`, so each gets the same validation, the same
"who may change it" rule and the same re-index decision."""
from __future__ import annotations

import json
import math
import os
import re
from typing import Any

from sqlalchemy import select

from kbframework.errors import Forbidden, ValidationFailed
from kbframework.settings.declared import BY_NAME, SETTINGS, Declared

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def delegated(d: Declared) -> bool:
    return bool(d.delegate_env) and os.environ.get(d.delegate_env, "").strip() == "1"


def admin_may_change(d: Declared) -> bool:
    """An organization admin may change ``admin`` settings, and operator settings the
    operator delegated."""
    return d.who == "admin" or delegated(d)


def coerce(d: Declared, raw: Any, *, from_text: bool = False) -> Any:
    """A value from JSON (or from text: the CLI and forms) checked against its declaration.
    Raises ValueError with a message for people."""
    if isinstance(raw, str) and (from_text or d.type not in ("str", "text")):
        raw = raw.strip() if d.type != "text" else raw.replace("\r\n", "\n").strip()
        if raw == "" or (from_text and raw.lower() in ("null", "none") and d.nullable):
            raw = None
    if raw is None:
        if d.nullable:
            return None
        if d.type in ("json", "list"):
            return {} if d.type == "json" else []
        raise ValueError("needs a value")
    t = d.type
    if t == "bool":
        if isinstance(raw, bool):
            return raw
        if from_text and isinstance(raw, str) and raw.lower() in _TRUE + _FALSE:
            return raw.lower() in _TRUE
        raise ValueError("must be true or false")
    if t in ("int", "float"):
        if isinstance(raw, bool):
            raise ValueError("must be a number")
        try:
            v = float(raw) if t == "float" else int(str(raw)) if isinstance(raw, str) else raw
        except ValueError:
            raise ValueError("must be a whole number" if t == "int" else "must be a number")
        if t == "int":
            if isinstance(v, float):
                if not v.is_integer():
                    raise ValueError("must be a whole number")
                v = int(v)
            if not isinstance(v, int):
                raise ValueError("must be a whole number")
        else:
            if not isinstance(v, (int, float)) or math.isnan(float(v)) or math.isinf(float(v)):
                raise ValueError("must be a number")
            v = float(v)
        if d.min is not None and v < d.min or d.max is not None and v > d.max:
            raise ValueError(f"must be between {d.range_text()}" if d.max is not None else f"must be {d.range_text()}")
        return v
    if t == "list":
        if isinstance(raw, str):
            raw = [x.strip() for x in raw.replace("\n", ",").split(",")]
        if not isinstance(raw, list) or not all(isinstance(x, str) for x in raw):
            raise ValueError("must be a list of names")
        out = [x.strip() for x in raw if x.strip()]
        if len(out) > 500 or any(len(x) > 100 for x in out):
            raise ValueError("takes at most 500 names of up to 100 characters")
        return out
    if t == "json":
        if isinstance(raw, str):
            try:
                raw = json.loads(raw)
            except json.JSONDecodeError as exc:
                raise ValueError(f"is not valid JSON: {exc.msg}")
        if not isinstance(raw, dict):
            raise ValueError("must be a JSON object")
        if d.check:
            d.check(raw)
        return raw
    if not isinstance(raw, str):
        raise ValueError("must be text")
    if d.max_length and len(raw) > d.max_length:
        raise ValueError(f"must be at most {d.max_length:,} characters")
    if t == "choice":
        vals = d.choice_values()
        if raw not in vals:
            raise ValueError(f"must be one of: {', '.join(vals)}")
    elif t == "time":
        if not re.fullmatch(r"([01]\d|2[0-3]):[0-5]\d", raw):
            raise ValueError("use HH:MM, e.g. 05:00")
    elif t == "timezone":
        from kbframework.orgs.accounts import check_timezone

        try:
            raw = check_timezone(raw)
        except ValidationFailed as exc:
            raise ValueError(exc.message.rstrip("."))
    elif t == "color":
        if not re.fullmatch(r"#[0-9a-fA-F]{6}", raw):
            raise ValueError("Use a colour like #2f6fed")
    elif t == "url":
        if not re.match(r"^https?://", raw) and not raw.startswith("/"):
            raise ValueError("must be a web address (https://…)")
    return raw


def values_of(st, org) -> dict:
    """Every declared setting's value for one organization (defaults where unset)."""
    out = {}
    for d in SETTINGS:
        holder = org if d.stored_on == "organization" else st
        v = getattr(holder, d.name, None) if holder is not None else None
        if v is None and not d.nullable:
            v = d.default
        if d.type == "float" and v is not None:
            v = float(v)
        out[d.name] = v
    return out


def current(s, org_id) -> dict:
    from kbframework.models import Organization, Setting

    return values_of(s.scalar(select(Setting).where(Setting.organization_id == org_id)),
                     s.get(Organization, org_id))


def legacy_extra(extra: dict) -> dict:
    """The old free-form ``settings.extra`` (nested branding and budget) as declared settings."""
    out: dict = {}
    for d in SETTINGS:
        if not d.extra_path:
            continue
        v: Any = extra
        for part in d.extra_path:
            v = v.get(part) if isinstance(v, dict) else None
        if v is not None:
            out[d.name] = v
    b = extra.get("budget") if isinstance(extra.get("budget"), dict) else {}
    tokens = b.get("monthly_tokens") or extra.get("monthly_token_budget")
    if tokens:
        out.update(budget_unit="tokens", budget_limit=tokens)
    elif b.get("monthly_usd"):
        out.update(budget_unit="cost", budget_limit=b["monthly_usd"])
    return out


def apply(s, org_id, data: dict, *, operator: bool = False, from_text: bool = False) -> bool:
    """Validate and store some settings; returns True when the change needs a re-index.
    Every value is checked before anything is stored; all errors come back together."""
    from kbframework.models import Organization, Setting

    if not isinstance(data, dict):
        raise ValidationFailed("Send the settings as a JSON object.")
    data = dict(data)
    if "extra" in data:  # the old free-form dict, still accepted from API clients
        old = data.pop("extra")
        if not isinstance(old, dict):
            raise ValidationFailed("'extra' must be an object.")
        data = {**legacy_extra(old), **data}
    unknown = [k for k in data if k not in BY_NAME]
    if unknown:
        raise ValidationFailed(f"Unknown setting{'s' if len(unknown) > 1 else ''}: {', '.join(unknown)}.",
                               code="unknown_setting", details={k: ["is not a setting"] for k in unknown})
    errors, clean = {}, {}
    for k, raw in data.items():
        d = BY_NAME[k]
        try:
            clean[k] = coerce(d, raw, from_text=from_text)
        except ValueError as exc:
            msg = str(exc)
            errors[k] = [f"{msg}." if msg[:1].isupper() else f"{d.label} {msg}."]
    if errors:
        raise ValidationFailed("Some settings are not valid.", details=errors)
    org = s.get(Organization, org_id)
    st = s.scalar(select(Setting).where(Setting.organization_id == org_id))
    if st is None:
        st = Setting(organization_id=org_id)
        s.add(st)
        s.flush()
    before = values_of(st, org)
    forbidden = [k for k, v in clean.items()
                 if not operator and not admin_may_change(BY_NAME[k]) and v != before[k]]
    if forbidden:
        d = BY_NAME[forbidden[0]]
        hint = f" (or delegates it with {d.delegate_env}=1)" if d.delegate_env else ""
        raise Forbidden(f"Only the platform operator can change '{d.name}': kbf org set SLUG {d.name}=…{hint}.",
                        code=d.refused_code)
    if not operator:
        for k, v in clean.items():
            if BY_NAME[k].admin_guard and v != before[k]:
                BY_NAME[k].admin_guard(v)
    if clean.get("embedding_provider"):
        from kbframework.hooks import registry

        registry.embedder(clean["embedding_provider"])  # not usable → a clear error
    if clean.get("budget_unit", before["budget_unit"]) != "none" and \
            clean.get("budget_limit", before["budget_limit"]) is None and "budget_unit" in clean:
        raise ValidationFailed("Give the monthly budget a limit (budget_limit) for its unit.",
                               details={"budget_limit": ["Monthly budget needs a value for its unit."]})
    for k, v in clean.items():
        setattr(org if BY_NAME[k].stored_on == "organization" else st, k, v)
    return any(BY_NAME[k].reindex and clean[k] != before[k] for k in clean)
