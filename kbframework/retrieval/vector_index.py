"""The product's own vector indexes: one HNSW index per embedding model in use.

Each model gets a partial expression index on the compact copy of its vectors,
``(embedding_half::halfvec(dim)) halfvec_cosine_ops WHERE embedding_model = '<model>'``,
so a model switch (two models serving side by side) never mixes dimensions and the old
model's index keeps answering until its chunks are gone. Indexes are built
``CONCURRENTLY`` (answers and ingestion go on meanwhile) after ``kbf db upgrade``, by the ingest
worker after a load brings a model that has none (queued behind the load, so a bulk load
never pays per-row graph maintenance), and by ``kbf db indexes --build``. The vector leg
(``retrieval.search``) repeats the index expression exactly.
"""
from __future__ import annotations

import hashlib
import logging
import os
import threading

from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError

log = logging.getLogger("kbframework.vector_index")

HNSW_M = 16
# measured at 100k chunks (README, "Retrieval at scale"): 128 lifts the large organization's
# recall@20 at ef_search 200 from 0.936 to 0.964, for about twice the build time
HNSW_EF_CONSTRUCTION = 128
SMALL_BUILD_ROWS = 10_000  # below this, a plain CREATE INDEX (writes wait a few milliseconds)

_known: set[str] = set()
_known_lock = threading.Lock()


def index_name(model: str) -> str:
    return "ix_chunks_hnsw_" + hashlib.sha1(model.encode()).hexdigest()[:12]


def _quote(model: str) -> str:
    return "'" + model.replace("'", "''") + "'"


def create_sql(model: str, dim: int, *, concurrently: bool = True) -> str:
    return (f"CREATE INDEX {'CONCURRENTLY ' if concurrently else ''}IF NOT EXISTS {index_name(model)} "
            f"ON chunks USING hnsw ((embedding_half::halfvec({int(dim)})) halfvec_cosine_ops) "
            f"WITH (m = {HNSW_M}, ef_construction = {HNSW_EF_CONSTRUCTION}) "
            f"WHERE embedding_model = {_quote(model)}")


def models_in_use(conn) -> dict[str, int]:
    """{model: dimension} of every embedding model that has chunks."""
    rows = conn.execute(text(
        "SELECT m.embedding_model, (SELECT vector_dims(c.embedding) FROM chunks c "
        "WHERE c.embedding_model = m.embedding_model AND c.embedding IS NOT NULL LIMIT 1) "
        "FROM (SELECT DISTINCT embedding_model FROM chunks WHERE embedding_model IS NOT NULL) m")).all()
    return {m: int(d) for m, d in rows if d}


def existing(conn) -> dict[str, dict]:
    """Every HNSW index on chunks: {name: {valid, ready, bytes, definition}}."""
    rows = conn.execute(text(
        "SELECT c.relname, i.indisvalid, i.indisready, pg_relation_size(c.oid), pg_get_indexdef(c.oid) "
        "FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_class t ON t.oid = i.indrelid "
        "JOIN pg_am a ON a.oid = c.relam WHERE t.relname = 'chunks' AND a.amname = 'hnsw'")).all()
    return {r[0]: {"valid": r[1], "ready": r[2], "bytes": int(r[3]), "definition": r[4]} for r in rows}


def building(conn) -> dict[str, dict]:
    """Index builds under way, from pg_stat_progress_create_index."""
    try:
        rows = conn.execute(text(
            "SELECT c.relname, p.phase, p.tuples_done, p.tuples_total FROM pg_stat_progress_create_index p "
            "JOIN pg_class c ON c.oid = p.index_relid")).all()
    except SQLAlchemyError:  # the progress view is unreadable (permissions): no progress to show
        log.debug("cannot read pg_stat_progress_create_index", exc_info=True)
        return {}
    return {r[0]: {"phase": r[1], "tuples_done": r[2], "tuples_total": r[3]} for r in rows}


def status(conn) -> list[dict]:
    """One row per index that exists or should: model, dim, name, state, size."""
    have = existing(conn)
    progress = building(conn)
    out, seen = [], set()
    for model, dim in sorted(models_in_use(conn).items()):
        name = index_name(model)
        seen.add(name)
        info = have.get(name)
        state = ("building" if name in progress else "missing" if info is None
                 else "valid" if info["valid"] else "invalid")
        out.append({"name": name, "model": model, "dim": dim, "state": state,
                    "bytes": info["bytes"] if info else 0, "progress": progress.get(name)})
    for name, info in sorted(have.items()):
        if name not in seen:  # a model no chunk uses any more
            out.append({"name": name, "model": None, "dim": None, "bytes": info["bytes"],
                        "state": "unused" if info["valid"] else "invalid", "progress": progress.get(name)})
    return out


def _autocommit_conn():
    """CREATE INDEX CONCURRENTLY refuses to run inside a transaction block, and in autocommit
    the organization scope that every transaction copies in (``tenancy.on_begin``, a
    transaction-local setting) is gone by the next statement: row-level security then hides
    every chunk, and the build finds no model in use. So this connection is a private one
    (never pooled, never handed to another caller) whose session carries the caller's scope,
    the system bypass for the CLI, the migration and the worker."""
    from sqlalchemy import create_engine, event
    from sqlalchemy.pool import NullPool

    from kbframework import db, tenancy

    db.get_engine()
    engine = create_engine(db._url, poolclass=NullPool, future=True, isolation_level="AUTOCOMMIT")
    org, bypass = tenancy.sql_settings()

    @event.listens_for(engine, "connect")
    def _scope(dbapi_conn, _rec):
        tenancy.on_connect(dbapi_conn)  # the tenant role, as every product connection
        if tenancy.ENABLED:
            cur = dbapi_conn.cursor()
            cur.execute("SELECT set_config('app.organization_id', %s, false), "
                        "set_config('app.rls_bypass', %s, false)", (org, bypass))
            cur.close()
            dbapi_conn.commit()

    return _ClosingConnection(engine.connect(), engine)


class _ClosingConnection:
    """The connection, disposing of its one-connection engine when closed."""

    def __init__(self, conn, engine):
        self._conn, self._engine = conn, engine

    def __getattr__(self, name):
        return getattr(self._conn, name)

    def close(self):
        self._conn.close()
        self._engine.dispose()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def build_memory(rows: int | None, dim: int | None) -> str:
    """maintenance_work_mem for an HNSW build of ``rows`` vectors: an HNSW build whose graph
    fits in memory is many times faster than one that spills (pgvector then says "hnsw graph
    no longer fits into maintenance_work_mem"). A halfvec element with its neighbour lists
    takes about 2·dim + 800 bytes in the build; half as much again for margin, at least 1 GB,
    at most 4 GB and a quarter of this machine's memory. ``KB_INDEX_BUILD_MEMORY`` overrides."""
    if os.environ.get("KB_INDEX_BUILD_MEMORY"):
        return os.environ["KB_INDEX_BUILD_MEMORY"].replace("'", "")
    want = int((rows or 0) * (2 * (dim or 1024) + 800) * 1.5)
    try:
        ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        ram = 4 << 30
    mb = max(1024, min(want, 4 << 30, ram // 4) // (1 << 20))
    return f"{mb}MB"


def _tune(conn, rows: int | None = None, dim: int | None = None) -> None:
    conn.execute(text(f"SET maintenance_work_mem = '{build_memory(rows, dim)}'"))
    conn.execute(text("SET max_parallel_maintenance_workers = "
                      f"{int(os.environ.get('KB_INDEX_BUILD_WORKERS', '2'))}"))


def build(model: str, dim: int, conn=None) -> dict:
    """Build one model's index concurrently (a no-op when a valid one exists); an invalid
    leftover of an interrupted build is dropped and built again."""
    import time

    own = conn is None
    conn = conn or _autocommit_conn()
    try:
        name = index_name(model)
        info = existing(conn).get(name)
        if info and not info["valid"]:
            conn.execute(text(f"DROP INDEX CONCURRENTLY IF EXISTS {name}"))
            info = None
        if info:
            _remember(model)
            return {"name": name, "built": False, "seconds": 0.0}
        t0 = time.perf_counter()
        rows = conn.execute(text("SELECT count(*) FROM chunks WHERE embedding_model = :m"), {"m": model}).scalar()
        _tune(conn, rows, dim)
        # a small index is built in milliseconds; CONCURRENTLY would instead wait for every
        # open transaction in the database to finish first
        conn.execute(text(create_sql(model, dim, concurrently=rows >= SMALL_BUILD_ROWS)))
        # the index follows a load: fresh statistics for both tables the legs join, so the
        # first questions after it are planned on the rows that are there
        conn.execute(text("ANALYZE chunks, documents"))
        _remember(model)
        secs = round(time.perf_counter() - t0, 2)
        log.info("built %s for %s (%s dims) in %.1fs", name, model, dim, secs)
        return {"name": name, "built": True, "seconds": secs}
    finally:
        if own:
            conn.close()


def rebuild(name: str) -> dict:
    """REINDEX one index CONCURRENTLY (answers keep using the old copy meanwhile)."""
    import time

    with _autocommit_conn() as conn:
        have = existing(conn)
        if name not in have:
            from kbframework.errors import NotFound

            raise NotFound(f"No vector index named {name!r}; `kbf db indexes` lists them.")
        _tune(conn)
        t0 = time.perf_counter()
        # a REINDEX keeps the options the index was built with: an index from before the
        # current build parameters takes them now (a catalog change; the graph is rebuilt next)
        if "hnsw" in have[name]["definition"]:
            conn.execute(text(f"ALTER INDEX {name} SET (m = {HNSW_M}, ef_construction = {HNSW_EF_CONSTRUCTION})"))
        conn.execute(text(f"REINDEX INDEX CONCURRENTLY {name}"))
        return {"name": name, "seconds": round(time.perf_counter() - t0, 2)}


def ensure_all(conn=None) -> list[dict]:
    """Build every missing or invalid index: the post-load step, and the one after ``kbf db
    upgrade`` (a schema from before the compact vectors has nothing to index, and gets none)."""
    own = conn is None
    conn = conn or _autocommit_conn()
    try:
        if not _has_compact_vectors(conn):
            return []
        return [build(model, dim, conn) for model, dim in sorted(models_in_use(conn).items())]
    finally:
        if own:
            conn.close()


def _has_compact_vectors(conn) -> bool:
    return conn.execute(text(
        "SELECT 1 FROM information_schema.columns WHERE table_name = 'chunks' "
        "AND column_name = 'embedding_half'")).first() is not None


def _remember(model: str) -> None:
    with _known_lock:
        _known.add(model)


def forget() -> None:
    with _known_lock:
        _known.clear()


def has_index(session, model: str) -> bool:
    """Whether a valid index serves ``model`` (cached once true)."""
    if model in _known:
        return True
    row = session.execute(text(
        "SELECT i.indisvalid FROM pg_class c JOIN pg_index i ON i.indexrelid = c.oid WHERE c.relname = :n"),
        {"n": index_name(model)}).first()
    if row and row[0]:
        _remember(model)
        return True
    return False


def after_load(session, models: dict[str, int]) -> None:
    """Called by ingestion once chunks are written: a model without an index gets one,
    built by the worker behind the jobs already queued (the rest of a bulk load)."""
    for model, dim in models.items():
        if has_index(session, model):
            continue
        try:
            from kbframework.jobs.queues import enqueue_unique

            enqueue_unique("ingest", f"vector-index-{index_name(model)}",
                           "kbframework.jobs.tasks.build_vector_index_job", model, int(dim))
        except Exception as exc:  # no queue (a CLI import): build it here and now
            log.info("queueing the index build failed (%s); building %s now", exc, index_name(model))
            build(model, dim)
