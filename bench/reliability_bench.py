"""Issue 16 targets: nothing lost when a worker is killed or Redis goes away.

* **Jobs after a worker SIGKILL** (target: all complete, within 5 minutes): a sitemap sync of
  a slow local site, six ingest jobs (300 notes) and a re-index are queued; a real
  `kbf worker` is killed with SIGKILL in the middle, a new one is started with the
  production defaults (60 s heartbeat, 30 s sweep, 30 s first backoff). Figures: jobs
  completed / failed, seconds from the kill until the last one finished, documents left
  half done (not active, or chunk count disagreeing with the chunks), duplicate chunks.
* **Changes lost across a Redis outage** (target: 0): the embedded Redis server is stopped;
  signed WooCommerce deliveries (a price change each) and note saves arrive through the API;
  Redis is started again and a `kbf worker --burst` runs. Figures: what the API answered,
  price changes applied, notes indexed, changes lost.

Run alone with ``.venv/bin/python -m bench.run reliability_bench``.
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

KBF = str(Path(sys.executable).parent / "kbf")


def _env(**extra) -> dict:
    from kbframework.config import get_config

    cfg = get_config()
    return {**os.environ, "KB_DATA_DIR": str(cfg.data_dir), "KB_ALLOW_PRIVATE_NETWORK": "1", **extra}


def _count(sql: str, **params) -> int:
    from sqlalchemy import text

    from kbframework.db import get_engine

    with get_engine().connect() as conn:
        return conn.execute(text(sql), params).scalar_one()


def _site(pages: int, delay: float):
    from kbframework.testing import LocalHTTPServer

    def handler(method, path, headers, body):
        if path == "/sitemap.xml":
            urls = "".join(f"<url><loc>{srv.url}/page/{i}</loc></url>" for i in range(pages))
            return 200, {"Content-Type": "application/xml"}, \
                f'<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{urls}</urlset>'
        if path.startswith("/page/"):
            n = path.rsplit("/", 1)[1]
            time.sleep(delay)
            return 200, {"Content-Type": "text/html"}, (
                f"<html><head><title>Page {n}</title></head><body><main><h1>Page {n}</h1><p>Page {n} "
                f"describes item {n}, an oak chair sold in the corner shop, delivered in three days.</p>"
                "</main></body></html>")
        return 404, {}, "not found"

    srv = LocalHTTPServer(handler)
    return srv


def _half_done(org_id: str) -> int:
    return _count(
        "SELECT count(*) FROM documents d WHERE d.organization_id = CAST(:o AS uuid) AND d.status <> 'deleted' "
        "AND (d.status <> 'active' OR d.chunk_count <> (SELECT count(*) FROM chunks c WHERE c.document_id = d.id) "
        "OR d.chunk_count = 0)", o=org_id)


def _duplicate_chunks() -> int:
    return _count("SELECT count(*) FROM (SELECT document_id, chunk_index FROM chunks GROUP BY 1, 2 "
                  "HAVING count(*) > 1) x")


def killed_worker(n_notes: int = 300, pages: int = 150) -> dict:
    from rq.job import Job
    from rq.registry import FailedJobRegistry, FinishedJobRegistry, ScheduledJobRegistry, StartedJobRegistry

    from kbframework.db import session_scope
    from kbframework.jobs.queues import QUEUE_NAMES, enqueue, get_redis, queue
    from kbframework.orgs.accounts import create_org
    from kbframework.sources.config import create_source
    from kbframework.sources.documents import create_manual
    from kbframework.testing import set_org_extra

    get_redis().flushdb()
    with session_scope() as s:
        org = create_org(s, "Kill Bench", "UTC", f"kill-bench-{uuid.uuid4().hex[:6]}")
        org_id = str(org.id)
    set_org_extra({"id": org_id}, allow_private_network=True)
    site = _site(pages, 0.05)
    try:
        with session_scope() as s:
            src = create_source(s, org_id, {"type": "sitemap", "name": "slow site", "config": {
                "sitemap_urls": [site.url + "/sitemap.xml"], "concurrency": 2}})
            source_id = str(src.id)
            ids = [str(create_manual(s, org_id, {"title": f"Note {i}", "body": f"Note {i}: the shop {i} opens "
                                                  f"at {i % 12 + 7}:00 on weekdays. " * 12}).id)
                   for i in range(n_notes)]
        jobs = [enqueue("sync", "kbframework.jobs.tasks.sync_source_job", source_id, "full")]
        jobs += [enqueue("ingest", "kbframework.jobs.tasks.ingest_documents_job", ids[i:i + 50], False)
                 for i in range(0, len(ids), 50)]
        jobs.append(enqueue("reindex", "kbframework.jobs.tasks.reindex_job", org_id, "all"))
        ids_all = {j.id for j in jobs}

        started = time.time()
        w1 = subprocess.Popen([KBF, "worker"], env=_env(), start_new_session=True,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        # kill it while the sync is crawling (a run open, some pages saved)
        deadline = time.time() + 180
        while time.time() < deadline and _count(
                "SELECT count(*) FROM documents WHERE source_id = CAST(:s AS uuid)", s=source_id) < 40:
            time.sleep(0.2)
        os.killpg(w1.pid, signal.SIGKILL)
        w1.wait(10)
        killed_at = time.time()
        print(f"worker killed {killed_at - started:.1f}s after it started; "
              f"{_count('SELECT count(*) FROM documents WHERE source_id = CAST(:s AS uuid)', s=source_id)} pages "
              "saved so far", flush=True)
        w2 = subprocess.Popen([KBF, "worker"], env=_env(), start_new_session=True,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        r = get_redis()
        finished: set = set()
        failed: set = set()
        limit = killed_at + 330
        try:
            while time.time() < limit:
                finished = {j for name in QUEUE_NAMES for j in FinishedJobRegistry(queue=queue(name)).get_job_ids()}
                failed = {j for name in QUEUE_NAMES for j in FailedJobRegistry(queue=queue(name)).get_job_ids()}
                # the jobs queued at the start, and those they queued (the sync's ingest batches)
                waiting = sum(len(StartedJobRegistry(queue=queue(n)).get_job_ids()) +
                              len(ScheduledJobRegistry(queue=queue(n)).get_job_ids()) + queue(n).count
                              for n in QUEUE_NAMES)
                if ids_all <= finished | failed and not waiting:
                    break
                time.sleep(1)
            done_after = time.time() - killed_at
        finally:
            os.killpg(w2.pid, signal.SIGTERM)
            try:
                w2.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(w2.pid, signal.SIGKILL)
        completed = len(ids_all & finished)
        out = {"jobs": len(ids_all), "completed": completed, "failed": len(ids_all & failed),
               "still_waiting": waiting, "seconds_after_kill": round(done_after, 1),
               "retried": sum(1 for j in Job.fetch_many(list(ids_all), connection=r)
                              if j is not None and (j.meta or {}).get("failures")),
               "documents": _count("SELECT count(*) FROM documents WHERE organization_id = CAST(:o AS uuid) "
                                   "AND status <> 'deleted'", o=org_id),
               "half_done_documents": _half_done(org_id), "duplicate_chunks": _duplicate_chunks(),
               "settings": "production defaults: KB_JOB_HEARTBEAT_SECONDS=60, KB_JOB_SWEEP_SECONDS=30, "
                           "KB_JOB_RETRY_BACKOFF=30,120,300"}
        print(f"after a SIGKILL: {completed}/{len(ids_all)} jobs completed (target: all) in "
              f"{out['seconds_after_kill']}s (target ≤ 300), {out['failed']} failed, "
              f"{out['half_done_documents']} half-done documents, {out['duplicate_chunks']} duplicate chunks",
              flush=True)
        return out
    finally:
        site.close()


def redis_outage(n_deliveries: int = 30, n_notes: int = 20) -> dict:
    from sqlalchemy import select

    from kbframework import embedded as services
    from kbframework.config import get_config
    from kbframework.db import session_scope
    from kbframework.models import Document
    from kbframework.orgs.accounts import create_org
    from kbframework.sources.sync import run_sync
    from kbframework.testing import login_client, set_org_extra
    from kbframework.web import create_app
    from fakes.woocommerce_server import FakeWooStore

    cfg = get_config()
    app = create_app({"TESTING": True, "RATELIMIT_ENABLED": False})
    slug = f"outage-bench-{uuid.uuid4().hex[:6]}"
    with session_scope() as s:
        org = create_org(s, "Outage Bench", "UTC", slug)
        org_ref = {"id": str(org.id), "slug": slug}
    set_org_extra(org_ref, allow_private_network=True)
    admin = login_client(app, org_ref, f"admin@{slug}.example", "correct horse battery")
    secret = "whsec_bench"
    store = FakeWooStore().start()
    try:
        store.generate(n_deliveries, seed=3, variable_ratio=0.0)
        r = admin.post("/api/admin/v1/sources", json={"type": "woocommerce", "name": "Shop", "config": {
            "store_url": store.url, "consumer_key": store.consumer_key, "consumer_secret": store.consumer_secret,
            "webhook_secret": secret}})
        sid = r.get_json()["id"]
        run_sync(sid, "full", inline_ingest=True)
        product_ids = store.product_ids()[:n_deliveries]
        expected = {}
        bodies = []
        for i, pid in enumerate(product_ids):
            price = str(100 + i)
            store.update(pid, regular_price=price)
            expected[str(pid)] = float(price)
            body = store.webhook_body("product.updated", pid)
            sig = base64.b64encode(hmac.new(secret.encode(), body, hashlib.sha256).digest()).decode()
            bodies.append((body, {"X-WC-Webhook-Topic": "product.updated", "X-WC-Webhook-Resource": "product",
                                  "X-WC-Webhook-Event": "updated", "X-WC-Webhook-Signature": sig,
                                  "X-WC-Webhook-ID": "142", "X-WC-Webhook-Delivery-ID": f"bench-{pid}",
                                  "Content-Type": "application/json"}))

        services.stop_redis(cfg)
        statuses: dict = {}
        t0 = time.time()
        for body, headers in bodies:
            code = admin.client.post(f"/api/webhooks/v1/woocommerce/{sid}", data=body, headers=headers).status_code
            statuses[f"webhook {code}"] = statuses.get(f"webhook {code}", 0) + 1
        note_ids = []
        for i in range(n_notes):
            resp = admin.post("/api/admin/v1/documents/manual", json={
                "title": f"Outage note {i}", "body": f"During the outage the shop {i} kept opening at 9:00."})
            statuses[f"note {resp.status_code}"] = statuses.get(f"note {resp.status_code}", 0) + 1
            if resp.status_code in (201, 202):
                note_ids.append(resp.get_json()["id"])
        outage_s = time.time() - t0
        services.start_redis(cfg)
        t1 = time.time()
        subprocess.run([KBF, "worker", "--burst"], env=_env(), capture_output=True, timeout=600, check=True)
        recovery_s = time.time() - t1
        with session_scope() as s:
            docs = {d.external_id: d for d in s.scalars(select(Document).where(Document.source_id == uuid.UUID(sid)))}
            applied = sum(1 for ext, price in expected.items()
                          if ext in docs and docs[ext].metadata_.get("price") == price)
            notes = s.scalars(select(Document).where(Document.id.in_([uuid.UUID(i) for i in note_ids]))).all()
            indexed = sum(1 for d in notes if d.status == "active" and d.chunk_count > 0)
        lost = (len(expected) - applied) + (n_notes - indexed)
        out = {"deliveries": len(expected), "notes": n_notes, "answers_during_outage": statuses,
               "price_changes_applied": applied, "notes_indexed": indexed, "changes_lost": lost,
               "outage_seconds": round(outage_s, 1), "worker_burst_seconds_after_restart": round(recovery_s, 1)}
        print(f"Redis outage: answers {statuses}; {applied}/{len(expected)} price changes applied, "
              f"{indexed}/{n_notes} notes indexed after restart: {lost} changes lost (target 0)", flush=True)
        return out
    finally:
        store.stop()
        if not services.redis_running(cfg):
            services.start_redis(cfg)


def run() -> dict:
    result = {"killed_worker": killed_worker(), "redis_outage": redis_outage()}
    k, o = result["killed_worker"], result["redis_outage"]
    result["targets"] = {
        "jobs_completed_after_sigkill==all": k["completed"] == k["jobs"],
        "seconds_after_kill<=300": k["seconds_after_kill"] <= 300,
        "half_done_documents==0": k["half_done_documents"] == 0,
        "changes_lost_across_redis_outage==0": o["changes_lost"] == 0,
    }
    return result


if __name__ == "__main__":  # pragma: no cover
    from bench.run import main

    sys.argv = [sys.argv[0], "reliability_bench"]
    sys.exit(main())
