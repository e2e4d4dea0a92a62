"""Ingestion, one document at a time, all or nothing (DESIGN.md).

    ingest_documents(ids):
      1. load            the document row and its organization's settings
      2. normalize       override_content or normalized_content → page-aware segments
      3. hash            sync_hash (content) and indexed_hash (content + chunking + model);
                         unchanged → stop, nothing is re-embedded
      4. chunk           structure-aware, 500–800 tokens, 50–100 overlap
      5. embed           batched across documents, retried with backoff
      6. replace         delete old chunks + insert new ones + status active, ONE transaction
    Any failure: status ``error`` with the reason in metadata; the old chunks keep serving.
"""
from __future__ import annotations

import hashlib
import logging
import time
import uuid
from dataclasses import dataclass, field

import numpy as np
from psycopg2.extras import execute_values
from sqlalchemy import select, text, update

from kbframework.clock import utcnow
from kbframework.hooks import registry
from kbframework.db import session_scope
from kbframework.errors import KBError
from kbframework.ingest.chunker import ChunkSettings, chunk_text
from kbframework.ingest.embedding import embed_texts
from kbframework.ingest.injection import instruction_like
from kbframework.models import Document, Setting, jsonb_merge
from kbframework.types import ChunkDraft, Segment

log = logging.getLogger("kbframework.ingest")

PAGE_BREAK = "\f"  # paged documents (PDF) keep page boundaries as form feeds in their text


@dataclass
class IngestResult:
    document_id: str
    action: str  # indexed | unchanged | error | skipped
    chunks: int = 0
    error: str | None = None
    steps: list[dict] = field(default_factory=list)


@dataclass
class _Work:
    doc_id: uuid.UUID
    org_id: uuid.UUID
    title: str
    segments: list[Segment]
    sync_hash: str
    indexed_hash: str
    provider: object
    chunks: list[ChunkDraft] = field(default_factory=list)
    vectors: np.ndarray | None = None
    steps: list[dict] = field(default_factory=list)
    flags: list[dict] = field(default_factory=list)  # instruction-like text found in the document


# --------------------------------------------------------------------------- steps


def org_ingest_settings(session, org_id) -> tuple[ChunkSettings, object]:
    st = session.scalar(select(Setting).where(Setting.organization_id == org_id))
    chunking = (st.chunking if st else None) or {}
    cs = ChunkSettings(**{k: int(v) for k, v in chunking.items()
                          if k in ("min_tokens", "max_tokens", "overlap_min", "overlap_max")})
    provider = registry.embedder(st.embedding_provider if st else None)
    return cs, provider


def normalize_step(doc: Document) -> list[Segment]:
    """The text to index: the admin's override wins over the synced text."""
    text = doc.override_content if doc.override_content else (doc.normalized_content or "")
    text = text.replace("\r\n", "\n")
    if PAGE_BREAK in text:
        return [Segment(t, page=i + 1) for i, t in enumerate(text.split(PAGE_BREAK)) if t.strip()]
    return [Segment(text)]


def content_hash(title: str, text: str) -> str:
    return hashlib.sha256(f"{title}\x00{text}".encode()).hexdigest()


def hash_step(doc: Document, cs: ChunkSettings, model: str) -> tuple[str, str]:
    """sync_hash: the source's content; indexed_hash: exactly what the chunks are built from
    (the admin's override if any, chunking settings, embedding model)."""
    sync_hash = content_hash(doc.title, doc.normalized_content or "")
    effective = content_hash(doc.title, doc.override_content or doc.normalized_content or "")
    indexed = hashlib.sha256(f"{effective}|{cs.fingerprint()}|{model}".encode()).hexdigest()
    return sync_hash, indexed


def chunk_step(title: str, segments: list[Segment], cs: ChunkSettings) -> list[ChunkDraft]:
    chunks = chunk_text(segments, title=title, settings=cs)
    if not chunks:
        raise KBError("The document has no text to index.", code="empty_document")
    return chunks


def embedding_input(chunk: ChunkDraft) -> str:
    return f"{chunk.heading}\n\n{chunk.content}" if chunk.heading else chunk.content


def embed_step(work: list[_Work]) -> None:
    """Embed the chunks of many documents together, per provider, all or nothing per batch."""
    by_provider: dict[str, list[_Work]] = {}
    for w in work:
        by_provider.setdefault(w.provider.model, []).append(w)
    for _model, items in by_provider.items():
        provider = items[0].provider
        texts = [embedding_input(c) for w in items for c in w.chunks]
        t0 = time.perf_counter()
        vecs = embed_texts(provider, texts)
        pos = 0
        for w in items:
            w.vectors = vecs[pos:pos + len(w.chunks)]
            pos += len(w.chunks)
            w.steps.append({"step": "embed", "model": provider.model, "chunks": len(w.chunks),
                            "ms": round((time.perf_counter() - t0) * 1000, 1)})
        _record_embedding_usage(items, provider, texts)


def _record_embedding_usage(items, provider, texts) -> None:
    try:
        from kbframework.orgs.usage import record_usage

        by_org: dict = {}
        for w in items:
            by_org[w.org_id] = by_org.get(w.org_id, 0) + sum(c.token_count for c in w.chunks)
        for org_id, tokens in by_org.items():
            record_usage(org_id, "ingest_embedding", provider.name, provider.model, tokens, 0)
    except Exception as exc:  # the ledger never breaks ingestion
        log.warning("usage ledger write failed: %s", exc)


def replace_batch_step(session, works: list[_Work]) -> None:
    """Replace the chunks of many documents in the caller's transaction, set-based (three statements):
    old chunks deleted, new ones inserted, the documents marked active with their hashes."""
    import json as _j

    conn = session.connection().connection.dbapi_connection
    now = utcnow()
    with conn.cursor() as cur:
        cur.execute("DELETE FROM chunks WHERE document_id = ANY(%s::uuid[])", ([str(w.doc_id) for w in works],))
        rows = [(str(w.org_id), str(w.doc_id), c.index, c.heading, c.content, c.token_count, vec,
                 w.provider.model, _json(c.metadata))
                for w in works for c, vec in zip(w.chunks, w.vectors)]
        execute_values(cur,
                       "INSERT INTO chunks (organization_id, document_id, chunk_index, heading, "
                       "content, token_count, embedding, embedding_model, metadata) VALUES %s", rows,
                       template="(%s::uuid, %s::uuid, %s, %s, %s, %s, %s, %s, %s::jsonb)", page_size=1000)
        upd = [(str(w.doc_id), w.sync_hash, w.indexed_hash, len(w.chunks),
                _j.dumps({"last_ingest": {"action": "indexed", "at": now.isoformat(), "steps": w.steps},
                          "content_flags": w.flags}))
               for w in works]
        execute_values(cur,
                       "UPDATE documents d SET status = 'active', sync_hash = v.sh, indexed_hash = v.ih, "
                       "chunk_count = v.n, last_synced_at = %s, updated_at = %s, "
                       "metadata = ((d.metadata - 'last_error') - 'last_error_at') || v.meta::jsonb "
                       "FROM (VALUES %%s) AS v(id, sh, ih, n, meta) WHERE d.id = v.id::uuid"
                       % ("'" + now.isoformat() + "'::timestamptz", "'" + now.isoformat() + "'::timestamptz"),
                       upd, template="(%s, %s, %s, %s, %s)", page_size=1000)


def _json(d: dict) -> str:
    import json

    return json.dumps(d or {})


def mark_error(doc_id, reason: str) -> None:
    """Status ``error`` with the reason; the chunks are not touched (they keep serving)."""
    with session_scope() as s:
        s.execute(update(Document).where(Document.id == doc_id).values(
            status="error", updated_at=utcnow(),
            metadata_=jsonb_merge(Document.metadata_, {"last_error": reason[:2000],
                                                        "last_error_at": utcnow().isoformat()})))


# --------------------------------------------------------------------------- orchestrator


def ingest_documents(document_ids, *, force: bool = False) -> list[IngestResult]:
    results: dict[str, IngestResult] = {}
    work: list[_Work] = []
    # 1–4: load, normalize, hash, chunk (read-only)
    with session_scope() as s:
        settings_cache: dict = {}
        docs = s.scalars(select(Document).where(Document.id.in_([_uuid(d) for d in document_ids]))).all()
        found = {str(d.id) for d in docs}
        for missing in (str(d) for d in document_ids if str(d) not in found):
            results[missing] = IngestResult(missing, "skipped", error="document not found")
        for doc in docs:
            did = str(doc.id)
            if doc.status in ("disabled", "deleted", "draft", "expired") and not force:
                results[did] = IngestResult(did, "skipped", error=f"status is {doc.status}")
                continue
            try:
                steps = []
                t0 = time.perf_counter()
                if doc.organization_id not in settings_cache:
                    settings_cache[doc.organization_id] = org_ingest_settings(s, doc.organization_id)
                cs, provider = settings_cache[doc.organization_id]
                segments = normalize_step(doc)
                steps.append({"step": "normalize", "segments": len(segments),
                              "chars": sum(len(x.text) for x in segments)})
                sync_hash, indexed_hash = hash_step(doc, cs, provider.model)
                steps.append({"step": "hash", "sync_hash": sync_hash[:12],
                              "unchanged": indexed_hash == doc.indexed_hash})
                if indexed_hash == doc.indexed_hash and not force and doc.chunk_count > 0:
                    if doc.status != "active":
                        s.execute(update(Document).where(Document.id == doc.id).values(status="active"))
                    results[did] = IngestResult(did, "unchanged", doc.chunk_count, steps=steps)
                    continue
                chunks = chunk_step(doc.title, segments, cs)
                steps.append({"step": "chunk", "chunks": len(chunks),
                              "tokens": sum(c.token_count for c in chunks),
                              "ms": round((time.perf_counter() - t0) * 1000, 1)})
                flags = instruction_like(doc.title + "\n" + "\n".join(x.text for x in segments))
                if flags:
                    steps.append({"step": "flag", "instruction_like": len(flags)})
                work.append(_Work(doc.id, doc.organization_id, doc.title, segments, sync_hash,
                                  indexed_hash, provider, chunks, steps=steps, flags=flags))
            except Exception as exc:
                results[did] = IngestResult(did, "error", error=_reason(exc))
    for did, r in list(results.items()):
        if r.action == "error":
            mark_error(did, r.error)
    # 5: embed, batched across documents (paused, not failed, when a paid model is over budget)
    work = _pause_over_budget(work, results)
    try:
        embed_step(work)
    except Exception as exc:
        for w in work:
            mark_error(w.doc_id, _reason(exc))
            results[str(w.doc_id)] = IngestResult(str(w.doc_id), "error", error=_reason(exc),
                                                  steps=w.steps)
        work = []
    # 6: replace, all or nothing per document. The whole batch goes in one set-based
    #    transaction (one DELETE, one multi-row INSERT, one UPDATE); if that fails, each
    #    document is retried alone so one bad document cannot block the others.
    #    synchronous_commit is off: a crash may lose the last batch's commit, never half of
    #    a document; the next sync or re-index redoes it.
    failed: list[tuple[_Work, Exception]] = []
    if work:
        try:
            with session_scope() as s:
                s.execute(text("SET LOCAL synchronous_commit TO OFF"))
                replace_batch_step(s, work)
            for w in work:
                w.steps.append({"step": "replace", "chunks": len(w.chunks)})
                results[str(w.doc_id)] = IngestResult(str(w.doc_id), "indexed", len(w.chunks), steps=w.steps)
        except Exception as batch_exc:
            log.warning("batch replace failed (%s); retrying document by document", batch_exc)
            for w in work:
                try:
                    with session_scope() as s:
                        s.execute(text("SET LOCAL synchronous_commit TO OFF"))
                        replace_batch_step(s, [w])
                    w.steps.append({"step": "replace", "chunks": len(w.chunks)})
                    results[str(w.doc_id)] = IngestResult(str(w.doc_id), "indexed", len(w.chunks), steps=w.steps)
                except Exception as exc:
                    log.exception("replacing chunks of %s failed", w.doc_id)
                    failed.append((w, exc))
    for w, exc in failed:
        mark_error(w.doc_id, _reason(exc))
        results[str(w.doc_id)] = IngestResult(str(w.doc_id), "error", error=_reason(exc), steps=w.steps)
    _index_new_models([w for w in work if results.get(str(w.doc_id)) and results[str(w.doc_id)].action == "indexed"])
    _store_traces({k: r for k, r in results.items() if r.action != "indexed"})
    return [results.get(str(d)) or IngestResult(str(d), "skipped") for d in document_ids]


def _index_new_models(written: list[_Work]) -> None:
    """A model that has no vector index yet gets one, built after the rest of the load."""
    models = {w.provider.model: int(w.vectors.shape[1]) for w in written
              if w.vectors is not None and len(w.vectors)}
    if not models:
        return
    try:
        from kbframework.retrieval.vector_index import after_load

        with session_scope() as s:
            after_load(s, models)
    except Exception as exc:  # searching works without the index (exact scans); say so
        log.warning("could not arrange the vector index build: %s", exc)


def _store_traces(results: dict[str, IngestResult]) -> None:
    """Keep the last ingestion's steps on the document, for the admin's detail page."""
    try:
        with session_scope() as s:
            for did, r in results.items():
                if r.action in ("indexed", "error", "unchanged") and r.steps:
                    trace = {"action": r.action, "at": utcnow().isoformat(), "steps": r.steps}
                    s.execute(update(Document).where(Document.id == _uuid(did)).values(
                        metadata_=jsonb_merge(Document.metadata_, {"last_ingest": trace})))
    except Exception as exc:
        log.warning("could not store ingestion traces: %s", exc)


def _pause_over_budget(work: list[_Work], results: dict) -> list[_Work]:
    from kbframework.orgs.budget import blocked

    keep, verdicts = [], {}
    for w in work:
        if w.org_id not in verdicts:
            try:
                verdicts[w.org_id] = blocked(w.org_id)
            except Exception:
                verdicts[w.org_id] = None
        stop = verdicts[w.org_id]
        if stop is not None and stop["budget"]["unit"] == "cost" and getattr(w.provider, "is_offline", False):
            stop = None  # an offline embedding costs nothing against a money budget
        if stop is None:
            keep.append(w)
            continue
        with session_scope() as s:
            s.execute(update(Document).where(Document.id == w.doc_id).values(
                status="syncing", metadata_=jsonb_merge(Document.metadata_, {
                    "paused": "budget", "paused_reason": "The monthly model budget is used up; indexing "
                                                         "resumes when the budget allows (raise it or wait "
                                                         "for next month)."})))
        results[str(w.doc_id)] = IngestResult(str(w.doc_id), "paused", error="budget exceeded", steps=w.steps)
    return keep


def _reason(exc: Exception) -> str:
    msg = getattr(exc, "message", None) or str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {msg}" if not isinstance(exc, KBError) else msg


def _uuid(v) -> uuid.UUID:
    return v if isinstance(v, uuid.UUID) else uuid.UUID(str(v))
