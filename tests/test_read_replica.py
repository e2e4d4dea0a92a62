"""A real hot standby: a second embedded PostgreSQL cloned from the test server by
pg_basebackup and kept current by streaming replication. With DATABASE_READ_URL pointing
at it, answers are read from the standby and writes stay on the primary; pausing the
standby's replay proves which server an answer came from."""
import os
import time

import pytest
from sqlalchemy import text

from kbframework import config as kbconfig
from kbframework import db
from kbframework.embedded import standby


def _note(admin, title, body):
    r = admin.post("/api/admin/v1/documents/manual?wait=1", json={"title": title, "body": body})
    assert r.status_code == 201, r.get_data(as_text=True)
    return r.get_json()


def _plain(url: str):
    """As the configured superuser, not the row-level-security role the product enters."""
    from sqlalchemy import create_engine
    from sqlalchemy.pool import NullPool

    return create_engine(url, poolclass=NullPool).connect()


def _on_standby(sql: str):
    with _plain(db.read_url()) as conn:
        return conn.execute(text(sql)).scalar()


def _wait_replayed(timeout: float = 30.0) -> None:
    """Until the standby has replayed everything the primary has written so far (its WAL insert
    position: ingestion commits asynchronously, so the write position can lag behind)."""
    with _plain(str(db.get_engine().url.render_as_string(hide_password=False))) as conn:
        target = conn.execute(text("SELECT pg_current_wal_insert_lsn()::text")).scalar()
    deadline = time.time() + timeout
    while time.time() < deadline:
        done = _on_standby(f"SELECT pg_wal_lsn_diff(pg_last_wal_replay_lsn(), '{target}') >= 0")
        if done:
            return
        time.sleep(0.1)
    raise AssertionError("the standby did not catch up")


@pytest.fixture
def read_replica(kb_services):
    cfg = kbconfig.get_config()
    if cfg.database_url:
        pytest.skip("the embedded standby needs the embedded primary")
    url = standby.start_standby(cfg)
    saved = os.environ.get("DATABASE_READ_URL")
    os.environ["DATABASE_READ_URL"] = url
    kbconfig.reset_config()
    try:
        yield url
    finally:
        try:
            _on_standby("SELECT pg_wal_replay_resume()")
        except Exception:
            pass
        if saved is None:
            os.environ.pop("DATABASE_READ_URL", None)
        else:
            os.environ["DATABASE_READ_URL"] = saved
        kbconfig.reset_config()
        standby.stop_standby(cfg, remove=True)
        # the read engine pointed at the standby; the next read goes to the primary again
        db.get_read_engine()


def test_answers_are_served_by_the_standby_and_writes_go_to_the_primary(read_replica, kb_admin):
    assert _on_standby("SELECT pg_is_in_recovery()") is True
    _note(kb_admin, "Return policy", "You can return any item within 30 days of delivery for a full refund.")
    _wait_replayed()
    r = kb_admin.post("/api/admin/v1/chat", json={"question": "what is your return policy?"})
    assert r.status_code == 200, r.get_data(as_text=True)
    assert "30 days" in r.get_json()["answer"]

    # freeze the standby: a note written now exists on the primary only
    _on_standby("SELECT pg_wal_replay_pause()")
    _note(kb_admin, "Gift vouchers", "Gift vouchers are sold in the shop in amounts of 25, 50 and 100 euros.")
    r = kb_admin.post("/api/admin/v1/chat", json={"question": "do you sell gift vouchers?"})
    assert r.status_code == 200, r.get_data(as_text=True)
    frozen = r.get_json()
    assert all(s["document_title"] != "Gift vouchers" for s in frozen["sources"]), \
        "the answer was read from the primary, not from the paused standby"
    # the chat log of that answer was written on the primary
    with _plain(str(db.get_engine().url.render_as_string(hide_password=False))) as conn:
        assert conn.execute(text("SELECT count(*) FROM chat_logs WHERE query = 'do you sell gift vouchers?'")
                            ).scalar() == 1

    _on_standby("SELECT pg_wal_replay_resume()")
    _wait_replayed()
    r = kb_admin.post("/api/admin/v1/chat", json={"question": "do you sell gift vouchers?"})
    assert any(s["document_title"] == "Gift vouchers" for s in r.get_json()["sources"])


def test_services_status_shows_replication_lag(read_replica, kb_services):
    from click.testing import CliRunner

    from kbframework.cli.commands import cli as main

    res = CliRunner().invoke(main, ["services", "status"])
    assert "read replica (DATABASE_READ_URL): in recovery" in res.output, res.output
    assert "standby" in res.output and "replay lag" in res.output, res.output
    res = CliRunner().invoke(main, ["services", "status", "--json"])
    import json

    st = json.loads(res.output)
    assert st["replication"]["read"]["in_recovery"] is True
    assert st["replication"]["standbys"] and st["replication"]["standbys"][0]["state"] == "streaming"


def test_an_unreachable_replica_falls_back_to_the_primary(kb_admin, monkeypatch, tmp_path):
    monkeypatch.setenv("DATABASE_READ_URL", f"postgresql://postgres@/postgres?host={tmp_path}")
    kbconfig.reset_config()
    try:
        _note(kb_admin, "Opening hours", "We are open Monday to Friday from 9:00 to 17:00.")
        r = kb_admin.post("/api/admin/v1/chat", json={"question": "when are you open?"})
        assert r.status_code == 200, r.get_data(as_text=True)
        assert "9:00" in r.get_json()["answer"]
    finally:
        monkeypatch.delenv("DATABASE_READ_URL")
        kbconfig.reset_config()
