"""Row-level security in the workers: a real ``kbf worker`` runs each job in the organization
it was queued for, so a job whose SQL forgets the organization filter (here on purpose) sees
that organization's rows only; a job queued without an organization sees none; and the
cross-organization work (the scheduler's due-source sweep, the recovery sweep, held jobs)
still reaches every organization because it declares the system bypass itself."""
from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from sqlalchemy import text

from kbframework import tenancy
from kbframework.db import get_engine, session_scope

ROOT = Path(__file__).resolve().parents[1]
KBF = str(Path(sys.executable).parent / "kbf")
PROBE = "tests.test_worker_scope.visible_documents_job"


def visible_documents_job() -> dict:
    """A job whose SQL has no organization filter: {organization id: documents it sees}."""
    from kbframework.jobs.boot import boot

    boot()
    with get_engine().connect() as conn:
        rows = conn.execute(text("SELECT organization_id, count(*) FROM documents GROUP BY 1")).all()
    return {str(org): n for org, n in rows}


def burst_worker(kb_services) -> None:
    """A real `kbf worker --burst` (this test module importable, for the probe job)."""
    env = {**os.environ, "KB_DATA_DIR": str(kb_services.data_dir), "DATABASE_URL": "", "REDIS_URL": "",
           "KB_ALLOW_PRIVATE_NETWORK": "1", "KB_JOB_SWEEP_SECONDS": "1", "KB_JOB_HEARTBEAT_SECONDS": "3",
           "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
    r = subprocess.run([KBF, "worker", "--burst"], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr


def fetch(job_id: str):
    from rq.job import Job

    from kbframework.jobs.queues import get_redis

    return Job.fetch(job_id, connection=get_redis())


def scalar(sql: str, **params):
    with tenancy.system("test: look at every organization"), get_engine().connect() as conn:
        return conn.execute(text(sql), params).scalar()


@pytest.fixture
def two_orgs(kb_org):
    """kb_org and a second organization, with unindexed notes: two in kb_org, one in the other."""
    from kbframework.orgs.accounts import create_org
    from kbframework.sources import documents as docs

    with session_scope() as s:
        other = create_org(s, "Other Org", "UTC", "other-org")
        other = {"id": str(other.id), "slug": other.slug}
    ids = {}
    with session_scope() as s:
        for name, org in (("a1", kb_org), ("a2", kb_org), ("b", other)):
            d = docs.create_manual(s, org["id"], {"title": f"Note {name}",
                                                  "body": f"The note {name} tells about oak tables and chairs."})
            ids[name] = str(d.id)
    return kb_org, other, ids


def test_a_worker_runs_each_job_in_the_organization_it_was_queued_for(two_orgs, kb_services):
    from kbframework.jobs.queues import enqueue

    a, b, ids = two_orgs
    with tenancy.organization(a["id"]):  # as a web request of organization A queues its work
        # the other organization's document id slipped into A's job: A's job must not reach it
        ingest = enqueue("ingest", "kbframework.jobs.tasks.ingest_documents_job", [ids["a1"], ids["b"]], False)
        probe_a = enqueue("ingest", PROBE)
    probe_b = enqueue("ingest", PROBE, for_organization=b["id"])  # cross-organization code names it
    unscoped = enqueue("ingest", PROBE)  # this process runs with the system bypass: no organization recorded
    unscoped_ingest = enqueue("ingest", "kbframework.jobs.tasks.ingest_documents_job", [ids["a2"]], False)
    assert ingest.meta["organization_id"] == a["id"] and probe_b.meta["organization_id"] == b["id"]
    assert "organization_id" not in unscoped.meta

    burst_worker(kb_services)

    assert fetch(probe_a.id).return_value() == {a["id"]: 2}
    assert fetch(probe_b.id).return_value() == {b["id"]: 1}
    assert fetch(unscoped.id).return_value() == {}  # the worker's default: no organization
    results = {r["document_id"]: r for r in fetch(ingest.id).return_value()["results"]}
    assert results[ids["a1"]]["action"] == "indexed"
    assert results[ids["b"]]["action"] == "skipped" and results[ids["b"]]["error"] == "document not found"
    assert [r["action"] for r in fetch(unscoped_ingest.id).return_value()["results"]] == ["skipped"]
    status = "SELECT status FROM documents WHERE id = CAST(:i AS uuid)"
    chunks = "SELECT count(*) FROM chunks WHERE document_id = CAST(:i AS uuid)"
    assert scalar(status, i=ids["a1"]) == "active" and scalar(chunks, i=ids["a1"]) > 0
    for name in ("b", "a2"):  # untouched: still waiting for a job of their own organization
        assert scalar(status, i=ids[name]) == "syncing" and scalar(chunks, i=ids[name]) == 0


def test_documents_queued_for_indexing_with_the_system_bypass_are_indexed_in_their_organizations(two_orgs, kb_services):
    """The CLI and scripts run with the system bypass, which a queued job does not carry:
    ``queue_ingest`` names each document's organization, one job per organization, so the
    worker finds the documents instead of skipping them as nobody's."""
    from kbframework.ingest.queue import queue_ingest

    a, b, ids = two_orgs
    assert tenancy.current() == tenancy.SYSTEM
    jobs = queue_ingest([ids["a1"], ids["b"], ids["a2"]])
    assert sorted((j.meta["organization_id"], tuple(j.args[0])) for j in jobs) == sorted(
        [(a["id"], (ids["a1"], ids["a2"])), (b["id"], (ids["b"],))])

    burst_worker(kb_services)

    for j in jobs:
        assert [r["action"] for r in fetch(j.id).return_value()["results"]] == ["indexed"] * len(j.args[0])
    for name in ("a1", "a2", "b"):
        assert scalar("SELECT status FROM documents WHERE id = CAST(:i AS uuid)", i=ids[name]) == "active"


def test_the_sweeps_still_reach_every_organization(two_orgs, kb_source, kb_http_server, kb_services):
    """What the scheduler queues carries no organization: the due-source sweep and the
    recovery sweep declare the bypass and queue each organization's work for it."""
    from kbframework.jobs.outbox import hold
    from kbframework.jobs.queues import enqueue, get_redis
    from kbframework.jobs.recovery import SWEEP_LOCK
    from kbframework.models import Source, SyncRun

    a, b, ids = two_orgs

    def site(method, path, headers, body):
        if path == "/sitemap.xml":
            urls = "".join(f"<url><loc>{srv.url}/page/{i}</loc></url>" for i in range(3))
            return 200, {"Content-Type": "application/xml"}, \
                f'<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{urls}</urlset>'
        if path.startswith("/page/"):
            n = path.rsplit("/", 1)[1]
            return 200, {"Content-Type": "text/html"}, (
                f"<html><head><title>Page {n}</title></head><body><main><h1>Page {n}</h1>"
                f"<p>Page {n} tells about a sturdy oak table sold in the shop on the corner.</p></main></body></html>")
        return 404, {}, "not found"

    srv = kb_http_server(site)
    due = kb_source("sitemap", {"sitemap_urls": [srv.url + "/sitemap.xml"], "concurrency": 1}, interval=5)
    # organization B: a sync left running by a process that is gone
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    with session_scope() as s:
        stuck = Source(organization_id=uuid.UUID(b["id"]), type="sitemap", name="stuck", status="syncing",
                       config={"sitemap_urls": ["http://127.0.0.1:9/sitemap.xml"]})
        s.add(stuck)
        s.flush()
        s.add(SyncRun(organization_id=stuck.organization_id, source_id=stuck.id, kind="full", status="running",
                      job_id=f"pid:{os.uname().nodename}:{dead.pid}"))
        stuck_id = str(stuck.id)
    with tenancy.organization(b["id"]):  # organization B's job, held while Redis was away
        hold("ingest", PROBE, [], {}, "held-probe-b", "test: Redis was away")
    # the scheduler's periodic jobs, queued as the CronScheduler queues them: no organization
    reconcile = enqueue("sync", "kbframework.jobs.tasks.reconcile_due_job")
    recover = enqueue("sync", "kbframework.jobs.tasks.recover_job")
    assert "organization_id" not in reconcile.meta and "organization_id" not in recover.meta
    get_redis().delete(SWEEP_LOCK)

    burst_worker(kb_services)

    assert fetch(reconcile.id).get_status() == "finished" and fetch(recover.id).get_status() == "finished"
    assert fetch(reconcile.id).return_value() == {"enqueued": {due.id: "full"}}
    sync = fetch(f"reconcile-{due.id}")
    assert sync.meta["organization_id"] == a["id"] and sync.get_status() == "finished"
    assert due.info()["status"] == "active"
    assert [d["status"] for d in due.documents()] == ["active"] * 3
    # the recovery sweep closed organization B's stopped run, and queued B's held job for B
    assert scalar("SELECT status FROM sync_runs WHERE source_id = CAST(:s AS uuid)", s=stuck_id) == "error"
    assert scalar("SELECT status FROM sources WHERE id = CAST(:s AS uuid)", s=stuck_id) == "error"
    assert scalar("SELECT count(*) FROM job_outbox") == 0
    held = fetch("held-probe-b")
    assert held.meta["organization_id"] == b["id"] and held.return_value() == {b["id"]: 1}


def test_filter_extractor_threads_run_in_the_callers_scope(two_orgs, kb_register_plugin):
    """A slow extractor runs in a pool thread; its SQL sees the asking organization's rows."""
    from datetime import datetime, timezone

    from kbframework.hooks.markers import hookimpl
    from kbframework.retrieval.filters import extract_filter_parts

    a, b, ids = two_orgs
    seen = []

    class Counting:
        @hookimpl
        def kb_extract_filters(self, query, context):
            with get_engine().connect() as conn:
                seen.append(conn.execute(text("SELECT count(*) FROM documents")).scalar())
            return []

        kb_extract_filters.kb_parallel = True

    kb_register_plugin(Counting(), "counting")
    with tenancy.organization(b["id"]):
        extract_filter_parts("oak tables", {"now": datetime.now(timezone.utc), "timezone": "UTC",
                                            "organization_id": b["id"], "settings": {}})
    assert seen == [1]
