"""The admin's first page: counts, each source's health, recent errors, top unanswered questions."""
from __future__ import annotations

from datetime import timedelta

from sqlalchemy import func, select

from kbframework.clock import iso, utcnow
from kbframework.hooks import registry
from kbframework.models import ChatFeedback, ChatLog, Chunk, Document, Source, SyncRun
from kbframework.orgs.accounts import as_uuid, org_timezone
from kbframework.review.zero_results import zero_results
from kbframework.sources.health import run_to_dict, source_health


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
    types = registry.source_types()
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
                     "supports_sync": bool(types.get(src.type) and types[src.type].supports_sync),
                     "last_run": run_to_dict(last_runs[src.id]) if last_runs[src.id] else None}
                    for src in sources],
        "errors": ([{"kind": "document", "id": str(d.id), "title": d.title,
                     "message": (d.metadata_ or {}).get("last_error") or "Indexing failed.",
                     "at": (d.metadata_ or {}).get("last_error_at") or iso(d.updated_at)} for d in doc_errors]
                   + [{"kind": "sync", "id": str(src.id), "title": src.name, "message": run.error,
                       "at": iso(run.started_at), "status": run.status} for run, src in run_errors]),
    }
