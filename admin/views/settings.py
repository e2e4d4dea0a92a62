"""Settings: the declared settings page and the budget form of the usage page. Both are drawn from the declared
settings (``kbframework.settings``) and save through the same ``apply`` as the API and
``kbf org set``; a setting the operator keeps for themselves is shown read-only."""
from __future__ import annotations

from zoneinfo import available_timezones

from flask import flash, redirect, render_template, request, url_for
from flask_login import current_user, login_required
from sqlalchemy import select

from kbframework import settings as declared
from kbframework.db import session_scope
from kbframework.errors import KBError
from kbframework.hooks import registry
from kbframework.models import Organization, Setting
from kbframework.review.providers import providers_info

from kbframework.admin.views.base import bp, field_errors, org, require_admin

# drawn by hand in the template (preset cards, the prompt editor, the branding preview)
HAND_DRAWN = ("preset", "brand", "system_prompt", "fallback_text", "retrieval_limit", "similarity_floor",
              "history_window", "timezone", "night_cutoff", "answer_threshold", "branding_title", "branding_color",
              "branding_logo", "branding_welcome")
BUDGET_FIELDS = ("budget_unit", "budget_limit", "budget_soft_pct", "budget_hard_stop")
GROUP_TITLES = {"assistant": "More assistant options", "retrieval": "More retrieval options"}


def field_info(d) -> dict:
    return {"name": d.name, "type": d.type, "label": d.label, "help": d.help, "range": d.range_text(),
            "nullable": d.nullable, "min": d.min, "max": d.max, "group": d.group,
            "choices": list(d.choice_values()) if d.type == "choice" else None,
            "editable": declared.admin_may_change(d), "delegate_env": d.delegate_env}


def generic_sections(names=None) -> list[dict]:
    out = []
    for group, title in declared.GROUPS.items():
        fields = [field_info(d) for d in declared.SETTINGS
                  if d.group == group and d.name not in HAND_DRAWN and (names is None or d.name in names)]
        if fields:
            out.append({"group": group, "title": GROUP_TITLES.get(group, title), "fields": fields})
    return out


def form_data(names) -> dict:
    """The posted text of the declared settings the admin may change (absent fields untouched)."""
    data = {}
    for name in names:
        d = declared.BY_NAME[name]
        if not declared.admin_may_change(d) or name not in request.form:
            continue
        vals = request.form.getlist(name)
        data[name] = vals[-1] if vals else ""  # a checkbox posts "false" (hidden) then "true"
    return data


def save(data: dict) -> tuple[bool, dict]:
    """(saved, errors); queues the re-index a changed chunking or embedding model needs."""
    try:
        with session_scope() as s:
            reindex = declared.apply(s, org(), data, from_text=True)
    except KBError as exc:
        errors = field_errors(exc)
        # the summary, then what each field needs (the usage page's budget form has no field slots)
        flash(exc.message if not errors or request.endpoint == "admin.settings"
              else " ".join(m for v in errors.values() for m in v), "error")
        return False, errors or {"_": [exc.message]}
    if reindex:
        from kbframework.jobs.queues import enqueue

        enqueue("reindex", "kbframework.jobs.tasks.reindex_job", str(org()), "all")
        flash("The change re-indexes every document; answers keep using the old index until then.", "ok")
    return True, {}


@bp.route("/settings", methods=["GET", "POST"])
@login_required
def settings():
    errors: dict = {}
    if request.method == "POST":
        require_admin()
        data = form_data([d.name for d in declared.SETTINGS])
        prompt = (data.get("system_prompt") or "").replace("\r\n", "\n").strip()
        preset = registry.presets().get(data.get("preset") or "")
        if "system_prompt" in data and preset is not None and prompt == preset.prompt_template.strip():
            data["system_prompt"] = ""  # unchanged preset wording: keep following the preset
        if "timezone" in data and not data["timezone"].strip():
            errors = {"timezone": ["Choose a time zone."]}
            flash("Some settings need attention.", "error")
        else:
            ok, errors = save(data)
            if ok:
                flash("Settings saved. The next answer uses them.", "ok")
                return redirect(url_for("admin.settings"))
    with session_scope() as s:
        st = s.scalar(select(Setting).where(Setting.organization_id == org()))
        cur = declared.values_of(st, s.get(Organization, org()))
    if request.method == "POST":  # show what was typed, not what is stored
        cur.update({k: v for k, v in request.form.items() if k in cur})
    presets = [{"name": p.name, "mode": p.mode, "label": p.label, "prompt_template": p.prompt_template,
                "fallback_text": p.fallback_text, "role_priority": p.role_priority}
               for p in registry.presets().values()]
    missing = cur["preset"] if cur["preset"] not in registry.presets() else None
    if request.method != "POST":
        cur["preset"] = registry.preset(cur["preset"]).name
    from kbframework.retrieval.gate import CALIBRATION

    return render_template("admin_settings.html", st=cur, presets=presets, errors=errors, missing_preset=missing,
                           calibration=CALIBRATION, sections=generic_sections(), providers=providers_info(),
                           timezones=sorted(available_timezones()), org_name=current_user.organization_name,
                           org_slug=current_user.organization_slug), (400 if errors else 200)


@bp.post("/usage/budget")
@login_required
def usage_budget():
    require_admin()
    ok, _ = save(form_data(BUDGET_FIELDS))
    if ok:
        flash("Budget saved.", "ok")
    return redirect(url_for("admin.usage", month=request.form.get("month") or None))


def is_operator() -> bool:
    """A platform operator signed in to the admin: their e-mail is in ``KB_OPERATOR_EMAILS``."""
    import os

    emails = {e.strip().lower() for e in os.environ.get("KB_OPERATOR_EMAILS", "").split(",") if e.strip()}
    return bool(getattr(current_user, "is_authenticated", False)) and \
        (getattr(current_user, "email", "") or "").lower() in emails


@bp.app_context_processor
def _operator_context():
    return {"is_operator": is_operator()} if request.blueprint == "admin" else {}


@bp.post("/organization/delete")
@login_required
def organization_delete():
    """The operator's admin action: delete this organization and everything it owns."""
    from flask import session
    from flask_login import logout_user

    from kbframework.errors import Forbidden, ValidationFailed
    from kbframework.orgs.lifecycle import delete_organization

    if not is_operator():
        raise Forbidden("Only a platform operator (KB_OPERATOR_EMAILS) can delete an organization.")
    slug = current_user.organization_slug
    if (request.form.get("confirm") or "").strip() != slug:
        raise ValidationFailed(f"Type the organization's slug, “{slug}”, to confirm.")
    res = delete_organization(org())
    logout_user()
    session.clear()
    flash(f"Organization “{res['organization']}” and everything it owned were deleted.", "ok")
    return redirect(url_for("auth.login"))
