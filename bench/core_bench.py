"""Issue 2 targets: ingest 10,000 manual documents (offline embedder) into one organization
while a second holds 100, then ask 200 questions of each.

Figures: ingestion chunks/s end to end (documents created, queued on RQ, indexed by a real
`kbf worker --burst` process), retrieval p50/p95 without the LLM, the vector leg's recall@20
against an exact scan for both organizations (automatic plan and forced HNSW), peak RSS of the
worker and of a gunicorn web process answering the questions over HTTP.
"""
from __future__ import annotations

import json
import os
import random
import re
import statistics
import subprocess
import sys
import time
import urllib.request
from datetime import datetime, timezone
from pathlib import Path

SHARED = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "retrieval_dev" / "corpus.jsonl"


def sentences() -> list[str]:
    out = []
    if SHARED.exists():
        for line in SHARED.read_text().splitlines():
            d = json.loads(line)
            out += [s.strip() for s in re.split(r"(?<=[.!?])\s+|\n", d["text"]) if len(s.strip()) > 30]
    if not out:
        rng = random.Random(0)
        words = "return policy shipping refund order techno event ticket venue dress jacket price stock".split()
        out = [" ".join(rng.choice(words) for _ in range(14)).capitalize() + "." for _ in range(2000)]
    return out


def make_docs(n: int, rng: random.Random, pool: list[str]) -> list[tuple[str, str]]:
    docs = []
    for i in range(n):
        body = "\n\n".join(" ".join(rng.choice(pool) for _ in range(5)) for _ in range(rng.randint(3, 6)))
        docs.append((f"Note {i}: {rng.choice(pool)[:60]}", body))
    return docs


def rss_peak_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return -1.0


def run(n_big: int = 10_000, n_small: int = 100, n_questions: int = 200) -> dict:
    from sqlalchemy import func, select, text

    from kbframework.orgs.accounts import create_org, ensure_source
    from kbframework.db import session_scope
    from kbframework.orgs.keys import create_key
    from kbframework.sources.apply import apply_draft
    from kbframework.models import AssistantKey, Chunk
    from kbframework.jobs.queues import enqueue
    from kbframework.types import DocumentDraft

    rng = random.Random(42)
    pool = sentences()
    stamp = int(time.time())
    orgs = {}
    with session_scope() as s:
        for label, n in (("big", n_big), ("small", n_small)):
            org = create_org(s, f"Bench {label} {stamp}", "Europe/Belgrade", f"bench-{label}-{stamp}")
            orgs[label] = {"id": org.id, "n": n}
    t0 = time.perf_counter()
    all_ids = []
    for label, o in orgs.items():
        docs = make_docs(o["n"], rng, pool)
        for i in range(0, len(docs), 500):
            with session_scope() as s:
                src = ensure_source(s, o["id"], "manual", "Manual knowledge")
                ids = []
                for j, (title, body) in enumerate(docs[i:i + 500]):
                    # the batched path syncs use: no existing row to look up, one flush per batch
                    d, _ = apply_draft(s, src, DocumentDraft(title=title, normalized_content=body, type="manual",
                                                             document_role="manual", external_id=f"b{i + j}"),
                                       doc=None, flush=False)
                    ids.append(str(d.id))
            all_ids += ids
            for k in range(0, len(ids), 100):
                enqueue("ingest", "kbframework.jobs.tasks.ingest_documents_job", ids[k:k + 100], False)
    created = time.perf_counter() - t0
    kbf = str(Path(sys.executable).parent / "kbf")
    # one worker per core, as a deployment would run them (`kbf worker` scales out by process)
    workers = [subprocess.Popen([kbf, "worker", "--burst", "--queues", "ingest"]) for _ in range(os.cpu_count() or 1)]
    peak_worker = 0.0
    while any(w.poll() is None for w in workers):
        peak_worker = max([peak_worker] + [rss_peak_mb(w.pid) for w in workers if w.poll() is None])
        time.sleep(0.2)
    elapsed = time.perf_counter() - t0
    with session_scope() as s:
        chunks = s.scalar(select(func.count()).select_from(Chunk).where(
            Chunk.organization_id.in_([o["id"] for o in orgs.values()])))
    result = {"documents": len(all_ids), "chunks": chunks, "ingest_seconds": round(elapsed, 2),
              "workers": len(workers),
              "create_seconds": round(created, 2), "ingest_chunks_per_s": round(chunks / elapsed, 1),
              "worker_peak_rss_mb": round(peak_worker, 1)}
    print(f"ingestion: {chunks} chunks in {elapsed:.1f}s → {result['ingest_chunks_per_s']} chunks/s "
          f"(worker peak {peak_worker:.0f} MB)", flush=True)

    # retrieval latency (no LLM) and recall@20 of the vector leg against an exact scan
    from kbframework.hooks import registry
    from kbframework.retrieval.answer import _POOL, _keyword_leg, embed_query
    from kbframework.retrieval import vector_index
    from kbframework.retrieval.search import Prefilter, forget_counts, keyword_search, rrf, vector_search

    forget_counts()
    provider = registry.embedder()
    t = time.perf_counter()  # the product's post-load step (`kbf db indexes --build`)
    vector_index.ensure_all()
    result["hnsw_build_seconds"] = round(time.perf_counter() - t, 2)
    questions = [rng.choice(pool)[:80] for _ in range(n_questions)]
    for label, o in orgs.items():
        lat, recall_auto, recall_hnsw, plans = [], [], [], set()
        for q in questions:
            with session_scope() as s:
                now = datetime.now(timezone.utc)
                pf = Prefilter(organization_id=str(o["id"]), now=now)
                t = time.perf_counter()
                # as the answer pipeline does: the keyword leg in parallel on its own connection
                kf = _POOL.submit(_keyword_leg, pf, q)
                qv, _ = embed_query(s, o["id"], q)
                (dim, vec), = qv.values()
                vh, plan = vector_search(s, pf, provider.model, dim, vec, k=20)
                kh = kf.result()[0]
                rrf({"vector": vh, "keyword": kh})
                lat.append((time.perf_counter() - t) * 1000)
                plans.add(plan["plan"])
                exact, _ = vector_search(s, pf, provider.model, dim, vec, k=20, force="exact")
                hnsw, _ = vector_search(s, pf, provider.model, dim, vec, k=20, force="hnsw")
            ex = {h.chunk_id for h in exact}
            if ex:
                recall_auto.append(len(ex & {h.chunk_id for h in vh}) / len(ex))
                recall_hnsw.append(len(ex & {h.chunk_id for h in hnsw}) / len(ex))
        lat.sort()
        result[f"{label}_org"] = {
            "documents": o["n"], "retrieval_p50_ms": round(statistics.median(lat), 2),
            "retrieval_p95_ms": round(lat[int(len(lat) * 0.95) - 1], 2),
            "vector_recall_at_20_auto": round(statistics.mean(recall_auto), 4),
            "vector_recall_at_20_forced_hnsw": round(statistics.mean(recall_hnsw), 4),
            "plans_used": sorted(plans)}
        print(f"{label} org: p95 {result[f'{label}_org']['retrieval_p95_ms']} ms, recall@20 auto "
              f"{result[f'{label}_org']['vector_recall_at_20_auto']} (forced HNSW "
              f"{result[f'{label}_org']['vector_recall_at_20_forced_hnsw']}), plan {sorted(plans)}", flush=True)

    # the web process: gunicorn answering the 400 questions over HTTP (public API, offline answerer)
    with session_scope() as s:
        keys = {}
        for label, o in orgs.items():
            k = create_key(s, o["id"], ["http://bench.local"], "bench", rate_per_minute=100000,
                           rate_per_day=1000000, rate_per_ip_minute=100000)
            keys[label] = k.key
    from kbframework.config import get_config
    from kbframework.embedded import pg_url, redis_url_for

    cfg = get_config()
    env = {**os.environ, "DATABASE_URL": cfg.database_url or pg_url(cfg), "REDIS_URL": cfg.redis_url or redis_url_for(cfg)}
    port = 5099
    web = subprocess.Popen([str(Path(sys.executable).parent / "gunicorn"), "-w", "1", "--threads", "4", "-b",
                            f"127.0.0.1:{port}", "kbframework.wsgi:app"], env=env, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1)
                break
            except Exception:
                time.sleep(0.2)
        http_lat = []
        for label, key in keys.items():
            for q in questions:
                req = urllib.request.Request(f"http://127.0.0.1:{port}/api/embed/v1/{key}/chat",
                                             data=json.dumps({"message": q}).encode(),
                                             headers={"Content-Type": "application/json", "Origin": "http://bench.local"})
                t = time.perf_counter()
                urllib.request.urlopen(req, timeout=30).read()
                http_lat.append((time.perf_counter() - t) * 1000)
        http_lat.sort()
        result["web_answer_p50_ms"] = round(statistics.median(http_lat), 1)
        result["web_answer_p95_ms"] = round(http_lat[int(len(http_lat) * 0.95) - 1], 1)
        pids = [web.pid] + [int(p) for p in subprocess.run(["pgrep", "-P", str(web.pid)], capture_output=True,
                                                          text=True).stdout.split()]
        result["web_peak_rss_mb"] = round(max(rss_peak_mb(p) for p in pids), 1)
    finally:
        web.terminate()
        web.wait(10)
    print(f"web: answer p95 {result['web_answer_p95_ms']} ms over HTTP, peak RSS {result['web_peak_rss_mb']} MB",
          flush=True)
    return result
