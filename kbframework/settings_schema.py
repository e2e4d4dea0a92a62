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
            _check_gate(val)
            old = st.extra or {}
            _check_private_network(old, val)
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


def _check_private_network(old: dict, new: dict) -> None:
    """Private-network access is the operator's decision: an organization may switch its
    ``allow_private_network`` on only when the operator delegated the switch
    (``KB_TENANT_PRIVATE_NETWORK=1``); switching it off (narrowing) is always allowed."""
    if "allow_private_network" not in new:
        return
    value = new["allow_private_network"]
    if not isinstance(value, bool):
        raise ValidationFailed("'allow_private_network' must be true or false.")
    if value and old.get("allow_private_network") is not True:
        from kbframework.errors import Forbidden
        from kbframework.net import operator_policy, private_network_delegated

        if not private_network_delegated():
            raise Forbidden("Private network access is decided by the operator of this instance "
                            "(KB_ALLOW_PRIVATE_NETWORK); it cannot be switched on per organization here.",
                            code="private_network_not_delegated")
        if not operator_policy().permits_private:
            raise Forbidden("The operator of this instance does not allow private network addresses "
                            "(KB_ALLOW_PRIVATE_NETWORK is off).", code="private_network_not_allowed")


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


def _check_gate(extra: dict) -> None:
    """The answerability gate's per-organization override and the synonyms its overlap uses."""
    t = extra.get("answer_threshold")
    if t is not None and (isinstance(t, bool) or not isinstance(t, (int, float)) or not -1.0 <= t <= 3.0):
        raise ValidationFailed("answer_threshold must be a number between -1 and 3 (or null for the default).")
    syn = extra.get("synonyms")
    if syn is not None and (not isinstance(syn, dict) or not all(
            isinstance(k, str) and (isinstance(v, str) or (isinstance(v, list) and all(isinstance(x, str) for x in v)))
            for k, v in syn.items())):
        raise ValidationFailed("synonyms must map a word to a word or a list of words.")
