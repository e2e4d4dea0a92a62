"""The embedded PostgreSQL 18 + pgvector 0.8: start/stop through `kbf services`, a damaged
state file repaired, a real PostgreSQL 16 folder made by the old `pgserver` upgraded
without loss, and an external server with an old pgvector refused with a clear message."""
import json
import os
import subprocess
import sys
from pathlib import Path

import psycopg2
import pytest

KBF = str(Path(sys.executable).parent / "kbf")


def kbf(*args, env, check=True):
    r = subprocess.run([KBF, *args], capture_output=True, text=True, env={**os.environ, **env}, timeout=300)
    if check and r.returncode != 0:
        raise AssertionError(f"kbf {' '.join(args)} failed ({r.returncode}): {r.stderr}{r.stdout}")
    return r


@pytest.fixture
def tmp_path():
    """A scratch folder directly under the temp dir: pytest's own folders are tightened to
    0700 by every new pytest session on the machine, which would lock the server's user out."""
    import shutil
    import tempfile

    path = Path(tempfile.mkdtemp(prefix="kbf-pgtest-"))
    yield path
    _stop_servers_under(path)
    shutil.rmtree(path, ignore_errors=True)


def _stop_servers_under(path: Path) -> None:
    """A test that failed half-way leaves its embedded servers running: stop whatever still
    runs from this scratch folder (its command line names the folder)."""
    import os
    import signal

    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if str(path) in cmd and ("redis-server" in cmd or "postgres" in cmd):
            try:
                os.kill(int(proc.name), signal.SIGTERM)
            except OSError:
                pass


def _url(env):
    out = kbf("services", "env", env=env).stdout
    return out.split("DATABASE_URL='")[1].split("'")[0]


def _one(url, sql):
    with psycopg2.connect(url) as conn, conn.cursor() as cur:
        cur.execute(sql)
        return cur.fetchall()


def test_services_run_postgres_18_with_pgvector_08(tmp_path):
    env = {"KB_DATA_DIR": str(tmp_path / "var"), "DATABASE_URL": "", "REDIS_URL": ""}
    try:
        kbf("services", "start", env=env)
        assert "PostgreSQL 18" in kbf("services", "status", env=env).stdout
        url = _url(env)
        assert _one(url, "SHOW server_version")[0][0].startswith("18.")
        available = dict(_one(url, "SELECT name, default_version FROM pg_available_extensions "
                                   "WHERE name IN ('vector', 'pg_trgm', 'unaccent', 'btree_gin')"))
        assert set(available) == {"vector", "pg_trgm", "unaccent", "btree_gin"}
        assert tuple(int(p) for p in available["vector"].split(".")[:2]) >= (0, 8)
        kbf("db", "upgrade", env=env)
        assert _one(url, "SELECT extversion FROM pg_extension WHERE extname = 'vector'")[0][0] == available["vector"]
    finally:
        kbf("services", "stop", env=env, check=False)


def test_a_restart_keeps_what_was_in_the_shared_buffers(tmp_path):
    """pg_prewarm's autoprewarm worker runs beside the embedded server: it writes down which
    pages the shared buffers hold when the server stops and reads them back after it starts,
    so the first questions after `kbf services start` do not read the indexes page by page."""
    import time

    env = {"KB_DATA_DIR": str(tmp_path / "var"), "DATABASE_URL": "", "REDIS_URL": ""}
    in_buffers = ("SELECT count(*) FROM pg_buffercache WHERE relfilenode = pg_relation_filenode('warm') "
                  "AND reldatabase = (SELECT oid FROM pg_database WHERE datname = current_database())")
    try:
        kbf("services", "start", env=env)
        url = _url(env)
        assert "pg_prewarm" in _one(url, "SHOW shared_preload_libraries")[0][0]
        with psycopg2.connect(url) as conn, conn.cursor() as cur:
            cur.execute("CREATE EXTENSION pg_buffercache")
            cur.execute("CREATE TABLE warm AS SELECT g AS id, repeat('x', 200) AS pad FROM generate_series(1, 20000) g")
        _one(url, "SELECT count(*) FROM warm")
        before = _one(url, in_buffers)[0][0]
        assert before > 100
        kbf("services", "stop", env=env)
        kbf("services", "start", env=env)
        deadline, after = time.monotonic() + 30, 0
        while time.monotonic() < deadline and after < before:  # the worker loads them in the background
            after = _one(url, in_buffers)[0][0]
            time.sleep(0.2)
        assert after == before
    finally:
        kbf("services", "stop", env=env, check=False)


@pytest.mark.parametrize("damage", ["", "{\"pid\": 12", "\x00\x00garbage", "[1, 2]"])
def test_damaged_state_file_never_breaks_the_next_start(tmp_path, damage):
    """A writer killed mid-rewrite (two signals in a row) must not break later `kbf` runs."""
    var = tmp_path / "var"
    env = {"KB_DATA_DIR": str(var), "DATABASE_URL": "", "REDIS_URL": ""}
    state = var / "pg.state.json"
    try:
        kbf("services", "start", env=env)
        assert json.loads(state.read_text())["pid"]
        # damaged while the server runs: the next start reuses the server and rebuilds the file
        state.write_text(damage)
        (var / ".pg.state.json.abc.tmp").write_text("{\"half")  # a rename that never happened
        kbf("services", "start", env=env)
        assert json.loads(state.read_text())["socket_dir"]
        assert not (var / ".pg.state.json.abc.tmp").exists()
        assert _one(_url(env), "SELECT 1") == [(1,)]
        # damaged while it is stopped: the next start starts it
        kbf("services", "stop", env=env)
        state.write_text(damage)
        kbf("services", "start", env=env)
        assert _one(_url(env), "SELECT 1") == [(1,)]
    finally:
        kbf("services", "stop", env=env, check=False)


# --------------------------------------------------------------------------- the old server

def _old_server(data_dir: Path):
    """A real PostgreSQL 16 folder made the way the first wave made it (pgserver)."""
    pgserver = pytest.importorskip("pgserver", reason="pgserver (PostgreSQL 16) is a test dependency")
    import warnings

    warnings.filterwarnings("ignore", module="platformdirs")
    data_dir.mkdir(parents=True, exist_ok=True)
    return pgserver.get_server(str(data_dir / "pg"), cleanup_mode=None)


def _fill_old(url: str) -> dict:
    """The first wave's schema (revision 0001) and an organization's documents and chunks."""
    from alembic import command
    from sqlalchemy import create_engine, text

    from kbframework.migrate import alembic_config

    engine = create_engine(url.replace("postgresql://", "postgresql+psycopg2://"))
    with engine.begin() as conn:
        conn.execute(text("CREATE EXTENSION IF NOT EXISTS vector"))
    with engine.begin() as conn:
        cfg = alembic_config()
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "0001")
    with engine.begin() as conn:
        conn.execute(text("INSERT INTO organizations (name, slug, timezone) "
                          "VALUES ('Old Co', 'old-co', 'Europe/Berlin')"))
        org = conn.execute(text("SELECT id FROM organizations")).scalar()
        conn.execute(text("INSERT INTO sources (organization_id, type, name) VALUES (:o, 'upload', 'files')"),
                     {"o": org})
        src = conn.execute(text("SELECT id FROM sources")).scalar()
        for i in range(30):
            conn.execute(text(
                "INSERT INTO documents (organization_id, source_id, external_id, title, type, status, "
                "normalized_content, sync_hash, tags) VALUES (:o, :s, :e, :t, 'page', 'ready', :c, :h, '{a,b}')"),
                {"o": org, "s": src, "e": f"doc-{i}", "t": f"Grüße Nr. {i}", "c": f"Inhalt {i} – äöü",
                 "h": f"{i:064d}"})
        docs = [r[0] for r in conn.execute(text("SELECT id FROM documents ORDER BY id"))]
        for n, doc in enumerate(docs):
            for k in range(5):
                vec = "[" + ",".join(str(((n * 5 + k) % 7) / 7 + j / 100) for j in range(8)) + "]"
                conn.execute(text(
                    "INSERT INTO chunks (organization_id, document_id, chunk_index, heading, content, "
                    "token_count, embedding, embedding_model) VALUES (:o, :d, :k, 'Kopf', :c, 7, "
                    "CAST(:v AS vector), 'test-8')"),
                    {"o": org, "d": doc, "k": k, "c": f"Absatz {n}/{k} über Größe", "v": vec})
        snapshot = {
            "orgs": conn.execute(text("SELECT id::text, name, slug FROM organizations ORDER BY id")).all(),
            "docs": conn.execute(text("SELECT id::text, title, normalized_content FROM documents ORDER BY id")).all(),
            "chunks": conn.execute(text("SELECT id, content, embedding::text FROM chunks ORDER BY id")).all(),
            "tsv": conn.execute(text("SELECT count(*) FROM chunks WHERE tsv @@ to_tsquery('english', 'absatz')")).scalar(),
        }
    engine.dispose()
    return snapshot


def test_upgrade_moves_a_real_pgserver_16_folder_without_loss(tmp_path):
    var = tmp_path / "var"
    env = {"KB_DATA_DIR": str(var), "DATABASE_URL": "", "REDIS_URL": ""}
    old = _old_server(var)
    url = old.get_uri()
    assert _one(url, "SHOW server_version")[0][0].startswith("16.")
    before = _fill_old(url)
    try:
        # the running old server is not silently reused
        r = kbf("services", "start", env=env, check=False)
        assert r.returncode != 0 and "kbf services upgrade" in r.stderr
        r = kbf("services", "upgrade", env=env)
        assert "upgraded 16 -> 18" in r.stdout
        kept = [p for p in var.iterdir() if p.name.startswith("pg-16-old-")]
        assert len(kept) == 1 and (kept[0] / "PG_VERSION").read_text().strip() == "16"
        assert (var / "pg" / "PG_VERSION").read_text().strip() == "18"
        assert "database at revision" in kbf("db", "upgrade", env=env).stdout
        new_url = _url(env)
        assert _one(new_url, "SHOW server_version")[0][0].startswith("18.")
        assert _one(new_url, "SELECT extversion FROM pg_extension WHERE extname = 'vector'")[0][0].startswith("0.8")
        assert _one(new_url, "SELECT id::text, name, slug FROM organizations ORDER BY id") == [tuple(r) for r in before["orgs"]]
        assert _one(new_url, "SELECT id::text, title, normalized_content FROM documents ORDER BY id") == [tuple(r) for r in before["docs"]]
        assert _one(new_url, "SELECT id, content, embedding::text FROM chunks ORDER BY id") == \
            [tuple(r) for r in before["chunks"]]
        assert _one(new_url, "SELECT count(*) FROM chunks WHERE tsv @@ to_tsquery('english', 'absatz')")[0][0] \
            == before["tsv"] == 150
        # the product works on the moved data, and a second upgrade is a no-op
        assert "old-co" in kbf("org", "list", env=env).stdout
        assert "nothing to do" in kbf("services", "upgrade", env=env).stdout
    finally:
        kbf("services", "stop", env=env, check=False)
        subprocess.run([str(Path(sys.modules["pgserver"].__file__).parent / "pginstall" / "bin" / "pg_ctl"),
                        "stop", "-D", str(var / "pg"), "-m", "immediate"], capture_output=True,
                       user="pgserver" if os.geteuid() == 0 else None) if (var / "pg" / "PG_VERSION").exists() \
            and (var / "pg" / "PG_VERSION").read_text().strip() == "16" else None


def test_upgrade_without_old_binaries_says_how_to_get_them(tmp_path):
    var = tmp_path / "var"
    (var / "pg").mkdir(parents=True)
    (var / "pg" / "PG_VERSION").write_text("16\n")
    env = {"KB_DATA_DIR": str(var), "DATABASE_URL": "", "REDIS_URL": "", "KB_OLD_PG_BIN": str(tmp_path / "nothing")}
    r = kbf("services", "upgrade", env=env, check=False)
    assert r.returncode != 0
    assert "PostgreSQL 16" in r.stderr and "--old-bin" in r.stderr and "kbframework[upgrade]" in r.stderr
    assert (var / "pg" / "PG_VERSION").read_text() == "16\n"  # untouched


def test_external_server_with_old_pgvector_is_refused_clearly(tmp_path):
    old = _old_server(tmp_path / "old")
    try:
        env = {"KB_DATA_DIR": str(tmp_path / "var"), "DATABASE_URL": old.get_uri(), "REDIS_URL": ""}
        for cmd in (("services", "start"), ("db", "upgrade")):
            r = kbf(*cmd, env=env, check=False)
            assert r.returncode != 0, r.stdout
            assert "pgvector 0.6.2" in r.stderr and "0.8 or newer" in r.stderr
            assert "iterative index scans" in r.stderr and "halfvec" in r.stderr
            assert "Traceback" not in r.stderr
    finally:
        old.cleanup()
        subprocess.run([str(Path(sys.modules["pgserver"].__file__).parent / "pginstall" / "bin" / "pg_ctl"),
                        "stop", "-D", str(tmp_path / "old" / "pg"), "-m", "fast"], capture_output=True,
                       user="pgserver" if os.geteuid() == 0 else None)
