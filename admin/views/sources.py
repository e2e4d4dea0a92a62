"""Source pages: the list, adding one (a form generated from the connector's config schema), its detail page, sync, status and delete."""
from __future__ import annotations

import json

from flask import flash, g, redirect, render_template, request, url_for
from flask_login import current_user, login_required
from marshmallow import fields as mfields
from marshmallow import validate as mvalidate
from sqlalchemy import select

from kbframework.db import session_scope
from kbframework.errors import KBError, NotFound, ValidationFailed
from kbframework.hooks import registry
from kbframework.models import Source, SyncRun
from kbframework.sources.health import run_to_dict, source_health
from kbframework.web.auth import admin_required
from kbframework.admin.views.base import back, bp, field_errors, opt_int, org, require_admin


def describe_fields(connector) -> list[dict]:
    """The form for a connector, generated from its marshmallow config schema."""
    base = {f["name"]: f for t in extra_source_types() if t["name"] == connector.name for f in t["fields"]}
    schema = connector.config_schema() if connector.config_schema else None
    out = []
    for name, f in (schema.fields.items() if schema else []):
        if name == "sync_interval_minutes":
            continue  # its own field on every sync-capable source form
        d = dict(base.get(name) or {"name": name, "type": type(f).__name__, "required": f.required,
                                    "secret": name in connector.secret_fields,
                                    "default": None, "help": None})
        md = f.metadata or {}
        d["label"] = md.get("label") or _label(name)
        d["help"] = d.get("help") or md.get("description") or md.get("help")
        d["choices"] = None
        for v in list(getattr(f, "validators", None) or []):
            if isinstance(v, mvalidate.OneOf):
                d["choices"] = list(v.choices)
        d["allow_none"] = bool(getattr(f, "allow_none", False))
        if d["secret"]:
            d["widget"] = "password"
        elif d["choices"]:
            d["widget"] = "select"
        elif isinstance(f, mfields.Boolean):
            d["widget"] = "checkbox"
        elif isinstance(f, (mfields.Integer, mfields.Float, mfields.Decimal)):
            d["widget"] = "number"
            d["step"] = "1" if isinstance(f, mfields.Integer) else "any"
        elif isinstance(f, mfields.List) and isinstance(getattr(f, "inner", None), (mfields.String, mfields.Url)):
            d["widget"] = "lines"
        elif isinstance(f, mfields.Url):
            d["widget"] = "url"
        elif isinstance(f, (mfields.String, mfields.Email, mfields.DateTime, mfields.Date, mfields.UUID)) \
                and "mapping" not in name:
            d["widget"] = "text"
        else:  # Dict, Nested, List of objects, Raw, a connector's own field (a mapping): JSON
            d["widget"] = "json"
        d["mapping"] = d["widget"] == "json" and "mapping" in name
        # what the JSON editor accepts: a list field takes [ … ], a mapping { … }
        d["json_kind"] = "array" if isinstance(f, mfields.List) else "any" if type(f) is mfields.Raw else "object"
        out.append(d)
    return out


def _label(name: str) -> str:
    words = name.replace("_", " ").split()
    fix = {"url": "URL", "urls": "URLs", "api": "API", "id": "ID", "ssl": "SSL", "json": "JSON"}
    out = " ".join(fix.get(w.lower(), w) for w in words)
    return out[:1].upper() + out[1:]


def extra_source_types() -> list[dict]:
    from kbframework.sources.config import describe_source_types

    if "source_types" not in g:
        g.source_types = describe_source_types()
    return g.source_types


def mapping_example(connector) -> str:
    return json.dumps(connector.mapping_example or {}, indent=2)


def config_from_form(fields: list[dict], form, editing: bool) -> tuple[dict, dict]:
    """Form values → the config dict the connector's schema loads; (config, field errors)."""
    cfg, errors = {}, {}
    for fd in fields:
        n = fd["name"]
        key = f"cfg_{n}"
        if fd["widget"] == "checkbox":
            vals = form.getlist(key)
            if vals:
                cfg[n] = vals[-1] in ("true", "on", "1")
            continue
        raw = form.get(key)
        if raw is None:
            continue
        raw = raw.strip()
        if raw == "" and fd["widget"] == "json" and fd.get("json_kind") in ("array", "object"):
            cfg[n] = [] if fd["json_kind"] == "array" else {}  # an emptied editor means "none"
            continue
        if raw == "":
            if editing and not fd["secret"] and fd["allow_none"]:
                cfg[n] = None
            continue
        if fd["widget"] == "json":
            try:
                cfg[n] = json.loads(raw)
            except json.JSONDecodeError as exc:
                errors[n] = [f"Not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})."]
        elif fd["widget"] == "lines":
            cfg[n] = [x.strip() for x in raw.replace(",", "\n").split("\n") if x.strip()]
        else:
            cfg[n] = raw
    return cfg, errors


def form_values(fields: list[dict], config: dict) -> dict:
    out = {}
    for fd in fields:
        v = config.get(fd["name"], fd.get("default"))
        if fd["secret"]:
            out[fd["name"]] = ""
        elif fd["widget"] == "json":
            out[fd["name"]] = json.dumps(v, indent=2) if v not in (None, "") else ""
        elif fd["widget"] == "lines":
            out[fd["name"]] = "\n".join(v or []) if isinstance(v, list) else (v or "")
        else:
            out[fd["name"]] = v
    return out


def _source_rows(s) -> list[dict]:
    from kbframework.sources.config import source_to_dict

    rows = s.scalars(select(Source).where(Source.organization_id == org()).order_by(Source.created_at)).all()
    out = []
    for src in rows:
        run = s.scalar(select(SyncRun).where(SyncRun.source_id == src.id).order_by(SyncRun.started_at.desc())
                       .limit(1))
        d = source_to_dict(src, s)
        d["health"] = source_health(src, run)
        d["last_run"] = run_to_dict(run) if run else None
        connector = registry.source_types().get(src.type)
        d["label"] = connector.label if connector else src.type
        d["supports_sync"] = bool(connector and connector.supports_sync)
        d["edited_in_admin"] = bool(connector and connector.edited_in_admin)
        out.append(d)
    return out


@bp.get("/sources")
@login_required
def sources():
    with session_scope() as s:
        rows = _source_rows(s)
    return render_template("admin_sources.html", sources=rows, types=extra_source_types(),
                           uploads={t["name"]: upload_url(t["name"]) for t in extra_source_types()})


def upload_url(type_: str) -> str | None:
    """Where a file of this source type is uploaded, when its connector accepts files."""
    connector = registry.source_types().get(type_)
    if connector is None or not connector.accepts_uploads:
        return None
    return url_for("api_uploads.upload_file", type_=type_)


@bp.route("/sources/new/<type_>", methods=["GET", "POST"])
@login_required
def source_new(type_):
    if type_ not in registry.source_types():
        raise NotFound(f"There is no “{type_}” source type here. Installed: "
                       f"{', '.join(sorted(registry.source_types())) or 'none'}.")
    connector = registry.source_type(type_)
    if connector.edited_in_admin:
        return redirect(url_for("admin.knowledge_new"))
    if upload_url(type_) and request.method == "GET":
        return render_template("admin_upload.html", connector=connector, upload_url=upload_url(type_),
                               replace=None)
    fields = describe_fields(connector)
    values, errors, name, interval = form_values(fields, {}), {}, "", ""
    if request.method == "POST":
        require_admin()
        name = request.form.get("name", "").strip()
        interval = request.form.get("sync_interval_minutes", "").strip()
        cfg, errors = config_from_form(fields, request.form, editing=False)
        values = {**values, **{k: request.form.get(f"cfg_{k}", "") for k in values}}
        if not errors:
            from kbframework.sources.config import create_source

            try:
                with session_scope() as s:
                    src = create_source(s, org(), {"type": type_, "name": name, "config": cfg,
                                                   "sync_interval_minutes": opt_int(interval, "Sync interval")})
                    sid = src.id
                flash(f"Source “{name}” added. Run a first sync to fetch its content.", "ok")
                return redirect(url_for("admin.source_detail", source_id=sid))
            except KBError as exc:
                errors = field_errors(exc)
                flash(exc.message, "error")
        else:
            flash("Some fields need attention.", "error")
    return render_template("admin_source_form.html", connector=connector, fields=fields, values=values,
                           errors=errors, name=name, interval=interval, src=None,
                           example=mapping_example(connector),
                           mapping_help=connector.mapping_help), (400 if errors else 200)


@bp.route("/sources/<source_id>", methods=["GET", "POST"])
@login_required
def source_detail(source_id):
    from kbframework.sources.config import get_source, source_to_dict, update_source

    errors: dict = {}
    with session_scope() as s:
        src = get_source(s, org(), source_id)
        connector = registry.source_types().get(src.type)
        fields = describe_fields(connector) if connector else []
        values = form_values(fields, src.config or {})
        name, interval = src.name, src.sync_interval_minutes or ""
        if request.method == "POST":
            require_admin()
            name = request.form.get("name", "").strip()
            interval = request.form.get("sync_interval_minutes", "").strip()
            cfg, errors = config_from_form(fields, request.form, editing=True)
            values = {**values, **{k: request.form.get(f"cfg_{k}", "") for k in values}}
            if not errors:
                try:
                    with s.begin_nested():
                        update_source(s, org(), source_id, {"name": name, "config": cfg,
                                                            "sync_interval_minutes": opt_int(interval, "Sync interval")})
                except KBError as exc:
                    errors = field_errors(exc)
                    flash(exc.message, "error")
            else:
                flash("Some fields need attention.", "error")
            if not errors:
                flash("Configuration saved. The next sync uses it.", "ok")
                return redirect(url_for("admin.source_detail", source_id=source_id))
            s.rollback()
            src = get_source(s, org(), source_id)
        info = source_to_dict(src, s)
        run = s.scalar(select(SyncRun).where(SyncRun.source_id == src.id).order_by(SyncRun.started_at.desc())
                       .limit(1))
        info["health"] = source_health(src, run)
        info["label"] = connector.label if connector else src.type
        info["supports_sync"] = bool(connector and connector.supports_sync)
        info["supports_webhooks"] = bool(connector and connector.accepts_webhooks)
        info["edited_in_admin"] = bool(connector and connector.edited_in_admin)
        runs = s.scalars(select(SyncRun).where(SyncRun.source_id == src.id)
                         .order_by(SyncRun.started_at.desc()).limit(30)).all()
        history = [run_to_dict(r) for r in runs]
        webhook_secret = None
        if current_user.is_admin and info["supports_webhooks"] and src.secrets:
            from kbframework.security import decrypt_json

            webhook_secret = decrypt_json(src.secrets).get("webhook_secret")
    return render_template("admin_source_detail.html", src=info, connector=connector, fields=fields,
                           values=values, errors=errors, name=name, interval=interval, history=history,
                           webhook_url=f"{request.host_url.rstrip('/')}/api/webhooks/v1/{info['type']}/{info['id']}",
                           webhook_secret=webhook_secret,
                           example=mapping_example(connector) if connector else "{}",
                           mapping_help=connector.mapping_help if connector else None), (400 if errors else 200)


@bp.post("/sources/<source_id>/sync")
@admin_required
def source_sync(source_id):
    from kbframework.jobs.queues import enqueue
    from kbframework.sources.config import get_source

    kind = request.form.get("kind", "incremental")
    if kind not in ("full", "incremental"):
        raise ValidationFailed("Choose a full or an incremental sync.")
    with session_scope() as s:
        src = get_source(s, org(), source_id)
        if src.status == "disabled":
            raise KBError("This source is disabled; enable it first.", code="source_disabled", status=409)
        connector = registry.source_type(src.type)
        if not connector.supports_sync:
            raise ValidationFailed(f"{connector.label} has nothing to sync.")
        name = src.name
    enqueue("sync", "kbframework.jobs.tasks.sync_source_job", str(source_id), kind)
    flash(f"{'Full' if kind == 'full' else 'Incremental'} sync of “{name}” queued; refresh in a moment "
          f"to see it in the history.", "ok")
    return back("admin.source_detail", source_id=source_id)


@bp.post("/sources/<source_id>/status")
@admin_required
def source_status(source_id):
    from kbframework.sources.config import update_source

    status = request.form.get("status")
    with session_scope() as s:
        src = update_source(s, org(), source_id, {"status": status})
        name = src.name
    flash(f"“{name}” is now {'disabled: it is not synced and its documents stay as they are' if status == 'disabled' else 'enabled'}.", "ok")
    return back("admin.source_detail", source_id=source_id)


@bp.post("/sources/<source_id>/delete")
@admin_required
def source_delete(source_id):
    from kbframework.sources.config import get_source

    with session_scope() as s:
        src = get_source(s, org(), source_id)
        name = src.name
        s.delete(src)
    flash(f"Source “{name}” and its documents were deleted.", "ok")
    return redirect(url_for("admin.sources"))
