"""The product's own vector indexes: one HNSW index per organization and embedding model,
for each organization whose chunks of that model outgrow an exact scan.

An index shared by every tenant loses recall exactly where a tenant is a small share of it:
the graph a filtered walk visits is mostly other tenants' rows. At 1M chunks a medium
organization (4.5% of the rows) found 0.09 of its exact top 20 without iterative scans and
0.930 with them, and every insert paid the graph maintenance, a small tenant's too. So each
organization above ``KB_EXACT_SCAN_MAX_ROWS`` chunks of a model gets a partial expression
index of its own, ``(embedding_half::halfvec(dim)) halfvec_cosine_ops WHERE embedding_model =
'<model>' AND organization_id = '<org>'``, which the vector leg's literal conditions let the
planner pick; smaller organizations are scanned exactly (recall 1.0) and their writes touch
no graph. Two models serving side by side never mix dimensions, and an old model's index
keeps answering until its chunks are gone. Indexes are built ``CONCURRENTLY`` (answers and
ingestion go on meanwhile) after ``kbf db upgrade``, by the ingest worker once a load takes an
organization past the exact-scan size (queued behind the load, so a bulk load never pays
per-row graph maintenance), and by ``kbf db indexes --build``, which also drops what no
longer serves: the model-wide indexes of earlier releases and the indexes of organizations
without chunks of their model. The vector leg (``retrieval.search``) repeats the index
expression exactly.

The same organizations get a full-text index of their own, ``gin (tsv) WHERE organization_id =
'<org>'``, beside the composite ``(organization_id, tsv)`` index every organization shares.
In the shared one a large organization's question reads its organization's entry, a posting
list of every one of its chunks, before the words' (at 1M chunks, 454 index pages and 11 ms for
the 400,000-chunk organization's all-words match, against 130 pages and 4 ms in its own); the
keyword leg's functions (``kbf_fulltext_match``, ``kbf_fulltext_df``) are planned for the
organization they are asked about and pick it. Small organizations keep the shared index: their
entry is short, and their writes maintain one index fewer.
"""
from __future__ import annotations

import hashlib
import logging
import os
import re
import threading
import time

from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError

log = logging.getLogger("kbframework.vector_index")

HNSW_M = 16
# measured at 100k chunks (README, "Retrieval at scale"): 128 lifts the large organization's
# recall@20 at ef_search 200 from 0.936 to 0.964, for about twice the build time
HNSW_EF_CONSTRUCTION = 128
SMALL_BUILD_ROWS = 10_000  # below this, a plain CREATE INDEX (writes wait a few milliseconds)
PREFIX = "ix_chunks_hnsw_"
FULLTEXT_PREFIX = "ix_chunks_fts_"
FULLTEXT = "full text"  # the kind of the per-organization full-text indexes, where a vector index names its model

_known: set[str] = set()
_known_lock = threading.Lock()


def index_name(model: str, org=None) -> str:
    """``ix_chunks_hnsw_<model hash>_<organization id's first 12 hex digits>``; without an
    organization, the model-wide name earlier releases built (recognised, then dropped)."""
    base = PREFIX + hashlib.sha1(model.encode()).hexdigest()[:12]
    return base if org is None else f"{base}_{str(org).replace('-', '')[:12]}"


def fulltext_index_name(org) -> str:
    """``ix_chunks_fts_<organization id's first 12 hex digits>``."""
    return FULLTEXT_PREFIX + str(org).replace("-", "")[:12]


def fulltext_create_sql(org, *, concurrently: bool = True) -> str:
    return (f"CREATE INDEX {'CONCURRENTLY ' if concurrently else ''}IF NOT EXISTS {fulltext_index_name(org)} "
            f"ON chunks USING gin (tsv) WHERE organization_id = {_quote(org)}::uuid")


def _quote(value: str) -> str:
    return "'" + str(value).replace("'", "''") + "'"


def create_sql(model: str, dim: int, org=None, *, concurrently: bool = True) -> str:
    where = f"embedding_model = {_quote(model)}"
    if org is not None:
        # the organization first: the build tests the predicate on every row of the table, and
        # the model's name sits in TOAST (read only for the organization's own rows this way)
        where = f"organization_id = {_quote(org)}::uuid AND {where}"
    return (f"CREATE INDEX {'CONCURRENTLY ' if concurrently else ''}IF NOT EXISTS {index_name(model, org)} "
            f"ON chunks USING hnsw ((embedding_half::halfvec({int(dim)})) halfvec_cosine_ops) "
            f"WITH (m = {HNSW_M}, ef_construction = {HNSW_EF_CONSTRUCTION}) WHERE {where}")


def threshold() -> int:
    """Chunks of one model an organization may hold and still be scanned exactly."""
    from kbframework.config import get_config

    return get_config().exact_scan_max_rows


def dimensions(conn, models) -> dict[str, int]:
    """{model: dimension} of these models, each read from one of its chunks (the models come
    from ``chunk_counts``: no second pass over the table to find them)."""
    out = {}
    for model in sorted(models):
        d = conn.execute(text("SELECT vector_dims(embedding) FROM chunks WHERE embedding_model = :m "
                              "AND embedding IS NOT NULL LIMIT 1"), {"m": model}).scalar()
        if d:
            out[model] = int(d)
    return out


def chunk_counts(conn, org=None) -> dict[tuple[str, str], int]:
    """{(organization id, model): chunks}, for one organization or all of them."""
    where, p = ("WHERE embedding_model IS NOT NULL", {})
    if org is not None:
        where, p = where + " AND organization_id = :org", {"org": str(org)}
    rows = conn.execute(text(f"SELECT organization_id, embedding_model, count(*) FROM chunks {where} "
                             "GROUP BY organization_id, embedding_model"), p).all()
    return {(str(o), m): int(n) for o, m, n in rows}


def wanted(conn, counts: dict[tuple[str, str], int] | None = None) -> list[dict]:
    """Every (organization, model) that should have an index: more chunks than an exact scan
    serves well."""
    counts = chunk_counts(conn) if counts is None else counts
    limit = threshold()
    dims = dimensions(conn, {m for (_org, m), n in counts.items() if n > limit})
    out = [{"organization_id": org, "model": model, "kind": "vector", "dim": dims[model], "rows": n,
            "name": index_name(model, org)}
           for (org, model), n in sorted(counts.items()) if n > limit and model in dims]
    # the organization's own full-text index, for the organizations that have a vector index
    sizes = org_sizes(counts)
    for org in sorted({w["organization_id"] for w in out}):
        out.append({"organization_id": org, "model": None, "kind": FULLTEXT, "dim": None,
                    "rows": sizes[org], "name": fulltext_index_name(org)})
    return out


_ORG_RE = re.compile(r"organization_id = '([0-9a-f-]{36})'::uuid")
_MODEL_RE = re.compile(r"embedding_model\)::text = '((?:[^']|'')*)'::text")


def existing(conn) -> dict[str, dict]:
    """Every HNSW index on chunks and every organization's own full-text index: {name: {valid,
    ready, bytes, definition, kind, model, organization_id}}."""
    rows = conn.execute(text(
        "SELECT c.relname, i.indisvalid, i.indisready, pg_relation_size(c.oid), pg_get_indexdef(c.oid), a.amname "
        "FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_class t ON t.oid = i.indrelid "
        "JOIN pg_am a ON a.oid = c.relam WHERE t.relname = 'chunks' "
        "AND (a.amname = 'hnsw' OR (a.amname = 'gin' AND c.relname LIKE :fts))"),
        {"fts": FULLTEXT_PREFIX + "%"}).all()
    out = {}
    for name, valid, ready, size, definition, am in rows:
        org, model = _ORG_RE.search(definition), _MODEL_RE.search(definition)
        out[name] = {"valid": valid, "ready": ready, "bytes": int(size), "definition": definition,
                     "kind": "vector" if am == "hnsw" else FULLTEXT,
                     "organization_id": org.group(1) if org else None,
                     "model": model.group(1).replace("''", "'") if model else None}
    return out


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


def _org_slugs(conn) -> dict[str, str]:
    return {str(i): s for i, s in conn.execute(text("SELECT id, slug FROM organizations")).all()}


def status(conn, counts: dict[tuple[str, str], int] | None = None) -> list[dict]:
    """One row per index that exists or should: name, organization, model, dim, chunks,
    state (valid, missing, invalid, building; superseded or unused for one to drop), size."""
    have = existing(conn)
    progress = building(conn)
    counts = chunk_counts(conn) if counts is None else counts
    slugs = _org_slugs(conn)
    sizes = org_sizes(counts)
    out, seen = [], set()
    for w in wanted(conn, counts):
        name = w["name"]
        seen.add(name)
        info = have.get(name)
        state = ("building" if name in progress else "missing" if info is None
                 else "valid" if info["valid"] else "invalid")
        out.append({**w, "organization": slugs.get(w["organization_id"]), "state": state,
                    "bytes": info["bytes"] if info else 0, "progress": progress.get(name)})
    for name, info in sorted(have.items()):
        if name in seen:
            continue
        org, model = info["organization_id"], info["model"]
        if info["kind"] == FULLTEXT:
            rows = sizes.get(org, 0)
        else:
            rows = counts.get((org, model), 0) if org else None
        state = ("building" if name in progress else "invalid" if not info["valid"]
                 else "superseded" if org is None else "valid" if rows else "unused")
        out.append({"name": name, "organization_id": org, "organization": slugs.get(org), "model": model,
                    "kind": info["kind"], "dim": None, "rows": rows, "state": state, "bytes": info["bytes"],
                    "progress": progress.get(name)})
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


def _build_one(conn, name: str, create, rows, dim: int | None, what: str, analyze_after: bool,
               warm: bool = True) -> dict:
    """The build of one index, shared by both kinds: a no-op when a valid one exists; an
    invalid leftover of an interrupted build is dropped and built again. ``rows``: the chunks
    it will hold, or a function that counts them; ``create(concurrently)``: its statement;
    ``warm``: read it into the shared buffers right away (``ensure_all`` does it last)."""
    import time

    own = conn is None
    conn = conn or _autocommit_conn()
    try:
        info = existing(conn).get(name)
        if info and not info["valid"]:
            conn.execute(text(f"DROP INDEX CONCURRENTLY IF EXISTS {name}"))
            info = None
        if info:
            _remember(name)
            return {"name": name, "built": False, "seconds": 0.0}
        t0 = time.perf_counter()
        if callable(rows):
            rows = rows(conn)
        _tune(conn, rows, dim)
        # a small index is built in milliseconds; CONCURRENTLY would instead wait for every
        # open transaction in the database to finish first
        conn.execute(text(create(rows >= SMALL_BUILD_ROWS)))
        if analyze_after:
            analyze(conn)
        _remember(name)
        secs = round(time.perf_counter() - t0, 2)
        log.info("built %s for %s (%s chunks) in %.1fs", name, what, rows, secs)
        return {"name": name, "built": True, "seconds": secs,
                "prewarmed_blocks": prewarm(conn, name) if warm else None}
    finally:
        if own:
            conn.close()


def build(model: str, dim: int, org, conn=None, rows: int | None = None, *, analyze_after: bool = False,
          warm: bool = True) -> dict:
    """Build one organization's index for one model concurrently (a no-op when a valid one
    exists); an invalid leftover of an interrupted build is dropped and built again.
    ``analyze_after``: refresh the planner's statistics once it is built (a build on its own;
    ``ensure_all`` analyzes once after all of its builds)."""
    count = rows if rows is not None else (lambda c: chunk_counts(c, org).get((str(org), model), 0))
    return _build_one(conn, index_name(model, org), lambda concurrently: create_sql(
        model, dim, org, concurrently=concurrently), count, dim,
        f"organization {org}, {model} ({dim} dims)", analyze_after, warm)


def build_fulltext(org, conn=None, rows: int | None = None, *, warm: bool = True) -> dict:
    """Build one organization's own full-text index concurrently (a no-op when a valid one
    exists; an invalid leftover is dropped and built again)."""
    count = rows if rows is not None else (lambda c: sum(chunk_counts(c, org).values()))
    return _build_one(conn, fulltext_index_name(org), lambda concurrently: fulltext_create_sql(
        org, concurrently=concurrently), count, None, f"organization {org}, full text", False, warm)


def org_sizes(counts: dict[tuple[str, str], int]) -> dict[str, int]:
    """{organization id: chunks of every model} from ``chunk_counts``."""
    sizes: dict[str, int] = {}
    for (org, _model), n in counts.items():
        sizes[org] = sizes.get(org, 0) + n
    return sizes


def analyze(conn) -> None:
    """Fresh statistics for both tables the legs join, so the first questions after a load
    and its index are planned on the rows that are there."""
    conn.execute(text("ANALYZE chunks, documents"))


def vacuum_analyze(conn) -> None:
    """``analyze``, and a vacuum of the same tables first: after a bulk load, the loaded rows'
    hint bits and the visibility map are set once, here, before visitors come. Left to
    autovacuum (PostgreSQL vacuums an insert-only table once enough rows arrived), that pass
    ran during the first questions after a 1M-chunk load, and each question that read a page
    first set its hint bits (with data checksums on, a whole-page write to the WAL); until
    the visibility map is set, the organization's chunk count cannot be an index-only scan.
    A vacuum skips the pages already all-visible, so after an autovacuum it costs little.
    Needs a connection in autocommit (VACUUM refuses a transaction block)."""
    conn.execute(text("VACUUM (ANALYZE) chunks, documents"))


PREWARM_SHARE = 4  # an index is loaded when it takes at most a quarter of the shared buffers


def prewarm(conn, name: str) -> int | None:
    """Read a just-built index into shared buffers in one sequential pass (``kbf_prewarm_index``,
    migration 0012): otherwise the first questions to its organization read its pages one at a
    time as the graph walk reaches them (93 ms instead of 25 for a 45,000-chunk organization's
    first vector search at 1M chunks). An index larger than a quarter of the shared buffers is
    left to the questions: loading it would push out the pages every other organization's
    answers use. Returns the blocks read, or None when nothing was loaded (too large, or the
    server has no pg_prewarm; a failure here never fails the build). ``conn``: the builds'
    autocommit connection (``_autocommit_conn``)."""
    try:
        size, shared = conn.execute(text(
            "SELECT pg_relation_size(CAST(:n AS regclass)), "
            "(SELECT setting::bigint * current_setting('block_size')::bigint FROM pg_settings "
            "WHERE name = 'shared_buffers')"), {"n": name}).first()
        if size > shared // PREWARM_SHARE:
            log.info("not prewarming %s: %d MB is more than a quarter of the shared buffers", name, size >> 20)
            return None
        blocks = conn.execute(text("SELECT kbf_prewarm_index(CAST(:n AS regclass))"), {"n": name}).scalar()
        return int(blocks) if blocks is not None else None
    except SQLAlchemyError as exc:  # a schema from before migration 0012, a revoked grant
        log.warning("could not prewarm %s: %s", name, exc)
        return None


def prewarm_many(conn, names: list[str]) -> dict[str, int | None]:
    """``prewarm`` each of ``names`` (once, in order) until what was loaded reaches half of the
    shared buffers: the rest of them is left to the questions, and the other half to the pages
    every answer reads. {name: blocks read, or None}."""
    try:  # shared_buffers is counted in blocks, as prewarm's result is
        shared_blocks = conn.execute(text("SELECT setting::bigint FROM pg_settings "
                                          "WHERE name = 'shared_buffers'")).scalar()
    except SQLAlchemyError as exc:
        log.warning("could not read shared_buffers: %s", exc)
        return {}
    out: dict[str, int | None] = {}
    loaded = 0
    for name in dict.fromkeys(names):
        out[name] = prewarm(conn, name) if loaded < shared_blocks // 2 else None
        loaded += out[name] or 0
    return out


def organization_indexes(conn, org_ids) -> list[str]:
    """The valid indexes of these organizations' own (vector and full text)."""
    wanted = {str(o) for o in org_ids}
    return [name for name, info in existing(conn).items() if info["valid"] and info["organization_id"] in wanted]


def prewarm_after_counts(counted: list[dict]) -> dict[str, int | None]:
    """Read the own indexes of the organizations whose words were just counted
    (``term_stats.refresh_term_stats`` results) into the shared buffers again: a count reads
    every tsvector of its organization through them (on the 1M bench, counting every
    organization's words left 3,723 of the 114,532 index blocks the post-load step had loaded).
    Only an organization above the exact-scan size has indexes of its own. Never fails."""
    orgs = [c["organization_id"] for c in counted if c and c.get("chunks", 0) > threshold()]
    if not orgs:
        return {}
    try:
        with _autocommit_conn() as conn:
            return prewarm_many(conn, organization_indexes(conn, orgs))
    except SQLAlchemyError as exc:  # an optimisation: the counts are stored either way
        log.warning("could not load the indexes of %s again after their word counts: %s", orgs, exc)
        return {}


def drop(conn, name: str) -> None:
    conn.execute(text(f"DROP INDEX CONCURRENTLY IF EXISTS {name}"))
    forget()


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
        return {"name": name, "seconds": round(time.perf_counter() - t0, 2), "prewarmed_blocks": prewarm(conn, name)}


def ensure_all(conn=None) -> list[dict]:
    """Build every missing or invalid index, vacuum and analyze the two tables when any was
    built (``vacuum_analyze``), refresh the stored word counts of the large
    organizations that changed (``term_stats``), then drop the indexes that serve nobody: the
    post-load step, and the one after ``kbf db upgrade`` (a schema from before the compact
    vectors has nothing to index, and gets none). The model-wide index of an earlier release
    goes only once every organization it served has its own, so no answer loses its index."""
    own = conn is None
    conn = conn or _autocommit_conn()
    try:
        if not _has_compact_vectors(conn):
            return []
        counts = chunk_counts(conn)
        results = [build(w["model"], w["dim"], w["organization_id"], conn, rows=w["rows"], warm=False)
                   if w["kind"] == "vector" else build_fulltext(w["organization_id"], conn, rows=w["rows"], warm=False)
                   for w in wanted(conn, counts)]
        if any(r["built"] for r in results):
            t0 = time.perf_counter()
            vacuum_analyze(conn)
            results.append({"name": "chunks, documents", "built": False, "vacuumed": True,
                            "seconds": round(time.perf_counter() - t0, 2)})
        from kbframework.retrieval.term_stats import refresh_stale_term_stats

        counted = refresh_stale_term_stats(org_sizes(counts))  # the stored word counts
        for stats in counted:
            results.append({"name": f"word counts of {stats['organization_id']}", "built": True,
                            "seconds": stats["seconds"], "words": stats["words"]})
        # last, once nothing else reads in bulk: the indexes just built, and those of the
        # organizations whose words were counted (the counts read every tsvector of theirs
        # through the shared buffers, and pushed out what an earlier load had put there)
        built = [r["name"] for r in results if r.get("built") and "prewarmed_blocks" in r]
        warmed = prewarm_many(conn, built + organization_indexes(conn, [c["organization_id"] for c in counted]))
        for r in results:
            if r["name"] in warmed:
                r["prewarmed_blocks"] = warmed[r["name"]]
        for row in status(conn, counts):  # builds add no chunk: the counts still hold
            if row["state"] in ("superseded", "unused"):
                drop(conn, row["name"])
                results.append({"name": row["name"], "built": False, "dropped": row["state"], "seconds": 0.0})
        return results
    finally:
        if own:
            conn.close()


def drop_for_organization(org_id) -> list[str]:
    """Drop a deleted organization's indexes (their predicate names it; nothing else would)."""
    with _autocommit_conn() as conn:
        names = [n for n, info in existing(conn).items() if info["organization_id"] == str(org_id)]
        for name in names:
            drop(conn, name)
    return names


def _has_compact_vectors(conn) -> bool:
    return conn.execute(text(
        "SELECT 1 FROM information_schema.columns WHERE table_name = 'chunks' "
        "AND column_name = 'embedding_half'")).first() is not None


def _remember(name: str) -> None:
    with _known_lock:
        _known.add(name)


def forget() -> None:
    with _known_lock:
        _known.clear()
    _below.clear()


def has_index(session, model: str, org) -> bool:
    """Whether a valid index of the organization's own serves ``model`` (cached once true)."""
    name = index_name(model, org)
    if name in _known:
        return True
    row = session.execute(text(
        "SELECT i.indisvalid FROM pg_class c JOIN pg_index i ON i.indexrelid = c.oid WHERE c.relname = :n"),
        {"n": name}).first()
    if row and row[0]:
        _remember(name)
        return True
    return False


# (organization, model) → (its chunks as last counted, chunks this process wrote since, when):
# a load goes in as many jobs, and each would count the organization's chunks again (up to the
# exact-scan size of index entries and fresh heap rows) although it is nowhere near the size
_below: dict[tuple[str, str], tuple[int, int, float]] = {}
RECOUNT_SECONDS = 300.0  # other workers write too: what one process knows is recounted this often


def _needs_count(org: str, model: str, written: int, limit: int) -> bool:
    """False while this process knows the organization is at most half the size: its last
    count plus what it wrote since. Other processes' writes are not in that sum, so the count
    is redone every ``RECOUNT_SECONDS`` (an index asked for a few minutes late; the post-load
    step and ``kbf db indexes --build`` still find every organization that needs one)."""
    got = _below.get((org, model))
    if got is None or time.monotonic() - got[2] > RECOUNT_SECONDS:
        return True
    counted, since, at = got
    since += written
    _below[(org, model)] = (counted, since, at)
    # in a pool of N worker processes sharing one load, this process wrote about 1/N of it
    return counted + since * _pool_size() > limit // 2


def _pool_size() -> int:
    """How many worker processes share the queues (``kbf worker --processes N`` tells its
    children through ``KB_WORKER_POOL_SIZE``)."""
    import os

    raw = os.environ.get("KB_WORKER_POOL_SIZE", "")
    return max(1, int(raw)) if raw.isdigit() else 1


def after_load(session, loaded: dict[str, dict[str, int]], written: dict[tuple[str, str], int] | None = None) -> None:
    """Called by ingestion once chunks are written, with {organization id: {model: dim}}: an
    organization whose chunks of a model now outgrow an exact scan and that has no index for
    it gets one, built by the worker behind the jobs already queued (the rest of a bulk load).
    ``written`` ({(organization, model): chunks}) lets a process skip counting an organization
    it knows to be far below the size."""
    from kbframework import tenancy
    from kbframework.db import session_scope

    limit = threshold()
    for org, models in loaded.items():
        for model, dim in models.items():
            if not _needs_count(str(org), model, (written or {}).get((str(org), model), 0), limit):
                continue
            if has_index(session, model, org):
                continue
            with tenancy.organization(org), session_scope() as s:  # the chunks it wrote, whoever asks
                n = s.execute(text(
                    "SELECT count(*) FROM (SELECT 1 FROM chunks WHERE organization_id = :org "
                    "AND embedding_model = :m LIMIT :cap) x"), {"org": str(org), "m": model, "cap": limit + 1}).scalar()
            if n <= limit:
                _below[(str(org), model)] = (int(n), 0, time.monotonic())
                continue
            _below.pop((str(org), model), None)
            try:
                from kbframework.jobs.queues import enqueue_unique

                enqueue_unique("ingest", f"vector-index-{index_name(model, org)}",
                               "kbframework.jobs.tasks.build_vector_index_job", model, int(dim), str(org))
            except Exception as exc:  # no queue (a CLI import): build it here and now
                log.info("queueing the index build failed (%s); building %s now", exc, index_name(model, org))
                build(model, dim, org)
