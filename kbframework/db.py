"""Engine and sessions. One engine per process, created from the resolved database URL."""
from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Iterator

from sqlalchemy import create_engine, event, text
from sqlalchemy.engine import Engine
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session, sessionmaker

from kbframework import tenancy
from kbframework.errors import ServiceUnavailable

_lock = threading.Lock()
_engine: Engine | None = None
_factory: sessionmaker | None = None
_url: str | None = None


def _on_connect(dbapi_conn, _rec):  # register the vector type per connection
    from psycopg2 import Error as DBAPIError
    from pgvector.psycopg2 import register_vector

    try:
        register_vector(dbapi_conn)
    except DBAPIError:
        dbapi_conn.rollback()  # before the first migration the extension may not exist yet
    tenancy.on_connect(dbapi_conn)


def _make_engine(url: str, pool_size: int) -> Engine:
    engine = create_engine(url, pool_size=pool_size, max_overflow=20, pool_pre_ping=True, future=True)
    event.listen(engine, "connect", _on_connect)
    # every transaction carries the organization scope (row-level security)
    event.listen(engine, "begin", tenancy.on_begin)
    event.listen(engine, "before_cursor_execute", tenancy.before_cursor_execute, retval=True)
    for end in ("commit", "rollback"):
        event.listen(engine, end, tenancy.on_end)
    return engine


def init_engine(url: str, *, pool_size: int = 10) -> Engine:
    global _engine, _factory, _url
    with _lock:
        if _engine is not None and _url == url:
            return _engine
        if _engine is not None:
            _engine.dispose()
        _engine = _make_engine(url, pool_size)
        _factory = sessionmaker(bind=_engine, expire_on_commit=False, future=True)
        _url = url
        return _engine


# --------------------------------------------------------------------------- read replica

_read_engine: Engine | None = None
_read_url: str | None = None


def read_url() -> str | None:
    """``DATABASE_READ_URL`` (a streaming replica), normalised; None when reads go to the primary."""
    from kbframework.config import get_config

    url = get_config().database_read_url
    if not url:
        return None
    from kbframework.embedded.services import normalize_db_url

    return normalize_db_url(url)


def get_read_engine() -> Engine:
    """The engine retrieval reads from: the replica when ``DATABASE_READ_URL`` is set, else
    the primary. Writes never go here."""
    global _read_engine, _read_url
    url = read_url()
    if url is None:
        return get_engine()
    with _lock:
        if _read_engine is None or _read_url != url:
            if _read_engine is not None:
                _read_engine.dispose()
            _read_engine = _make_engine(url, 10)
            _read_url = url
        return _read_engine


@contextmanager
def read_session_scope() -> Iterator[Session]:
    """A read-only session for the answer path. On a replica it is read-only by nature; when
    the replica cannot be reached the read falls back to the primary (with a warning in
    the log) rather than failing the visitor's question."""
    if read_url() is None:
        with session_scope() as s:
            yield s
        return
    try:
        conn = get_read_engine().connect()  # the pool's pre-ping tells a dead replica
    except OperationalError as exc:
        import logging

        logging.getLogger(__name__).warning("read replica unreachable, reading from the primary: %s",
                                            str(exc.orig).strip())
        with session_scope() as s:
            yield s
        return
    s = Session(bind=conn, expire_on_commit=False, future=True)
    try:
        yield s
        s.rollback()  # nothing to keep: a replica refuses writes anyway
    except Exception:
        s.rollback()
        raise
    finally:
        s.close()
        conn.close()


def _monitor_connect(url: str):
    """A plain connection as the configured user (not the row-level-security role), for
    the replication views, which hide their columns from unprivileged roles."""
    from sqlalchemy.pool import NullPool

    return create_engine(url, poolclass=NullPool, future=True).connect()


def replication_status() -> dict:
    """What an operator asks of a replica: is the read server in recovery, how far behind
    is it (seconds since the last replayed transaction, bytes of WAL not yet replayed), and
    the primary's view of its standbys."""
    out: dict = {"read_url_set": read_url() is not None, "standbys": []}
    try:
        get_engine()
        with _monitor_connect(_url) as conn:
            rows = conn.execute(text(
                "SELECT application_name, client_addr::text, state, sync_state, "
                "EXTRACT(EPOCH FROM replay_lag) AS replay_lag_s, "
                "pg_wal_lsn_diff(pg_current_wal_lsn(), replay_lsn) AS bytes_behind "
                "FROM pg_stat_replication")).mappings().all()
            out["standbys"] = [{k: (float(v) if k in ("replay_lag_s", "bytes_behind") and v is not None else v)
                                for k, v in r.items()} for r in rows]
    except OperationalError as exc:
        out["primary_error"] = str(exc.orig).strip()
    if out["read_url_set"]:
        try:
            with _monitor_connect(read_url()) as conn:
                r = conn.execute(text(
                    "SELECT pg_is_in_recovery() AS in_recovery, "
                    "CASE WHEN pg_is_in_recovery() THEN EXTRACT(EPOCH FROM now() - "
                    "pg_last_xact_replay_timestamp()) END AS lag_s, "
                    "CASE WHEN pg_is_in_recovery() THEN pg_wal_lsn_diff(pg_last_wal_receive_lsn(), "
                    "pg_last_wal_replay_lsn()) END AS replay_backlog_bytes")).mappings().one()
                out["read"] = {"in_recovery": r["in_recovery"],
                               "lag_s": float(r["lag_s"]) if r["lag_s"] is not None else None,
                               "replay_backlog_bytes": float(r["replay_backlog_bytes"])
                               if r["replay_backlog_bytes"] is not None else None}
        except OperationalError as exc:
            out["read"] = {"error": str(exc.orig).strip()}
    return out


_fast: Engine | None = None
_side: Engine | None = None
SIDE_READ_APPLICATION = "kbf-side-read"  # what pg_stat_activity shows for these connections


def get_side_read_engine() -> Engine:
    """Autocommit connections to the primary for a read that runs beside the answer's own
    session (the keyword leg), not pinged on checkout: no ping, no BEGIN, no COMMIT, three
    round trips fewer in front of the longer search leg. Every statement carries the
    organization scope in its own query string (``tenancy.scope_each_statement``). A caller
    retries once on a dropped connection."""
    global _side
    if _side is None:
        get_engine()
        with _lock:
            if _side is None:
                _side = create_engine(_url, pool_size=5, max_overflow=15, pool_pre_ping=False,
                                      isolation_level="AUTOCOMMIT", future=True,
                                      connect_args={"application_name": SIDE_READ_APPLICATION})
                event.listen(_side, "connect", _on_connect)
                event.listen(_side, "before_cursor_execute", tenancy.scope_each_statement, retval=True)
    return _side


@contextmanager
def side_read_scope() -> Iterator[Session]:
    """The session of a read beside the answer's own: the replica's (``read_session_scope``)
    when one is set, else one of ``get_side_read_engine``'s connections to the primary."""
    if read_url() is not None:
        with read_session_scope() as s:
            yield s
        return
    conn = get_side_read_engine().connect()
    s = Session(bind=conn, expire_on_commit=False, future=True)
    try:
        yield s
    finally:
        s.close()
        conn.close()


def get_autocommit_engine() -> Engine:
    """A second, small pool for hot single-statement paths (webhook receipts): connections
    stay in autocommit mode and are not pinged on checkout, which saves two round trips per
    request. Callers retry once on a dropped connection (``run_autocommit``)."""
    global _fast
    if _fast is None:
        get_engine()
        with _lock:
            if _fast is None:
                _fast = create_engine(_url, pool_size=10, max_overflow=20, pool_pre_ping=False,
                                      isolation_level="AUTOCOMMIT", future=True)
                event.listen(_fast, "connect", lambda dbapi_conn, _rec: tenancy.on_connect(dbapi_conn))
    return _fast


def run_autocommit(sql: str, params: dict):
    """Run one query string (PostgreSQL runs it as one implicit transaction); retried once
    when the pooled connection turns out to be dead."""
    from sqlalchemy.exc import DBAPIError

    prefix, scope = tenancy.prefix_for_query_string()  # the organization scope, for this one transaction
    sql, params = prefix + sql, {**params, **scope}
    for attempt in (1, 2):
        try:
            with get_autocommit_engine().connect() as conn:
                res = conn.exec_driver_sql(sql, params)
                return res.first() if res.returns_rows else None
        except DBAPIError as exc:
            if attempt == 2 or not exc.connection_invalidated:
                raise


def get_engine() -> Engine:
    if _engine is None:
        from kbframework.config import get_config
        from kbframework.embedded import normalize_db_url, start_postgres

        cfg = get_config()  # only the database: a command that never queues a job needs no Redis
        engine = init_engine(normalize_db_url(cfg.database_url or start_postgres(cfg)))
        if cfg.database_url:  # an external server: say now if its pgvector is too old
            from kbframework.embedded.server_check import check_pgvector

            try:
                check_pgvector(engine)
            except Exception:
                dispose()
                raise
    return _engine


def new_session() -> Session:
    get_engine()
    return _factory()


@contextmanager
def session_scope() -> Iterator[Session]:
    """A session that commits on success and rolls back on any error."""
    s = new_session()
    try:
        yield s
        s.commit()
    except Exception:
        s.rollback()
        raise
    finally:
        s.close()


def check_database() -> None:
    try:
        with get_engine().connect() as conn:
            conn.execute(text("SELECT 1"))
    except OperationalError as exc:
        raise ServiceUnavailable(f"The database is not reachable: {exc.orig}".strip())


def dispose() -> None:
    global _engine, _factory, _url, _fast, _side, _read_engine, _read_url
    with _lock:
        for engine in (_engine, _fast, _side, _read_engine):
            if engine is not None:
                engine.dispose()
        _engine = _factory = _url = _fast = _side = None
        _read_engine = _read_url = None
