"""Validation of organization settings edited in the admin (marshmallow)."""
from __future__ import annotations

from marshmallow import Schema, ValidationError, fields, validate

from kbframework.hooks import registry
from kbframework.errors import ValidationFailed


class SettingsInput(Schema):
    preset = fields.String()
    brand = fields.String(allow_none=True, validate=validate.Length(max=200))
    system_prompt = fields.String(allow_none=True, validate=validate.Length(max=20000))
    mode = fields.String(allow_none=True)
    retrieval_limit = fields.Integer(validate=validate.Range(1, 20))
    similarity_floor = fields.Float(validate=validate.Range(-1.0, 1.0))
    response_style = fields.String(allow_none=True)
    history_window = fields.Integer(validate=validate.Range(0, 20))
    night_cutoff = fields.String(validate=validate.Regexp(r"^([01]\d|2[0-3]):[0-5]\d$",
                                                          error="Use HH:MM, e.g. 05:00."))
    timezone = fields.String()
    extra = fields.Dict()


def apply_settings(s, st, data: dict) -> bool:
    """Apply validated settings; returns True when the change requires a re-index."""
    try:
        v = SettingsInput().load(data or {})
    except ValidationError as exc:
        raise ValidationFailed("Some settings are not valid.", details=exc.messages)
    if "preset" in v and v["preset"] not in registry.presets():
        raise ValidationFailed(f"Unknown preset '{v['preset']}'.")
    reindex = False
    for k, val in v.items():
        if k == "timezone":
            from kbframework.orgs.accounts import check_timezone
            from kbframework.models import Organization

            org = s.get(Organization, st.organization_id)
            org.timezone = check_timezone(val)
        elif k == "extra":
            _check_budget(val.get("budget"))
            old = st.extra or {}
            new = {**old, **val}
            if old.get("chunking") != new.get("chunking") or \
                    old.get("embedding_provider") != new.get("embedding_provider"):
                if new.get("embedding_provider"):
                    registry.embedder(new["embedding_provider"])  # unknown provider → clear error
                reindex = True
            st.extra = new
        else:
            setattr(st, k, val)
    return reindex


def _check_budget(b) -> None:
    if b is None:
        return
    if not isinstance(b, dict):
        raise ValidationFailed("'budget' must be an object.")
    for k in ("monthly_tokens", "monthly_usd"):
        v = b.get(k)
        if v is not None and (not isinstance(v, (int, float)) or isinstance(v, bool) or v < 0):
            raise ValidationFailed(f"budget.{k} must be a positive number or null.")
    sp = b.get("soft_pct", 80)
    if not isinstance(sp, (int, float)) or not 1 <= sp <= 100:
        raise ValidationFailed("budget.soft_pct must be between 1 and 100.")
