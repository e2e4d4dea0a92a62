"""``kbframework.testing``: pytest fixtures on the real embedded services (a pytest plugin).

Fixtures: ``kb_services`` (PostgreSQL + pgvector and Redis in a scratch folder, migrated),
``kb_app``, ``kb_clean`` (empty tables and Redis), ``kb_org``, ``kb_admin`` (a logged-in
client with CSRF handled), ``kb_drain`` (run queued jobs now), ``kb_http_server`` (a small
local HTTP server for faking a remote system at the protocol level), ``kb_source`` (a
scratch source of any installed type in ``kb_org``: sync it, list its documents, ask about
them) and ``kb_register_plugin`` (register a plugin object in-process for one test).

Plugin authors get all of them by installing kbframework: the module is a pytest plugin
(entry point ``pytest11``), so a plugin's own tests just name the fixtures. The guide is
docs/plugins.md.
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

TABLES = ("job_outbox", "chat_feedback", "chat_logs", "usage_ledger", "webhook_events", "chunks", "documents",
          "sync_runs", "sources", "assistant_keys", "settings", "user_sessions", "memberships", "users", "organizations")


@pytest.fixture(scope="session")
def kb_services():
    """Real embedded services in a scratch data folder (or DATABASE_URL/REDIS_URL when
    KB_TEST_EXTERNAL=1), migrated to the newest schema."""
    from kbframework import config as kbconfig
    from kbframework import db, embedded

    external = os.environ.get("KB_TEST_EXTERNAL") == "1"
    keep = os.environ.get("KB_TEST_DATA_DIR")
    data_dir = Path(keep) if keep else Path(tempfile.mkdtemp(prefix="kbf-test-"))
    saved = {k: os.environ.get(k) for k in ("KB_DATA_DIR", "DATABASE_URL", "REDIS_URL", "KB_EMBED_RETRY_BASE",
                                            "KB_ALLOW_PRIVATE_NETWORK", "KB_TENANT_PRIVATE_NETWORK")}
    os.environ["KB_DATA_DIR"] = str(data_dir)
    os.environ["KB_EMBED_RETRY_BASE"] = "0.01"
    # The suite is an operator that lets organizations reach loopback (kb_http_server and
    # the fakes listen there) when they switch allow_private_network on themselves.
    os.environ.setdefault("KB_ALLOW_PRIVATE_NETWORK", "127.0.0.0/8,::1/128")
    os.environ.setdefault("KB_TENANT_PRIVATE_NETWORK", "1")
    if not external:
        os.environ.pop("DATABASE_URL", None)
        os.environ.pop("REDIS_URL", None)
    kbconfig.reset_config()
    cfg = kbconfig.get_config()
    db_url, redis_url = embedded.ensure_services(cfg)
    db.init_engine(db_url)
    from kbframework.jobs.queues import init_redis
    from kbframework.migrate import upgrade
    from kbframework.retrieval import vector_index

    upgrade()
    vector_index.ensure_all()
    init_redis(redis_url)
    yield cfg
    db.dispose()
    if not external and not keep:
        embedded.stop_postgres(cfg)
        embedded.stop_redis(cfg)
        shutil.rmtree(data_dir, ignore_errors=True)
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    kbconfig.reset_config()


@pytest.fixture(scope="session")
def kb_app(kb_services):
    from kbframework.web import create_app

    # login throttling off: a test suite logs in far more than 20 times a minute
    app = create_app({"TESTING": True, "RATELIMIT_ENABLED": False})
    return app


@pytest.fixture
def kb_clean(kb_services):
    """Empty every table and Redis before the test."""
    from sqlalchemy import text

    from kbframework.db import get_engine
    from kbframework.jobs.queues import get_redis
    from kbframework.retrieval.search import forget_counts

    with get_engine().begin() as conn:
        conn.execute(text("SET LOCAL ROLE NONE"))  # maintenance as the database user (TRUNCATE skips row security)
        conn.execute(text("TRUNCATE " + ", ".join(TABLES) + " RESTART IDENTITY CASCADE"))
    get_redis().flushdb()
    forget_counts()
    yield


@pytest.fixture
def kb_org(kb_clean):
    from kbframework.orgs.accounts import create_org
    from kbframework.db import session_scope

    with session_scope() as s:
        org = create_org(s, "Test Org", "Europe/Belgrade", "test-org")
        return {"id": str(org.id), "slug": org.slug, "timezone": org.timezone}


class AdminClient:
    """A Flask test client logged in as an admin; adds the CSRF header to writes."""

    def __init__(self, client, csrf: str, org: dict, email: str):
        self.client, self.csrf, self.org, self.email = client, csrf, org, email

    def _h(self, kw):
        h = dict(kw.pop("headers", {}) or {})
        h.setdefault("X-CSRF-Token", self.csrf)
        return h

    def get(self, *a, **kw):
        return self.client.get(*a, **kw)

    def post(self, *a, **kw):
        return self.client.post(*a, headers=self._h(kw), **kw)

    def put(self, *a, **kw):
        return self.client.put(*a, headers=self._h(kw), **kw)

    def delete(self, *a, **kw):
        return self.client.delete(*a, headers=self._h(kw), **kw)


def login_client(app, org: dict, email: str, password: str, role: str = "admin") -> AdminClient:
    from kbframework.orgs.accounts import create_user, get_org_by_slug
    from kbframework.db import session_scope

    with session_scope() as s:
        create_user(s, email, password, get_org_by_slug(s, org["slug"]), role)
    client = app.test_client()
    r = client.post("/api/admin/v1/login", json={"email": email, "password": password})
    assert r.status_code == 200, r.get_data(as_text=True)
    return AdminClient(client, r.get_json()["csrf_token"], org, email)


@pytest.fixture
def kb_admin(kb_app, kb_org):
    return login_client(kb_app, kb_org, "admin@test.example", "correct horse battery")


@pytest.fixture
def kb_drain(kb_services):
    """Call to run every queued job now, in this process, on the real Redis queues."""
    from kbframework.jobs.worker import run_burst

    return run_burst


class LocalHTTPServer:
    """Serve ``handler(method, path, headers, body) -> (status, headers, body)`` on 127.0.0.1."""

    def __init__(self, handler):
        outer = self

        class H(BaseHTTPRequestHandler):
            def _do(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else b""
                outer.requests.append((self.command, self.path, dict(self.headers), body))
                status, headers, payload = handler(self.command, self.path, dict(self.headers), body)
                if isinstance(payload, (dict, list)):
                    payload = json.dumps(payload).encode()
                    headers = {"Content-Type": "application/json", **headers}
                elif isinstance(payload, str):
                    payload = payload.encode()
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST = do_PUT = do_DELETE = _do

            def log_message(self, *a):
                pass

        self.requests: list = []
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def kb_http_server():
    servers = []

    def make(handler):
        srv = LocalHTTPServer(handler)
        servers.append(srv)
        return srv

    yield make
    for s in servers:
        s.close()


# --------------------------------------------------------------------------- scratch sources


class ScratchSource:
    """A source row in ``kb_org``, created through the host's own ``sources.create_source``
    (config validated by the connector's schema, secrets encrypted), with the calls a
    connector's test needs."""

    def __init__(self, id: str, type: str, name: str, org: dict):
        self.id, self.type, self.name, self.org = id, type, name, org

    def __repr__(self):
        return f"<ScratchSource {self.type} {self.id}>"

    def sync(self, kind: str = "full") -> dict:
        """Run the real sync pipeline now, ingesting inline: fetch → normalize → apply →
        chunk → embed. Returns ``run_sync``'s result ({"status", "stats", ...})."""
        from kbframework.sources.sync import run_sync

        return run_sync(self.id, kind=kind, inline_ingest=True)

    def info(self) -> dict:
        """The source row: status, last_error, last_sync_at, watermark, config."""
        from kbframework.orgs.accounts import as_uuid
        from kbframework.db import session_scope
        from kbframework.models import Source

        with session_scope() as s:
            src = s.get(Source, as_uuid(self.id))
            return {"id": str(src.id), "type": src.type, "name": src.name, "status": src.status,
                    "last_error": src.last_error, "last_sync_at": src.last_sync_at,
                    "watermark": src.watermark, "config": dict(src.config or {})}

    def documents(self, status: str | None = None, full: bool = True) -> list[dict]:
        """This source's documents (not deleted unless ``status="deleted"``), as the admin
        API shows them; ``full`` adds normalized_content and metadata."""
        from sqlalchemy import select

        from kbframework.orgs.accounts import as_uuid
        from kbframework.db import session_scope
        from kbframework.sources.documents import doc_to_dict
        from kbframework.models import Document, Source

        with session_scope() as s:
            src = s.get(Source, as_uuid(self.id))
            q = select(Document).where(Document.source_id == src.id)
            q = q.where(Document.status == status) if status else q.where(Document.status != "deleted")
            return [doc_to_dict(d, src, full=full) for d in s.scalars(q.order_by(Document.title, Document.id))]

    def ask(self, question: str, mode: str | None = None, now=None, history=None) -> dict:
        """Ask the organization's assistant, as the admin chat does (answer, cards, sources, debug)."""
        from kbframework.retrieval.answer import answer

        return answer(self.org["id"], question, mode=mode, now=now, history=history or [], channel="admin")


def set_org_settings(org: dict, **values) -> None:
    """Change an organization's declared settings as the operator would (``kbf org set``), e.g.
    ``allow_private_network=True``: validated, operator-only settings included."""
    from kbframework import settings as declared
    from kbframework.orgs.accounts import as_uuid
    from kbframework.db import session_scope

    with session_scope() as s:
        declared.apply(s, as_uuid(org["id"]), values, operator=True)


def set_org_extra(org: dict, **values) -> None:
    """The old name of :func:`set_org_settings`; nested keys of the former ``settings.extra``
    (``branding``, ``budget``) are translated."""
    from kbframework.settings import legacy_extra

    set_org_settings(org, **{**legacy_extra(values), **{k: v for k, v in values.items()
                                                        if k not in ("branding", "budget")}})


@pytest.fixture
def kb_source(kb_org):
    """A factory: ``kb_source("ics", {"url": srv.url + "/feed.ics"})`` → :class:`ScratchSource`.

    The organization is ``kb_org``. ``allow_private_network`` (default True) lets the
    connector reach ``kb_http_server`` on 127.0.0.1 (the SSRF guard refuses it otherwise).
    A config the connector's schema rejects raises ``ValidationFailed`` with the details."""

    def make(type_name: str, config: dict | None = None, *, name: str | None = None,
             allow_private_network: bool = True, interval: int | None = None) -> ScratchSource:
        from kbframework.db import session_scope
        from kbframework.sources.config import create_source

        if allow_private_network:
            set_org_settings(kb_org, allow_private_network=True)
        with session_scope() as s:
            src = create_source(s, kb_org["id"], {"type": type_name, "name": name or f"scratch {type_name}",
                                                  "config": config or {}, "sync_interval_minutes": interval})
            return ScratchSource(str(src.id), src.type, src.name, kb_org)

    return make


# --------------------------------------------------------------------------- in-process plugins


@pytest.fixture
def kb_register_plugin():
    """Register plugin objects (a module, a class instance with ``@hookimpl`` methods) next to
    everything installed, for one test: ``kb_register_plugin(obj, "name")`` returns the
    plugin manager. The host's manager and caches are restored afterwards."""
    from kbframework.hooks.manager import build_plugin_manager, reset_plugin_manager

    state: dict = {}

    def register(obj, name: str | None = None):
        pm = state.get("pm")
        if pm is None:
            pm = state["pm"] = build_plugin_manager()
        pm.register(obj, name=name)
        reset_plugin_manager(pm)
        return pm

    yield register
    if state:
        reset_plugin_manager(None)
