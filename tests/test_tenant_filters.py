"""Every statement the two pipelines send reads a tenant table only through its organization.

Why: it is what keeps one organization's rows out of another's answers when a filter is
forgotten (row-level security is the second line), and what lets the schema distribute by
``organization_id`` on Citus with each question answered by one node (docs/operations.md).

How: the SQL actually sent to PostgreSQL while notes are ingested, a source is synced and
questions are answered (with filters, history and a session) is captured at the cursor,
parsed with sqlglot, and every occurrence of a tenant table must be restricted by
``<that table>.organization_id`` — compared with a value, or joined on
``organization_id`` to an occurrence that is. INSERTs must set ``organization_id``. The
ORM's own writes address a row by its primary key after an organization-scoped read in the
same transaction; moving to Citus makes those keys ``(organization_id, id)``
(docs/operations.md).
"""
from __future__ import annotations

import re

import pytest
import sqlglot
from sqlalchemy import event
from sqlglot import exp

from kbframework import db

TENANT_TABLES = {"sources", "sync_runs", "documents", "chunks", "settings", "assistant_keys",
                 "chat_logs", "chat_feedback", "usage_ledger", "webhook_events", "memberships",
                 "user_sessions"}


# Reads that find the organization rather than use it, each on its own column alone:
# the session cookie's token names the signed-in user's organization, and an ingestion job
# carries only document ids (its documents' organization then scopes every later statement).
ENTRY_LOOKUPS = {("user_sessions", "token_hash", exp.EQ), ("documents", "id", exp.In)}


def _entry_lookup(select: exp.Select, table: str) -> bool:
    where = select.args.get("where")
    if where is None or len(select.args.get("joins") or []) > 0:
        return False
    pred = where.this
    return (isinstance(pred.this, exp.Column)
            and (table, pred.this.name, type(pred)) in ENTRY_LOOKUPS)


class Capture:
    def __init__(self):
        self.statements: list[str] = []

    def __call__(self, conn, cursor, statement, parameters, context, executemany):
        try:
            sql = cursor.mogrify(statement, parameters if not executemany else parameters[0]).decode()
        except Exception:
            sql = statement
        self.statements.append(sql)


@pytest.fixture
def captured(kb_services):
    cap = Capture()
    engines = {db.get_engine(), db.get_autocommit_engine(), db.get_read_engine(), db.get_side_read_engine()}
    for e in engines:
        event.listen(e, "before_cursor_execute", cap)
    yield cap
    for e in engines:
        event.remove(e, "before_cursor_execute", cap)


def _org_column(col: exp.Column) -> bool:
    return col.name == "organization_id"


def _restricted_aliases(scope_expr: exp.Expression, aliases: dict[str, str]) -> set[str]:
    """The table aliases of one SELECT/UPDATE/DELETE whose organization_id is pinned."""
    pinned: set[str] = set()
    joins: list[tuple[str, str]] = []
    conds = []
    for key in ("where", "joins"):
        node = scope_expr.args.get(key)
        if node is None:
            continue
        if key == "joins":
            conds.extend(j.args.get("on") for j in node if j.args.get("on") is not None)
        else:
            conds.append(node)
    only = next(iter(aliases)) if len(aliases) == 1 else None
    for cond in conds:
        for pred in cond.find_all(exp.EQ, exp.In):
            left = pred.this
            if not isinstance(left, exp.Column) or not _org_column(left):
                continue
            la = left.table or only
            right = pred.expression if isinstance(pred, exp.EQ) else None
            if isinstance(right, exp.Column) and _org_column(right):
                joins.append((la, right.table or only))
            elif la:
                pinned.add(la)
    changed = True
    while changed:  # an alias joined on organization_id to a pinned one is pinned too
        changed = False
        for a, b in joins:
            if a in pinned and b not in pinned:
                pinned.add(b); changed = True
            if b in pinned and a not in pinned:
                pinned.add(a); changed = True
    return pinned


def violations(sql: str) -> list[str]:
    try:
        trees = sqlglot.parse(sql, read="postgres")
    except Exception:
        return []  # statements sqlglot cannot read are not ours to judge (DDL, SET, SHOW)
    found = []
    for tree in trees:
        if tree is None:
            continue
        for ins in tree.find_all(exp.Insert):
            target = ins.this.this if isinstance(ins.this, exp.Schema) else ins.this
            if isinstance(target, exp.Table) and target.name in TENANT_TABLES:
                cols = [c.name for c in ins.this.expressions] if isinstance(ins.this, exp.Schema) else []
                if "organization_id" not in cols:
                    found.append(f"INSERT INTO {target.name} without organization_id")
        for scope_expr in tree.find_all(exp.Select):
            tables = {}
            candidates = []
            from_ = scope_expr.args.get("from_") or scope_expr.args.get("from")
            if from_ is not None and isinstance(from_.this, exp.Table):
                candidates.append(from_.this)
            for j in scope_expr.args.get("joins") or []:
                if isinstance(j.this, exp.Table):
                    candidates.append(j.this)
            for t in candidates:
                if t.name in TENANT_TABLES:
                    tables[t.alias_or_name] = t.name
            if not tables:
                continue
            pinned = _restricted_aliases(scope_expr, tables)
            for alias, name in tables.items():
                if alias not in pinned and not _entry_lookup(scope_expr, name):
                    kind = type(scope_expr).__name__.upper()
                    found.append(f"{kind} reads {name} (as {alias}) without organization_id")
    return found


def test_the_checker_catches_an_unscoped_read():
    assert violations("SELECT id FROM documents WHERE id = 'x'")
    assert violations("SELECT c.id FROM chunks c JOIN documents d ON d.id = c.document_id "
                      "WHERE d.organization_id = 'o'")
    assert violations("INSERT INTO chunks (document_id, content) VALUES (1, 'x')")
    assert not violations("SELECT c.id FROM chunks c JOIN documents d ON d.id = c.document_id "
                          "AND d.organization_id = c.organization_id WHERE c.organization_id = 'o'")
    assert not violations("SELECT id FROM documents WHERE organization_id = 'o' AND id = 'x'")
    assert not violations("SELECT id FROM user_sessions WHERE token_hash = 'h'")
    assert violations("SELECT id FROM user_sessions WHERE token_hash = 'h' OR id = 'x'")
    assert violations("SELECT id FROM chunks WHERE id = 1")


def _note(admin, title, body, **extra):
    r = admin.post("/api/admin/v1/documents/manual?wait=1", json={"title": title, "body": body, **extra})
    assert r.status_code == 201, r.get_data(as_text=True)
    return r.get_json()


def test_ingestion_and_answers_filter_every_tenant_table(kb_admin, captured):
    doc = _note(kb_admin, "Return policy", "You can return any item within 30 days of delivery.",
                tags=["policy"], role="support")
    _note(kb_admin, "Friday jazz night", "Live jazz at the Blue Note, Friday from 21:00. Entry 10 euros.",
          role="event")
    r = kb_admin.put(f"/api/admin/v1/documents/manual/{doc['id']}?wait=1",
                     json={"body": "You can return any item within 60 days of delivery."})
    assert r.status_code == 200, r.get_data(as_text=True)
    history = [{"role": "user", "content": "what is your return policy?"},
               {"role": "assistant", "content": "Within 60 days (Return policy)."}]
    for q, extra in (("what is your return policy?", {}),
                     ("anything on friday under 20 euros?", {}),
                     ("and how long do refunds take?", {"history": history}),
                     ("what's the link?", {"session_id": "tenant-filter-test"})):
        r = kb_admin.post("/api/admin/v1/chat", json={"question": q, **extra})
        assert r.status_code == 200, r.get_data(as_text=True)
    assert captured.statements, "nothing was captured"
    bad = {}
    for sql in captured.statements:
        for v in violations(sql):
            where = re.search(r"\sWHERE\s", sql)
            bad.setdefault(v, sql[:200] + " … " + (sql[where.start():][:300] if where else ""))
    assert not bad, "statements reading a tenant table without its organization:\n" + \
        "\n".join(f"- {v}\n    {sql}" for v, sql in bad.items())
