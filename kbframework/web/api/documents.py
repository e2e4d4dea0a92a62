"""Documents: list and read them, write manual knowledge, change status, reindex, restore."""
from __future__ import annotations

from flask import request
from flask_login import login_required
from marshmallow import ValidationError

from kbframework.db import session_scope
from kbframework.errors import ValidationFailed
from kbframework.ingest.queue import queue_ingest
from kbframework.sources import documents as docs
from kbframework.web.api.common import accepted, blueprint, body, int_arg, org_id
from kbframework.web.auth import admin_required

bp = blueprint("documents", __name__)


@bp.get("/documents")
@login_required
def list_documents():
    a = request.args
    with session_scope() as s:
        return docs.list_documents(s, org_id(), q=a.get("q"), source_id=a.get("source_id"),
                                   type_=a.get("type"), role=a.get("role"), status=a.get("status"),
                                   tag=a.get("tag"), page=int_arg(a.get("page"), 1),
                                   per_page=int_arg(a.get("per_page"), 25), sort=a.get("sort", "-updated_at"))


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
    job = queue_ingest([doc_id], inline=request.args.get("wait") == "1")
    with session_scope() as s:
        out = docs.doc_to_dict(docs.get_document(s, org_id(), doc_id))
    return accepted(out, job, 201)


@bp.put("/documents/manual/<doc_id>")
@admin_required
def update_manual(doc_id):
    data = body()
    with session_scope() as s:
        doc = docs.update_manual(s, org_id(), doc_id, data)
        did = doc.id
    job = queue_ingest([did], inline=request.args.get("wait") == "1")
    with session_scope() as s:
        return accepted(docs.doc_to_dict(docs.get_document(s, org_id(), did)), job, 200)


@bp.post("/documents/<doc_id>/duplicate")
@admin_required
def duplicate(doc_id):
    with session_scope() as s:
        doc = docs.duplicate_manual(s, org_id(), doc_id)
        did = doc.id
    job = queue_ingest([did])
    with session_scope() as s:
        return accepted(docs.doc_to_dict(docs.get_document(s, org_id(), did)), job, 201)


@bp.put("/documents/<doc_id>/status")
@admin_required
def set_status(doc_id):
    status = body().get("status")
    with session_scope() as s:
        doc = docs.set_status(s, org_id(), doc_id, status)
        needs = doc.status == "syncing"
        out = docs.doc_to_dict(doc)
    if needs:
        queue_ingest([doc_id])
    return out


@bp.post("/documents/<doc_id>/reindex")
@admin_required
def reindex(doc_id):
    with session_scope() as s:
        docs.get_document(s, org_id(), doc_id)
    job = queue_ingest([doc_id], force=True, inline=request.args.get("wait") == "1")
    out = {"queued": request.args.get("wait") != "1", "job_id": getattr(job, "id", None)}
    return accepted(out, job, 202)


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
