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

    job = enqueue("sync", "kbframework.jobs.tasks.sync_source_job", src.id, "full")
    w1 = workers()
    # the first batch of documents is saved, the crawl is still going: kill the worker
    wait_for(lambda: count("SELECT count(*) FROM documents WHERE source_id = :s", s=src.id) >= 50,
             90, "the first batch of the sync")
    assert count("SELECT count(*) FROM documents WHERE source_id = :s", s=src.id) < pages
    w1.kill()
    with session_scope() as s:
        assert s.get(Source, uuid.UUID(src.id)).status == "syncing"

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
    from kbframework.sources.documents import create_manual, queue_ingest
    from kbframework.testing import set_org_extra
    from tests.fakes.openai_server import FakeOpenAI

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


def test_a_job_that_keeps_dying_ends_failed_and_visible(kb_source, kb_http_server, workers, kb_services):
    """Every attempt's worker is killed: after the last retry the job is failed, the run and
    the source say why, and the source stays due for reconciliation."""
    srv = slow_site(kb_http_server, 60, delay=0.2)
    src = kb_source("sitemap", {"sitemap_urls": [srv.url + "/sitemap.xml"], "concurrency": 1}, interval=5)
    from rq import Retry
    from rq.job import Job

    from kbframework.jobs.queues import enqueue, get_redis
    from kbframework.jobs.worker import due_sources

    # one retry allowed: the worker is killed during the first attempt and during the retry
    job = enqueue("sync", "kbframework.jobs.tasks.sync_source_job", src.id, "full", retry=Retry(max=1, interval=[1]))
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
