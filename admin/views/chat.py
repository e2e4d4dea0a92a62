"""The test chat and the answer trace page."""
from __future__ import annotations

from flask import render_template, request
from flask_login import login_required
from sqlalchemy import select

from kbframework.db import session_scope
from kbframework.errors import NotFound
from kbframework.hooks import registry
from kbframework.models import ChatLog, Chunk, Document, Setting, Source
from kbframework.orgs.accounts import as_uuid
from kbframework.admin.views.base import bp, org


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
