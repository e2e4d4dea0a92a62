"""The keyword leg's side connection (``db.side_read_scope``): autocommit, not pinged on
checkout, every statement carrying the organization scope in its own query string; a connection
the server dropped costs the leg one more try, never the answer."""
from __future__ import annotations

import pytest
from sqlalchemy import text

from kbframework import tenancy
from kbframework.db import SIDE_READ_APPLICATION, get_engine, get_side_read_engine, session_scope
from kbframework.retrieval.answer import answer
from tests.retrieval_support import NOW, PRODUCTS, SUPPORT, seed


def test_every_statement_carries_the_scope_in_each_parameter_style(kb_org):
    seed(kb_org["id"], PRODUCTS + SUPPORT)
    with tenancy.organization(kb_org["id"]):
        with get_side_read_engine().connect() as conn:
            assert conn.exec_driver_sql("SELECT current_setting('app.organization_id')").scalar() == kb_org["id"]
            assert conn.exec_driver_sql("SELECT current_setting('app.organization_id'), %s",
                                        (7,)).one() == (kb_org["id"], 7)
            mine = conn.execute(text("SELECT count(*) FROM documents WHERE title <> :t"), {"t": ""}).scalar()
            assert mine == len(PRODUCTS + SUPPORT)
            assert conn.execute(text("SELECT count(*) FROM documents")).scalar() == mine
            with pytest.raises(RuntimeError, match="many parameter sets"):
                conn.execute(text("SELECT :x"), [{"x": 1}, {"x": 2}])
    with tenancy.nobody():
        with get_side_read_engine().connect() as conn:  # each statement its own scope: none now
            assert conn.execute(text("SELECT count(*) FROM documents")).scalar() == 0


def test_a_dropped_side_connection_costs_the_keyword_leg_one_more_try(kb_org):
    seed(kb_org["id"], PRODUCTS + SUPPORT)
    first = answer(kb_org["id"], "a red dress for a summer wedding", mode="search", now=NOW)
    assert first["debug"]["keyword"]["hits"]
    with get_engine().begin() as conn, tenancy.owner(conn):  # as the server's own user
        ended = conn.execute(text("SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                                  "WHERE application_name = :a) x"), {"a": SIDE_READ_APPLICATION}).scalar()
    assert ended >= 1  # the pooled side connection the first answer used
    again = answer(kb_org["id"], "a red dress for a summer wedding", mode="search", now=NOW)
    assert [h["chunk_id"] for h in again["debug"]["keyword"]["hits"]] == \
        [h["chunk_id"] for h in first["debug"]["keyword"]["hits"]]
    assert again["sources"][0]["document_title"] == first["sources"][0]["document_title"]
