"""Manual knowledge: the list and the editor (markdown, tags, role, expiry), saving and indexing."""
from __future__ import annotations

import uuid
from datetime import datetime
from zoneinfo import ZoneInfo

from flask import flash, g, redirect, render_template, request, url_for
from flask_login import login_required
from sqlalchemy import func, select

from kbframework.clock import utcnow
from kbframework.db import session_scope
from kbframework.errors import KBError, ValidationFailed
from kbframework.hooks import registry
from kbframework.models import Document, Source
from kbframework.review import feedback as fb_service
from kbframework.ingest.queue import queue_ingest
from kbframework.sources import documents as docs
from kbframework.admin.views.base import bp, field_errors, int_arg, org, require_admin
from kbframework.admin.views.documents import local_day_end, text_col


def _manual_source_ids(s) -> list:
    editor = registry.editor_source_type()
    if editor is None:
        return []
    return list(s.scalars(select(Source.id).where(Source.organization_id == org(), Source.type == editor.name)))


@bp.get("/knowledge")
@login_required
def knowledge():
    tag = (request.args.get("tag") or "").strip()
    q = (request.args.get("q") or "").strip()
    page = int_arg("page", 1)
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
            fb, log = fb_service.get_feedback(s, org(), a["feedback"])
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
        editor = registry.editor_source_type()
        if editor is None or src.type != editor.name:
            flash("Synced documents come from their source and are edited there; you can disable this one "
                  "or add a manual entry that corrects it.", "error")
            return redirect(url_for("admin.document_detail", doc_id=doc_id))
        entry = {"title": d.title, "body": d.raw_content or d.normalized_content or "", "tags": ", ".join(d.tags or []),
                 "role": d.document_role, "expires": _expiry_value(d.expires_at), "feedback_id": "",
                 "context": None}
        if request.args.get("feedback"):  # editing a cited note from a feedback item: come back to it
            fb, log = fb_service.get_feedback(s, org(), request.args["feedback"])
            entry["feedback_id"] = str(fb.id)
            entry["context"] = {"kind": "feedback", "query": log.query, "answer": log.final_answer,
                                "comment": fb.comment, "id": str(fb.id)}
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
    end = local_day_end(entry["expires"]) if entry["expires"] else None
    if end is not None and end <= utcnow():
        raise ValidationFailed("The expiry date is in the past; pick a future date or leave it empty.",
                               details={"expires": ["Pick a future date."]})
    data["expires_at"] = end.isoformat() if end else None
    return entry, data


def _save_manual(doc_id: str | None):
    require_admin()
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
                fb_service.set_addressed(s, org(), entry["feedback_id"], True)
    except KBError as exc:
        return _editor_error(exc, doc_id, entry)
    results = queue_ingest([new_id], inline=True) or []  # a note is chunked and embedded at once
    r = results[0] if results else None
    if r is not None and r.action == "error":
        flash(f"Saved, but indexing failed: {r.error}. Try “Re-index” on the document.", "error")
    else:
        n = r.chunks if r else 0
        flash(f"Saved and indexed: {n} chunk{'s' if n != 1 else ''}. The assistant uses it from now on."
              + (" The feedback is marked addressed." if entry["feedback_id"] and request.form.get("mark_addressed")
                 else ""), "ok")
    if entry["feedback_id"]:  # back where the fix started
        return redirect(url_for("admin.feedback_detail", feedback_id=entry["feedback_id"]))
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
                           errors=field_errors(exc)), exc.status


@bp.post("/knowledge")
@login_required
def knowledge_create():
    return _save_manual(None)


@bp.post("/knowledge/<doc_id>")
@login_required
def knowledge_update(doc_id):
    return _save_manual(doc_id)
