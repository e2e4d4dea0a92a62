"""Nothing lost: real `kbf worker` processes killed with SIGKILL in the middle of a sync and of
a re-index, the test's own Redis server stopped during a webhook delivery and a note save,
and the CLI's exit codes when documents fail. Heartbeats, sweeps and backoff are shrunk to
seconds through the environment so each scenario finishes well within a minute."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from sqlalchemy import func, select, text

from kbframework.db import get_engine, session_scope
from kbframework.models import Chunk, Document, Source, SyncRun

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

KBF = str(Path(sys.executable).parent / "kbf")
FAST = {"KB_JOB_HEARTBEAT_SECONDS": "3", "KB_JOB_SWEEP_SECONDS": "1", "KB_JOB_RETRY_BACKOFF": "1,2,2",
        "KB_JOB_RETRIES": "3"}


def worker_env(kb_services, **extra) -> dict:
    return {**os.environ, "KB_DATA_DIR": str(kb_services.data_dir), "DATABASE_URL": "", "REDIS_URL": "",
            "KB_ALLOW_PRIVATE_NETWORK": "1", **FAST, **extra}


class Worker:
    """A real `kbf worker` in its own process group (its RQ scheduler child goes with it)."""

    def __init__(self, env: dict, *args):
        self.proc = subprocess.Popen([KBF, "worker", *args], env=env, start_new_session=True,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def kill(self):
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(10)

    def stop(self):
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(15)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                pass
        self.kill()


@pytest.fixture(autouse=True)
def fast_jobs(monkeypatch):
    """Jobs queued by this process carry the short backoff too."""
    for k, v in FAST.items():
        monkeypatch.setenv(k, v)


@pytest.fixture
def workers(kb_services):
    started: list[Worker] = []

    def start(*args, **env):
        w = Worker(worker_env(kb_services, **env), *args)
        started.append(w)
        return w

    yield start
    for w in started:
        w.stop()


def wait_for(predicate, timeout: float, what: str, every: float = 0.1):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def count(sql: str, **params) -> int:
    with get_engine().connect() as conn:
        return conn.execute(text(sql), params).scalar_one()


def kbf(*args, env: dict, check: bool = False):
    return subprocess.run([KBF, *args], capture_output=True, text=True, env=env, timeout=180)


# ----------------------------------------------------------------------------- a slow website


def slow_site(kb_http_server, pages: int, delay: float, broken: frozenset = frozenset()):
    """A sitemap of ``pages`` pages, each answered after ``delay`` seconds (``broken``: 500)."""

    def handler(method, path, headers, body):
        if path == "/sitemap.xml":
            urls = "".join(f"<url><loc>{srv.url}/page/{i}</loc></url>" for i in range(pages))
            return 200, {"Content-Type": "application/xml"}, \
                f'<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{urls}</urlset>'
        if path.startswith("/page/"):
            n = int(path.rsplit("/", 1)[1])
            time.sleep(delay)
            if n in broken:
                return 500, {}, "boom"
            return 200, {"Content-Type": "text/html"}, (
                f"<html><head><title>Page {n}</title></head><body><main><h1>Page {n}</h1>"
                f"<p>Page {n} tells about item number {n}: a sturdy thing made of oak, sold in the shop "
                f"on the corner since {1900 + n}. It is delivered within {n % 7 + 1} days.</p></main></body></html>")
        return 404, {}, "not found"

    srv = kb_http_server(handler)
    return srv


def source_docs(source_id) -> list[Document]:
    with session_scope() as s:
        rows = s.scalars(select(Document).where(Document.source_id == source_id,
                                                Document.status != "deleted")).all()
        s.expunge_all()
        return rows


def no_duplicate_chunks() -> bool:
    return count("SELECT count(*) FROM (SELECT document_id, chunk_index FROM chunks "
                 "GROUP BY document_id, chunk_index HAVING count(*) > 1) d") == 0


# ----------------------------------------------------------------------------- SIGKILL


def test_worker_killed_mid_sync_the_sync_is_retried_and_completes(kb_source, kb_http_server, workers,
                                                                   kb_services):
    pages = 120
    srv = slow_site(kb_http_server, pages, delay=0.06)
    src = kb_source("sitemap", {"sitemap_urls": [srv.url + "/sitemap.xml"], "concurrency": 1})
    from kbframework.jobs.queues import enqueue

    job = enqueue("sync", "kbframework.jobs.tasks.sync_source_job", src.id, "full", for_organization=src.org["id"])
    w1 = workers()
    # the first batch of documents is saved, the crawl is still going: kill the worker
    wait_for(lambda: count("SELECT count(*) FROM documents WHERE source_id = :s", s=src.id) >= 50,
             90, "the first batch of the sync")
    assert count("SELECT count(*) FROM documents WHERE source_id = :s", s=src.id) < pages
    w1.kill()
    with session_scope() as s:
        assert s.get(Source, uuid.UUID(src.id)).status == "syncing"
    # once its lease has run out, a listing says so, and leaves the failing to the workers' sweep
    from rq.job import Job

    from kbframework.jobs.listing import list_jobs
    from kbframework.jobs.queues import get_redis

    time.sleep(3.5)
    running = {j["id"]: j for j in list_jobs(["running"])}
    assert "its worker seems gone" in running[job.id]["reason"]
    assert Job.fetch(job.id, connection=get_redis()).get_status() == "started"

    t0 = time.time()
    workers()
    # the abandoned job is noticed within the heartbeat, retried after its backoff, and completes
    wait_for(lambda: count("SELECT count(*) FROM sync_runs WHERE source_id = :s AND status = 'success'",
                           s=src.id), 60, "the retried sync to finish")
    wait_for(lambda: count("SELECT count(*) FROM documents WHERE source_id = :s AND status = 'active' "
                           "AND chunk_count > 0", s=src.id) == pages, 60, "every page indexed")
    assert time.time() - t0 < 60
    docs = source_docs(src.id)
    assert len(docs) == pages and len({d.external_id for d in docs}) == pages
    assert all(d.status == "active" and d.chunk_count > 0 for d in docs)
    assert count("SELECT count(*) FROM chunks c JOIN documents d ON d.id = c.document_id "
                 "WHERE d.source_id = :s", s=src.id) == sum(d.chunk_count for d in docs)
    assert no_duplicate_chunks()
    with session_scope() as s:
        runs = s.scalars(select(SyncRun).where(SyncRun.source_id == uuid.UUID(src.id))
                         .order_by(SyncRun.started_at)).all()
        assert [r.status for r in runs] == ["error", "success"]
        assert "stopped" in runs[0].error and runs[0].finished_at is not None
        assert all(r.job_id == job.id for r in runs)
        source = s.get(Source, uuid.UUID(src.id))
        assert source.status == "active" and source.last_error is None

    # kbf jobs shows the job as retried, with the reason of the failed attempt
    out = kbf("jobs", "--json", env=worker_env(kb_services))
    assert out.returncode == 0, out.stderr
    listed = {j["id"]: j for j in json.loads(out.stdout)["jobs"]}
    assert listed[job.id]["state"] == "retried"
    assert "worker running it stopped" in listed[job.id]["reason"]
    human = kbf("jobs", env=worker_env(kb_services)).stdout
    assert job.id in human and "reason: the worker running it stopped" in human


def test_worker_killed_mid_reindex_resumes_without_partial_documents(kb_org, workers, kb_services):
    from kbframework.jobs.queues import enqueue
    from kbframework.ingest.queue import queue_ingest
    from kbframework.sources.documents import create_manual
    from kbframework.testing import set_org_extra
    from fakes.openai_server import FakeOpenAI

    n = 200
    ids = []
    with session_scope() as s:
        for i in range(n):
            ids.append(create_manual(s, kb_org["id"], {
                "title": f"Note {i}", "body": f"Note {i} is about the opening hours of shop {i}. " * 20}).id)
    queue_ingest(ids, inline=True)
    # the organization moves to another embedding model: a re-index embeds everything again,
    # here through a slow OpenAI-compatible server, so the worker can be killed half way
    fake = FakeOpenAI(delay=0.5)
    try:
        set_org_extra(kb_org, embedding_provider="openai")
        env = {"KB_LLM_BASE_URL": fake.url, "OPENAI_API_KEY": "sk-test"}
        job = enqueue("reindex", "kbframework.jobs.tasks.reindex_job", kb_org["id"], "all")
        w1 = workers(**env)
        model_rows = "SELECT count(DISTINCT document_id) FROM chunks WHERE embedding_model = 'text-embedding-3-small'"
        wait_for(lambda: count(model_rows) >= 50, 90, "the first re-indexed batch")
        assert count(model_rows) < n
        w1.kill()
        done_before = count(model_rows)

        workers(**env)
        wait_for(lambda: count(model_rows) == n, 60, "the re-index to resume and finish")
        from rq.job import Job

        from kbframework.jobs.queues import get_redis

        finished = wait_for(lambda: Job.fetch(job.id, connection=get_redis()).get_status() == "finished"
                            and Job.fetch(job.id, connection=get_redis()), 30, "the job to finish")
        result = finished.return_value()
        # it resumed: what the killed attempt had finished was not embedded again
        assert result["resumed"]["already_indexed"] >= done_before
        assert result["failed_count"] == 0
    finally:
        fake.close()
    with session_scope() as s:
        docs = s.scalars(select(Document).where(Document.organization_id == uuid.UUID(kb_org["id"]))).all()
        assert len(docs) == n and all(d.status == "active" and d.chunk_count > 0 for d in docs)
        per_doc = dict(s.execute(select(Chunk.document_id, func.count()).group_by(Chunk.document_id)).all())
        assert all(per_doc[d.id] == d.chunk_count for d in docs)
        # no document is left with chunks of two models (half old, half new)
        assert s.scalar(select(func.count()).select_from(
            select(Chunk.document_id).group_by(Chunk.document_id)
            .having(func.count(func.distinct(Chunk.embedding_model)) > 1).subquery())) == 0
    assert no_duplicate_chunks()


def test_a_job_that_keeps_dying_ends_failed_and_visible(kb_source, kb_http_server, workers, kb_services,
                                                        kb_admin, kb_app):
    """Every attempt's worker is killed: after the last retry the job is failed, the run and
    the source say why, and the source stays due for reconciliation."""
    srv = slow_site(kb_http_server, 60, delay=0.2)
    src = kb_source("sitemap", {"sitemap_urls": [srv.url + "/sitemap.xml"], "concurrency": 1}, interval=5)
    from rq import Retry
    from rq.job import Job

    from kbframework.jobs.queues import enqueue, get_redis
    from kbframework.sources.schedule import due_sources

    # one retry allowed: the worker is killed during the first attempt and during the retry
    job = enqueue("sync", "kbframework.jobs.tasks.sync_source_job", src.id, "full", retry=Retry(max=1, interval=[1]),
                  for_organization=src.org["id"])
    for attempt in range(2):
        w = workers()
        # this attempt's own run is open (the run of the attempt before was closed first)
        wait_for(lambda: count("SELECT count(*) FROM sync_runs WHERE job_id = :j", j=job.id) == attempt + 1
                 and count("SELECT count(*) FROM sync_runs WHERE job_id = :j AND status = 'running'", j=job.id) == 1,
                 60, f"attempt {attempt + 1} to start")
        time.sleep(1)
        w.kill()
    workers()
    wait_for(lambda: Job.fetch(job.id, connection=get_redis()).get_status() == "failed", 60,
             "the job to fail after its last attempt")
    with session_scope() as s:
        source = s.get(Source, uuid.UUID(src.id))
        assert source.status == "error" and "stopped" in source.last_error
        runs = s.scalars(select(SyncRun).where(SyncRun.source_id == uuid.UUID(src.id))).all()
        assert runs and all(r.status == "error" for r in runs)
    assert src.id in due_sources()
    listed = json.loads(kbf("jobs", "--json", "--state", "failed", env=worker_env(kb_services)).stdout)["jobs"]
    failed = next(j for j in listed if j["id"] == job.id)
    assert failed["attempts"] == 2 and "worker running it stopped" in failed["reason"]

    # the admin API shows the organization's failed work with its reason, and only its own
    view = kb_admin.get("/api/admin/v1/jobs?state=failed").get_json()
    assert [j["id"] for j in view["jobs"]] == [job.id] and "stopped" in view["jobs"][0]["reason"]
    assert kb_admin.get("/api/admin/v1/jobs?state=bogus").status_code == 400
    from kbframework.db import session_scope as scope
    from kbframework.orgs.accounts import create_org
    from kbframework.testing import login_client

    with scope() as s:
        create_org(s, "Other Org", "UTC", "other-org")
    other = login_client(kb_app, {"slug": "other-org"}, "other@test.example", "correct horse battery")
    assert other.get("/api/admin/v1/jobs?state=failed").get_json()["jobs"] == []


# ----------------------------------------------------------------------------- Redis outage


@pytest.fixture
def redis_outage(kb_services):
    """Stop the test's own Redis server (a real redis-server process) and start it again."""
    from kbframework import embedded as services

    state = {"down": False}

    def stop():
        services.stop_redis(kb_services)
        assert not services.redis_running(kb_services)
        state["down"] = True

    def start():
        services.start_redis(kb_services)
        state["down"] = False

    yield stop, start
    if state["down"]:
        start()


def burst_worker(kb_services):
    """A real `kbf worker --burst` once Redis is back: its first sweep queues held work."""
    r = subprocess.run([KBF, "worker", "--burst"], env=worker_env(kb_services), capture_output=True, text=True,
                       timeout=180)
    assert r.returncode == 0, r.stderr


def test_webhook_during_a_redis_outage_is_applied_once_redis_is_back(kb_admin, kb_services, redis_outage):
    import base64
    import hashlib
    import hmac

    from fakes.woocommerce_server import FakeWooStore
    from kbframework.models import WebhookEvent
    from kbframework.sources.sync import run_sync
    from kbframework.testing import set_org_extra

    csv = ROOT.parent / "shared" / "data" / "woocommerce" / "sample_data" / "sample_products.csv"
    if not csv.exists():
        pytest.skip("shared WooCommerce fixtures missing")
    stop, start = redis_outage
    secret = "whsec_outage_test"
    with FakeWooStore.from_sample_csv(str(csv)) as store:
        set_org_extra(kb_admin.org, allow_private_network=True)
        r = kb_admin.post("/api/admin/v1/sources", json={"type": "woocommerce", "name": "Shop", "config": {
            "store_url": store.url, "consumer_key": store.consumer_key, "consumer_secret": store.consumer_secret,
            "webhook_secret": secret}})
        assert r.status_code == 201, r.get_data(as_text=True)
        sid = r.get_json()["id"]
        assert run_sync(sid, "full", inline_ingest=True)["status"] == "ok"

        store.update(46, regular_price="31")
        body = store.webhook_body("product.updated", 46)
        sig = base64.b64encode(hmac.new(secret.encode(), body, hashlib.sha256).digest()).decode()
        headers = {"X-WC-Webhook-Topic": "product.updated", "X-WC-Webhook-Resource": "product",
                   "X-WC-Webhook-Event": "updated", "X-WC-Webhook-Signature": sig, "X-WC-Webhook-ID": "142",
                   "X-WC-Webhook-Delivery-ID": "outage-1", "Content-Type": "application/json"}
        url = f"/api/webhooks/v1/woocommerce/{sid}"

        stop()
        r = kb_admin.client.post(url, data=body, headers=headers)
        # accepted, not refused: the receipt and its pending work are both in PostgreSQL
        assert r.status_code == 202, r.get_data(as_text=True)
        answer = r.get_json()
        assert answer["accepted"] is True and answer["queued"] is False and "as soon as" in answer["message"]
        assert count("SELECT count(*) FROM job_outbox WHERE queue = 'webhook'") == 1
        # WooCommerce retrying the same delivery changes nothing (one receipt, one held job)
        assert kb_admin.client.post(url, data=body, headers=headers).get_json()["duplicate"] is True
        assert count("SELECT count(*) FROM job_outbox") == 1
        start()

        burst_worker(kb_services)
        assert count("SELECT count(*) FROM job_outbox") == 0
        with session_scope() as s:
            doc = s.scalar(select(Document).where(Document.source_id == uuid.UUID(sid), Document.external_id == "46"))
            assert doc.metadata_["price"] == 31
            ev = s.scalars(select(WebhookEvent).where(WebhookEvent.source_id == uuid.UUID(sid))).all()
            assert [e.outcome for e in ev] == ["cheap"]


def test_note_saved_during_a_redis_outage_is_indexed_once_redis_is_back(kb_admin, kb_services, redis_outage):
    stop, start = redis_outage
    stop()
    r = kb_admin.post("/api/admin/v1/documents/manual", json={
        "title": "Winter opening hours", "body": "In winter the shop opens at 10:00 and closes at 18:00."})
    assert r.status_code == 202, r.get_data(as_text=True)
    note = r.get_json()
    assert note["accepted"] is True and note["indexing"] == "pending" and note["status"] == "syncing"
    assert "indexed as soon as" in note["message"]
    # an edit made during the outage is kept too
    r = kb_admin.put(f"/api/admin/v1/documents/manual/{note['id']}", json={
        "body": "In winter the shop opens at 10:00 and closes at 17:30."})
    assert r.status_code == 202 and r.get_json()["indexing"] == "pending"
    assert count("SELECT count(*) FROM job_outbox WHERE queue = 'ingest'") == 2
    # the organization's admin sees the held work, and so does the operator (a `kbf` command
    # starts the embedded Redis again if it is down, as every kbf command does)
    view = kb_admin.get("/api/admin/v1/jobs").get_json()
    assert view["queue_reachable"] is False and view["counts"] == {"held": 2}
    listed = json.loads(kbf("jobs", "--json", env=worker_env(kb_services)).stdout)["jobs"]
    assert [j["state"] for j in listed] == ["held", "held"]
    start()

    burst_worker(kb_services)
    doc = kb_admin.get(f"/api/admin/v1/documents/{note['id']}").get_json()
    assert doc["status"] == "active" and doc["chunk_count"] > 0
    assert "17:30" in " ".join(c["content"] for c in doc["chunks"])
    assert count("SELECT count(*) FROM job_outbox") == 0


def test_pdf_uploaded_during_a_redis_outage_is_indexed_once_redis_is_back(kb_admin, kb_services, redis_outage,
                                                                          shared_data):
    import io

    pytest.importorskip("kbframework_pdf")
    stop, start = redis_outage
    data = (shared_data / "pdfs" / "multicolumn.pdf").read_bytes()
    stop()
    r = kb_admin.post("/api/admin/v1/sources/pdf/upload", data={"file": (io.BytesIO(data), "columns.pdf")},
                      content_type="multipart/form-data")
    assert r.status_code == 202, r.get_data(as_text=True)
    doc = r.get_json()
    assert doc["accepted"] is True and doc["indexing"] == "pending" and "indexed as soon as" in doc["message"]
    start()
    burst_worker(kb_services)
    doc = kb_admin.get(f"/api/admin/v1/documents/{doc['id']}").get_json()
    assert doc["status"] == "active" and doc["chunk_count"] > 0
    assert count("SELECT count(*) FROM job_outbox") == 0


# ----------------------------------------------------------------------------- exit codes and stuck runs


def test_cli_exit_codes_count_failed_documents(kb_source, kb_http_server, kb_org, kb_services):
    env = worker_env(kb_services)
    srv = slow_site(kb_http_server, 6, delay=0, broken=frozenset({2, 4}))
    src = kb_source("sitemap", {"sitemap_urls": [srv.url + "/sitemap.xml"]})
    r = kbf("source", "sync", src.id, "--full", "--wait", env=env)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "2 of 6 items failed" in r.stderr
    assert json.loads(r.stdout)["stats"]["errors"] == 2

    # all well: exit 0
    ok = kb_source("sitemap", {"sitemap_urls": [slow_site(kb_http_server, 3, delay=0).url + "/sitemap.xml"]},
                   name="fine")
    assert kbf("source", "sync", ok.id, "--full", "--wait", env=env).returncode == 0

    assert kbf("reindex", "--org", kb_org["slug"], "--all", env=env).returncode == 0
    # documents that cannot be indexed (no text left): non-zero, with the count
    with get_engine().begin() as conn:
        conn.execute(text("UPDATE documents SET normalized_content = '', title = '' WHERE id IN "
                          "(SELECT id FROM documents WHERE source_id = :s ORDER BY external_id LIMIT 2)"), {"s": ok.id})
    r = kbf("reindex", "--org", kb_org["slug"], "--all", env=env)
    assert r.returncode == 1, r.stdout + r.stderr
    out = json.loads(r.stdout)
    assert out["failed_count"] == 2 and len(out["failed"]) == 2 and all(f["error"] for f in out["failed"])
    assert f"2 of {out['documents']} documents failed" in r.stderr


def test_a_sync_left_running_by_a_dead_process_is_recovered(kb_source, kb_services):
    """A CLI sync (`kbf source sync --wait`) killed mid-run: the sweep sees its process is
    gone, closes the run and puts the source back where reconciliation finds it."""
    from kbframework.jobs.recovery import SWEEP_LOCK, sweep
    from kbframework.jobs.queues import get_redis
    from kbframework.sources.schedule import due_sources

    srv_src = kb_source("sitemap", {"sitemap_urls": ["http://127.0.0.1:9/sitemap.xml"]}, interval=5)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    with session_scope() as s:
        source = s.get(Source, uuid.UUID(srv_src.id))
        source.status = "syncing"
        s.add(SyncRun(organization_id=source.organization_id, source_id=source.id, kind="full",
                      status="running", job_id=f"pid:{os.uname().nodename}:{dead.pid}"))
        live = SyncRun(organization_id=source.organization_id, source_id=source.id, kind="full",
                       status="running", job_id=f"pid:{os.uname().nodename}:{os.getpid()}")
        s.add(live)
    get_redis().delete(SWEEP_LOCK)
    assert srv_src.id not in due_sources()
    out = sweep()
    assert out["runs"] == {"runs": 1, "sources": 0}  # the live one keeps the source syncing
    with session_scope() as s:
        s.get(SyncRun, live.id).status = "success"
    get_redis().delete(SWEEP_LOCK)
    assert sweep()["runs"] == {"runs": 0, "sources": 1}
    with session_scope() as s:
        source = s.get(Source, uuid.UUID(srv_src.id))
        assert source.status == "error" and "stopped before it finished" in source.last_error
        runs = s.scalars(select(SyncRun).where(SyncRun.source_id == source.id)).all()
        assert sorted(r.status for r in runs) == ["error", "success"]
    assert srv_src.id in due_sources()


def test_a_hung_job_is_stopped_at_its_time_limit_and_fails_visibly(kb_source, kb_http_server, workers, kb_services):
    """A sync that outlives its time limit (a source answering very slowly) is stopped even
    though the sync itself records item errors and carries on, retried, then failed."""
    from rq import Retry
    from rq.job import Job

    from kbframework.jobs.queues import enqueue, get_redis

    srv = slow_site(kb_http_server, 40, delay=0.5)
    src = kb_source("sitemap", {"sitemap_urls": [srv.url + "/sitemap.xml"], "concurrency": 1})
    job = enqueue("sync", "kbframework.jobs.tasks.sync_source_job", src.id, "full", retry=Retry(max=1, interval=[1]),
                  job_timeout=3, for_organization=src.org["id"])
    workers()
    wait_for(lambda: Job.fetch(job.id, connection=get_redis()).get_status() == "failed", 60,
             "the job to fail after its time limit twice")
    meta = Job.fetch(job.id, connection=get_redis()).meta
    assert [f["reason"] for f in meta["failures"]] == ["it ran longer than its time limit "
                                                       "(Task exceeded maximum timeout value (3 seconds))"] * 2
    with session_scope() as s:
        source = s.get(Source, uuid.UUID(src.id))
        assert source.status == "error" and "time limit" in source.last_error
        runs = s.scalars(select(SyncRun).where(SyncRun.source_id == source.id)).all()
        assert len(runs) == 2 and all(r.status == "error" and "time limit" in r.error for r in runs)


def test_a_receipt_whose_job_was_lost_is_fetched_again(kb_admin, kb_drain):
    """A receipt recorded, then the process died before queueing its job (or Redis lost it):
    ten minutes on, the sweep fetches the item again, once."""
    from datetime import datetime, timedelta, timezone

    from fakes.woocommerce_server import FakeWooStore
    from kbframework.jobs.queues import get_redis
    from kbframework.jobs.recovery import SWEEP_LOCK, sweep
    from kbframework.models import WebhookEvent
    from kbframework.sources.sync import run_sync
    from kbframework.testing import set_org_extra

    csv = ROOT.parent / "shared" / "data" / "woocommerce" / "sample_data" / "sample_products.csv"
    if not csv.exists():
        pytest.skip("shared WooCommerce fixtures missing")
    with FakeWooStore.from_sample_csv(str(csv)) as store:
        set_org_extra(kb_admin.org, allow_private_network=True)
        r = kb_admin.post("/api/admin/v1/sources", json={"type": "woocommerce", "name": "Shop", "config": {
            "store_url": store.url, "consumer_key": store.consumer_key, "consumer_secret": store.consumer_secret,
            "webhook_secret": "whsec_lost"}})
        sid = r.get_json()["id"]
        assert run_sync(sid, "full", inline_ingest=True)["status"] == "ok"
        store.update(46, regular_price="29")
        with session_scope() as s:
            src = s.get(Source, uuid.UUID(sid))
            old = WebhookEvent(organization_id=src.organization_id, source_id=src.id, delivery_id="lost-1",
                               topic="product.updated", external_id="46", outcome="queued",
                               received_at=datetime.now(timezone.utc) - timedelta(minutes=15))
            fresh = WebhookEvent(organization_id=src.organization_id, source_id=src.id, delivery_id="fresh-1",
                                 topic="product.updated", external_id="47", outcome="queued")
            s.add_all([old, fresh])
        get_redis().delete(SWEEP_LOCK)
        assert sweep()["receipts"] == 1  # the fresh one may still have its job on the way
        get_redis().delete(SWEEP_LOCK)
        assert sweep()["receipts"] == 0  # queued once, not on every sweep
        kb_drain()
        with session_scope() as s:
            doc = s.scalar(select(Document).where(Document.source_id == uuid.UUID(sid), Document.external_id == "46"))
            assert doc.metadata_["price"] == 29
            outcomes = dict(s.execute(select(WebhookEvent.delivery_id, WebhookEvent.outcome)
                                      .where(WebhookEvent.source_id == uuid.UUID(sid))).all())
            assert outcomes == {"lost-1": "cheap", "fresh-1": "queued"}
