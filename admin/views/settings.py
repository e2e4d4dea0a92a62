"""Assistant settings: preset, prompt, retrieval, branding, time zone, providers."""
from __future__ import annotations

from zoneinfo import available_timezones

from flask import flash, redirect, render_template, request, url_for
from flask_login import current_user, login_required
from sqlalchemy import select

from kbframework.db import session_scope
from kbframework.errors import KBError
from kbframework.hooks import registry
from kbframework.models import Organization, Setting
from kbframework.review.providers import providers_info
from kbframework.admin.views.base import bp, field_errors, org, require_admin


@bp.route("/settings", methods=["GET", "POST"])
@login_required
def settings():
    from kbframework.settings_schema import apply_settings
    from kbframework.web.api.settings import settings_to_dict

    errors: dict = {}
    with session_scope() as s:
        st = s.scalar(select(Setting).where(Setting.organization_id == org()))
        o = s.get(Organization, org())
        if request.method == "POST":
            require_admin()
            data, errors = _settings_from_form(st)
            if not errors:
                try:
                    with s.begin_nested():
                        reindex = apply_settings(s, st, data)
                except KBError as exc:
                    errors = field_errors(exc) or {"_": [exc.message]}
                    flash(exc.message, "error")
                else:
                    if reindex:
                        from kbframework.jobs.queues import enqueue

                        enqueue("reindex", "kbframework.jobs.tasks.reindex_job", str(org()), "all")
                    flash("Settings saved. The next answer uses them.", "ok")
                    return redirect(url_for("admin.settings"))
            else:
                flash("Some settings need attention.", "error")
        cur = settings_to_dict(st)
        cur["timezone"] = o.timezone
        if request.method == "POST":  # show what was typed, not what is stored
            cur.update({k: v for k, v in request.form.items() if k in cur and k not in ("extra", "presets")})
            cur["extra"] = {**(cur["extra"] or {}), "branding": {
                k: request.form.get(f"branding_{k}", "") for k in ("color", "logo", "title", "welcome")},
                "fallback_text": request.form.get("fallback_text", "")}
    presets = cur["presets"]
    effective = registry.preset(cur["preset"]).name
    missing = cur["preset"] if cur["preset"] not in registry.presets() else None
    if request.method != "POST":
        cur["preset"] = effective
    from kbframework.retrieval.gate import CALIBRATION

    return render_template("admin_settings.html", st=cur, presets=presets, errors=errors, missing_preset=missing,
                           calibration=CALIBRATION, providers=providers_info(), timezones=sorted(available_timezones()),
                           org_name=current_user.organization_name), (400 if errors else 200)


def _settings_from_form(st) -> tuple[dict, dict]:
    f = request.form
    errors: dict = {}
    data: dict = {"preset": f.get("preset") or st.preset, "brand": (f.get("brand") or "").strip() or None,
                  "timezone": (f.get("timezone") or "").strip(), "night_cutoff": (f.get("night_cutoff") or "").strip()}
    prompt = (f.get("system_prompt") or "").replace("\r\n", "\n").strip()
    preset = registry.presets().get(data["preset"])
    if preset is not None and prompt == preset.prompt_template.strip():
        prompt = ""  # unchanged preset wording: keep following the preset
    data["system_prompt"] = prompt or None
    for name, cast, label in (("retrieval_limit", int, "Retrieval limit"), ("history_window", int, "History window"),
                              ("similarity_floor", float, "Similarity floor")):
        raw = (f.get(name) or "").strip()
        try:
            data[name] = cast(raw)
        except ValueError:
            errors[name] = [f"{label} must be a number."]
    color = (f.get("branding_color") or "").strip()
    logo = (f.get("branding_logo") or "").strip()
    import re

    if color and not re.fullmatch(r"#[0-9a-fA-F]{6}", color):
        errors["branding_color"] = ["Use a colour like #2f6fed."]
    if logo and not re.match(r"^https?://", logo) and not logo.startswith("/"):
        errors["branding_logo"] = ["The logo must be a web address (https://…)."]
    raw_t = (f.get("answer_threshold") or "").strip()
    threshold = None
    if raw_t:
        try:
            threshold = float(raw_t)
        except ValueError:
            errors["answer_threshold"] = ["The answer threshold must be a number (or empty for the default)."]
    data["extra"] = {"answer_threshold": threshold, "branding": {"color": color or None, "logo": logo or None,
                                  "title": (f.get("branding_title") or "").strip() or None,
                                  "welcome": (f.get("branding_welcome") or "").strip() or None},
                     "fallback_text": (f.get("fallback_text") or "").strip() or None}
    if not data["timezone"]:
        errors["timezone"] = ["Choose a time zone."]
    return data, errors
