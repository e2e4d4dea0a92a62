"""Row-level security: which organization's rows a database transaction may see.

Every query already filters by organization; this is the second wall behind that filter.
PostgreSQL policies (migration ``0004_row_level_security``) show a row of a tenant table
only when its ``organization_id`` equals the transaction's ``app.organization_id`` setting,
or when the transaction declared a system bypass (``app.rls_bypass = 'on'``). Connections
enter the non-superuser ``kbf_tenant`` role (NOBYPASSRLS) as soon as they open, so the
policies apply even when the configured database user is a superuser.

The scope of the current code path is a context variable:

- a web request starts with *no* organization (a query sees nothing) and gets the signed-in
  user's organization once the session is loaded, or the key's organization on the public
  API, or the source's organization on a webhook;
- ``with tenancy.system("why")``: an explicit, logged bypass for work that is genuinely
  cross-organization (finding a session by its token, a key by its value, a source by its
  webhook address; migrations; the scheduler's sweeps);
- a queued job runs with the organization recorded when it was queued
  (``kbframework.jobs.scope``); the worker and the scheduler default to *no* organization
  (``use_nobody_default``), so a job that records none sees nothing unless its function
  declares ``system("why")`` itself;
- the CLI and code called directly (tests) default to the system bypass
  (``use_system_default`` says so in the log).

Every transaction copies the scope into ``app.organization_id`` / ``app.rls_bypass`` when it
begins (``db`` installs the hook); the settings are transaction-local, so a pooled
connection never carries one request's organization into the next.
"""
from __future__ import annotations

import logging
import uuid
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Iterator, Optional

log = logging.getLogger("kbframework.tenancy")

ROLE = "kbf_tenant"
SYSTEM = "system"
NOBODY = "nobody"

ENABLED = True  # the RLS bench switches it off to measure the cost (new connections follow it)

_scope: ContextVar[Optional[str]] = ContextVar("kbf_tenant_scope", default=None)
_default = SYSTEM  # not a web request nor a worker: CLI, tests calling functions directly


def use_system_default(who: str) -> None:
    """Declare this process's default scope the system bypass (logged: it is an audit entry)."""
    global _default
    _default = SYSTEM
    log.info("row-level security: %s runs cross-organization work with the system bypass", who)


def use_nobody_default(who: str) -> None:
    """Declare this process's default scope *no* organization: whatever runs without a declared
    scope (a job queued without its organization) sees no tenant rows."""
    global _default
    _default = NOBODY
    log.info("row-level security: %s sees no organization's rows unless a job declares its scope", who)


def current() -> str:
    """An organization id (text), ``SYSTEM`` or ``NOBODY``."""
    v = _scope.get()
    return v if v is not None else _default


def current_organization() -> Optional[str]:
    """The organization id (text) when the scope is one organization, else None."""
    scope = current()
    return None if scope in (SYSTEM, NOBODY) else scope


def sql_settings() -> tuple[str, str]:
    """(app.organization_id, app.rls_bypass) for the current scope."""
    scope = current()
    if scope == SYSTEM:
        return "", "on"
    if scope == NOBODY:
        return "", "off"
    return scope, "off"


def set_scope(value) -> object:
    """Set the scope for the rest of this context (a request); returns a token for ``reset``."""
    if value not in (SYSTEM, NOBODY):
        value = str(value if isinstance(value, uuid.UUID) else uuid.UUID(str(value)))
    return _scope.set(value)


def reset(token) -> None:
    _scope.reset(token)


@contextmanager
def organization(org_id) -> Iterator[None]:
    token = set_scope(org_id)
    try:
        yield
    finally:
        _scope.reset(token)


@contextmanager
def system(reason: str) -> Iterator[None]:
    """An explicit bypass of the organization wall; ``reason`` is logged (debug level on hot
    paths is enough: each call site names its reason in the code)."""
    log.debug("row-level security bypass: %s", reason)
    token = _scope.set(SYSTEM)
    try:
        yield
    finally:
        _scope.reset(token)


@contextmanager
def nobody() -> Iterator[None]:
    token = _scope.set(NOBODY)
    try:
        yield
    finally:
        _scope.reset(token)


# ----------------------------------------------------------------------------- engine hooks

SET_SQL = "SELECT set_config('app.organization_id', %s, true), set_config('app.rls_bypass', %s, true)"


def on_connect(dbapi_conn) -> None:
    """Enter the tenant role on a new connection (when the migration created it)."""
    if not ENABLED:
        return
    cur = dbapi_conn.cursor()
    try:
        cur.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (ROLE,))
        if cur.fetchone():
            cur.execute(f"SET ROLE {ROLE}")
    finally:
        cur.close()
    dbapi_conn.commit()


_PENDING = "kb_scope_pending"
_NAMED_PREFIX = ("SELECT set_config('app.organization_id', %(_kb_org)s, true), "
                 "set_config('app.rls_bypass', %(_kb_bypass)s, true); ")


def on_begin(conn) -> None:
    """Copy the scope into the new transaction's settings: held until its first statement,
    which carries it in the same round trip (``before_cursor_execute``). A round trip of its own
    cost every transaction 0.3 ms on a quiet machine and 1-2 ms beside a running search, and
    on the answer path it stood in front of the keyword leg."""
    if ENABLED:
        conn.info[_PENDING] = sql_settings()


def before_cursor_execute(conn, cursor, statement, parameters, context, executemany):
    """The transaction's first statement, with the scope set in front of it (one query string:
    PostgreSQL runs the two in order, in the transaction psycopg2 opened, and the cursor holds
    the second's result). Where a prefix cannot go (many parameter sets, no parameters to add
    to, a connection in autocommit) the scope is sent first, as its own statement."""
    pending = conn.info.pop(_PENDING, None)
    if pending is None:
        return statement, parameters
    if not executemany and not cursor.connection.autocommit and parameters:
        if isinstance(parameters, dict):
            return _NAMED_PREFIX + statement, {**parameters, "_kb_org": pending[0], "_kb_bypass": pending[1]}
        if isinstance(parameters, (tuple, list)):
            return SET_SQL + "; " + statement, (*pending, *parameters)
    cursor.execute(SET_SQL, pending)
    return statement, parameters


def scope_each_statement(conn, cursor, statement, parameters, context, executemany):
    """Every statement on an autocommit connection, with the scope in front of it in the same
    query string (PostgreSQL runs a query string as one implicit transaction, so the scope
    holds for that statement and ends with it)."""
    if not ENABLED:
        return statement, parameters
    org, bypass = sql_settings()
    if executemany:
        raise RuntimeError("a statement with many parameter sets cannot carry the organization scope "
                           "on an autocommit connection")
    if isinstance(parameters, dict):
        return _NAMED_PREFIX + statement, {**parameters, "_kb_org": org, "_kb_bypass": bypass}
    if parameters:
        return SET_SQL + "; " + statement, (org, bypass, *parameters)
    # no parameters, so the driver does not interpolate: the two values inline (an id set_scope
    # checked, or empty; "on" or "off")
    uuid.UUID(org) if org else None
    return (f"SELECT set_config('app.organization_id', '{org}', true), "
            f"set_config('app.rls_bypass', '{'on' if bypass == 'on' else 'off'}', true); " + statement), parameters


def without_scope(statement: str) -> str:
    """A statement as its caller wrote it (for code that reads the statements sent)."""
    if statement.startswith("SELECT set_config('app.organization_id', '"):
        return statement.split("; ", 1)[1]
    return statement.removeprefix(_NAMED_PREFIX).removeprefix(SET_SQL + "; ")


def on_end(conn) -> None:
    """A transaction that ended before any statement leaves nothing for the next one."""
    conn.info.pop(_PENDING, None)


def flush_pending(conn) -> None:
    """Send the held scope now: for a caller about to use the driver's cursor directly (no
    statement event would carry it)."""
    pending = conn.info.pop(_PENDING, None)
    if pending is not None:
        with conn.connection.dbapi_connection.cursor() as cur:
            cur.execute(SET_SQL, pending)


def prefix_for_query_string() -> tuple[str, dict]:
    """For a one-string multi-statement query (run as one implicit transaction)."""
    if not ENABLED:
        return "", {}
    org, bypass = sql_settings()
    return ("SELECT set_config('app.organization_id', %(_kb_org)s, true), "
            "set_config('app.rls_bypass', %(_kb_bypass)s, true);\n"), {"_kb_org": org, "_kb_bypass": bypass}


@contextmanager
def owner(conn) -> Iterator[None]:
    """Run DDL or maintenance (``CREATE INDEX``, ``TRUNCATE``) in ``conn``'s transaction as the
    configured database user rather than the tenant role."""
    conn.exec_driver_sql("SET LOCAL ROLE NONE")
    try:
        yield
    finally:
        pass  # SET LOCAL ends with the transaction
