"""Admin API v1 (session-authenticated, CSRF-protected, scoped to the caller's organization)."""
from __future__ import annotations

from flask import Blueprint, request
from flask_login import current_user, login_required
from marshmallow import ValidationError
from sqlalchemy import func, select

from kbframework.sources import documents as docs
from kbframework.hooks import registry
from kbframework.orgs.accounts import as_uuid
from kbframework.db import session_scope
from kbframework.errors import KBError, NotFound, ValidationFailed
from kbframework.hooks.manager import list_plugins
from kbframework.models import ChatLog, Setting, Source, SyncRun
from kbframework.security import decrypt_json, mask
from kbframework.web.auth import admin_required, csrf_token

bp = Blueprint("api_admin", __name__, url_prefix="/api/admin/v1")


def org_id():
    return as_uuid(current_user.organization_id)


def body() -> dict:
    if not request.data:
        return {}
    data = request.get_json(silent=True)
    if data is None:
        raise KBError("The request body is not valid JSON.", code="malformed_json")
    if not isinstance(data, dict):
        raise ValidationFailed("The request body must be a JSON object.")
    return data


@bp.get("/me")
@login_required
def me():
    return {"user": {"id": current_user.user_id, "email": current_user.email, "role": current_user.role},
            "organization": {"id": current_user.organization_id, "name": current_user.organization_name,
                             "slug": current_user.organization_slug},
            "csrf_token": csrf_token()}


@bp.get("/plugins")
@login_required
def plugins():
    return {"plugins": list_plugins(), "source_types": sorted(registry.source_types()),
            "presets": sorted(registry.presets())}


# --------------------------------------------------------------------------- chat


@bp.post("/chat")
@login_required
def chat():
    from kbframework.retrieval.answer import answer

    data = body()
    question = data.get("question", data.get("message"))
    if not isinstance(question, str):
        raise ValidationFailed("Send the question as a string in 'question'.", code="empty_question")
    history = data.get("history") or []
    if not isinstance(history, list):
        raise ValidationFailed("'history' must be a list of {role, content}.")
    return answer(org_id(), question, mode=data.get("mode") or None, history=history, channel="admin",
                  user_id=as_uuid(current_user.user_id), session_id=data.get("session_id"))


@bp.get("/chat-logs/<log_id>")
@login_required
def chat_log(log_id):
    with session_scope() as s:
        row = s.scalar(select(ChatLog).where(ChatLog.id == as_uuid(log_id), ChatLog.organization_id == org_id()))
        if row is None:
            raise NotFound("No such chat log in this organization.")
        return {"id": str(row.id), "query": row.query, "rewritten_query": row.rewritten_query,
                "answer": row.final_answer, "mode": row.mode, "filters": row.filters, "channel": row.channel,
                "debug": row.retrieval_debug, "prompt": row.prompt, "model": row.model,
                "tokens_in": row.tokens_in, "tokens_out": row.tokens_out, "zero_result": row.zero_result,
                "reason": row.reason, "used_document_ids": row.used_document_ids,
                "used_chunk_ids": row.used_chunk_ids, "created_at": row.created_at.isoformat()}


# --------------------------------------------------------------------------- documents


@bp.get("/documents")
@login_required
def list_documents():
    a = request.args
    with session_scope() as s:
        return docs.list_documents(s, org_id(), q=a.get("q"), source_id=a.get("source_id"),
                                   type_=a.get("type"), role=a.get("role"), status=a.get("status"),
                                   tag=a.get("tag"), page=_int(a.get("page"), 1),
                                   per_page=_int(a.get("per_page"), 25), sort=a.get("sort", "-updated_at"))


def _int(v, default):
    try:
        return int(v) if v not in (None, "") else default
    except ValueError:
        raise ValidationFailed(f"'{v}' is not a number.")


@bp.get("/documents/<doc_id>")
@login_required
def get_document(doc_id):
    with session_scope() as s:
        return docs.document_detail(s, org_id(), doc_id)


@bp.post("/documents/manual")
@admin_required
def create_manual():
    data = body()
    with session_scope() as s:
        doc = docs.create_manual(s, org_id(), data)
        out = docs.doc_to_dict(doc)
        doc_id = doc.id
    docs.queue_ingest([doc_id], inline=request.args.get("wait") == "1")
    with session_scope() as s:
        out = docs.doc_to_dict(docs.get_document(s, org_id(), doc_id))
    return out, 201


@bp.put("/documents/manual/<doc_id>")
@admin_required
def update_manual(doc_id):
    data = body()
    with session_scope() as s:
        doc = docs.update_manual(s, org_id(), doc_id, data)
        did = doc.id
    docs.queue_ingest([did], inline=request.args.get("wait") == "1")
    with session_scope() as s:
        return docs.doc_to_dict(docs.get_document(s, org_id(), did))


@bp.post("/documents/<doc_id>/duplicate")
@admin_required
def duplicate(doc_id):
    with session_scope() as s:
        doc = docs.duplicate_manual(s, org_id(), doc_id)
        did = doc.id
    docs.queue_ingest([did])
    with session_scope() as s:
        return docs.doc_to_dict(docs.get_document(s, org_id(), did)), 201


@bp.put("/documents/<doc_id>/status")
@admin_required
def set_status(doc_id):
    status = body().get("status")
    with session_scope() as s:
        doc = docs.set_status(s, org_id(), doc_id, status)
        needs = doc.status == "syncing"
        out = docs.doc_to_dict(doc)
    if needs:
        docs.queue_ingest([doc_id])
    return out


@bp.post("/documents/<doc_id>/reindex")
@admin_required
def reindex(doc_id):
    with session_scope() as s:
        docs.get_document(s, org_id(), doc_id)
    job = docs.queue_ingest([doc_id], force=True, inline=request.args.get("wait") == "1")
    return {"queued": request.args.get("wait") != "1", "job_id": getattr(job, "id", None)}, 202


@bp.post("/documents/<doc_id>/restore")
@admin_required
def restore(doc_id):
    from marshmallow import fields

    until = body().get("until")
    try:
        until_dt = fields.AwareDateTime().deserialize(until) if until else None
    except ValidationError:
        raise ValidationFailed("'until' must be an ISO date-time with a time zone.")
    with session_scope() as s:
        return docs.doc_to_dict(docs.restore_document(s, org_id(), doc_id, until_dt))


@bp.delete("/documents/<doc_id>")
@admin_required
def delete_document(doc_id):
    with session_scope() as s:
        docs.delete_document(s, org_id(), doc_id)
    return {"deleted": doc_id}


@bp.post("/documents/bulk-status")
@admin_required
def bulk_status():
    data = body()
    ids, status = data.get("ids") or [], data.get("status")
    if not isinstance(ids, list) or not ids:
        raise ValidationFailed("Send 'ids' as a non-empty list.")
    changed = []
    with session_scope() as s:
        for i in ids[:500]:
            changed.append(docs.doc_to_dict(docs.set_status(s, org_id(), i, status))["id"])
    return {"updated": changed}


# --------------------------------------------------------------------------- sources


def source_to_dict(src: Source, s=None) -> dict:
    connector = registry.source_types().get(src.type)
    secrets = decrypt_json(src.secrets) if src.secrets else {}
    out = {"id": str(src.id), "name": src.name, "type": src.type, "status": src.status,
           "config": src.config or {}, "secrets": {k: mask(v) for k, v in secrets.items()},
           "sync_interval_minutes": src.sync_interval_minutes, "last_sync_at": _iso(src.last_sync_at),
           "last_error": src.last_error, "last_webhook_at": _iso(src.last_webhook_at),
           "watermark": _iso(src.watermark), "installed": connector is not None,
           "created_at": _iso(src.created_at)}
    if s is not None:
        out["document_count"] = s.scalar(select(func.count()).select_from(docs.Document).where(
            docs.Document.source_id == src.id, docs.Document.status != "deleted"))
    return out


def _iso(v):
    return v.isoformat() if v else None


@bp.get("/sources")
@login_required
def list_sources():
    with session_scope() as s:
        rows = s.scalars(select(Source).where(Source.organization_id == org_id()).order_by(Source.created_at)).all()
        return {"items": [source_to_dict(r, s) for r in rows]}


@bp.get("/source-types")
@login_required
def source_types():
    from kbframework.sources.config import describe_source_types

    return {"items": describe_source_types()}


@bp.post("/sources")
@admin_required
def create_source():
    from kbframework.sources.config import create_source as _create

    data = body()
    with session_scope() as s:
        src = _create(s, org_id(), data)
        return source_to_dict(src, s), 201


@bp.get("/sources/<source_id>")
@login_required
def get_source(source_id):
    from kbframework.sources.config import get_source as _get

    with session_scope() as s:
        src = _get(s, org_id(), source_id)
        out = source_to_dict(src, s)
        runs = s.scalars(select(SyncRun).where(SyncRun.source_id == src.id)
                         .order_by(SyncRun.started_at.desc()).limit(20)).all()
        out["sync_runs"] = [{"id": str(r.id), "kind": r.kind, "status": r.status, "stats": r.stats,
                             "error": r.error, "started_at": _iso(r.started_at),
                             "finished_at": _iso(r.finished_at)} for r in runs]
        return out


@bp.put("/sources/<source_id>")
@admin_required
def update_source(source_id):
    from kbframework.sources.config import get_source as _get_source
    from kbframework.sources.config import update_source as _update

    data = body()
    with session_scope() as s:
        before = (_get_source(s, org_id(), source_id).config or {}).get("field_mapping")
        src, reindex_ids = _update(s, org_id(), source_id, data)
        remap = ((src.config or {}).get("field_mapping") != before and src.status != "disabled"
                 and getattr(registry.source_types().get(src.type), "supports_sync", False))
        out = source_to_dict(src, s)
    if reindex_ids:
        docs.queue_ingest(reindex_ids)
    if remap:  # the mapping decides text and metadata: re-derive every item, re-embed what changed
        from kbframework.jobs.queues import enqueue

        job = enqueue("sync", "kbframework.jobs.tasks.sync_source_job", str(source_id), "full")
        out["resync_job_id"] = job.id
    return out


@bp.post("/sources/<source_id>/register-webhooks")
@admin_required
def register_webhooks(source_id):
    from kbframework.sources.config import register_webhooks as _register

    base_url = body().get("base_url") or request.host_url
    return _register(org_id(), source_id, base_url)


@bp.post("/sources/<source_id>/sync")
@admin_required
def sync_source(source_id):
    from kbframework.sources.config import get_source as _get
    from kbframework.jobs.queues import enqueue

    kind = body().get("kind", "incremental")
    if kind not in ("full", "incremental"):
        raise ValidationFailed("kind must be 'full' or 'incremental'.")
    with session_scope() as s:
        src = _get(s, org_id(), source_id)
        if src.status == "disabled":
            raise KBError("This source is disabled; enable it first.", code="source_disabled", status=409)
    job = enqueue("sync", "kbframework.jobs.tasks.sync_source_job", str(source_id), kind,
                  job_id=None)
    return {"queued": True, "job_id": job.id, "kind": kind}, 202


@bp.delete("/sources/<source_id>")
@admin_required
def delete_source(source_id):
    from kbframework.sources.config import get_source as _get

    with session_scope() as s:
        s.delete(_get(s, org_id(), source_id))
    return {"deleted": source_id}


# --------------------------------------------------------------------------- settings


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
