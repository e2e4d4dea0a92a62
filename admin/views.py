"""The admin pages: server-rendered Jinja, forms that post back with a CSRF field, and a
little JavaScript (admin.js) for the test chat, the markdown preview and copy buttons.

Every page needs a login and only ever sees the caller's organization: lookups go through
the organization-scoped service functions (documents, sources, keys, feedback), so another
organization's id is a 404. Members read everything; every write needs the admin role.
"""
from __future__ import annotations

import json
import uuid
from datetime import date, datetime, timezone
from zoneinfo import ZoneInfo, available_timezones

from flask import Blueprint, flash, g, redirect, render_template, request, url_for
from flask_login import current_user, login_required
from marshmallow import fields as mfields
from marshmallow import validate as mvalidate
from sqlalchemy import func, select
from werkzeug.exceptions import HTTPException

from kbframework.sources import documents as docs
from kbframework.hooks import registry
from kbframework.orgs.accounts import as_uuid
from kbframework.db import session_scope
from kbframework.errors import KBError, NotFound, ValidationFailed
from kbframework.models import (ChatLog, Chunk, Document, Organization, Setting, Source, SyncRun)
from kbframework.types import DOCUMENT_ROLES
from kbframework.web import api_admin_extra as extra
from kbframework.web.auth import admin_required

bp = Blueprint("admin", __name__, url_prefix="/admin", template_folder="templates",
               static_folder="static")

NAV = (
    ("admin.dashboard", "Dashboard", "home"),
    ("admin.sources", "Sources", "plug"),
    ("admin.documents", "Documents", "file"),
    ("admin.knowledge", "Knowledge", "pen"),
    ("admin.chat", "Test chat", "chat"),
    ("admin.feedback", "Feedback", "thumb"),
    ("admin.zero_results", "Zero results", "search"),
    ("admin.keys", "Embed keys", "key"),
    ("admin.usage", "Usage", "chart"),
    ("admin.settings", "Settings", "gear"),
)
SECTION_OF = {  # which nav item an endpoint belongs to
    "admin.source_new": "admin.sources", "admin.source_detail": "admin.sources",
    "admin.document_detail": "admin.documents", "admin.knowledge_new": "admin.knowledge",
    "admin.knowledge_edit": "admin.knowledge", "admin.feedback_detail": "admin.feedback",
}
CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: https: http:; "
       "connect-src 'self'; frame-ancestors 'none'; base-uri 'self'; form-action 'self'")


def org():
    return as_uuid(current_user.organization_id)


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


# --------------------------------------------------------------------------- request plumbing


@bp.before_request
def _load_org():
    g.org_tz = "UTC"
    if request.endpoint != "admin.static" and current_user.is_authenticated:
        with session_scope() as s:
            o = s.get(Organization, org())
            if o is not None:
                g.org_tz = o.timezone


@bp.after_request
def _headers(resp):
    if resp.mimetype == "text/html":
        resp.headers.setdefault("Content-Security-Policy", CSP)
        resp.headers.setdefault("X-Frame-Options", "DENY")
        resp.headers.setdefault("Referrer-Policy", "same-origin")
        resp.headers.setdefault("Cache-Control", "no-store")
    resp.headers.setdefault("X-Content-Type-Options", "nosniff")
    return resp


@bp.errorhandler(KBError)
def _kb_error(exc: KBError):
    if not current_user.is_authenticated:
        from kbframework.web.errors import error_response

        return error_response(exc.status, exc.code, exc.message)
    return render_template("admin_error.html", status=exc.status, message=exc.message,
                           details=exc.details or None), exc.status


@bp.errorhandler(HTTPException)
def _http_error(exc: HTTPException):
    messages = {404: "There is nothing here, or it belongs to another organization.",
                405: "That action cannot be done this way."}
    if not current_user.is_authenticated:
        from kbframework.web.errors import error_response

        return error_response(exc.code or 500, "http_error", exc.description or exc.name)
    return render_template("admin_error.html", status=exc.code,
                           message=messages.get(exc.code, exc.description)), exc.code


@bp.app_template_filter("dt")
def _dt(value, fmt: str = "%d %b %Y, %H:%M"):
    """A time in the organization's time zone."""
    if not value:
        return "—"
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            return value
    if isinstance(value, datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=timezone.utc)
        value = value.astimezone(ZoneInfo(getattr(g, "org_tz", "UTC") or "UTC"))
    return value.strftime(fmt)


@bp.app_template_filter("ago")
def _ago(value):
    if not value:
        return "never"
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            return value
    if value.tzinfo is None:
        value = value.replace(tzinfo=timezone.utc)
    secs = (utcnow() - value).total_seconds()
    if secs < 0:
        secs = -secs
        for n, unit in ((86400, "day"), (3600, "hour"), (60, "minute")):
            if secs >= n:
                k = int(secs // n)
                return f"in {k} {unit}{'s' if k != 1 else ''}"
        return "in a moment"
    for n, unit in ((86400 * 30, "month"), (86400, "day"), (3600, "hour"), (60, "minute")):
        if secs >= n:
            k = int(secs // n)
            return f"{k} {unit}{'s' if k != 1 else ''} ago"
    return "just now"


@bp.app_template_filter("num")
def _num(value):
    try:
        return f"{int(value):,}"
    except (TypeError, ValueError):
        return value


@bp.app_template_filter("money")
def _money(value):
    v = float(value or 0)
    return f"${v:,.4f}" if 0 < v < 1 else f"${v:,.2f}"


@bp.app_template_filter("tojson_pretty")
def _tojson_pretty(value):
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


@bp.app_context_processor
def _layout_context():
    if not request.blueprint == "admin":
        return {}
    active = SECTION_OF.get(request.endpoint, request.endpoint)
    is_admin = bool(getattr(current_user, "is_admin", False))
    return {"nav": NAV, "nav_active": active, "is_admin": is_admin, "readonly": not is_admin,
            "roles": DOCUMENT_ROLES}


def back(default_endpoint: str, **kw):
    """Redirect to the form's ``next`` (same-site paths only) or a default page."""
    nxt = request.form.get("next") or request.args.get("next") or ""
    if nxt.startswith("/") and not nxt.startswith("//"):
        return redirect(nxt)
    return redirect(url_for(default_endpoint, **kw))


def _int_arg(name: str, default: int, lo: int = 1, hi: int = 10_000) -> int:
    try:
        v = int(request.args.get(name) or default)
    except ValueError:
        raise ValidationFailed(f"'{name}' must be a whole number.")
    return max(lo, min(hi, v))


# --------------------------------------------------------------------------- dashboard


@bp.get("/")
@login_required
def dashboard():
    with session_scope() as s:
        summary = extra.dashboard_summary(s, org())
    types = registry.source_types()
    return render_template("admin_dashboard.html", d=summary,
                           type_labels={n: getattr(c, "label", n) for n, c in types.items()})


# --------------------------------------------------------------------------- sources


def describe_fields(connector) -> list[dict]:
    """The form for a connector, generated from its marshmallow config schema."""
    base = {f["name"]: f for t in extra_source_types() if t["name"] == connector.name for f in t["fields"]}
    schema = connector.config_schema() if getattr(connector, "config_schema", None) else None
    out = []
    for name, f in (schema.fields.items() if schema else []):
        if name == "sync_interval_minutes":
            continue  # its own field on every sync-capable source form
        d = dict(base.get(name) or {"name": name, "type": type(f).__name__, "required": f.required,
                                    "secret": name in getattr(connector, "secret_fields", ()),
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
        out.append(d)
    return out


def _label(name: str) -> str:
    words = name.replace("_", " ").split()
    fix = {"url": "URL", "urls": "URLs", "api": "API", "id": "ID", "ssl": "SSL", "json": "JSON"}
    out = " ".join(fix.get(w.lower(), w) for w in words)
    return out[:1].upper() + out[1:]


MAPPING_HELP = {
    "woocommerce": "Targets: text, metadata, tags, ignore, column:venue (or city, event_start, event_end, "
                   "expires_at, primary_image_url, source_url), joined with + like text+tags. Sections: "
                   "attributes, meta, acf, columns.",
    "wordpress": "One entry per post type selected above: role, type, text (field paths in order, e.g. "
                 "title.rendered, acf.*), columns (event_start, venue, city…), metadata, ignore.",
}


def extra_source_types() -> list[dict]:
    from kbframework.sources.config import describe_source_types

    if "source_types" not in g:
        g.source_types = describe_source_types()
    return g.source_types


MAPPING_EXAMPLES = {
    "woocommerce": {
        "attributes": {"Color": "text+tags", "Size": "metadata", "Brand": "text+metadata"},
        "meta": {"_warranty": "text", "gtin": "metadata"},
        "acf": {"material": "text"},
        "columns": {"acf.venue_name": "venue", "acf.city": "city"},
    },
    "wordpress": {
        "post": {"role": "article",
                 "text": ["title.rendered", "content.rendered", {"path": "acf.venue", "label": "Venue"}],
                 "columns": {"event_start": "acf.event_date", "venue": "acf.venue"},
                 "metadata": {"ticket_url": "acf.ticket_url"},
                 "ignore": ["acf.internal_*"]},
        "page": {"role": "support"},
    },
}


def mapping_example(connector) -> str:
    ex = getattr(connector, "mapping_example", None)
    if callable(ex):
        ex = ex()
    if ex is None:
        ex = MAPPING_EXAMPLES.get(connector.name, {})
    return json.dumps(ex, indent=2)


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
    from kbframework.web.api_admin import source_to_dict

    rows = s.scalars(select(Source).where(Source.organization_id == org()).order_by(Source.created_at)).all()
    out = []
    for src in rows:
        run = s.scalar(select(SyncRun).where(SyncRun.source_id == src.id).order_by(SyncRun.started_at.desc())
                       .limit(1))
        d = source_to_dict(src, s)
        d["health"] = extra.source_health(src, run)
        d["last_run"] = extra.run_to_dict(run) if run else None
        connector = registry.source_types().get(src.type)
        d["label"] = getattr(connector, "label", src.type) if connector else src.type
        d["supports_sync"] = bool(connector and getattr(connector, "supports_sync", True))
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
    """A source type whose documents are uploaded (PDF) has ``POST /api/admin/v1/upload/<type>``."""
    from flask import current_app

    path = f"/api/admin/v1/upload/{type_}"
    return path if any(r.rule == path for r in current_app.url_map.iter_rules()) else None


@bp.route("/sources/new/<type_>", methods=["GET", "POST"])
@login_required
def source_new(type_):
    if type_ not in registry.source_types():
        raise NotFound(f"There is no “{type_}” source type here. Installed: "
                       f"{', '.join(sorted(registry.source_types())) or 'none'}.")
    connector = registry.source_type(type_)
    if type_ == "manual":
        return redirect(url_for("admin.knowledge_new"))
    if upload_url(type_) and request.method == "GET":
        return render_template("admin_upload.html", connector=connector, upload_url=upload_url(type_),
                               replace=None)
    fields = describe_fields(connector)
    values, errors, name, interval = form_values(fields, {}), {}, "", ""
    if request.method == "POST":
        _require_admin()
        name = request.form.get("name", "").strip()
        interval = request.form.get("sync_interval_minutes", "").strip()
        cfg, errors = config_from_form(fields, request.form, editing=False)
        values = {**values, **{k: request.form.get(f"cfg_{k}", "") for k in values}}
        if not errors:
            from kbframework.sources.config import create_source

            try:
                with session_scope() as s:
                    src = create_source(s, org(), {"type": type_, "name": name, "config": cfg,
                                                   "sync_interval_minutes": _opt_int(interval, "Sync interval")})
                    sid = src.id
                flash(f"Source “{name}” added. Run a first sync to fetch its content.", "ok")
                return redirect(url_for("admin.source_detail", source_id=sid))
            except KBError as exc:
                errors = _field_errors(exc)
                flash(exc.message, "error")
        else:
            flash("Some fields need attention.", "error")
    return render_template("admin_source_form.html", connector=connector, fields=fields, values=values,
                           errors=errors, name=name, interval=interval, src=None,
                           example=mapping_example(connector),
                           mapping_help=MAPPING_HELP.get(type_)), (400 if errors else 200)


def _require_admin():
    if not current_user.is_admin:
        from kbframework.errors import Forbidden

        raise Forbidden("Only admins can change this; members have read-only access.")


def _opt_int(v, label):
    if v in (None, ""):
        return None
    try:
        n = int(v)
    except ValueError:
        raise ValidationFailed(f"{label} must be a whole number of minutes.")
    if n < 0:
        raise ValidationFailed(f"{label} cannot be negative.")
    return n or None


def _field_errors(exc: KBError) -> dict:
    det = exc.details or {}
    out = {}
    for k, v in det.items():
        if isinstance(v, dict):
            out[k] = [f"{kk}: {vv}" for kk, vv in v.items()]
        elif isinstance(v, list):
            out[k] = [str(x) for x in v]
        else:
            out[k] = [str(v)]
    return out


@bp.route("/sources/<source_id>", methods=["GET", "POST"])
@login_required
def source_detail(source_id):
    from kbframework.sources.config import get_source, update_source
    from kbframework.web.api_admin import source_to_dict

    errors: dict = {}
    with session_scope() as s:
        src = get_source(s, org(), source_id)
        connector = registry.source_types().get(src.type)
        fields = describe_fields(connector) if connector else []
        values = form_values(fields, src.config or {})
        name, interval = src.name, src.sync_interval_minutes or ""
        if request.method == "POST":
            _require_admin()
            name = request.form.get("name", "").strip()
            interval = request.form.get("sync_interval_minutes", "").strip()
            cfg, errors = config_from_form(fields, request.form, editing=True)
            values = {**values, **{k: request.form.get(f"cfg_{k}", "") for k in values}}
            if not errors:
                try:
                    with s.begin_nested():
                        update_source(s, org(), source_id, {"name": name, "config": cfg,
                                                            "sync_interval_minutes": _opt_int(interval, "Sync interval")})
                except KBError as exc:
                    errors = _field_errors(exc)
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
        info["health"] = extra.source_health(src, run)
        info["label"] = getattr(connector, "label", src.type) if connector else src.type
        info["supports_sync"] = bool(connector and getattr(connector, "supports_sync", True))
        info["supports_webhooks"] = bool(connector and hasattr(connector, "handle_webhook"))
        runs = s.scalars(select(SyncRun).where(SyncRun.source_id == src.id)
                         .order_by(SyncRun.started_at.desc()).limit(30)).all()
        history = [extra.run_to_dict(r) for r in runs]
        webhook_secret = None
        if current_user.is_admin and info["supports_webhooks"] and src.secrets:
            from kbframework.security import decrypt_json

            webhook_secret = decrypt_json(src.secrets).get("webhook_secret")
    return render_template("admin_source_detail.html", src=info, connector=connector, fields=fields,
                           values=values, errors=errors, name=name, interval=interval, history=history,
                           webhook_url=f"{request.host_url.rstrip('/')}/api/webhooks/v1/{info['type']}/{info['id']}",
                           webhook_secret=webhook_secret,
                           example=mapping_example(connector) if connector else "{}",
                           mapping_help=MAPPING_HELP.get(info["type"])), (400 if errors else 200)


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
        if not getattr(connector, "supports_sync", True):
            raise ValidationFailed(f"{getattr(connector, 'label', src.type)} has nothing to sync.")
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
        src, _ = update_source(s, org(), source_id, {"status": status})
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


# --------------------------------------------------------------------------- documents


def _doc_filters() -> dict:
    a = request.args
    return {k: (a.get(k) or "").strip() for k in ("q", "source_id", "type", "role", "status", "tag")}


def _facets(s) -> dict:
    oid = org()
    types = [r[0] for r in s.execute(select(Document.type).where(Document.organization_id == oid)
                                     .group_by(Document.type).order_by(Document.type))]
    tags = [r[0] for r in s.execute(select(func.unnest(Document.tags).label("t"))
                                    .where(Document.organization_id == oid, Document.status != "deleted")
                                    .group_by(text_col("t")).order_by(text_col("t")))]
    srcs = [{"id": str(x.id), "name": x.name, "type": x.type} for x in
            s.scalars(select(Source).where(Source.organization_id == oid).order_by(Source.name))]
    return {"types": types, "tags": tags, "sources": srcs}


def text_col(name):
    from sqlalchemy import text

    return text(name)


@bp.get("/documents")
@login_required
def documents():
    f = _doc_filters()
    page = _int_arg("page", 1)
    per_page = _int_arg("per_page", 25, 1, 200)
    with session_scope() as s:
        if f["source_id"]:
            from kbframework.sources.config import get_source

            get_source(s, org(), f["source_id"])  # another organization's source → 404
        result = docs.list_documents(s, org(), q=f["q"] or None, source_id=f["source_id"] or None,
                                     type_=f["type"] or None, role=f["role"] or None,
                                     status=f["status"] or None, tag=f["tag"] or None, page=page,
                                     per_page=per_page, sort=request.args.get("sort") or "-updated_at")
        facets = _facets(s)
    query = {k: v for k, v in f.items() if v}
    if per_page != 25:
        query["per_page"] = per_page
    return render_template("admin_documents.html", result=result, f=f, facets=facets, query=query,
                           pdf_upload=upload_url("pdf") and "pdf" in registry.source_types(),
                           statuses=docs.STATUSES, page_url=lambda p: url_for("admin.documents", **query, page=p),
                           here=request.full_path)


@bp.post("/documents/bulk")
@admin_required
def documents_bulk():
    ids = request.form.getlist("ids")
    status = request.form.get("status")
    if not ids:
        flash("Select at least one document first.", "error")
        return back("admin.documents")
    if status not in ("active", "disabled"):
        raise ValidationFailed("Choose enable or disable.")
    with session_scope() as s:
        for i in ids[:500]:
            docs.set_status(s, org(), i, status)
    flash(f"{len(ids[:500])} document{'s' if len(ids) != 1 else ''} "
          f"{'enabled' if status == 'active' else 'disabled'}.", "ok")
    return back("admin.documents")


def _split_pages(text: str | None) -> list[str]:
    return (text or "").split("\f")


@bp.get("/documents/<doc_id>")
@login_required
def document_detail(doc_id):
    with session_scope() as s:
        d = docs.document_detail(s, org(), doc_id)
    return render_template("admin_document_detail.html", d=d, pages=_split_pages(d.get("normalized_content")),
                           editable=d.get("source_type") == "manual",
                           upload=upload_url(d["source_type"]) if d.get("source_type") else None)


@bp.post("/documents/<doc_id>/reindex")
@admin_required
def document_reindex(doc_id):
    with session_scope() as s:
        docs.get_document(s, org(), doc_id)
    results = docs.queue_ingest([doc_id], force=True, inline=True) or []
    r = results[0] if results else None
    if r is not None and r.action == "error":
        flash(f"Re-indexing failed: {r.error}", "error")
    else:
        n = r.chunks if r else 0
        flash(f"Re-indexed: {n} chunk{'s' if n != 1 else ''}.", "ok")
    return back("admin.document_detail", doc_id=doc_id)


@bp.post("/documents/<doc_id>/status")
@admin_required
def document_status(doc_id):
    status = request.form.get("status")
    with session_scope() as s:
        doc = docs.set_status(s, org(), doc_id, status)
        needs, title = doc.status == "syncing", doc.title
    if needs:
        docs.queue_ingest([doc_id], inline=True)
    flash(f"“{title}” {'disabled: the assistant no longer uses it' if status == 'disabled' else 'enabled'}.", "ok")
    return back("admin.document_detail", doc_id=doc_id)


@bp.post("/documents/<doc_id>/delete")
@admin_required
def document_delete(doc_id):
    with session_scope() as s:
        doc = docs.get_document(s, org(), doc_id)
        title = doc.title
        docs.delete_document(s, org(), doc_id)
    flash(f"“{title}” was deleted. A synced document comes back on the next full sync if the source "
          f"still has it; disable it instead to keep it out.", "ok")
    nxt = request.form.get("next") or ""
    if nxt.startswith("/admin/documents/" + str(doc_id)):
        return redirect(url_for("admin.documents"))
    return back("admin.documents")


@bp.post("/documents/<doc_id>/restore")
@admin_required
def document_restore(doc_id):
    until = _local_day_end(request.form.get("until"))
    if until is not None and until <= utcnow():
        raise ValidationFailed("Pick a date in the future to extend to.")
    with session_scope() as s:
        doc = docs.restore_document(s, org(), doc_id, until)
        needs, title = doc.status == "syncing", doc.title
    if needs:
        docs.queue_ingest([doc_id], inline=True)
    flash(f"“{title}” restored" + (f" until {until.astimezone(ZoneInfo(g.org_tz)):%d %b %Y}." if until else "."),
          "ok")
    return back("admin.document_detail", doc_id=doc_id)


def _local_day_end(value: str | None) -> datetime | None:
    """'2025-12-31' → the end of that day in the organization's time zone."""
    if not value:
        return None
    try:
        d = date.fromisoformat(value.strip()[:10])
    except ValueError:
        raise ValidationFailed(f"'{value}' is not a date.")
    return datetime(d.year, d.month, d.day, 23, 59, 59, tzinfo=ZoneInfo(g.org_tz))


# --------------------------------------------------------------------------- manual knowledge (§10)


def _manual_source_ids(s) -> list:
    return list(s.scalars(select(Source.id).where(Source.organization_id == org(), Source.type == "manual")))


@bp.get("/knowledge")
@login_required
def knowledge():
    tag = (request.args.get("tag") or "").strip()
    q = (request.args.get("q") or "").strip()
    page = _int_arg("page", 1)
    with session_scope() as s:
        ids = _manual_source_ids(s)
        if ids:
            result = docs.list_documents(s, org(), q=q or None, source_id=ids[0], tag=tag or None, page=page,
                                         per_page=25, sort="-updated_at")
        else:
            result = {"items": [], "page": 1, "per_page": 25, "total": 0, "pages": 1}
        tags = [r[0] for r in s.execute(select(func.unnest(Document.tags).label("t"), func.count())
                                        .where(Document.organization_id == org(), Document.source_id.in_(ids or [uuid.uuid4()]),
                                               Document.status != "deleted")
                                        .group_by(text_col("t")).order_by(text_col("t")))]
    query = {k: v for k, v in {"tag": tag, "q": q}.items() if v}
    return render_template("admin_knowledge.html", result=result, tag=tag, q=q, tags=tags,
                           page_url=lambda p: url_for("admin.knowledge", **query, page=p))


def _expiry_value(v) -> str:
    if not v:
        return ""
    if isinstance(v, str):
        v = datetime.fromisoformat(v)
    return v.astimezone(ZoneInfo(g.org_tz)).date().isoformat()


@bp.get("/knowledge/new")
@login_required
def knowledge_new():
    """The editor, empty or prefilled: from a template (duplicate), a zero-result question, or
    a piece of feedback whose answer needs correcting."""
    a = request.args
    entry = {"title": a.get("title", ""), "body": a.get("body", ""), "tags": a.get("tags", ""),
             "role": a.get("role", "manual"), "expires": "", "feedback_id": "", "context": None}
    with session_scope() as s:
        if a.get("template"):
            d = docs.get_document(s, org(), a["template"])
            entry.update(title=f"{d.title} (copy)", body=d.normalized_content or "", tags=", ".join(d.tags or []),
                         role=d.document_role)
            entry["context"] = {"kind": "template", "title": d.title, "id": str(d.id)}
        elif a.get("feedback"):
            fb, log = extra.get_feedback(s, org(), a["feedback"])
            entry.update(title=_title_from_question(log.query), tags="correction",
                         body=f"# {_title_from_question(log.query)}\n\n"
                              f"Customers ask: “{log.query.strip()}”\n\nThe correct answer: \n",
                         feedback_id=str(fb.id))
            entry["context"] = {"kind": "feedback", "query": log.query, "answer": log.final_answer,
                                "comment": fb.comment, "id": str(fb.id)}
        elif a.get("q"):
            entry.update(title=_title_from_question(a["q"]), tags="faq",
                         body=f"# {_title_from_question(a['q'])}\n\nCustomers ask: “{a['q'].strip()}”\n\n"
                              f"The answer: \n")
            entry["context"] = {"kind": "zero", "query": a["q"]}
        tag_list = _all_tags(s)
    return render_template("admin_knowledge_editor.html", entry=entry, doc=None, tag_list=tag_list, errors={})


def _title_from_question(q: str) -> str:
    q = " ".join((q or "").split()).rstrip("?!. ")
    return (q[:1].upper() + q[1:])[:120] if q else ""


def _all_tags(s) -> list[str]:
    return [r[0] for r in s.execute(select(func.unnest(Document.tags).label("t"))
                                    .where(Document.organization_id == org(), Document.status != "deleted")
                                    .group_by(text_col("t")).order_by(text_col("t")))]


@bp.get("/knowledge/<doc_id>/edit")
@login_required
def knowledge_edit(doc_id):
    with session_scope() as s:
        d = docs.get_document(s, org(), doc_id)
        src = s.get(Source, d.source_id)
        if src.type != "manual":
            flash("Synced documents come from their source and are edited there; you can disable this one "
                  "or add a manual entry that corrects it.", "error")
            return redirect(url_for("admin.document_detail", doc_id=doc_id))
        entry = {"title": d.title, "body": d.raw_content or d.normalized_content or "", "tags": ", ".join(d.tags or []),
                 "role": d.document_role, "expires": _expiry_value(d.expires_at), "feedback_id": "",
                 "context": None}
        doc = {"id": str(d.id), "status": d.status, "chunk_count": d.chunk_count}
        tag_list = _all_tags(s)
    return render_template("admin_knowledge_editor.html", entry=entry, doc=doc, tag_list=tag_list, errors={})


def _entry_from_form() -> tuple[dict, dict]:
    f = request.form
    entry = {"title": f.get("title", "").strip(), "body": f.get("body", ""), "tags": f.get("tags", ""),
             "role": f.get("role", "manual"), "expires": f.get("expires", "").strip(),
             "feedback_id": f.get("feedback_id", ""), "context": None}
    data = {"title": entry["title"], "body": entry["body"],
            "tags": [t.strip() for t in entry["tags"].split(",") if t.strip()], "role": entry["role"]}
    end = _local_day_end(entry["expires"]) if entry["expires"] else None
    if end is not None and end <= utcnow():
        raise ValidationFailed("The expiry date is in the past; pick a future date or leave it empty.",
                               details={"expires": ["Pick a future date."]})
    data["expires_at"] = end.isoformat() if end else None
    return entry, data


def _save_manual(doc_id: str | None):
    _require_admin()
    try:
        entry, data = _entry_from_form()
    except KBError as exc:
        return _editor_error(exc, doc_id, None)
    try:
        with session_scope() as s:
            if doc_id:
                data = {**_kept_fields(docs.get_document(s, org(), doc_id)), **data}
            doc = docs.update_manual(s, org(), doc_id, data) if doc_id else docs.create_manual(s, org(), data)
            new_id = doc.id
            if entry["feedback_id"] and request.form.get("mark_addressed"):
                extra.set_addressed(s, org(), entry["feedback_id"], True)
    except KBError as exc:
        return _editor_error(exc, doc_id, entry)
    results = docs.queue_ingest([new_id], inline=True) or []  # §10: chunks and embeds at once
    r = results[0] if results else None
    if r is not None and r.action == "error":
        flash(f"Saved, but indexing failed: {r.error}. Try “Re-index” on the document.", "error")
    else:
        n = r.chunks if r else 0
        flash(f"Saved and indexed: {n} chunk{'s' if n != 1 else ''}. The assistant uses it from now on."
              + (" The feedback is marked addressed." if entry["feedback_id"] and request.form.get("mark_addressed")
                 else ""), "ok")
    return redirect(url_for("admin.document_detail", doc_id=new_id))


def _kept_fields(d) -> dict:
    """What the editor does not show but an entry may carry (an event's dates and venue, a link,
    an image, metadata): kept as they are when the text is edited."""
    meta = {k: v for k, v in (d.metadata_ or {}).items() if k not in ("last_error", "last_error_at")}
    return {"event_start": docs.iso(d.event_start), "event_end": docs.iso(d.event_end), "venue": d.venue,
            "city": d.city, "source_url": d.source_url, "image_url": d.primary_image_url, "metadata": meta}


def _editor_error(exc: KBError, doc_id, entry):
    if entry is None:
        f = request.form
        entry = {"title": f.get("title", ""), "body": f.get("body", ""), "tags": f.get("tags", ""),
                 "role": f.get("role", "manual"), "expires": f.get("expires", ""),
                 "feedback_id": f.get("feedback_id", ""), "context": None}
    if exc.status in (403, 404):
        raise exc
    flash(exc.message, "error")
    doc = None
    with session_scope() as s:
        if doc_id:
            d = docs.get_document(s, org(), doc_id)
            doc = {"id": str(d.id), "status": d.status, "chunk_count": d.chunk_count}
        tag_list = _all_tags(s)
    return render_template("admin_knowledge_editor.html", entry=entry, doc=doc, tag_list=tag_list,
                           errors=_field_errors(exc)), exc.status


@bp.post("/knowledge")
@login_required
def knowledge_create():
    return _save_manual(None)


@bp.post("/knowledge/<doc_id>")
@login_required
def knowledge_update(doc_id):
    return _save_manual(doc_id)


# --------------------------------------------------------------------------- test chat


@bp.get("/chat")
@login_required
def chat():
    presets = sorted(registry.presets().values(), key=lambda p: p.label)
    with session_scope() as s:
        st = s.scalar(select(Setting).where(Setting.organization_id == org()))
        current = registry.preset(st.preset if st else None)
    return render_template("admin_chat.html", presets=presets, current=current, q=request.args.get("q", ""))


def trace_context(s, debug: dict) -> dict:
    """Titles and positions for every chunk the trace mentions (organization-scoped)."""
    ids = set()
    for leg in ("vector", "keyword"):
        for h in (debug.get(leg) or {}).get("hits", []) or []:
            ids.add(h.get("chunk_id"))
    for f in debug.get("fused") or []:
        ids.add(f.get("chunk_id"))
    ids = [i for i in ids if isinstance(i, int)]
    chunks = {}
    if ids:
        rows = s.execute(select(Chunk.id, Chunk.chunk_index, Chunk.token_count, Chunk.metadata_, Document.id,
                                Document.title, Document.status, Source.type)
                         .join(Document, Document.id == Chunk.document_id)
                         .join(Source, Source.id == Document.source_id)
                         .where(Chunk.id.in_(ids), Chunk.organization_id == org())).all()
        from kbframework.ingest.chunker import page_label

        for cid, idx, tok, meta, did, title, status, stype in rows:
            chunks[cid] = {"index": idx, "tokens": tok, "document_id": str(did), "title": title,
                           "status": status, "source_type": stype, "pages": page_label(meta or {})}
    selected = {c.get("chunk_id") for c in debug.get("context") or []}
    return {"chunks": chunks, "selected": selected}


@bp.get("/trace/<log_id>")
@login_required
def trace(log_id):
    """The debug panel for one answer, as an HTML fragment (test chat and feedback share it)."""
    with session_scope() as s:
        log = s.scalar(select(ChatLog).where(ChatLog.id == as_uuid(log_id), ChatLog.organization_id == org()))
        if log is None:
            raise NotFound("No such answer in this organization.")
        debug = log.retrieval_debug or {}
        ctx = trace_context(s, debug)
        info = {"id": str(log.id), "query": log.query, "model": log.model, "tokens_in": log.tokens_in,
                "tokens_out": log.tokens_out, "latency_ms": log.latency_ms, "reason": log.reason,
                "zero_result": log.zero_result, "channel": log.channel, "created_at": log.created_at,
                "flags": log.flags or []}
    return render_template("admin_trace.html", debug=debug, ctx=ctx, log=info)


# --------------------------------------------------------------------------- feedback (§13)


@bp.get("/feedback")
@login_required
def feedback():
    a = request.args
    f = {"rating": a.get("rating", ""), "state": a.get("state", ""), "from": a.get("from", ""),
         "to": a.get("to", ""), "source_type": a.get("source_type", "")}
    with session_scope() as s:
        result = extra.feedback_list(s, org(), rating=f["rating"] or None, date_from=f["from"] or None,
                                     date_to=f["to"] or None, source_type=f["source_type"] or None,
                                     state=f["state"] or None, page=_int_arg("page", 1))
        stypes = sorted({r[0] for r in s.execute(select(Source.type).where(Source.organization_id == org()))})
    query = {k: v for k, v in f.items() if v}
    return render_template("admin_feedback.html", result=result, f=f, source_types=stypes,
                           page_url=lambda p: url_for("admin.feedback", **query, page=p))


@bp.get("/feedback/<feedback_id>")
@login_required
def feedback_detail(feedback_id):
    with session_scope() as s:
        fb, log = extra.get_feedback(s, org(), feedback_id)
        item = extra.feedback_to_dict(fb, log)
        cited = extra.cited_documents(s, org(), log)
        debug = log.retrieval_debug or {}
        ctx = trace_context(s, debug)
        info = {"id": str(log.id), "query": log.query, "model": log.model, "tokens_in": log.tokens_in,
                "tokens_out": log.tokens_out, "latency_ms": log.latency_ms, "reason": log.reason,
                "zero_result": log.zero_result, "channel": log.channel, "created_at": log.created_at,
                "flags": log.flags or []}
    return render_template("admin_feedback_detail.html", fb=item, cited=cited, debug=debug, ctx=ctx, log=info)


@bp.post("/feedback/<feedback_id>/addressed")
@admin_required
def feedback_addressed(feedback_id):
    flag = request.form.get("addressed", "1") == "1"
    with session_scope() as s:
        extra.set_addressed(s, org(), feedback_id, flag)
    flash("Marked as addressed." if flag else "Reopened.", "ok")
    return back("admin.feedback_detail", feedback_id=feedback_id)


# --------------------------------------------------------------------------- zero results (§20)


@bp.get("/zero-results")
@login_required
def zero_results():
    days = _int_arg("days", 7, 1, 366)
    with session_scope() as s:
        result = extra.zero_results(s, org(), days=days)
    return render_template("admin_zero_results.html", result=result, days=days)


# --------------------------------------------------------------------------- embed keys


GRACE_CHOICES = (("1h", "1 hour"), ("24h", "24 hours"), ("7d", "7 days"), ("30d", "30 days"))


@bp.get("/keys")
@login_required
def keys():
    from kbframework.orgs import keys as keys_mod

    with session_scope() as s:
        items = [extra.key_view(k, request.host_url) for k in keys_mod.list_keys(s, org())]
    items.sort(key=lambda k: (not k["usable"], k["status"] != "active", k["created_at"] or ""))
    return render_template("admin_keys.html", keys=items, grace_choices=GRACE_CHOICES,
                           new_key=request.args.get("new"))


def _key_form() -> dict:
    f = request.form
    data = {"name": f.get("name", ""), "allowed_origins": f.get("allowed_origins", "")}
    for k in extra.LIMIT_FIELDS:
        data[k] = f.get(k, "")
    return data


@bp.post("/keys")
@admin_required
def key_create():
    with session_scope() as s:
        k = extra.create_key(s, org(), _key_form())
        kid = k.id
    flash("Key created. Copy the snippet below into your website.", "ok")
    return redirect(url_for("admin.keys", new=str(kid)) + f"#key-{kid}")


@bp.post("/keys/<key_id>")
@admin_required
def key_update(key_id):
    data = _key_form()
    data["settings"] = {"show_sources": request.form.get("show_sources") == "on",
                        "position": request.form.get("position") or "bottom-right"}
    if data["settings"]["position"] not in ("bottom-right", "bottom-left"):
        raise ValidationFailed("Position must be bottom-right or bottom-left.")
    with session_scope() as s:
        extra.update_key(s, org(), key_id, data)
    flash("Key saved.", "ok")
    return redirect(url_for("admin.keys") + f"#key-{key_id}")


@bp.post("/keys/<key_id>/rotate")
@admin_required
def key_rotate(key_id):
    grace = request.form.get("grace") or "24h"
    if grace not in dict(GRACE_CHOICES):
        raise ValidationFailed("Choose a grace period from the list.")
    with session_scope() as s:
        old, new = extra.rotate_key(s, org(), key_id, grace)
        nid = new.id
    flash(f"Key rotated. The old key keeps working for {dict(GRACE_CHOICES)[grace]}; put the new snippet on "
          f"your website before then.", "ok")
    return redirect(url_for("admin.keys", new=str(nid)) + f"#key-{nid}")


@bp.post("/keys/<key_id>/revoke")
@admin_required
def key_revoke(key_id):
    with session_scope() as s:
        extra.revoke_key(s, org(), key_id)
    flash("Key revoked: it stops working now.", "ok")
    return redirect(url_for("admin.keys"))


# --------------------------------------------------------------------------- usage


def bar_chart(days: list[dict], width: int = 960, height: int = 220) -> dict:
    """Geometry for a per-day SVG bar chart (tokens in and out stacked)."""
    n = max(1, len(days))
    top = max([d["tokens_in"] + d["tokens_out"] for d in days] + [1])
    pad_l, pad_b, pad_t = 44, 22, 10
    plot_w, plot_h = width - pad_l - 6, height - pad_b - pad_t
    slot = plot_w / n
    bw = max(2.0, slot * 0.7)
    bars = []
    for i, d in enumerate(days):
        x = pad_l + i * slot + (slot - bw) / 2
        h_in = plot_h * d["tokens_in"] / top
        h_out = plot_h * d["tokens_out"] / top
        bars.append({"x": round(x, 1), "w": round(bw, 1), "y_in": round(pad_t + plot_h - h_in, 1),
                     "h_in": round(h_in, 1), "y_out": round(pad_t + plot_h - h_in - h_out, 1),
                     "h_out": round(h_out, 1), "day": d["day"], "label": d["day"][8:10],
                     "show_label": n <= 16 or i % 3 == 0 or i == n - 1, "lx": round(x + bw / 2, 1), **d})
    ticks = [{"y": round(pad_t + plot_h - plot_h * f, 1), "v": int(top * f)} for f in (0, 0.5, 1)]
    return {"w": width, "h": height, "bars": bars, "ticks": ticks, "base": pad_t + plot_h, "left": pad_l,
            "label_y": height - 6}


@bp.get("/usage")
@login_required
def usage():
    month = request.args.get("month") or None
    with session_scope() as s:
        u = extra.usage_summary(s, org(), month)
    y, m = (int(x) for x in u["month"].split("-"))
    prev = f"{y - (m == 1):04d}-{(m - 2) % 12 + 1:02d}"
    nxt = f"{y + (m == 12):04d}-{m % 12 + 1:02d}"
    this = datetime.now(ZoneInfo(g.org_tz)).strftime("%Y-%m")
    return render_template("admin_usage.html", u=u, chart=bar_chart(u["days"]), prev=prev,
                           next=nxt if nxt <= this else None,
                           month_label=date(y, m, 1).strftime("%B %Y"))


# --------------------------------------------------------------------------- settings


@bp.route("/settings", methods=["GET", "POST"])
@login_required
def settings():
    from kbframework.settings_schema import apply_settings
    from kbframework.web.api_admin import settings_to_dict

    errors: dict = {}
    with session_scope() as s:
        st = s.scalar(select(Setting).where(Setting.organization_id == org()))
        o = s.get(Organization, org())
        if request.method == "POST":
            _require_admin()
            data, errors = _settings_from_form(st)
            if not errors:
                try:
                    with s.begin_nested():
                        reindex = apply_settings(s, st, data)
                except KBError as exc:
                    errors = _field_errors(exc) or {"_": [exc.message]}
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
            cur.update({k: v for k, v in request.form.items() if k in cur})
            cur["extra"] = {**(cur["extra"] or {}), "branding": {
                k: request.form.get(f"branding_{k}", "") for k in ("color", "logo", "title", "welcome")},
                "fallback_text": request.form.get("fallback_text", "")}
    presets = cur["presets"]
    effective = registry.preset(cur["preset"]).name
    missing = cur["preset"] if cur["preset"] not in registry.presets() else None
    if request.method != "POST":
        cur["preset"] = effective
    return render_template("admin_settings.html", st=cur, presets=presets, errors=errors, missing_preset=missing,
                           providers=extra.providers_info(), timezones=sorted(available_timezones()),
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
    data["extra"] = {"branding": {"color": color or None, "logo": logo or None,
                                  "title": (f.get("branding_title") or "").strip() or None,
                                  "welcome": (f.get("branding_welcome") or "").strip() or None},
                     "fallback_text": (f.get("fallback_text") or "").strip() or None}
    if not data["timezone"]:
        errors["timezone"] = ["Choose a time zone."]
    return data, errors
