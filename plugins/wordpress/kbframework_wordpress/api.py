"""Admin helper route: what can this WordPress site give us?

``POST /api/admin/v1/wordpress/discover`` (admin, CSRF) with ``{"source_id": "…"}`` (use a
saved source's settings and secrets) or ``{"config": {...}}`` (a source being created).
Answers ``{"authenticated_as", "types": [{slug, name, rest_base, default_role}],
"fields": {post_type: [field paths of one published item]}}`` — the post types the site
exposes and the paths a field mapping can use.
"""
from __future__ import annotations

from flask import Blueprint, request
from flask_login import current_user
from marshmallow import ValidationError

from kbframework.orgs.accounts import as_uuid
from kbframework.db import session_scope
from kbframework.errors import ValidationFailed
from kbframework.web.auth import admin_required

bp = Blueprint("kbf_wordpress", __name__, url_prefix="/api/admin/v1/wordpress")


@bp.post("/discover")
@admin_required
def discover():
    from kbframework.hooks import registry
    from kbframework.sources.config import get_source
    from kbframework.sources.sync import source_config, sync_context

    data = request.get_json(silent=True)
    if not isinstance(data, dict):
        raise ValidationFailed("Send a JSON object with 'source_id' or 'config'.")
    connector = registry.source_type("wordpress")
    org_id = as_uuid(current_user.organization_id)
    with session_scope() as s:
        if data.get("source_id"):
            src = get_source(s, org_id, data["source_id"])
            if src.type != "wordpress":
                raise ValidationFailed("That source is not a WordPress source.")
            config, ctx = source_config(src), sync_context(s, src)
        else:
            try:
                config = connector.config_schema().load(data.get("config") or {})
            except ValidationError as exc:
                raise ValidationFailed("The source configuration is not valid.", details=exc.messages)
            from kbframework.models import Organization, Setting
            from kbframework.types import SyncContext
            from sqlalchemy import select

            org = s.get(Organization, org_id)
            st = s.scalar(select(Setting).where(Setting.organization_id == org_id))
            from kbframework.net import organization_policy

            ctx = SyncContext(organization_id=str(org_id), timezone=org.timezone,
                              allow_private_network=organization_policy((st.extra if st else {}) or {}))
    return connector.discover(config, ctx, sample=bool(data.get("sample", True)))
