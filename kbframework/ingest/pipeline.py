"""Ingestion of a batch of documents, all or nothing per document (DESIGN.md).

    ingest_documents(ids):
      1. load            the document rows and their organizations' settings
      2. normalize       override_content or normalized_content → page-aware segments
      3. hash            sync_hash (content) and indexed_hash (content + chunking + model);
                         unchanged → stop, nothing is re-embedded
    then, part by part (about eight chunks of documents each):
      4. chunk           structure-aware, 500–800 tokens, 50–100 overlap; the part's token
                         counts asked of the tokenizer together
      5. embed           one call for every chunk of the part, retried with backoff
      6. replace         old chunks deleted + new ones copied in (binary COPY) + status
                         active, ONE transaction for the part; if it fails, each document
                         alone, so one bad document cannot cost the others their chunks.
                         Written by a thread beside steps 4–5 of the next part: PostgreSQL
                         computes the full-text vectors and maintains the indexes on one core
                         while this process embeds on the other.
    Any failure: status ``error`` with the reason in metadata; the old chunks keep serving.
"""
from __future__ import annotations

import contextvars
import hashlib
import json
import logging
import os
import time
import uuid
import threading
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field

import numpy as np
from sqlalchemy import select, update
from sqlalchemy.exc import SQLAlchemyError

from kbframework import tenancy
from kbframework.clock import utcnow
from kbframework.hooks import registry
from kbframework.db import session_scope
from kbframework.errors import KBError
from kbframework.ingest.chunk_rows import STAGE_SQL, ChunkCopy, insert_staged
from kbframework.ingest.chunker import ChunkSettings, TokenCounts, chunk_text, prime_documents
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


def chunk_step(title: str, segments: list[Segment], cs: ChunkSettings,
               counts: TokenCounts | None = None) -> list[ChunkDraft]:
    chunks = chunk_text(segments, title=title, settings=cs, counts=counts)
    if not chunks:
        raise KBError("The document has no text to index.", code="empty_document")
    return chunks


def embedding_input(chunk: ChunkDraft) -> str:
    return f"{chunk.heading}\n\n{chunk.content}" if chunk.heading else chunk.content


def embed_step(work: list[_Work], usage: dict | None = None, part: int = 0) -> None:
    """Embed the chunks of many documents together, per provider, all or nothing per batch.
    The tokens embedded are recorded in the usage ledger, or added to ``usage`` for the caller
    to record once (``_record_usage``). ``part`` numbers the batch in the document's trace."""
    by_provider: dict[str, list[_Work]] = {}
    for w in work:
        by_provider.setdefault(w.provider.model, []).append(w)
    for _model, items in by_provider.items():
        provider = items[0].provider
        texts = [embedding_input(c) for w in items for c in w.chunks]
        t0 = time.perf_counter()
        vecs = embed_texts(provider, texts)
        ms = round((time.perf_counter() - t0) * 1000, 1)
        pos = 0
        for w in items:
            w.vectors = vecs[pos:pos + len(w.chunks)]
            pos += len(w.chunks)
            w.steps.append({"step": "embed", "model": provider.model, "chunks": len(w.chunks),
                            "part": part, "batch_chunks": len(texts), "ms": ms})
        mine = {} if usage is None else usage
        for w in items:
            key = (w.org_id, provider.name, provider.model)
            mine[key] = mine.get(key, 0) + sum(c.token_count for c in w.chunks)
        if usage is None:
            _record_usage(mine)


def _record_usage(usage: dict) -> None:
    from kbframework.orgs.usage import record_usage

    for (org_id, name, model), tokens in usage.items():
        record_usage(org_id, "ingest_embedding", name, model, tokens, 0)  # logs, never raises


def replace_batch_step(session, works: list[_Work]) -> None:
    """Replace the chunks of many documents in the caller's transaction, in four statements.

    The documents are updated first: their row locks make a second writer of the same
    document (a duplicate job) wait for this transaction, and its DELETE then sees, and
    removes, the chunks written here, so a document never ends with two sets of chunks."""
    sa_conn = session.connection()
    tenancy.flush_pending(sa_conn)  # the driver's cursor below carries no statement event
    conn = sa_conn.connection.dbapi_connection
    now = utcnow()
    ids = [str(w.doc_id) for w in works]
    meta = [json.dumps({"last_ingest": {"action": "indexed", "at": now.isoformat(), "steps": w.steps},
                        "content_flags": w.flags}) for w in works]
    rows = ChunkCopy()
    for w in works:
        for c, vec in zip(w.chunks, w.vectors):
            rows.add(w.org_id, w.doc_id, c.index, c.heading, c.content, c.token_count, vec,
                     w.provider.model, c.metadata)
    with conn.cursor() as cur:
        cur.execute(
            "SET LOCAL synchronous_commit TO OFF; "
            "UPDATE documents d SET status = 'active', sync_hash = v.sh, indexed_hash = v.ih, "
            "chunk_count = v.n, last_synced_at = %(now)s, updated_at = %(now)s, "
            "metadata = ((d.metadata - 'last_error') - 'last_error_at') || v.meta "
            "FROM unnest(%(ids)s::uuid[], %(orgs)s::uuid[], %(sh)s::text[], %(ih)s::text[], %(n)s::int[], "
            "%(meta)s::jsonb[]) AS v(id, org, sh, ih, n, meta) WHERE d.id = v.id AND d.organization_id = v.org; "
            "DELETE FROM chunks WHERE organization_id = ANY(%(org_set)s::uuid[]) "
            "AND document_id = ANY(%(ids)s::uuid[]); "
            + STAGE_SQL,
            {"now": now, "ids": ids, "orgs": [str(w.org_id) for w in works], "sh": [w.sync_hash for w in works],
             "ih": [w.indexed_hash for w in works], "n": [len(w.chunks) for w in works], "meta": meta,
             "org_set": sorted({str(w.org_id) for w in works})})
        insert_staged(cur, rows)


def mark_error(doc_id, reason: str) -> None:
    """Status ``error`` with the reason; the chunks are not touched (they keep serving)."""
    mark_errors([(doc_id, reason)])


def mark_errors(failures: list[tuple[object, str]]) -> None:
    """``mark_error`` for many documents in one transaction."""
    if not failures:
        return
    with session_scope() as s:
        for doc_id, reason in failures:
            s.execute(update(Document).where(Document.id == _uuid(doc_id)).values(
                status="error", updated_at=utcnow(),
                metadata_=jsonb_merge(Document.metadata_, {"last_error": reason[:2000],
                                                            "last_error_at": utcnow().isoformat()})))


# --------------------------------------------------------------------------- orchestrator


def ingest_documents(document_ids, *, force: bool = False) -> list[IngestResult]:
    results: dict[str, IngestResult] = {}
    budget_units: dict = {}
    loaded = _load(document_ids, force, results, budget_units)  # 1–3, read-only
    # organization → its budget's verdict: False until asked, None to go on
    verdicts = {org: False for org, unit in budget_units.items() if unit != "none"}
    usage: dict = {}
    marked: set[str] = set()
    embedded: list[_Work] = []
    with _Writer(results) as writer:
        for k, part in enumerate(_parts(loaded)):  # 4–5 here, 6 in the writer's threads
            work = _chunk(part, results)
            work = _pause_over_budget(work, results, verdicts)  # paused, not failed, over a paid budget
            try:
                embed_step(work, usage, part=k)
            except Exception as exc:  # the provider's failure is each document's: recorded on it
                log.warning("embedding %s documents failed: %s", len(work), _reason(exc))
                for w in work:
                    results[str(w.doc_id)] = IngestResult(str(w.doc_id), "error", error=_reason(exc),
                                                          steps=w.steps)
                work = []
            # documents that failed so far say so now (their old chunks keep serving)
            failed = [(did, r.error) for did, r in results.items() if r.action == "error" and did not in marked]
            mark_errors(failed)
            marked.update(did for did, _ in failed)
            writer.write(work)
            embedded += work
        writer.also(_record_usage, usage)  # beside the last writes rather than after them
    # after the writes: whether an organization outgrew an exact scan is counted on its chunks
    # as committed (an index is asked for even if some writes failed: the build finds what there is)
    _index_new_models(embedded)
    _count_new_words(embedded)
    _store_traces({k: r for k, r in results.items() if r.action != "indexed"})
    return [results.get(str(d)) or IngestResult(str(d), "skipped") for d in document_ids]


_LOADED = (Document.id, Document.organization_id, Document.title, Document.status, Document.override_content,
           Document.normalized_content, Document.indexed_hash, Document.chunk_count)
PART_CHARS = 16_000  # about eight chunks: small enough that writing overlaps embedding, large enough to batch


def writers() -> int:
    """Parts written at once (``KB_INGEST_WRITERS``, default 2): with the full-text vectors
    and a vector index to maintain, writing a chunk costs PostgreSQL more than embedding it
    costs the worker, so a second connection keeps both cores busy. 1 leaves a core to a web
    process on the same machine during a bulk load."""
    try:
        return max(1, int(os.environ.get("KB_INGEST_WRITERS", "2")))
    except ValueError:
        log.warning("KB_INGEST_WRITERS must be a whole number; writing with 2 connections")
        return 2


def _parts(loaded: list[tuple]) -> list[list[tuple]]:
    """Parts of about ``PART_CHARS``, the first and the last smaller: nothing is written until
    the first part is embedded, and the job waits alone for the last part's write."""
    sizes = [sum(len(x.text) for x in item[0].segments) for item in loaded]
    tail = len(loaded)
    while tail > 1 and sum(sizes[tail - 1:]) < PART_CHARS // 4:
        tail -= 1
    parts, cur, size = [], [], 0
    for i, item in enumerate(loaded[:tail]):
        cur.append(item)
        size += sizes[i]
        if size >= (PART_CHARS // 2 if not parts else PART_CHARS):
            parts.append(cur)
            cur, size = [], 0
    if cur:
        parts.append(cur)
    if loaded[tail:]:
        parts.append(loaded[tail:])
    return parts


_WRITE_POOL: ThreadPoolExecutor | None = None
_WRITE_POOL_LOCK = threading.Lock()


def _write_pool() -> ThreadPoolExecutor:
    """The process's writing threads, started once: a worker runs a job of fifty documents in
    well under a second, and starting its two threads in every job was 3% of its time."""
    global _WRITE_POOL
    with _WRITE_POOL_LOCK:
        if _WRITE_POOL is None:
            _WRITE_POOL = ThreadPoolExecutor(max_workers=writers(), thread_name_prefix="kbf-ingest-write")
        return _WRITE_POOL


class _Writer:
    """Writes (step 6) the parts in threads of their own while the caller goes on.

    Each write runs in a copy of the caller's context (the tenant scope row-level security
    reads) and keeps its results apart until the end (the caller reads its own meanwhile).
    Leaving the ``with`` waits for every write and adds their results; an error a write could
    not record on its documents (the database gone) is raised there."""

    def __init__(self, results: dict):
        self.results = results
        self._futures: list = []
        self._others: list = []
        self._pool = _write_pool()

    def write(self, work: list[_Work]) -> None:
        if work:
            self._futures.append(self._pool.submit(contextvars.copy_context().run, _replace, work))

    def also(self, fn, *args) -> None:
        """Run ``fn(*args)`` in a writing thread too (its result is not kept)."""
        self._others.append(self._pool.submit(contextvars.copy_context().run, fn, *args))

    def __enter__(self) -> "_Writer":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        wait(self._futures + self._others)
        for f in self._others:
            if f.exception() is not None:
                log.warning("ingestion bookkeeping failed: %s", f.exception())
        for f in self._futures:
            if exc_type is not None and f.exception() is not None:
                continue  # the caller's own error is the one to raise
            self.results.update(f.result()[1])


def _load(document_ids, force: bool, results: dict,
          budgets: dict) -> list[tuple[_Work, ChunkSettings, float]]:
    """Load, normalize and hash; a document that fails here gets its error result. ``budgets``
    gets each organization's budget unit ("none": nothing to check before embedding)."""
    from kbframework.orgs.budget import budget_settings

    todo = []
    with session_scope() as s:
        settings_cache: dict = {}
        # the columns the steps read, as plain rows (no ORM objects to build and track)
        docs = s.execute(select(*_LOADED).where(Document.id.in_([_uuid(d) for d in document_ids]))).all()
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
                    budgets[doc.organization_id] = budget_settings(s, doc.organization_id)["unit"]
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
                todo.append((_Work(doc.id, doc.organization_id, doc.title, segments, sync_hash, indexed_hash,
                                   provider, steps=steps), cs, time.perf_counter() - t0))
            except Exception as exc:  # this document's failure, recorded on it; the batch goes on
                log.warning("preparing document %s failed: %s", did, _reason(exc))
                results[did] = IngestResult(did, "error", error=_reason(exc))
    return todo


def _chunk(part: list[tuple[_Work, ChunkSettings, float]], results: dict) -> list[_Work]:
    """Chunk a part's documents, their token counts asked of the tokenizer together."""
    counts = TokenCounts()
    try:
        prime_documents(counts, [(w.segments, cs) for w, cs, _ in part])
    except Exception as exc:  # each document then counts its own, and fails alone if it must
        log.warning("counting the batch's tokens together failed (%s); counting per document", _reason(exc))
    work: list[_Work] = []
    for w, cs, spent in part:
        try:
            t0 = time.perf_counter()
            w.chunks = chunk_step(w.title, w.segments, cs, counts)
            w.steps.append({"step": "chunk", "chunks": len(w.chunks),
                            "tokens": sum(c.token_count for c in w.chunks),
                            "ms": round((spent + time.perf_counter() - t0) * 1000, 1)})
            w.flags = instruction_like(w.title + "\n" + "\n".join(x.text for x in w.segments))
            if w.flags:
                w.steps.append({"step": "flag", "instruction_like": len(w.flags)})
            work.append(w)
        except Exception as exc:  # an empty document, text the chunker cannot take: this one only
            if not isinstance(exc, KBError):
                log.warning("chunking document %s failed: %s", w.doc_id, _reason(exc))
            results[str(w.doc_id)] = IngestResult(str(w.doc_id), "error", error=_reason(exc), steps=w.steps)
    return work


def _replace(work: list[_Work]) -> tuple[list[_Work], dict[str, IngestResult]]:
    """Write the part in one transaction; if that fails, each document in its own, so one
    bad document cannot block the others. Returns the documents written and every result."""
    results: dict[str, IngestResult] = {}
    t0 = time.perf_counter()
    try:
        _write(work)
        written = work
    except Exception as batch_exc:
        log.warning("batch replace failed (%s); retrying document by document", _reason(batch_exc))
        written, failed = [], []
        for w in work:
            try:
                _write([w])
                written.append(w)
            except Exception as exc:
                log.exception("replacing chunks of %s failed", w.doc_id)
                failed.append(w)
                results[str(w.doc_id)] = IngestResult(str(w.doc_id), "error", error=_reason(exc), steps=w.steps)
        mark_errors([(w.doc_id, results[str(w.doc_id)].error) for w in failed])
    ms = round((time.perf_counter() - t0) * 1000, 1)
    batch = sum(len(x.chunks) for x in work)
    for w in written:
        w.steps.append({"step": "replace", "chunks": len(w.chunks), "batch_chunks": batch, "ms": ms})
        results[str(w.doc_id)] = IngestResult(str(w.doc_id), "indexed", len(w.chunks), steps=w.steps)
    return written, results


def _write(works: list[_Work]) -> None:
    """One transaction, four round trips (statements, COPY, INSERT, COMMIT). synchronous_commit
    is off: a crash may lose the last batch's commit, never half of a document; the next sync
    or re-index redoes it."""
    with session_scope() as s:
        replace_batch_step(s, works)


def _index_new_models(written: list[_Work]) -> None:
    """An organization that this load took past the exact-scan size for a model gets its own
    vector index, built after the rest of the load."""
    loaded: dict[str, dict[str, int]] = {}
    counts: dict[tuple[str, str], int] = {}
    for w in written:
        if w.vectors is not None and len(w.vectors):
            loaded.setdefault(str(w.org_id), {})[w.provider.model] = int(w.vectors.shape[1])
            key = (str(w.org_id), w.provider.model)
            counts[key] = counts.get(key, 0) + len(w.vectors)
    if not loaded:
        return
    try:
        from kbframework.retrieval.vector_index import after_load

        with session_scope() as s:
            after_load(s, loaded, counts)
    except Exception as exc:  # searching works without the index (exact scans); say so
        log.warning("could not arrange the vector index build: %s", exc)


def _count_new_words(written: list[_Work]) -> None:
    """The organizations written to no longer have a complete stored word list
    (``retrieval.term_stats``); a small one's is counted again behind the load."""
    from kbframework.ingest.behind_the_load import after_new_chunks
    from kbframework.retrieval.term_stats import mark_changed

    orgs = sorted({str(w.org_id) for w in written if w.vectors is not None and len(w.vectors)})
    if not orgs:
        return
    try:
        with session_scope() as s:
            mark_changed(s, orgs)
    except Exception as exc:  # a list would go on saying it is complete: counted again whatever it says
        log.warning("could not record the new chunks of %s for the stored word counts (%s); counting "
                    "their words again behind the load", orgs, exc)
        after_new_chunks(orgs, force=True)
        return
    after_new_chunks(orgs)


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


def _pause_over_budget(work: list[_Work], results: dict, verdicts: dict) -> list[_Work]:
    from kbframework.orgs.budget import blocked

    keep = []
    for w in work:
        if verdicts.get(w.org_id) is False:
            try:
                verdicts[w.org_id] = blocked(w.org_id)
            except (SQLAlchemyError, KBError) as exc:  # no verdict: index rather than hold the document
                log.warning("budget check for %s failed, indexing anyway: %s", w.org_id, exc)
                verdicts[w.org_id] = None
        stop = verdicts.get(w.org_id)
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
