"""Retrieval at scale, measured on the product as shipped (issue 15).

101 organizations in the product's own tables: one holding 40% of the chunks, ten at 4.5%
each, ninety small ones sharing the rest (at least 100 chunks each). Chunk texts are
realistic generated text (ten sentences of the shared retrieval corpus each); their vectors
come from the offline embedder: every sentence is embedded once and a chunk's vector is
the normalised mean of its sentences' vectors (WordLlama itself is a mean of token
vectors, so this is what it would return for the chunk, give or take weighting), which
keeps a 1M-chunk load within minutes on two cores. Rows go in by binary COPY into the
migrated schema; then the product's own post-load steps run (``ANALYZE`` and
``vector_index.ensure_all`` — what ``kbf db indexes --build`` and the ingest worker do).

Per organization class: p50/p95 of 200 questions through the retrieval steps the answer
pipeline runs (capped pre-filter, embed_query, keyword leg in parallel, vector leg, RRF),
recall@20 of the vector leg against an exact full-precision scan of that organization,
the raw SQL floor of the same two queries (psycopg2, precomputed query vector) in the
same run and the ratio; index build time and size; ingestion end to end through a real
`kbf worker` against the embedder alone on the same chunks; peak RSS of the worker and
of a gunicorn web process answering questions. Size: ``KB_BENCH_SCALE_SIZE`` (default
100,000; ``make bench-scale SIZE=1000000``).
"""
from __future__ import annotations

import io
import json
import os
import random
import statistics
import struct
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from bench.core_bench import make_docs, rss_peak_mb, sentences

SENTENCES_PER_CHUNK = 10
CHUNKS_PER_DOC = 5


def pct(values, p):
    v = sorted(values)
    return round(v[max(0, int(len(v) * p + 0.5) - 1)], 2) if v else None


def class_sizes(total: int) -> list[tuple[str, int]]:
    large = int(total * 0.40)
    medium = int(total * 0.045)
    small = max(100, (total - large - 10 * medium) // 90)
    return [("large", large)] + [("medium", medium)] * 10 + [("small", small)] * 90


# --------------------------------------------------------------------------- binary COPY

def _field(b: bytes | None) -> bytes:
    return b"\xff\xff\xff\xff" if b is None else struct.pack(">i", len(b)) + b


def _vector(v: np.ndarray) -> bytes:
    return struct.pack(">hh", len(v), 0) + v.astype(">f4").tobytes()


class CopyBuffer:
    def __init__(self):
        self.buf = io.BytesIO()
        self.buf.write(b"PGCOPY\n\xff\r\n\x00" + struct.pack(">ii", 0, 0))
        self.rows = 0

    def row(self, fields: list[bytes | None]) -> None:
        self.buf.write(struct.pack(">h", len(fields)) + b"".join(_field(f) for f in fields))
        self.rows += 1

    def done(self) -> io.BytesIO:
        self.buf.write(struct.pack(">h", -1))
        self.buf.seek(0)
        return self.buf


def _raw_conn():
    import psycopg2

    from kbframework.config import get_config
    from kbframework.embedded import pg_url

    cfg = get_config()
    url = (cfg.database_url or pg_url(cfg)).replace("postgresql+psycopg2://", "postgresql://")
    conn = psycopg2.connect(url)
    from pgvector.psycopg2 import register_vector

    register_vector(conn)
    return conn


def load(total: int, rng: random.Random, pool: list[str], pool_vecs: np.ndarray, model: str) -> dict:
    """Organizations and sources through the product; documents and chunks by COPY."""
    from kbframework.orgs.accounts import create_org, ensure_source
    from kbframework.db import session_scope

    stamp = int(time.time())
    orgs = []
    with session_scope() as s:
        for i, (cls, n) in enumerate(class_sizes(total)):
            org = create_org(s, f"Scale {cls} {i} {stamp}", "Europe/Belgrade", f"scale-{i}-{stamp}")
            src = ensure_source(s, org.id, "manual", "Manual knowledge")
            orgs.append({"id": str(org.id), "source": str(src.id), "class": cls, "chunks": n})
    t0 = time.perf_counter()
    jobs: list[list[dict]] = [[], []]
    for i, o in enumerate(orgs):
        jobs[i % 2].append(o)
    errors = []

    def loader(part: list[dict], seed: int):
        try:
            r = random.Random(seed)
            conn = _raw_conn()
            for o in part:
                _load_org(conn, o, r, pool, pool_vecs, model)
            conn.close()
        except Exception as exc:  # reported, not swallowed
            errors.append(exc)

    threads = [threading.Thread(target=loader, args=(jobs[k], k + 1)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return {"orgs": orgs, "load_seconds": round(time.perf_counter() - t0, 1)}


def _load_org(conn, o: dict, r: random.Random, pool, pool_vecs, model: str) -> None:
    org_b, src_b = uuid.UUID(o["id"]).bytes, uuid.UUID(o["source"]).bytes
    n_docs = max(1, (o["chunks"] + CHUNKS_PER_DOC - 1) // CHUNKS_PER_DOC)
    model_b = model.encode()
    left = o["chunks"]
    step = 2000  # documents per COPY round
    for start in range(0, n_docs, step):
        docs, chunks = CopyBuffer(), CopyBuffer()
        for j in range(start, min(n_docs, start + step)):
            did = uuid.uuid4()
            title = f"Note {j}: {pool[r.randrange(len(pool))][:60]}"
            n = min(CHUNKS_PER_DOC, left)
            left -= n
            docs.row([did.bytes, org_b, src_b, title.encode(), b"manual", b"manual", b"active",
                      title.encode(), struct.pack(">i", n), f"x{j}".encode()])
            for k in range(n):
                pick = [r.randrange(len(pool)) for _ in range(SENTENCES_PER_CHUNK)]
                content = " ".join(pool[p] for p in pick)
                vec = pool_vecs[pick].mean(axis=0)
                vec /= np.linalg.norm(vec) or 1.0
                chunks.row([org_b, did.bytes, struct.pack(">i", k), title.encode(), content.encode(),
                            struct.pack(">i", len(content.split())), _vector(vec), model_b])
            if left <= 0:
                break
        with conn.cursor() as cur:
            cur.copy_expert("COPY documents (id, organization_id, source_id, title, type, document_role, "
                            "status, normalized_content, chunk_count, external_id) FROM STDIN WITH (FORMAT binary)",
                            docs.done())
            cur.copy_expert("COPY chunks (organization_id, document_id, chunk_index, heading, content, "
                            "token_count, embedding, embedding_model) FROM STDIN WITH (FORMAT binary)",
                            chunks.done())
        conn.commit()
        if left <= 0:
            break


# --------------------------------------------------------------------------- one question

def retrieve(org_id: str, q: str) -> tuple[list, dict]:
    """The answer pipeline's retrieval steps 4–7 (no LLM), as ``retrieval.answer`` runs them."""
    from kbframework.db import session_scope
    from kbframework.retrieval.answer import _POOL, _keyword_leg, embed_query
    from kbframework.retrieval.search import Prefilter, count_candidates, rrf, vector_search

    with session_scope() as s:
        pf = Prefilter(organization_id=org_id, now=datetime.now(timezone.utc))
        if not count_candidates(s, pf):
            return [], {}
        qv, _ = embed_query(s, org_id, q)
        kf = _POOL.submit(_keyword_leg, pf, q)
        vh, plans = [], []
        for model, (dim, vec) in qv.items():
            hits, plan = vector_search(s, pf, model, dim, vec, k=20)
            vh += hits
            plans.append(plan)
        kh = kf.result()[0]
        rrf({"vector": vh, "keyword": kh})
        return vh, {"plan": plans[0]["plan"] if plans else None, "vec": vec,
                    "ef": plans[0].get("ef_search") if plans else None}


def floor_queries(conn, org_id: str, model: str, dim: int, vec, q: str, plan: str,
                  ef: int | None = None) -> tuple[float, list[int]]:
    """The same two searches as bare SQL (no pre-filter join, no fusion, no Python around)."""
    lit = "[" + ",".join(f"{float(x):.6g}" for x in vec) + "]"
    t = time.perf_counter()
    with conn.cursor() as cur:
        if plan == "hnsw":
            cur.execute("SET hnsw.iterative_scan = relaxed_order")
            cur.execute(f"SET hnsw.ef_search = {int(ef or 40)}")
            cur.execute(f"SELECT id FROM chunks WHERE organization_id = %s AND embedding_model = %s "
                        f"ORDER BY (embedding_half::halfvec({dim})) <=> %s::halfvec({dim}) LIMIT 20",
                        (org_id, model, lit))
        else:
            cur.execute("SELECT id FROM chunks WHERE organization_id = %s AND embedding_model = %s "
                        "ORDER BY embedding_half <=> %s::halfvec LIMIT 20", (org_id, model, lit))
        ids = [r[0] for r in cur.fetchall()]
        cur.execute("SELECT id FROM chunks WHERE organization_id = %s AND tsv @@ websearch_to_tsquery('english', %s) "
                    "ORDER BY ts_rank_cd(tsv, websearch_to_tsquery('english', %s), 32) DESC LIMIT 20",
                    (org_id, q, q))
        cur.fetchall()
    conn.rollback()
    return (time.perf_counter() - t) * 1000, ids


def trap_top(conn, org_id: str, model: str, dim: int, vec) -> list[int]:
    lit = "[" + ",".join(f"{float(x):.6g}" for x in vec) + "]"
    with conn.cursor() as cur:
        cur.execute("SET hnsw.iterative_scan = off")
        cur.execute("SET hnsw.ef_search = 40")
        cur.execute(f"SELECT id FROM chunks WHERE organization_id = %s AND embedding_model = %s "
                    f"ORDER BY (embedding_half::halfvec({dim})) <=> %s::halfvec({dim}) LIMIT 20", (org_id, model, lit))
        ids = [r[0] for r in cur.fetchall()]
    conn.rollback()
    return ids


def exact_top(conn, org_id: str, model: str, vec) -> list[int]:
    lit = "[" + ",".join(f"{float(x):.6g}" for x in vec) + "]"
    with conn.cursor() as cur:
        cur.execute("SELECT id FROM chunks WHERE organization_id = %s AND embedding_model = %s "
                    "ORDER BY embedding <=> %s::vector LIMIT 20", (org_id, model, lit))
        ids = [r[0] for r in cur.fetchall()]
    conn.rollback()
    return ids


# --------------------------------------------------------------------------- ingestion

def ingestion(rng: random.Random, pool: list[str], n_docs: int = 1500) -> dict:
    """Product ingestion through a real `kbf worker --burst` (documents saved as a sync saves
    them, queued by `queue_ingest` in the sync's batches) against the embedder alone on the
    chunks it wrote, into this table, whose vector index takes every new row: the measurement
    is bench.ingest_bench's, three runs, the median reported."""
    from bench.ingest_bench import repeated

    return repeated(rng, pool, n_docs, "scale")


def web_rss(orgs: list[dict], questions: list[str]) -> dict:
    from kbframework.config import get_config
    from kbframework.db import session_scope
    from kbframework.embedded import pg_url, redis_url_for
    from kbframework.orgs.keys import create_key

    picks = [next(o for o in orgs if o["class"] == c) for c in ("large", "medium", "small")]
    with session_scope() as s:
        keys = [create_key(s, uuid.UUID(o["id"]), ["http://bench.local"], "bench", rate_per_minute=100000,
                           rate_per_day=1000000, rate_per_ip_minute=100000).key for o in picks]
    cfg = get_config()
    env = {**os.environ, "DATABASE_URL": cfg.database_url or pg_url(cfg),
           "REDIS_URL": cfg.redis_url or redis_url_for(cfg)}
    port = 5098
    web = subprocess.Popen([str(Path(sys.executable).parent / "gunicorn"), "-w", "1", "--threads", "4", "-b",
                            f"127.0.0.1:{port}", "kbframework.wsgi:app"], env=env, stderr=subprocess.DEVNULL)
    lat = []
    try:
        for _ in range(150):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1)
                break
            except Exception:
                time.sleep(0.2)
        for key in keys:
            for q in questions[:40]:
                req = urllib.request.Request(f"http://127.0.0.1:{port}/api/embed/v1/{key}/chat",
                                             data=json.dumps({"message": q}).encode(),
                                             headers={"Content-Type": "application/json",
                                                      "Origin": "http://bench.local"})
                t = time.perf_counter()
                urllib.request.urlopen(req, timeout=60).read()
                lat.append((time.perf_counter() - t) * 1000)
        pids = [web.pid] + [int(p) for p in subprocess.run(["pgrep", "-P", str(web.pid)], capture_output=True,
                                                          text=True).stdout.split()]
        peak = max(rss_peak_mb(p) for p in pids)
    finally:
        web.terminate()
        web.wait(10)
    return {"web_peak_rss_mb": round(peak, 1), "web_answer_p50_ms": pct(lat, 0.5),
            "web_answer_p95_ms": pct(lat, 0.95), "answers": len(lat)}


# --------------------------------------------------------------------------- run

def run(size: int | None = None, n_questions: int = 200) -> dict:
    from sqlalchemy import text

    from kbframework.hooks import registry
    from kbframework.db import get_engine
    from kbframework.retrieval import vector_index
    from kbframework.retrieval.search import forget_counts

    size = size or int(os.environ.get("KB_BENCH_SCALE_SIZE", "100000"))
    rng = random.Random(15)
    pool = sentences()
    provider = registry.embedder()
    t = time.perf_counter()
    pool_vecs = np.asarray(provider.embed_batch(pool), dtype=np.float32)
    result: dict = {"size": size, "model": provider.model, "dim": provider.dim,
                    "pool_sentences": len(pool), "embed_pool_seconds": round(time.perf_counter() - t, 1)}
    loaded = load(size, rng, pool, pool_vecs, provider.model)
    orgs = loaded["orgs"]
    result["load_seconds"] = loaded["load_seconds"]
    print(f"loaded {size} chunks in {len(orgs)} organizations by COPY in {loaded['load_seconds']} s", flush=True)
    # the product's post-load steps
    t = time.perf_counter()
    with get_engine().connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(text("VACUUM ANALYZE chunks"))
        conn.execute(text("ANALYZE documents"))
    result["analyze_seconds"] = round(time.perf_counter() - t, 1)
    t = time.perf_counter()
    built = vector_index.ensure_all()
    result["index_build_seconds"] = round(time.perf_counter() - t, 1)
    with get_engine().connect() as conn:
        st = vector_index.status(conn)
        sizes = conn.execute(text(
            "SELECT pg_relation_size('chunks'), pg_total_relation_size('chunks'), "
            "pg_relation_size('ix_chunks_org_tsv')")).first()
    result["indexes"] = st
    result["index_mb"] = round(sum(r["bytes"] for r in st) / 1048576, 1)
    result["chunks_heap_mb"] = round(sizes[0] / 1048576, 1)
    result["chunks_total_mb"] = round(sizes[1] / 1048576, 1)
    result["fulltext_index_mb"] = round(sizes[2] / 1048576, 1)
    print(f"post-load: analyze {result['analyze_seconds']} s, HNSW build {result['index_build_seconds']} s "
          f"({result['index_mb']} MB; {built}); heap {result['chunks_heap_mb']} MB, "
          f"total with TOAST and indexes {result['chunks_total_mb']} MB", flush=True)
    forget_counts()
    questions = [pool[rng.randrange(len(pool))][:80] for _ in range(n_questions)]
    raw = _raw_conn()
    classes = {}
    for cls in ("large", "medium", "small"):
        members = [o for o in orgs if o["class"] == cls]
        for q in questions[:5]:  # warm the caches the way a running server has them
            retrieve(members[0]["id"], q)
        lat, floor, recall, floor_recall, trap, plans = [], [], [], [], [], set()
        for i, q in enumerate(questions):
            o = members[i % len(members)]
            t = time.perf_counter()
            hits, info = retrieve(o["id"], q)
            lat.append((time.perf_counter() - t) * 1000)
            if not info:
                continue
            plans.add(info["plan"])
            ms, floor_ids = floor_queries(raw, o["id"], provider.model, provider.dim, info["vec"], q, info["plan"],
                                          info.get("ef"))
            floor.append(ms)
            exact = set(exact_top(raw, o["id"], provider.model, info["vec"]))
            if info["plan"] == "hnsw":  # the known trap, for contrast: the same index without iterative scans
                trap.append(len(exact & set(trap_top(raw, o["id"], provider.model, provider.dim, info["vec"])))
                            / max(1, len(exact)))
            if exact:
                recall.append(len(exact & {h.chunk_id for h in hits}) / len(exact))
                floor_recall.append(len(exact & set(floor_ids)) / len(exact))
        c = {"organizations": len(members), "chunks_each": members[0]["chunks"],
             "p50_ms": pct(lat, 0.5), "p95_ms": pct(lat, 0.95),
             "floor_p50_ms": pct(floor, 0.5), "floor_p95_ms": pct(floor, 0.95),
             "ratio_p95": round(pct(lat, 0.95) / pct(floor, 0.95), 2) if floor else None,
             "recall_at_20": round(statistics.mean(recall), 4) if recall else None,
             "recall_at_20_min": round(min(recall), 4) if recall else None,
             "floor_recall_at_20": round(statistics.mean(floor_recall), 4) if floor_recall else None,
             "recall_at_20_without_iterative_scan": round(statistics.mean(trap), 4) if trap else None,
             "plans": sorted(p for p in plans if p)}
        classes[cls] = c
        print(f"{cls:6s} ({c['organizations']} × {c['chunks_each']} chunks): p50 {c['p50_ms']} ms, "
              f"p95 {c['p95_ms']} ms; floor p95 {c['floor_p95_ms']} ms (ratio {c['ratio_p95']}); "
              f"recall@20 {c['recall_at_20']} (min {c['recall_at_20_min']}; bare halfvec SQL "
              f"{c['floor_recall_at_20']}; without iterative scan {c['recall_at_20_without_iterative_scan']}), "
              f"plan {c['plans']}", flush=True)
    raw.close()
    result["classes"] = classes
    result["bench_process_peak_rss_mb"] = round(rss_peak_mb(os.getpid()), 1)
    try:
        result["ingestion"] = ingestion(rng, pool)
    except Exception as exc:
        result["ingestion"] = {"error": f"{type(exc).__name__}: {exc}"}
    try:
        result["web"] = web_rss(orgs, questions)
        print(f"web: peak RSS {result['web']['web_peak_rss_mb']} MB, answer p95 over HTTP "
              f"{result['web']['web_answer_p95_ms']} ms", flush=True)
    except Exception as exc:
        result["web"] = {"error": f"{type(exc).__name__}: {exc}"}
    result["targets"] = {"p95_ms": 50, "recall_at_20": 0.95, "ratio_p95": 1.5, "ingestion_ratio": 0.7,
                         "peak_rss_mb": 600}
    return result
