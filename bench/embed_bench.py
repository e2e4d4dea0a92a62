"""Issue 7 targets: the public chat as a customer's website uses it.

Figures: widget.js size (raw, gzip -9, and as served with Content-Encoding: gzip; target ≤ 15 KB
gzipped); public chat latency p50/p95 over HTTP with the offline answerer at 20 concurrent
clients against a real gunicorn server (2 processes × 10 threads, sharing Redis for the rate
limits); time to first streamed token (SSE), alone and under the same load.
Run alone: ``.venv/bin/python -m bench.run embed_bench``.
"""
from __future__ import annotations

import gzip
import http.client
import json
import os
import random
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ORIGIN = "https://shop.bench.example"
QUESTIONS = ["Do you have a red dress?", "what is your return policy?", "how long does shipping take?",
             "blue jacket price", "is the linen shirt in stock?", "which shoes are on sale?",
             "can I pay by card?", "do you ship to Belgrade?", "summer dress under 50 euro",
             "what sizes do the jeans come in?"]


def pct(values: list[float], p: float) -> float:
    if not values:
        return -1.0
    v = sorted(values)
    return round(v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))], 1)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def seed(n_products: int = 60) -> tuple[str, str]:
    from kbframework.orgs.accounts import create_org, ensure_source
    from kbframework.db import session_scope
    from kbframework.ingest.pipeline import ingest_documents
    from kbframework.orgs.keys import create_key
    from kbframework.sources.apply import apply_draft
    from kbframework.types import DocumentDraft

    rng = random.Random(7)
    colours = "red blue green black white linen denim navy beige yellow".split()
    kinds = "dress jacket shirt jeans shoes skirt coat scarf hat sweater".split()
    stamp = int(time.time())
    ids = []
    with session_scope() as s:
        org = create_org(s, f"Embed bench {stamp}", "Europe/Belgrade", f"embed-bench-{stamp}")
        src = ensure_source(s, org.id, "manual", "Manual knowledge")
        for i in range(n_products):
            c, k = rng.choice(colours), rng.choice(kinds)
            d, _ = apply_draft(s, src, DocumentDraft(
                title=f"{c.title()} {k} {i}", type="woo_product", document_role="product", external_id=f"p{i}",
                normalized_content=f"{c.title()} {k} in soft cotton. Sizes XS to XL. Price {20 + i} euro. "
                                   f"A {c} {k} for every day; free shipping over 50 euro.",
                source_url=f"https://shop.bench.example/p/{i}", primary_image_url=f"https://img.bench.example/{i}.jpg",
                metadata={"price": str(20 + i), "currency": "EUR", "in_stock": i % 3 != 0}))
            ids.append(d.id)
        for j, (t, body) in enumerate([
                ("Shipping", "We ship within two days. Shipping to Belgrade takes one day; free over 50 euro."),
                ("Returns", "You can return any item within 30 days of delivery for a full refund."),
                ("Payment", "We accept cards, PayPal and cash on delivery.")]):
            d, _ = apply_draft(s, src, DocumentDraft(title=t, normalized_content=body, type="wp_page",
                                                     document_role="support", external_id=f"a{j}",
                                                     source_url=f"https://shop.bench.example/{t.lower()}"))
            ids.append(d.id)
        key = create_key(s, org.id, [ORIGIN], "Bench", rate_per_minute=1_000_000, rate_per_day=1_000_000,
                         rate_per_ip_minute=1_000_000).key
        org_id = str(org.id)
    ingest_documents(ids)
    return org_id, key


def start_server(workers: int, threads: int) -> tuple[subprocess.Popen, str]:
    from kbframework.config import get_config
    from kbframework.embedded import pg_url, redis_url_for

    cfg = get_config()
    env = {k: v for k, v in os.environ.items() if k not in ("KB_LLM_BASE_URL", "OPENAI_BASE_URL", "OPENAI_API_KEY")}
    env.update(KB_DATA_DIR=str(cfg.data_dir), DATABASE_URL=cfg.database_url or pg_url(cfg),
               REDIS_URL=cfg.redis_url or redis_url_for(cfg), KB_LLM_PROVIDER="extractive", KB_LOG_LEVEL="WARNING")
    port = free_port()
    gunicorn = str(Path(sys.executable).parent / "gunicorn")
    p = subprocess.Popen([gunicorn, "-w", str(workers), "--threads", str(threads), "-b", f"127.0.0.1:{port}",
                          "--log-level", "warning", "kbframework.wsgi:app"], cwd=str(ROOT), env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 90
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(url + "/healthz", timeout=2):
                return p, url
        except OSError:
            time.sleep(0.2)
    p.terminate()
    raise RuntimeError("gunicorn did not start")


def post(url: str, path: str, body: dict, stream: bool = False) -> tuple[int, float, float | None]:
    """Returns (status, total ms, ms to the first token event or None)."""
    port = int(url.rsplit(":", 1)[1])
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    headers = {"Content-Type": "application/json", "Origin": ORIGIN,
               "Accept": "text/event-stream" if stream else "application/json"}
    t0 = time.perf_counter()
    first = None
    try:
        conn.request("POST", path, body=json.dumps({**body, "stream": stream}), headers=headers)
        r = conn.getresponse()
        if stream and r.status == 200:
            while True:
                line = r.fp.readline()
                if not line:
                    break
                if first is None and line.startswith(b"event: token"):
                    first = (time.perf_counter() - t0) * 1000
                if line.startswith(b"event: done"):
                    r.fp.readline()
                    break
        else:
            r.read()
        return r.status, (time.perf_counter() - t0) * 1000, first
    finally:
        conn.close()


def run(clients: int = 20, per_client: int = 10, workers: int = 2, threads: int = 10) -> dict:
    from kbframework.web.embed_pages import widget_asset

    a = widget_asset()
    out = {"widget_bytes": len(a["raw"]), "widget_gzip_bytes": len(gzip.compress(a["raw"], 9)),
           "widget_target_gzip_bytes": 15 * 1024}
    out["widget_within_target"] = out["widget_gzip_bytes"] <= out["widget_target_gzip_bytes"]
    print(f"widget.js: {out['widget_bytes']} B raw, {out['widget_gzip_bytes']} B gzipped", flush=True)

    org_id, key = seed()
    proc, url = start_server(workers, threads)
    path = f"/api/embed/v1/{key}/chat"
    try:
        req = urllib.request.Request(f"{url}/widget.js?key={key}",
                                     headers={"Accept-Encoding": "gzip", "Referer": ORIGIN + "/"})
        with urllib.request.urlopen(req) as r:
            out["widget_served_bytes"] = len(r.read())
            out["widget_served_encoding"] = r.headers.get("Content-Encoding")
        for q in QUESTIONS[:4] * 2:  # warm both processes (model load, connections)
            post(url, path, {"message": q})

        # time to first token, one visitor at a time
        ttft, stream_total = [], []
        for i in range(20):
            st, total, first = post(url, path, {"message": QUESTIONS[i % len(QUESTIONS)]}, stream=True)
            if st == 200 and first is not None:
                ttft.append(first)
                stream_total.append(total)
        out["ttft_ms_p50_idle"], out["ttft_ms_p95_idle"] = pct(ttft, 50), pct(ttft, 95)
        out["stream_total_ms_p50_idle"] = pct(stream_total, 50)

        # 20 concurrent clients, JSON answers
        lat, codes, lock = [], {}, threading.Lock()

        def client(n: int):
            rng = random.Random(n)
            for _ in range(per_client):
                st, ms, _ = post(url, path, {"message": rng.choice(QUESTIONS)})
                with lock:
                    codes[st] = codes.get(st, 0) + 1
                    if st == 200:
                        lat.append(ms)

        t0 = time.perf_counter()
        with ThreadPoolExecutor(clients) as pool:
            list(pool.map(client, range(clients)))
        wall = time.perf_counter() - t0
        out.update(concurrent_clients=clients, requests=clients * per_client, status_counts=codes,
                   chat_ms_p50=pct(lat, 50), chat_ms_p95=pct(lat, 95), chat_ms_max=pct(lat, 100),
                   throughput_rps=round(len(lat) / wall, 1), server=f"gunicorn -w {workers} --threads {threads}")

        # time to first token while 19 other clients keep asking
        stop = threading.Event()

        def background(n: int):
            rng = random.Random(100 + n)
            while not stop.is_set():
                post(url, path, {"message": rng.choice(QUESTIONS)})

        bg = [threading.Thread(target=background, args=(n,), daemon=True) for n in range(clients - 1)]
        for t in bg:
            t.start()
        time.sleep(1.0)
        ttft_load = []
        for i in range(15):
            st, total, first = post(url, path, {"message": QUESTIONS[i % len(QUESTIONS)]}, stream=True)
            if st == 200 and first is not None:
                ttft_load.append(first)
        stop.set()
        for t in bg:
            t.join(timeout=120)
        out["ttft_ms_p50_under_load"], out["ttft_ms_p95_under_load"] = pct(ttft_load, 50), pct(ttft_load, 95)
        print(f"chat p50 {out['chat_ms_p50']} ms, p95 {out['chat_ms_p95']} ms at {clients} clients "
              f"({out['throughput_rps']} req/s); first token p50 {out['ttft_ms_p50_idle']} ms idle, "
              f"{out['ttft_ms_p50_under_load']} ms under load", flush=True)
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
    return out


if __name__ == "__main__":
    sys.argv = [sys.argv[0], "embed_bench"]
    from bench.run import main

    sys.exit(main())
