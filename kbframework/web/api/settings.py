"""The organization's assistant settings."""
from __future__ import annotations

from flask_login import login_required
from sqlalchemy import select

from kbframework.db import session_scope
from kbframework.hooks import registry
from kbframework.models import Setting
from kbframework.web.api.common import blueprint, body, org_id
from kbframework.web.auth import admin_required

bp = blueprint("settings", __name__)


SETTING_FIELDS = ("preset", "brand", "system_prompt", "mode", "retrieval_limit", "similarity_floor",
                  "response_style", "history_window", "night_cutoff")


def settings_to_dict(st: Setting) -> dict:
    out = {f: getattr(st, f) for f in SETTING_FIELDS}
    out["extra"] = st.extra or {}
    out["presets"] = [{"name": p.name, "mode": p.mode, "label": p.label, "prompt_template": p.prompt_template,
                       "fallback_text": p.fallback_text, "role_priority": p.role_priority}
                      for p in registry.presets().values()]
    return out


@bp.get("/settings")
@login_required
def get_settings():
    with session_scope() as s:
        st = s.scalar(select(Setting).where(Setting.organization_id == org_id()))
        return settings_to_dict(st)


@bp.put("/settings")
@admin_required
def put_settings():
    from kbframework.settings_schema import apply_settings

    data = body()
    with session_scope() as s:
        st = s.scalar(select(Setting).where(Setting.organization_id == org_id()))
        reindex = apply_settings(s, st, data)
        out = settings_to_dict(st)
    if reindex:
        from kbframework.jobs.queues import enqueue

        enqueue("reindex", "kbframework.jobs.tasks.reindex_job", str(org_id()), "all")
        out["reindex_queued"] = True
    return out
