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


def init_engine(url: str, *, pool_size: int = 10) -> Engine:
    global _engine, _factory, _url
    with _lock:
        if _engine is not None and _url == url:
            return _engine
        if _engine is not None:
            _engine.dispose()
        _engine = create_engine(url, pool_size=pool_size, max_overflow=20, pool_pre_ping=True,
                                future=True)
        _factory = sessionmaker(bind=_engine, expire_on_commit=False, future=True)
        _url = url

        @event.listens_for(_engine, "connect")
        def _on_connect(dbapi_conn, _rec):  # register the vector type per connection
            from pgvector.psycopg2 import register_vector

            try:
                register_vector(dbapi_conn)
            except Exception:
                dbapi_conn.rollback()  # before the first migration the extension may not exist yet
            tenancy.on_connect(dbapi_conn)

        # every transaction carries the organization scope (row-level security)
        event.listen(_engine, "begin", tenancy.on_begin)
        return _engine


_fast: Engine | None = None


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
        from kbframework.embedded import ensure_services

        url, _ = ensure_services()
        engine = init_engine(url)
        if get_config().database_url:  # an external server: say now if its pgvector is too old
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
    global _engine, _factory, _url, _fast
    with _lock:
        if _engine is not None:
            _engine.dispose()
        if _fast is not None:
            _fast.dispose()
        _engine = _factory = _url = _fast = None
