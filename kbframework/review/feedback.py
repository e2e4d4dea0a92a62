"""Answer feedback under review: the list with its filters, one item with the documents the
answer cited, marking it addressed, and rating an answer from the admin's test chat."""
from __future__ import annotations

from sqlalchemy import and_, exists, func, select

from kbframework.clock import day_start, iso, utcnow
from kbframework.errors import NotFound, ValidationFailed
from kbframework.hooks import registry
from kbframework.models import ChatFeedback, ChatLog, Document, Source
from kbframework.addresses import safe_link
from kbframework.orgs.accounts import as_uuid, org_timezone


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
        conds.append(ChatFeedback.created_at >= day_start(date_from, tz))
    if date_to:
        conds.append(ChatFeedback.created_at < day_start(date_to, tz, end=True))
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
    editor = registry.editor_source_type()
    out = []
    for i in ids:
        if i in by_id:
            d, src = by_id[i]
            out.append({"id": str(d.id), "title": d.title, "status": d.status, "type": d.type,
                        "source_type": src.type, "source_name": src.name, "source_url": safe_link(d.source_url),
                        "editable": editor is not None and src.type == editor.name})
        else:
            out.append({"id": i, "title": "(document deleted)", "status": "deleted", "type": None,
                        "source_type": None, "source_name": None, "source_url": None, "editable": False})
    return out


def set_addressed(s, oid, feedback_id, addressed: bool = True) -> ChatFeedback:
    fb, _ = get_feedback(s, oid, feedback_id)
    fb.addressed_at = utcnow() if addressed else None
    return fb


def get_chat_log(s, oid, log_id) -> ChatLog:
    row = s.scalar(select(ChatLog).where(ChatLog.id == as_uuid(log_id), ChatLog.organization_id == as_uuid(oid)))
    if row is None:
        raise NotFound("No such chat log in this organization.")
    return row


def chat_log_to_dict(row: ChatLog) -> dict:
    return {"id": str(row.id), "query": row.query, "rewritten_query": row.rewritten_query,
            "answer": row.final_answer, "mode": row.mode, "filters": row.filters, "channel": row.channel,
            "debug": row.retrieval_debug, "prompt": row.prompt, "model": row.model,
            "tokens_in": row.tokens_in, "tokens_out": row.tokens_out, "zero_result": row.zero_result,
            "reason": row.reason, "used_document_ids": row.used_document_ids,
            "used_chunk_ids": row.used_chunk_ids, "created_at": row.created_at.isoformat()}


def rate_answer(s, oid, log_id, rating, comment, session: str) -> ChatFeedback:
    """A thumbs up or down (and an optional comment) on one logged answer."""
    if rating not in ("up", "down"):
        raise ValidationFailed("'rating' must be 'up' or 'down'.")
    if comment is not None and (not isinstance(comment, str) or len(comment) > 2000):
        raise ValidationFailed("'comment' must be text of at most 2,000 characters.")
    log = get_chat_log(s, oid, log_id)
    fb = ChatFeedback(organization_id=as_uuid(oid), chat_log_id=log.id, rating=rating,
                      comment=(comment or "").strip() or None, user_session_id=session)
    s.add(fb)
    s.flush()
    return fb
