"""Document pages: the filtered list, bulk status, detail, reindex, status, delete, restore."""
from __future__ import annotations

from datetime import date, datetime
from zoneinfo import ZoneInfo

from flask import flash, g, redirect, render_template, request, url_for
from flask_login import login_required
from sqlalchemy import func, select

from kbframework.clock import utcnow
from kbframework.db import session_scope
from kbframework.errors import ValidationFailed
from kbframework.hooks import registry
from kbframework.models import Document, Source
from kbframework.ingest.queue import queue_ingest
from kbframework.sources import documents as docs
from kbframework.web.auth import admin_required
from kbframework.admin.views.base import back, bp, int_arg, org
from kbframework.admin.views.sources import upload_url


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
    page = int_arg("page", 1)
    per_page = int_arg("per_page", 25, 1, 200)
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
                           upload_types=[c for c in registry.source_types().values() if c.accepts_uploads],
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


def _edited_in_admin(type_: str | None) -> bool:
    connector = registry.source_types().get(type_) if type_ else None
    return bool(connector and connector.edited_in_admin)


@bp.get("/documents/<doc_id>")
@login_required
def document_detail(doc_id):
    with session_scope() as s:
        d = docs.document_detail(s, org(), doc_id)
    return render_template("admin_document_detail.html", d=d, pages=_split_pages(d.get("normalized_content")),
                           editable=_edited_in_admin(d.get("source_type")),
                           upload=upload_url(d["source_type"]) if d.get("source_type") else None)


@bp.post("/documents/<doc_id>/reindex")
@admin_required
def document_reindex(doc_id):
    with session_scope() as s:
        docs.get_document(s, org(), doc_id)
    results = queue_ingest([doc_id], force=True, inline=True) or []
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
        queue_ingest([doc_id], inline=True)
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
    until = local_day_end(request.form.get("until"))
    if until is not None and until <= utcnow():
        raise ValidationFailed("Pick a date in the future to extend to.")
    with session_scope() as s:
        doc = docs.restore_document(s, org(), doc_id, until)
        needs, title = doc.status == "syncing", doc.title
    if needs:
        queue_ingest([doc_id], inline=True)
    flash(f"“{title}” restored" + (f" until {until.astimezone(ZoneInfo(g.org_tz)):%d %b %Y}." if until else "."),
          "ok")
    return back("admin.document_detail", doc_id=doc_id)


def local_day_end(value: str | None) -> datetime | None:
    """'2025-12-31' → the end of that day in the organization's time zone."""
    if not value:
        return None
    try:
        d = date.fromisoformat(value.strip()[:10])
    except ValueError:
        raise ValidationFailed(f"'{value}' is not a date.")
    return datetime(d.year, d.month, d.day, 23, 59, 59, tzinfo=ZoneInfo(g.org_tz))
