"""Admin API v1, the parts the admin pages need beyond the core API: feedback review (§13),
zero-result queries (§20), assistant keys, usage, markdown preview, provider checks and a
dashboard summary. Session-authenticated, CSRF-protected, scoped to the caller's organization.

The query helpers here are plain functions taking a database session and an organization
id; the admin pages (``kbframework.admin.views``) call them too, so the page and the API
always agree.
"""
from __future__ import annotations

import time
from datetime import date, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import bleach
from flask import Blueprint, request
from flask_login import current_user, login_required
from sqlalchemy import and_, exists, func, select, text

from kbframework.orgs import keys as keys_mod
from kbframework.hooks import registry
from kbframework.orgs.accounts import as_uuid
from kbframework.db import session_scope
from kbframework.errors import KBError, NotFound, ValidationFailed
from kbframework.models import (AssistantKey, ChatFeedback, ChatLog, Chunk, Document, Organization, Source,
                                SyncRun, UsageLedger)
from kbframework.web.auth import admin_required

bp = Blueprint("api_admin_extra", __name__, url_prefix="/api/admin/v1")


from kbframework.web.api_admin import body, org_id  # noqa: E402  (one definition of both)


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


def iso(v):
    return v.isoformat() if isinstance(v, (datetime, date)) else v


def org_timezone(s, oid) -> str:
    org = s.get(Organization, as_uuid(oid))
    return org.timezone if org else "UTC"


def parse_day(value: str | None, tz: str, end: bool = False) -> datetime | None:
    """'2025-05-01' → the start (or the end) of that day in the organization's time zone."""
    if not value:
        return None
    try:
        d = date.fromisoformat(str(value)[:10])
    except ValueError:
        raise ValidationFailed(f"'{value}' is not a date like 2025-05-01.")
    start = datetime(d.year, d.month, d.day, tzinfo=ZoneInfo(tz))
    return start + timedelta(days=1) if end else start


# --------------------------------------------------------------------------- markdown


_md = None
MD_TAGS = ["p", "br", "hr", "h1", "h2", "h3", "h4", "h5", "h6", "strong", "em", "del", "s", "code", "pre",
           "blockquote", "ul", "ol", "li", "a", "table", "thead", "tbody", "tr", "th", "td", "img"]
MD_ATTRS = {"a": ["href", "title"], "img": ["src", "alt", "title"],
            "ol": ["start"]}


def render_markdown(source: str) -> str:
    """Markdown → sanitized HTML (markdown-it-py, raw HTML off; bleach as the last word)."""
    global _md
    if _md is None:
        from markdown_it import MarkdownIt

        _md = MarkdownIt("commonmark", {"html": False, "linkify": False, "breaks": True}).enable(
            ["table", "strikethrough"])
    html = _md.render(source or "")
    return bleach.clean(html, tags=MD_TAGS, attributes=MD_ATTRS, protocols=["http", "https", "mailto"],
                        strip=True)


@bp.post("/markdown/preview")
@login_required
def markdown_preview():
    src = body().get("markdown", "")
    if not isinstance(src, str):
        raise ValidationFailed("Send the text as a string in 'markdown'.")
    if len(src) > 500_000:
        raise ValidationFailed("The text is too long to preview (at most 500,000 characters).", status=413)
    return {"html": render_markdown(src)}


# --------------------------------------------------------------------------- dashboard


def dashboard_summary(s, oid) -> dict:
    oid = as_uuid(oid)
    tz = org_timezone(s, oid)
    week_ago = utcnow() - timedelta(days=7)
    count = lambda q: s.scalar(q) or 0  # noqa: E731
    sources = s.scalars(select(Source).where(Source.organization_id == oid).order_by(Source.created_at)).all()
    last_runs = {}
    for src in sources:
        run = s.scalar(select(SyncRun).where(SyncRun.source_id == src.id).order_by(SyncRun.started_at.desc())
                       .limit(1))
        last_runs[src.id] = run
    doc_errors = s.scalars(select(Document).where(Document.organization_id == oid, Document.status == "error")
                           .order_by(Document.updated_at.desc()).limit(10)).all()
    run_errors = s.execute(select(SyncRun, Source).join(Source, Source.id == SyncRun.source_id)
                           .where(SyncRun.organization_id == oid, SyncRun.error.isnot(None),
                                  SyncRun.started_at >= utcnow() - timedelta(days=14))
                           .order_by(SyncRun.started_at.desc()).limit(10)).all()
    zero = zero_results(s, oid, days=7, limit=5)
    return {
        "timezone": tz,
        "active_sources": count(select(func.count()).select_from(Source).where(
            Source.organization_id == oid, Source.status != "disabled")),
        "sources_total": len(sources),
        "active_documents": count(select(func.count()).select_from(Document).where(
            Document.organization_id == oid, Document.status == "active")),
        "documents_total": count(select(func.count()).select_from(Document).where(
            Document.organization_id == oid, Document.status != "deleted")),
        "chunks": count(select(func.count()).select_from(Chunk).where(Chunk.organization_id == oid)),
        "questions_week": count(select(func.count()).select_from(ChatLog).where(
            ChatLog.organization_id == oid, ChatLog.created_at >= week_ago)),
        "zero_result_week": zero["total"],
        "zero_result_top": zero["items"],
        "open_feedback": count(select(func.count()).select_from(ChatFeedback).where(
            ChatFeedback.organization_id == oid, ChatFeedback.rating == "down",
            ChatFeedback.addressed_at.is_(None))),
        "sources": [{"id": str(src.id), "name": src.name, "type": src.type, "status": src.status,
                     "last_sync_at": iso(src.last_sync_at), "last_error": src.last_error,
                     "health": source_health(src, last_runs[src.id]),
                     "last_run": run_to_dict(last_runs[src.id]) if last_runs[src.id] else None}
                    for src in sources],
        "errors": ([{"kind": "document", "id": str(d.id), "title": d.title,
                     "message": (d.metadata_ or {}).get("last_error") or "Indexing failed.",
                     "at": (d.metadata_ or {}).get("last_error_at") or iso(d.updated_at)} for d in doc_errors]
                   + [{"kind": "sync", "id": str(src.id), "title": src.name, "message": run.error,
                       "at": iso(run.started_at), "status": run.status} for run, src in run_errors]),
    }


def run_to_dict(r: SyncRun) -> dict:
    took = (r.finished_at - r.started_at).total_seconds() if r.finished_at and r.started_at else None
    return {"id": str(r.id), "kind": r.kind, "status": r.status, "stats": r.stats or {}, "error": r.error,
            "started_at": iso(r.started_at), "finished_at": iso(r.finished_at),
            "seconds": round(took, 1) if took is not None else None}


def source_health(src: Source, last_run: SyncRun | None) -> dict:
    """One word and a reason for a source's sync health, for people rather than machines."""
    connector = registry.source_types().get(src.type)
    if connector is None:
        return {"state": "error", "label": "plugin missing",
                "reason": f"The '{src.type}' plugin is not installed."}
    if src.status == "disabled":
        return {"state": "disabled", "label": "disabled", "reason": "Disabled: not synced, documents kept."}
    if not getattr(connector, "supports_sync", True):
        return {"state": "ok", "label": "healthy", "reason": "Edited here; nothing to sync."}
    if src.status == "error" or (last_run is not None and last_run.status == "error"):
        return {"state": "error", "label": "failing", "reason": src.last_error or (last_run.error if last_run else "")}
    if src.status == "syncing" or (last_run is not None and last_run.status == "running"):
        return {"state": "syncing", "label": "syncing", "reason": "A sync is running."}
    if src.last_sync_at is None:
        return {"state": "warn", "label": "never synced", "reason": "Run a first sync."}
    if last_run is not None and last_run.status == "partial":
        return {"state": "warn", "label": "partial", "reason": "The last sync skipped some items."}
    if src.sync_interval_minutes:
        age = (utcnow() - src.last_sync_at).total_seconds() / 60
        if age > 3 * src.sync_interval_minutes:
            return {"state": "warn", "label": "stale",
                    "reason": f"No sync for {int(age)} minutes (every {src.sync_interval_minutes} expected)."}
    return {"state": "ok", "label": "healthy", "reason": "The last sync succeeded."}


@bp.get("/dashboard")
@login_required
def dashboard():
    with session_scope() as s:
        return dashboard_summary(s, org_id())


# --------------------------------------------------------------------------- feedback (§13)


def feedback_list(s, oid, *, rating=None, date_from=None, date_to=None, source_type=None, state=None,
                  page: int = 1, per_page: int = 25) -> dict:
    oid = as_uuid(oid)
    tz = org_timezone(s, oid)
    conds = [ChatFeedback.organization_id == oid]
    if rating:
        if rating not in ("up", "down"):
            raise ValidationFailed("Rating must be 'up' or 'down'.")
        conds.append(ChatFeedback.rating == rating)
    if date_from:
        conds.append(ChatFeedback.created_at >= parse_day(date_from, tz))
    if date_to:
        conds.append(ChatFeedback.created_at < parse_day(date_to, tz, end=True))
    if state == "open":
        conds.append(ChatFeedback.addressed_at.is_(None))
    elif state == "addressed":
        conds.append(ChatFeedback.addressed_at.isnot(None))
    if source_type:
        used = func.jsonb_array_elements_text(ChatLog.used_document_ids).table_valued("value").alias("u")
        conds.append(exists(
            select(1).select_from(used).join(Document, Document.id == func.cast(used.c.value, Document.id.type))
            .join(Source, Source.id == Document.source_id).where(Source.type == source_type)))
    page = max(1, int(page or 1))
    per_page = min(100, max(1, int(per_page or 25)))
    q = select(ChatFeedback, ChatLog).join(ChatLog, ChatLog.id == ChatFeedback.chat_log_id).where(and_(*conds))
    total = s.scalar(select(func.count()).select_from(q.subquery()))
    rows = s.execute(q.order_by(ChatFeedback.created_at.desc(), ChatFeedback.id)
                     .limit(per_page).offset((page - 1) * per_page)).all()
    return {"items": [feedback_to_dict(fb, log) for fb, log in rows], "page": page, "per_page": per_page,
            "total": total, "pages": max(1, -(-total // per_page))}


def feedback_to_dict(fb: ChatFeedback, log: ChatLog) -> dict:
    return {"id": str(fb.id), "rating": fb.rating, "comment": fb.comment, "created_at": iso(fb.created_at),
            "addressed_at": iso(fb.addressed_at), "chat_log_id": str(log.id), "query": log.query,
            "answer": log.final_answer, "channel": log.channel, "mode": log.mode,
            "zero_result": log.zero_result, "used_document_ids": log.used_document_ids or []}


def get_feedback(s, oid, feedback_id) -> tuple[ChatFeedback, ChatLog]:
    row = s.execute(select(ChatFeedback, ChatLog).join(ChatLog, ChatLog.id == ChatFeedback.chat_log_id)
                    .where(ChatFeedback.id == as_uuid(feedback_id),
                           ChatFeedback.organization_id == as_uuid(oid))).first()
    if row is None:
        raise NotFound("No such feedback in this organization.")
    return row[0], row[1]


def cited_documents(s, oid, log: ChatLog) -> list[dict]:
    """The documents an answer cited, in citation order, with their source."""
    ids = []
    for chunk_src in (log.retrieval_debug or {}).get("context", []) or []:
        if chunk_src.get("document_id") not in ids:
            ids.append(chunk_src.get("document_id"))
    for d in log.used_document_ids or []:
        if d not in ids:
            ids.append(d)
    if not ids:
        return []
    rows = s.execute(select(Document, Source).join(Source, Source.id == Document.source_id).where(
        Document.organization_id == as_uuid(oid), Document.id.in_([as_uuid(i) for i in ids]))).all()
    by_id = {str(d.id): (d, src) for d, src in rows}
    out = []
    for i in ids:
        if i in by_id:
            d, src = by_id[i]
            out.append({"id": str(d.id), "title": d.title, "status": d.status, "type": d.type,
                        "source_type": src.type, "source_name": src.name, "source_url": d.source_url,
                        "editable": src.type == "manual"})
        else:
            out.append({"id": i, "title": "(document deleted)", "status": "deleted", "type": None,
                        "source_type": None, "source_name": None, "source_url": None, "editable": False})
    return out


def set_addressed(s, oid, feedback_id, addressed: bool = True) -> ChatFeedback:
    fb, _ = get_feedback(s, oid, feedback_id)
    fb.addressed_at = utcnow() if addressed else None
    return fb


@bp.get("/feedback")
@login_required
def list_feedback():
    a = request.args
    with session_scope() as s:
        return feedback_list(s, org_id(), rating=a.get("rating") or None, date_from=a.get("from"),
                             date_to=a.get("to"), source_type=a.get("source_type") or None,
                             state=a.get("state") or None, page=_int(a.get("page"), 1),
                             per_page=_int(a.get("per_page"), 25))


@bp.get("/feedback/<feedback_id>")
@login_required
def feedback_detail(feedback_id):
    with session_scope() as s:
        fb, log = get_feedback(s, org_id(), feedback_id)
        out = feedback_to_dict(fb, log)
        out["debug"] = log.retrieval_debug or {}
        out["cited_documents"] = cited_documents(s, org_id(), log)
        return out


@bp.post("/feedback/<feedback_id>/addressed")
@admin_required
def mark_addressed(feedback_id):
    flag = body().get("addressed", True)
    with session_scope() as s:
        fb = set_addressed(s, org_id(), feedback_id, bool(flag))
        return {"id": str(fb.id), "addressed_at": iso(fb.addressed_at)}


@bp.post("/chat-logs/<log_id>/feedback")
@admin_required
def rate_chat_log(log_id):
    """Rate an answer from the admin test chat (the same table the public widget writes)."""
    data = body()
    rating = data.get("rating")
    if rating not in ("up", "down"):
        raise ValidationFailed("'rating' must be 'up' or 'down'.")
    comment = data.get("comment")
    if comment is not None and (not isinstance(comment, str) or len(comment) > 2000):
        raise ValidationFailed("'comment' must be text of at most 2,000 characters.")
    with session_scope() as s:
        log = s.scalar(select(ChatLog).where(ChatLog.id == as_uuid(log_id), ChatLog.organization_id == org_id()))
        if log is None:
            raise NotFound("No such chat log in this organization.")
        fb = ChatFeedback(organization_id=org_id(), chat_log_id=log.id, rating=rating,
                          comment=(comment or "").strip() or None, user_session_id=f"admin:{current_user.user_id}")
        s.add(fb)
        s.flush()
        return {"id": str(fb.id), "rating": rating}, 201


# --------------------------------------------------------------------------- zero results (§20)


def zero_results(s, oid, *, days: int = 7, limit: int = 100, channel: str | None = None) -> dict:
    """Questions that found nothing, grouped by their normalized text, most asked first."""
    since = utcnow() - timedelta(days=max(1, int(days)))
    norm = func.lower(func.regexp_replace(func.btrim(ChatLog.query), r"[\s?!.]+$", "")).label("norm")
    conds = [ChatLog.organization_id == as_uuid(oid), ChatLog.zero_result.is_(True), ChatLog.created_at >= since]
    if channel:
        conds.append(ChatLog.channel == channel)
    sub = select(ChatLog.id, ChatLog.query, ChatLog.created_at, ChatLog.reason, ChatLog.channel, norm).where(
        *conds).subquery()
    q = select(sub.c.norm, func.count().label("n"), func.max(sub.c.created_at).label("last"),
               func.min(sub.c.created_at).label("first"),
               func.array_agg(func.distinct(sub.c.reason)).label("reasons"),
               func.array_agg(func.distinct(sub.c.channel)).label("channels"),
               (func.array_agg(sub.c.query.op("ORDER BY")(sub.c.created_at.desc())))[1].label("example"),
               (func.array_agg(sub.c.id.op("ORDER BY")(sub.c.created_at.desc())))[1].label("last_id")
               ).group_by(sub.c.norm).order_by(text("n DESC"), text("last DESC"))
    rows = s.execute(q.limit(limit)).all()
    total = s.scalar(select(func.count()).select_from(ChatLog).where(*conds)) or 0
    return {"days": int(days), "total": total, "groups": len(rows),
            "items": [{"query": r.example, "count": r.n, "last_asked": iso(r.last), "first_asked": iso(r.first),
                       "reasons": [x for x in (r.reasons or []) if x], "channels": [x for x in (r.channels or []) if x],
                       "last_log_id": str(r.last_id)} for r in rows]}


@bp.get("/zero-results")
@login_required
def list_zero_results():
    days = _int(request.args.get("days"), 7)
    if not 1 <= days <= 366:
        raise ValidationFailed("'days' must be between 1 and 366.")
    with session_scope() as s:
        return zero_results(s, org_id(), days=days, channel=request.args.get("channel") or None)


# --------------------------------------------------------------------------- assistant keys


def snippets(base: str, key: str) -> dict:
    base = base.rstrip("/")
    return {"widget": f'<script src="{base}/widget.js?key={key}" async></script>',
            "iframe": (f'<iframe src="{base}/embed/{key}" title="Chat assistant" loading="lazy" '
                       f'style="width:100%;height:640px;border:0;border-radius:12px"></iframe>')}


def key_view(k: AssistantKey, base: str) -> dict:
    out = keys_mod.key_to_dict(k)
    out["snippets"] = snippets(base, k.key)
    out["replaced_by_id"] = str(k.replaced_by_id) if k.replaced_by_id else None
    out["usable"] = k.status == "active" or (k.status == "rotated" and k.expires_at is not None
                                             and k.expires_at > utcnow())
    return out


def public_base() -> str:
    return request.host_url.rstrip("/")


def parse_origins(value) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        value = [v for v in value.replace(",", "\n").split("\n")]
    if not isinstance(value, list):
        raise ValidationFailed("'allowed_origins' must be a list of origins like https://shop.example.com.")
    return [str(v).strip() for v in value if str(v).strip()]


LIMIT_FIELDS = ("rate_per_minute", "rate_per_day", "rate_per_ip_minute")


def parse_limits(data: dict) -> dict:
    out = {}
    for f in LIMIT_FIELDS:
        v = data.get(f)
        if v in (None, ""):
            continue
        try:
            n = int(v)
        except (TypeError, ValueError):
            raise ValidationFailed(f"'{f.replace('_', ' ')}' must be a whole number.")
        if not 1 <= n <= 1_000_000:
            raise ValidationFailed(f"'{f.replace('_', ' ')}' must be between 1 and 1,000,000.")
        out[f] = n
    return out


def create_key(s, oid, data: dict) -> AssistantKey:
    origins = parse_origins(data.get("allowed_origins"))
    if not origins:
        raise ValidationFailed("Add at least one allowed website origin, e.g. https://shop.example.com.")
    name = str(data.get("name") or "Website").strip()[:200] or "Website"
    return keys_mod.create_key(s, oid, origins, name, **parse_limits(data))


def update_key(s, oid, key_id, data: dict) -> AssistantKey:
    k = keys_mod.get_key(s, oid, key_id)
    if "name" in data:
        name = str(data["name"] or "").strip()
        if not name:
            raise ValidationFailed("The key needs a name.")
        k.name = name[:200]
    if "allowed_origins" in data:
        origins = keys_mod.clean_origins(parse_origins(data["allowed_origins"]))
        if not origins:
            raise ValidationFailed("Keep at least one allowed website origin.")
        k.allowed_origins = origins
    for f, v in parse_limits(data).items():
        setattr(k, f, v)
    if "settings" in data:
        st = data["settings"]
        if not isinstance(st, dict):
            raise ValidationFailed("'settings' must be an object.")
        k.settings = {**(k.settings or {}), **st}
    k.updated_at = utcnow()
    return k


def rotate_key(s, oid, key_id, grace: str | None) -> tuple[AssistantKey, AssistantKey]:
    return keys_mod.rotate_key(s, oid, key_id, keys_mod.parse_duration(grace or "24h"))


def revoke_key(s, oid, key_id) -> AssistantKey:
    k = keys_mod.get_key(s, oid, key_id)
    k.status = "revoked"
    k.expires_at = utcnow()
    return k


@bp.get("/keys")
@login_required
def list_keys():
    with session_scope() as s:
        return {"items": [key_view(k, public_base()) for k in keys_mod.list_keys(s, org_id())]}


@bp.post("/keys")
@admin_required
def post_key():
    with session_scope() as s:
        return key_view(create_key(s, org_id(), body()), public_base()), 201


@bp.put("/keys/<key_id>")
@admin_required
def put_key(key_id):
    with session_scope() as s:
        return key_view(update_key(s, org_id(), key_id, body()), public_base())


@bp.post("/keys/<key_id>/rotate")
@admin_required
def post_rotate(key_id):
    with session_scope() as s:
        old, new = rotate_key(s, org_id(), key_id, body().get("grace"))
        return {"old": key_view(old, public_base()), "new": key_view(new, public_base())}, 201


@bp.post("/keys/<key_id>/revoke")
@admin_required
def post_revoke(key_id):
    with session_scope() as s:
        return key_view(revoke_key(s, org_id(), key_id), public_base())


# --------------------------------------------------------------------------- usage


def month_bounds(month: str | None, tz: str) -> tuple[datetime, datetime, str]:
    zone = ZoneInfo(tz)
    if month:
        try:
            y, m = (int(x) for x in month.split("-"))
            start = datetime(y, m, 1, tzinfo=zone)
        except ValueError:
            raise ValidationFailed(f"'{month}' is not a month like 2025-05.")
    else:
        now = utcnow().astimezone(zone)
        start = datetime(now.year, now.month, 1, tzinfo=zone)
    end = datetime(start.year + (start.month == 12), start.month % 12 + 1, 1, tzinfo=zone)
    return start, end, f"{start.year:04d}-{start.month:02d}"


def usage_summary(s, oid, month: str | None = None) -> dict:
    oid = as_uuid(oid)
    tz = org_timezone(s, oid)
    start, end, label = month_bounds(month, tz)
    conds = [UsageLedger.organization_id == oid, UsageLedger.created_at >= start, UsageLedger.created_at < end]
    day = func.date(func.timezone(tz, UsageLedger.created_at)).label("day")
    rows = s.execute(select(day, func.sum(UsageLedger.tokens_in), func.sum(UsageLedger.tokens_out),
                            func.sum(UsageLedger.cost_usd), func.count()).where(*conds)
                     .group_by(day).order_by(day)).all()
    by_day = {r[0]: r for r in rows}
    days = []
    d = start.date()
    while d < end.date():
        r = by_day.get(d)
        days.append({"day": d.isoformat(), "tokens_in": int(r[1] or 0) if r else 0,
                     "tokens_out": int(r[2] or 0) if r else 0, "cost_usd": float(r[3] or 0) if r else 0.0,
                     "calls": int(r[4]) if r else 0})
        d += timedelta(days=1)
    by_model = s.execute(select(UsageLedger.purpose, UsageLedger.provider, UsageLedger.model,
                                func.sum(UsageLedger.tokens_in), func.sum(UsageLedger.tokens_out),
                                func.sum(UsageLedger.cost_usd), func.count()).where(*conds)
                         .group_by(UsageLedger.purpose, UsageLedger.provider, UsageLedger.model)
                         .order_by(func.sum(UsageLedger.cost_usd).desc(), UsageLedger.model)).all()
    tin = sum(x["tokens_in"] for x in days)
    tout = sum(x["tokens_out"] for x in days)
    from kbframework.models import Setting

    st = s.scalar(select(Setting).where(Setting.organization_id == oid))
    extra = (st.extra if st else {}) or {}
    budget = extra.get("monthly_token_budget") or (extra.get("budget") or {}).get("monthly_tokens")
    return {"month": label, "timezone": tz, "tokens_in": tin, "tokens_out": tout, "tokens": tin + tout,
            "cost_usd": round(sum(x["cost_usd"] for x in days), 6), "calls": sum(x["calls"] for x in days),
            "budget_tokens": int(budget) if budget else None,
            "budget_used": round((tin + tout) / int(budget), 4) if budget else None,
            "days": days,
            "by_model": [{"purpose": r[0], "provider": r[1], "model": r[2], "tokens_in": int(r[3] or 0),
                          "tokens_out": int(r[4] or 0), "cost_usd": float(r[5] or 0), "calls": int(r[6])}
                         for r in by_model]}


@bp.get("/usage")
@login_required
def usage():
    with session_scope() as s:
        return usage_summary(s, org_id(), request.args.get("month") or None)


# --------------------------------------------------------------------------- providers


def providers_info() -> dict:
    out = {}
    try:
        e = registry.embedder()
        out["embedding"] = {"name": e.name, "model": e.model, "dim": getattr(e, "dim", None),
                            "available": bool(e.available()), "needs_key": bool(getattr(e, "needs_key", False))}
    except KBError as exc:
        out["embedding"] = {"name": None, "error": exc.message, "available": False}
    try:
        llm = registry.llm()
        out["llm"] = {"name": llm.name, "model": llm.model, "available": bool(llm.available()),
                      "offline": llm.name == "extractive"}
    except KBError as exc:
        out["llm"] = {"name": None, "error": exc.message, "available": False}
    out["installed"] = {"embedding": [p.name for p in registry.embedding_providers()],
                        "llm": [p.name for p in registry.llm_providers()]}
    return out


def check_providers() -> dict:
    """Ask each active provider one tiny question and report whether it answered."""
    out = providers_info()
    t0 = time.perf_counter()
    try:
        vec = registry.embedder().embed_batch(["ping"])[0]
        out["embedding"].update(ok=True, ms=round((time.perf_counter() - t0) * 1000, 1), dim_seen=len(vec))
    except Exception as exc:
        out["embedding"].update(ok=False, error=f"{type(exc).__name__}: {getattr(exc, 'message', exc)}")
    t0 = time.perf_counter()
    try:
        llm = registry.llm()
        msgs = [{"role": "system", "content": "Reply with the single word: pong."},
                {"role": "user", "content": "ping"}]
        if llm.name == "extractive":
            res = llm.complete(msgs, question="ping", passages=[
                {"n": 1, "title": "ping", "content": "Pong: the offline answerer quotes passages like this one."}])
        else:
            res = llm.complete(msgs, max_tokens=5, temperature=0)
        out["llm"].update(ok=True, ms=round((time.perf_counter() - t0) * 1000, 1),
                          reply=(res.text or "")[:80], used_llm=res.used_llm)
    except Exception as exc:
        out["llm"].update(ok=False, error=f"{type(exc).__name__}: {getattr(exc, 'message', exc)}")
    return out


@bp.get("/providers")
@login_required
def get_providers():
    return providers_info()


@bp.post("/providers/check")
@login_required
def post_providers_check():
    return check_providers()


def _int(v, default):
    try:
        return int(v) if v not in (None, "") else default
    except ValueError:
        raise ValidationFailed(f"'{v}' is not a number.")
