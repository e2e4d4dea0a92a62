"""Issue 3 targets, against the local WooCommerce REST v3 server (fakes/):

* a full sync of 5,000 generated products (20 % variable, with variations), end to end:
  listing, variations, normalisation, documents, chunks, offline embeddings — ≥ 100 products/s;
* a second full sync with nothing changed: zero chunks re-embedded, ≤ 10 s;
* the webhook endpoint under 20 concurrent deliveries (a gunicorn process like ``kbf run``,
  real HTTP, signed WooCommerce bodies, every delivery for a different product so each one
  queues a job): p95 ≤ 50 ms, measured two ways: bursts of 20 simultaneous deliveries, and
  20 clients posting back to back; then the queued jobs are drained and every price change
  lands without re-embedding. Latency depends on the machine: the load average is recorded.

``run()`` expects the services to be up (``bench/run.py`` starts scratch ones); run it alone
with ``.venv/bin/python -m bench.run woocommerce_bench``.
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import http.client
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

N_PRODUCTS = 5000
CONCURRENCY = 20
DELIVERIES = 400


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _sign(body: bytes, secret: str) -> str:
    return base64.b64encode(hmac.new(secret.encode(), body, hashlib.sha256).digest()).decode()


def _pct(values: list[float], p: float) -> float:
    values = sorted(values)
    return round(values[max(0, int(round(len(values) * p)) - 1)], 2)


def run(n_products: int = N_PRODUCTS, concurrency: int = CONCURRENCY, deliveries: int = DELIVERIES) -> dict:
    from sqlalchemy import func, select

    from kbframework.orgs.accounts import create_org
    from kbframework.db import session_scope
    from kbframework.models import Chunk, Document, Setting, WebhookEvent
    from kbframework.sources.config import create_source
    from kbframework.sources.sync import run_sync
    from fakes.woocommerce_server import FakeWooStore

    result: dict = {"products": n_products}
    store = FakeWooStore().start()
    try:
        t = time.perf_counter()
        store.generate(n_products, seed=7, variable_ratio=0.2)
        n_variations = sum(len(store.variations_of(p["id"])) for p in store.products if p["type"] == "variable")
        result["store_generate_seconds"] = round(time.perf_counter() - t, 2)
        result["variations"] = n_variations

        stamp = uuid.uuid4().hex[:8]
        secret = "bench-" + uuid.uuid4().hex
        with session_scope() as s:
            org = create_org(s, f"Woo bench {stamp}", "Europe/Belgrade", f"woo-bench-{stamp}")
            st = s.scalar(select(Setting).where(Setting.organization_id == org.id))
            st.allow_private_network = True
            src = create_source(s, org.id, {"type": "woocommerce", "name": "Bench shop", "config": {
                "store_url": store.url, "consumer_key": store.consumer_key,
                "consumer_secret": store.consumer_secret, "webhook_secret": secret}})
            org_id, source_id = org.id, str(src.id)

        # 1. the first full sync, end to end (fetch → normalize → documents → chunks → embeddings)
        t = time.perf_counter()
        first = run_sync(source_id, "full", inline_ingest=True)
        elapsed = time.perf_counter() - t
        if first.get("status") != "ok":
            raise RuntimeError(f"first sync failed: {first}")
        with session_scope() as s:
            docs = s.scalar(select(func.count()).select_from(Document).where(
                Document.source_id == source_id, Document.status == "active"))
            chunks = s.scalar(select(func.count()).select_from(Chunk).where(Chunk.organization_id == org_id))
            max_chunk = s.scalar(select(func.max(Chunk.id)).where(Chunk.organization_id == org_id))
        result["first_sync"] = {"seconds": round(elapsed, 2), "documents": docs, "chunks": chunks,
                                "products_per_s": round(n_products / elapsed, 1),
                                "store_requests": len(store.requests), "stats": first["stats"]}
        print(f"full sync: {n_products} products ({n_variations} variations) → {docs} documents, {chunks} chunks "
              f"in {elapsed:.1f}s = {n_products / elapsed:.0f} products/s (target ≥ 100)", flush=True)

        # 2. a second full sync with nothing changed
        store.reset_requests()
        t = time.perf_counter()
        second = run_sync(source_id, "full", inline_ingest=True)
        elapsed2 = time.perf_counter() - t
        with session_scope() as s:
            new_chunks = s.scalar(select(func.count()).select_from(Chunk).where(
                Chunk.organization_id == org_id, Chunk.id > max_chunk))
        result["second_sync"] = {"seconds": round(elapsed2, 2), "reembedded_chunks": new_chunks,
                                 "embedded_documents": second["stats"]["embedded_documents"],
                                 "store_requests": len(store.requests), "stats": second["stats"]}
        print(f"second full sync, nothing changed: {elapsed2:.1f}s (target ≤ 10 s), {new_chunks} chunks "
              f"re-embedded (target 0)", flush=True)

        # 3. the webhook endpoint: 20 concurrent deliveries against a gunicorn process
        ids = [p["id"] for p in store.products if p["type"] == "simple" and p["status"] == "publish"][:deliveries]
        bodies = []
        for n, pid in enumerate(ids):
            store.update(pid, regular_price=f"{300 + n}.00", sale_price="")
            body = store.webhook_body("product.updated", pid)
            bodies.append((pid, body, _sign(body, secret)))
        result["webhooks"] = _webhook_latency(source_id, bodies, concurrency)
        wh = result["webhooks"]
        b, su = wh["burst"], wh["sustained"]
        print(f"webhooks, bursts of {concurrency} simultaneous deliveries: p50 {b['p50_ms']} ms, p95 {b['p95_ms']} ms "
              f"(target ≤ 50), max {b['max_ms']} ms", flush=True)
        print(f"webhooks, {concurrency} clients back to back: p50 {su['p50_ms']} ms, p95 {su['p95_ms']} ms, "
              f"{su['per_s']}/s; statuses {wh['statuses']} (load average {wh['load_average_1m']} on "
              f"{wh['cpus']} CPUs)", flush=True)

        # the queued jobs, drained: every price change applied, nothing re-embedded
        from kbframework.jobs.worker import run_burst

        t = time.perf_counter()
        run_burst(("webhook",))
        drain = time.perf_counter() - t
        with session_scope() as s:
            outcomes = dict(s.execute(select(WebhookEvent.outcome, func.count()).where(
                WebhookEvent.source_id == source_id).group_by(WebhookEvent.outcome)).all())
            after = s.scalar(select(func.count()).select_from(Chunk).where(
                Chunk.organization_id == org_id, Chunk.id > max_chunk))
            prices_ok = sum(1 for pid, _, _ in bodies if (s.scalar(select(Document.metadata_).where(
                Document.source_id == source_id, Document.external_id == str(pid))) or {}).get("price")
                == float(store.get(pid)["price"]))
        wh.update(drain_seconds=round(drain, 2), outcomes=outcomes, reembedded_chunks=after,
                  prices_applied=prices_ok)
        print(f"webhook jobs drained in {drain:.1f}s: outcomes {outcomes}, {prices_ok}/{len(bodies)} prices "
              f"applied, {after} chunks re-embedded", flush=True)

        with session_scope() as s:  # leave the scratch database small for the next benchmark
            from kbframework.models import Organization

            s.delete(s.get(Organization, org_id))
    finally:
        store.stop()
    result["targets"] = {
        "sync_products_per_s>=100": result["first_sync"]["products_per_s"] >= 100,
        "second_sync_seconds<=10": result["second_sync"]["seconds"] <= 10,
        "second_sync_reembeds_zero": result["second_sync"]["reembedded_chunks"] == 0,
        "webhook_burst_p95_ms<=50": result["webhooks"]["burst"]["p95_ms"] <= 50,
        "webhook_sustained_p95_ms<=50": result["webhooks"]["sustained"]["p95_ms"] <= 50,
    }
    return result


def _webhook_latency(source_id: str, bodies: list[tuple[int, bytes, str]], concurrency: int) -> dict:
    from kbframework.config import get_config
    from kbframework.embedded import pg_url, redis_url_for

    cfg = get_config()
    env = {**os.environ, "DATABASE_URL": cfg.database_url or pg_url(cfg),
           "REDIS_URL": cfg.redis_url or redis_url_for(cfg)}
    port = _free_port()
    gunicorn = str(Path(sys.executable).parent / "gunicorn")
    web = subprocess.Popen([gunicorn, "-w", "2", "--worker-class", "gthread", "--threads", "8", "-b",
                            f"127.0.0.1:{port}", "kbframework.wsgi:app"], env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(150):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1)
                break
            except Exception:
                time.sleep(0.2)
        path = f"/api/webhooks/v1/woocommerce/{source_id}"

        def post(pid: int, body: bytes, sig: str) -> tuple[int, float]:
            headers = {"Content-Type": "application/json", "User-Agent": "WooCommerce/9.8.5 Hookshot",
                       "X-WC-Webhook-Topic": "product.updated", "X-WC-Webhook-Resource": "product",
                       "X-WC-Webhook-Event": "updated", "X-WC-Webhook-Signature": sig,
                       "X-WC-Webhook-ID": "142", "X-WC-Webhook-Delivery-ID": uuid.uuid4().hex,
                       "Connection": "close"}
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            t = time.perf_counter()
            try:
                conn.request("POST", path, body=body, headers=headers)
                resp = conn.getresponse()
                resp.read()
                return resp.status, (time.perf_counter() - t) * 1000
            finally:
                conn.close()

        # warm both workers (first request loads plugins, opens pools)
        for pid, body, sig in bodies[:4]:
            post(pid, body, sig)
        work = list(bodies[4:])
        half = len(work) // 2
        lock = threading.Lock()

        # (a) bursts: 20 deliveries at the same instant (WooCommerce saving a product with
        #     many variations), a short pause, again
        burst_lat: list[float] = []
        statuses: dict[int, int] = {}
        bursts = [work[i:i + concurrency] for i in range(0, half, concurrency)]
        for burst in bursts:
            gate = threading.Barrier(len(burst))

            def one(item):
                gate.wait()
                status, ms = post(*item)
                with lock:
                    burst_lat.append(ms)
                    statuses[status] = statuses.get(status, 0) + 1

            threads = [threading.Thread(target=one, args=(item,)) for item in burst]
            for th in threads:
                th.start()
            for th in threads:
                th.join()
            time.sleep(0.1)

        # (b) sustained: 20 clients posting back to back, no pause
        rest = work[half:]
        latencies: list[float] = []

        def client() -> None:
            while True:
                with lock:
                    if not rest:
                        return
                    item = rest.pop()
                status, ms = post(*item)
                with lock:
                    latencies.append(ms)
                    statuses[status] = statuses.get(status, 0) + 1

        threads = [threading.Thread(target=client) for _ in range(concurrency)]
        t = time.perf_counter()
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        wall = time.perf_counter() - t
    finally:
        web.terminate()
        try:
            web.wait(10)
        except subprocess.TimeoutExpired:
            web.kill()
    return {"deliveries": len(burst_lat) + len(latencies), "concurrency": concurrency, "statuses": statuses,
            "burst": {"bursts": len(bursts), "p50_ms": _pct(burst_lat, 0.5), "p95_ms": _pct(burst_lat, 0.95),
                      "max_ms": round(max(burst_lat), 2)},
            "sustained": {"deliveries": len(latencies), "p50_ms": _pct(latencies, 0.5),
                          "p95_ms": _pct(latencies, 0.95), "max_ms": round(max(latencies), 2),
                          "mean_ms": round(statistics.mean(latencies), 2),
                          "per_s": round(len(latencies) / wall, 1)},
            "server": "gunicorn -w 2 gthread x8 (as kbf run)", "cpus": os.cpu_count(),
            "load_average_1m": round(os.getloadavg()[0], 2)}


if __name__ == "__main__":  # pragma: no cover
    from bench.run import main

    sys.argv = [sys.argv[0], "woocommerce_bench"]
    raise SystemExit(main())
