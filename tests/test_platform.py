"""Embedded services, migrations, the plugin host and the CLI, for real."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
KBF = str(Path(sys.executable).parent / "kbf")


def kbf(*args, env=None, input=None, check=True):
    e = {**os.environ, **(env or {})}
    r = subprocess.run([KBF, *args], capture_output=True, text=True, env=e, input=input, timeout=120)
    if check and r.returncode != 0:
        raise AssertionError(f"kbf {' '.join(args)} failed ({r.returncode}): {r.stderr}{r.stdout}")
    return r


def test_embedded_services_start_stop_and_keep_data(tmp_path):
    env = {"KB_DATA_DIR": str(tmp_path / "var"), "DATABASE_URL": "", "REDIS_URL": ""}
    try:
        kbf("services", "start", env=env)
        assert "postgres: running" in kbf("services", "status", env=env).stdout
        assert "export DATABASE_URL=" in kbf("services", "env", env=env).stdout
        kbf("db", "upgrade", env=env)
        kbf("org", "create", "Keep Co", "--timezone", "Europe/Berlin", env=env)
        kbf("services", "stop", env=env)
        r = kbf("services", "status", env=env, check=False)
        assert r.returncode != 0 and "stopped" in r.stdout
        kbf("services", "start", env=env)
        assert "keep-co" in kbf("org", "list", env=env).stdout
    finally:
        kbf("services", "stop", env=env, check=False)


def test_migrations_run_from_empty_and_back(tmp_path):
    from alembic.script import ScriptDirectory

    from kbframework.migrate import alembic_config

    heads = ScriptDirectory.from_config(alembic_config()).get_heads()
    assert len(heads) == 1, f"the migrations must form one chain, found heads {heads}"
    env = {"KB_DATA_DIR": str(tmp_path / "var"), "DATABASE_URL": "", "REDIS_URL": ""}
    try:
        assert "empty" in kbf("db", "current", env=env).stdout
        assert f"at revision {heads[0]}" in kbf("db", "upgrade", env=env).stdout
        kbf("db", "downgrade", "base", env=env)
        assert "empty" in kbf("db", "current", env=env).stdout
        assert f"at revision {heads[0]}" in kbf("db", "upgrade", env=env).stdout
    finally:
        kbf("services", "stop", env=env, check=False)


def test_a_database_never_migrated_is_a_clear_cli_error(tmp_path):
    env = {"KB_DATA_DIR": str(tmp_path / "var"), "DATABASE_URL": "", "REDIS_URL": ""}
    try:
        r = kbf("org", "list", env=env, check=False)
        assert r.returncode == 1
        assert "no kbframework schema yet" in r.stderr and "kbf db upgrade" in r.stderr
        assert "Traceback" not in r.stderr and "ProgrammingError" not in r.stderr
    finally:
        kbf("services", "stop", env=env, check=False)


def test_database_down_is_a_clear_cli_error():
    r = kbf("org", "list", env={"DATABASE_URL": "postgresql://nobody@127.0.0.1:1/none"}, check=False)
    assert r.returncode != 0
    assert "database is not reachable" in r.stderr
    assert "Traceback" not in r.stderr


def test_cli_end_to_end(kb_services, kb_clean, tmp_path):
    env = {"KB_DATA_DIR": str(kb_services.data_dir), "DATABASE_URL": "", "REDIS_URL": ""}
    assert "created organization acme" in kbf("org", "create", "Acme", "--timezone", "Europe/Belgrade", env=env).stdout
    r = kbf("user", "create", "boss@acme.example", "--org", "acme", "--role", "admin", env=env)
    assert "password:" in r.stdout
    body = tmp_path / "returns.md"
    body.write_text("# Returns\n\nReturns are accepted within 14 days with the receipt.")
    r = kbf("doc", "add-manual", "--org", "acme", "--title", "Returns", "--body-file", str(body),
            "--tags", "policy", "--role", "support", env=env)
    assert "indexed: 1 chunks" in r.stdout
    r = kbf("ask", "--org", "acme", "what is your return policy?", env=env)
    assert "14 days" in r.stdout and "Sources:" in r.stdout
    import json

    out = json.loads(kbf("ask", "--org", "acme", "--json", "returns", env=env).stdout)
    assert out["sources"][0]["document_title"] == "Returns" and "fused" in out["debug"]
    r = kbf("ask", "--org", "nope", "hi", env=env, check=False)
    assert r.returncode != 0 and "No organization with slug 'nope'" in r.stderr
    r = kbf("ask", "--org", "acme", "", env=env, check=False)
    assert r.returncode != 0 and "empty" in r.stderr
    r = kbf("org", "create", "Bad", "--timezone", "Mars/Olympus", env=env, check=False)
    assert r.returncode != 0 and "Unknown time zone" in r.stderr
    r = kbf("key", "create", "--org", "acme", "--origin", "https://acme.example", env=env)
    assert "kb_pk_" in r.stdout


def test_plugins_listing_and_duplicate_source_type(kb_services):
    r = kbf("plugins")
    assert "manual" in r.stdout and "kb_source_types" in r.stdout
    from kbframework.hooks import registry
    from kbframework.errors import StartupError
    from kbframework.hooks.manager import build_plugin_manager, reset_plugin_manager
    from kbframework.hooks.markers import hookimpl

    class Dup:
        @hookimpl
        def kb_source_types(self):
            from kbframework_manual.connector import ManualConnector

            return [ManualConnector()]

    pm = build_plugin_manager()
    pm.register(Dup(), name="impostor")
    reset_plugin_manager(pm)
    try:
        with pytest.raises(StartupError) as exc:
            registry.source_types()
        assert "'manual'" in exc.value.message and "impostor" in exc.value.message
    finally:
        reset_plugin_manager(None)


def test_kb_load_plugins_restricts_loading():
    r = kbf("plugins", "--json", env={"KB_LOAD_PLUGINS": "nothing-like-this"})
    import json

    names = [p["name"] for p in json.loads(r.stdout)]
    assert "manual" not in names and "kbframework.default_plugins.providers" in names


def test_scheduler_runs_expiry_and_due_reconciliation(kb_services, kb_admin, kb_drain):
    """RQ's CronScheduler (kbf scheduler, started by kbf worker --with-scheduler) enqueues the
    periodic jobs; a worker runs them."""
    import time
    from datetime import datetime, timedelta, timezone

    from rq import Queue

    from kbframework.jobs.queues import get_redis

    past = datetime.now(timezone.utc) - timedelta(hours=3)
    r = kb_admin.post("/api/admin/v1/documents/manual?wait=1", json={
        "title": "Old party", "body": "A party that is over.", "role": "event",
        "event_start": (past - timedelta(hours=4)).isoformat(), "event_end": past.isoformat()})
    doc = r.get_json()
    env = {"KB_DATA_DIR": str(kb_services.data_dir), "DATABASE_URL": "", "REDIS_URL": ""}
    proc = subprocess.Popen([KBF, "scheduler"], env={**os.environ, **env})
    try:
        deadline = time.time() + 30
        while time.time() < deadline and not Queue("reindex", connection=get_redis()).count:
            time.sleep(0.3)
    finally:
        proc.terminate()
        proc.wait(10)
    kb_drain()
    assert kb_admin.get(f"/api/admin/v1/documents/{doc['id']}").get_json()["status"] == "expired"


def test_web_start_with_database_down_is_one_clear_line(tmp_path):
    gunicorn = str(Path(sys.executable).parent / "gunicorn")
    env = {**os.environ, "DATABASE_URL": "postgresql://nobody@127.0.0.1:1/none", "REDIS_URL": "redis://127.0.0.1:1/0",
           "KB_DATA_DIR": str(tmp_path)}
    r = subprocess.run([gunicorn, "-w", "1", "-b", "127.0.0.1:0", "kbframework.wsgi:app"], env=env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    assert "kbframework cannot start: The database is not reachable" in r.stderr


def test_a_web_process_loads_its_models_before_its_first_visitor(kb_services, tmp_path):
    """Each gunicorn worker loads the answer pipeline, the offline model and the token table when
    it starts (``web.warm``), says so in one line, and then answers."""
    import time
    import urllib.request

    from tests.embed_support import free_port, service_env

    gunicorn = str(Path(sys.executable).parent / "gunicorn")
    port = free_port()
    err = open(tmp_path / "web.log", "w+")
    proc = subprocess.Popen([gunicorn, "-w", "1", "-b", f"127.0.0.1:{port}", "kbframework.wsgi:app"],
                            env=service_env(), stdout=subprocess.DEVNULL, stderr=err)
    try:
        deadline = time.time() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as r:
                    assert r.status == 200
                    break
            except OSError:
                assert proc.poll() is None and time.time() < deadline, (tmp_path / "web.log").read_text()
                time.sleep(0.1)
    finally:
        proc.terminate()
        proc.wait(10)
    line = next((ln for ln in (tmp_path / "web.log").read_text().splitlines()
                 if "kbframework web process ready in" in ln), None)
    assert line is not None, (tmp_path / "web.log").read_text()
    from kbframework.hooks import registry

    assert f"embedding model {registry.embedder().model}" in line and "error" not in line
    words = int(line.split("token table words ")[1].split(",")[0])
    frozen = int(line.split("frozen objects ")[1].split(",")[0])
    assert words > 1000 and frozen > 10000, line  # a real table; what the start loaded, frozen


def test_database_down_during_a_request_is_503(kb_admin, monkeypatch):
    from sqlalchemy.exc import OperationalError

    from kbframework.sources import documents

    def down(*a, **k):
        raise OperationalError("SELECT 1", {}, Exception("server closed the connection unexpectedly"))

    monkeypatch.setattr(documents, "list_documents", down)
    r = kb_admin.get("/api/admin/v1/documents")
    assert r.status_code == 503 and r.get_json()["error"]["code"] == "service_unavailable"
