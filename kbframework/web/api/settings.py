"""The organization's declared settings (``kbframework.settings``): read them all with what
the form needs to know about each, change some."""
from __future__ import annotations

from flask_login import login_required
from sqlalchemy import select

from kbframework.db import session_scope
from kbframework.hooks import registry
from kbframework.models import Setting
from kbframework.web.api.common import blueprint, body, org_id
from kbframework.web.auth import admin_required

bp = blueprint("settings", __name__)


def settings_to_dict(s, st: Setting) -> dict:
    """Every declared setting's value, and what the form needs to know about each one."""
    from kbframework import settings as declared
    from kbframework.models import Organization

    out = declared.values_of(st, s.get(Organization, st.organization_id))
    out["declared"] = [{"name": d.name, "type": d.type, "default": d.default, "group": d.group, "label": d.label,
                        "help": d.help, "range": d.range_text(), "nullable": d.nullable, "who": d.who,
                        "editable": declared.admin_may_change(d),
                        "choices": list(d.choice_values()) if d.type == "choice" else None}
                       for d in declared.SETTINGS]
    out["presets"] = [{"name": p.name, "mode": p.mode, "label": p.label, "prompt_template": p.prompt_template,
                       "fallback_text": p.fallback_text, "role_priority": p.role_priority}
                      for p in registry.presets().values()]
    return out


@bp.get("/settings")
@login_required
def get_settings():
    with session_scope() as s:
        st = s.scalar(select(Setting).where(Setting.organization_id == org_id()))
        return settings_to_dict(s, st)


@bp.put("/settings")
@admin_required
def put_settings():
    from kbframework import settings as declared

    data = body()
    with session_scope() as s:
        reindex = declared.apply(s, org_id(), data)
        s.flush()
        st = s.scalar(select(Setting).where(Setting.organization_id == org_id()))
        out = settings_to_dict(s, st)
    if reindex:
        from kbframework.jobs.queues import enqueue

        enqueue("reindex", "kbframework.jobs.tasks.reindex_job", str(org_id()), "all")
        out["reindex_queued"] = True
    return out
