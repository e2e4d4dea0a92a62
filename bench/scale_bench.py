"""Retrieval at scale, measured on the product as shipped (issue 15).

101 organizations in the product's own tables: one holding 40% of the chunks, ten at 4.5%
each, ninety small ones sharing the rest (at least 100 chunks each). Chunk texts are
realistic generated text (ten sentences of the shared retrieval corpus each); their vectors
come from the offline embedder: every sentence is embedded once and a chunk's vector is
the normalised mean of its sentences' vectors (WordLlama itself is a mean of token
vectors, so this is what it would return for the chunk, give or take weighting), which
keeps a 1M-chunk load within minutes on two cores. Rows go in by binary COPY into the
migrated schema; then the product's post-load step runs and nothing else:
``vector_index.ensure_all`` (what ``kbf db indexes --build`` does: each model's index, then
``VACUUM (ANALYZE)`` of chunks and documents); no warm-up, no setting the product does not make.

Per organization class: p50/p95 of 200 questions through the product's own answer steps
(``retrieval.steps``) in the visitor's organization scope, the retrieval steps timed by the
product's trace (pre-filter, query embedding, vector leg with the keyword leg beside it,
RRF); recall@20 of the vector leg against an exact full-precision scan of that organization;
the raw SQL floor: the legs' own statements, caught as the driver received them and replayed
on plain connections in the same role and scope, concurrently as the product runs them, and
the ratio; the same question through the product again (the replay reads pages the product's
first run brought into the shared buffers, so the first ratio charges the product every first
read; the second compares the two with the cache alike); index build time and size; ingestion end to end through a real
`kbf worker` against the embedder alone on the same chunks; peak RSS of the worker and
of a gunicorn web process answering questions. Size: ``KB_BENCH_SCALE_SIZE`` (default
100,000; ``make bench-scale SIZE=1000000``); questions per class ``KB_BENCH_SCALE_QUESTIONS``
(default 200); ``KB_BENCH_SCALE_SWEEP=1`` adds the recall-against-cost sweep.
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

class LegStatements:
    """The statements the two legs send, exactly as the driver receives them (text and
    parameters), caught on the product's engine so the floor replays the very same SQL."""

    def __init__(self):
        from sqlalchemy import event

        from kbframework.db import get_engine, get_side_read_engine

        self.seen: list[tuple[str, object]] = []
        self._lock = threading.Lock()
        # the vector leg on the request's own connection, the keyword leg on a side connection
        for engine in (get_engine(), get_side_read_engine()):
            event.listen(engine, "before_cursor_execute", self._catch)

    def _catch(self, conn, cursor, statement, parameters, context, executemany):
        if "embedding_half" in statement or "tsv @@" in statement:  # the searches, not the lookups around them
            with self._lock:
                self.seen.append((statement, parameters))

    def take(self) -> dict:
        with self._lock:
            got, self.seen = self.seen, []
        return {"vector": [x for x in got if "embedding_half" in x[0]],
                "keyword": [x for x in got if "embedding_half" not in x[0]]}


def _split(names: list[str], first: str, last: str):
    from kbframework.retrieval.steps import STEPS

    i, j = names.index(first), names.index(last)
    return STEPS[:i], STEPS[i:j + 1]


def retrieve(org_id: str, q: str) -> dict:
    """One question through the product's own steps, as ``answer()`` runs them for a visitor
    of ``org_id`` (the request's organization scope, a pooled session): the steps before the
    searches (context, conversation, filters) untimed, then the retrieval steps timed — the
    expansion that starts the keyword leg on its own connection, pre-filter, place check, query
    embedding, vector leg with the keyword leg beside it, soft match, RRF — by the product's
    own trace; the usage ledger's row after them, untimed, as after a visitor's answer."""
    from kbframework import tenancy
    from kbframework.db import session_scope
    from kbframework.retrieval.steps import STEPS, Turn, run_steps

    # from the first step that searches (the expansion, which starts the keyword leg) to fusion
    before, steps = _split([st.name for st in STEPS], "expand_query", "rrf")
    t0 = time.perf_counter()
    with tenancy.organization(org_id), session_scope() as s:
        t = Turn(org_id=uuid.UUID(org_id), question=q, now=datetime.now(timezone.utc), retrieval_only=True)
        run_steps(s, t, before)
        t1 = time.perf_counter()
        run_steps(s, t, steps)
        t2 = time.perf_counter()
        run_steps(s, t, [st for st in STEPS if st.name == "record_usage"])  # after the answer, as for a visitor
    whole = (time.perf_counter() - t0) * 1000
    plans = (t.debug.get("vector") or {}).get("plans") or []
    return {"ms": (t2 - t1) * 1000, "whole_ms": whole, "steps": {r.name: r.ms for r in t.trace.steps},
            "hits": t.legs.get("vector", []), "plan": plans[0] if plans else None,
            "vec": next(iter(t.qvecs.values()))[1] if t.qvecs else None, "floor": t.ctx.floor,
            "candidates": t.candidates}


class Floor:
    """The raw SQL floor: the two legs' own statements, replayed on two plain psycopg2
    connections in the same role and organization scope as the product's (so row-level
    security adds the same conditions), at the same time, as the product runs them: no
    session, no pool, no Python around them."""

    def __init__(self):
        self.conns = [_raw_conn(), _raw_conn()]
        for c in self.conns:
            with c.cursor() as cur:
                cur.execute("SET ROLE kbf_tenant")
            c.commit()

    def _run(self, conn, org_id: str, stmts, out: list, i: int):
        with conn.cursor() as cur:
            cur.execute("SELECT set_config('app.organization_id', %s, false), "
                        "set_config('app.rls_bypass', 'off', false)", (org_id,))
            conn.commit()
            t = time.perf_counter()
            for sql, params in stmts:
                cur.execute(sql, params)
                cur.fetchall()
            out[i] = (time.perf_counter() - t) * 1000
        conn.rollback()

    def measure(self, org_id: str, legs: dict) -> dict:
        out = [0.0, 0.0]
        ths = [threading.Thread(target=self._run, args=(self.conns[i], org_id, legs[name], out, i))
               for i, name in enumerate(("vector", "keyword"))]
        t = time.perf_counter()
        for th in ths:
            th.start()
        for th in ths:
            th.join()
        both = (time.perf_counter() - t) * 1000
        return {"ms": both, "vector_ms": out[0], "keyword_ms": out[1]}

    def close(self):
        for c in self.conns:
            c.close()


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


def exact_top(conn, org_id: str, model: str, vec, floor: float = 0.0) -> list[int]:
    """The organization's true top 20 by full-precision cosine similarity (those the
    product's similarity floor would keep)."""
    lit = "[" + ",".join(f"{float(x):.6g}" for x in vec) + "]"
    with conn.cursor() as cur:
        cur.execute("SELECT id, 1 - (embedding <=> %s::vector) FROM chunks WHERE organization_id = %s "
                    "AND embedding_model = %s ORDER BY embedding <=> %s::vector LIMIT 20", (lit, org_id, model, lit))
        ids = [r[0] for r in cur.fetchall() if r[1] >= floor]
    conn.rollback()
    return ids


# --------------------------------------------------------------------------- ingestion

def ingestion(rng: random.Random, pool: list[str], orgs: list[dict], n_docs: int = 1500) -> dict:
    """Product ingestion through a real `kbf worker --burst` (documents saved as a sync saves
    them, queued by `queue_ingest` in the sync's batches) against the embedder alone on the
    chunks it wrote, into this table: into new organizations (below the exact-scan size, no
    vector index takes their rows) and into the large organization (its own HNSW index takes
    every new row). The measurement is bench.ingest_bench's, three runs each, the median
    reported; with one worker process, and with one per core as `kbf run` starts them."""
    from bench.ingest_bench import repeated

    large = next(o["id"] for o in orgs if o["class"] == "large")
    per_core = min(4, os.cpu_count() or 1)
    return {"new_organization": repeated(rng, pool, n_docs, "scale"),
            "large_organization": repeated(rng, pool, n_docs, "scale-large", org_id=large),
            "new_organization_one_process_per_core": repeated(rng, pool, n_docs, "scale-pool", processes=per_core),
            "large_organization_one_process_per_core": repeated(rng, pool, n_docs, "scale-large-pool",
                                                                org_id=large, processes=per_core)}


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


# --------------------------------------------------------------------------- recall against cost

SWEEP = [(2, 100, "relaxed_order"), (2, 200, "relaxed_order"), (2, 300, "relaxed_order"), (2, 400, "relaxed_order"),
         (3, 200, "relaxed_order"), (4, 200, "relaxed_order"), (2, 200, "strict_order"), (2, 600, "relaxed_order")]


def sweep(orgs: list[dict], questions: list[str], model: str, dim: int, cls: str = "large") -> list[dict]:
    """The HNSW vector statement of one class for each (re-rank factor, ef_search, iterative
    scan mode): recall@20 against the exact scan and its latency, replayed as the floor is
    (``KB_BENCH_SCALE_SWEEP=1``)."""
    from kbframework.hooks import registry
    from kbframework.retrieval.search import Prefilter, vector_sql

    members = [o for o in orgs if o["class"] == cls]
    vecs = registry.embedder().embed_batch(questions)
    raw = _raw_conn()
    exact = [set(exact_top(raw, members[i % len(members)]["id"], model, v)) for i, v in enumerate(vecs)]
    raw.close()
    floor_conns = Floor()
    conn = floor_conns.conns[0]
    out = []
    for factor, ef, mode in SWEEP:
        lat, rec = [], []
        for i, v in enumerate(vecs):
            o = members[i % len(members)]
            pf = Prefilter(organization_id=o["id"], now=datetime.now(timezone.utc))
            sql, p, _ = vector_sql(pf, model, dim, v, 20, "hnsw", ef_search=ef, rerank_factor=factor, iterative=mode)
            stmt = _driver_sql(sql, p)
            with conn.cursor() as cur:
                cur.execute("SELECT set_config('app.organization_id', %s, false)", (o["id"],))
                t = time.perf_counter()
                cur.execute(*stmt)
                ids = {r[0] for r in cur.fetchall()}
                lat.append((time.perf_counter() - t) * 1000)
            conn.rollback()
            if exact[i]:
                rec.append(len(ids & exact[i]) / len(exact[i]))
        row = {"rerank_factor": factor, "ef_search": ef, "iterative_scan": mode,
               "recall_at_20": round(statistics.mean(rec), 4), "recall_at_20_min": round(min(rec), 4),
               "p50_ms": pct(lat, 0.5), "p95_ms": pct(lat, 0.95)}
        out.append(row)
        print(f"sweep {cls}: re-rank {factor}×k, ef_search {ef}, {mode}: recall@20 {row['recall_at_20']} "
              f"(min {row['recall_at_20_min']}), p50 {row['p50_ms']} ms, p95 {row['p95_ms']} ms", flush=True)
    floor_conns.close()
    return out


def _driver_sql(sql: str, params: dict) -> tuple[str, dict]:
    """A product statement compiled as the driver receives it (expanding IN lists rendered)."""
    from sqlalchemy.dialects import postgresql

    from kbframework.retrieval.search import bind

    compiled = bind(sql, params).bindparams(**params).compile(dialect=postgresql.psycopg2.dialect(),
                                                              compile_kwargs={"render_postcompile": True})
    return str(compiled), compiled.params


# --------------------------------------------------------------------------- run

def measure_classes(orgs: list[dict], questions: list[str], model: str, dim: int,
                    only: tuple[str, ...] = ("large", "medium", "small")) -> dict:
    """Per organization class: the product's retrieval latency, the floor beside it, recall."""
    caught = LegStatements()
    floor_conns = Floor()
    raw = _raw_conn()
    classes = {}
    for cls in only:
        members = [o for o in orgs if o["class"] == cls]
        lat, whole, floor, recall, trap, plans, steps, again = [], [], [], [], [], set(), {}, []
        first, later, first_steps = [], [], {}
        for i, q in enumerate(questions):  # no warm-up: the first question pays what a first visitor pays
            o = members[i % len(members)]
            caught.take()
            r = retrieve(o["id"], q)
            legs = caught.take()
            lat.append(r["ms"])
            # the process's first question to this organization, apart: what a fresh process pays once
            if i < len(members):
                first.append(r["ms"])
                for name, ms in r["steps"].items():
                    first_steps.setdefault(name, []).append(ms or 0.0)
            else:
                later.append(r["ms"])
            whole.append(r["whole_ms"])
            for name, ms in r["steps"].items():
                steps.setdefault(name, []).append(ms or 0.0)
            if r["plan"] is None:
                continue
            plans.add(r["plan"]["access"])
            floor.append(floor_conns.measure(o["id"], legs))
            exact = set(exact_top(raw, o["id"], model, r["vec"], r["floor"]))
            if r["plan"]["plan"] == "hnsw":  # the known trap, for contrast: the same index without iterative scans
                trap.append(len(exact & set(trap_top(raw, o["id"], model, dim, r["vec"]))) / max(1, len(exact)))
            if exact:
                recall.append(len(exact & {h.chunk_id for h in r["hits"]}) / len(exact))
            # the same question again through the product: its pages as warm as the floor's
            # replay found them, so product against floor with the cache state alike
            again.append(retrieve(o["id"], q)["ms"])
            caught.take()
        f_both = [f["ms"] for f in floor]
        c = {"organizations": len(members), "chunks_each": members[0]["chunks"],
             "p50_ms": pct(lat, 0.5), "p95_ms": pct(lat, 0.95),
             "whole_turn_p50_ms": pct(whole, 0.5), "whole_turn_p95_ms": pct(whole, 0.95),
             "floor_p50_ms": pct(f_both, 0.5), "floor_p95_ms": pct(f_both, 0.95),
             "floor_vector_p95_ms": pct([f["vector_ms"] for f in floor], 0.95),
             "floor_keyword_p95_ms": pct([f["keyword_ms"] for f in floor], 0.95),
             "ratio_p95": round(pct(lat, 0.95) / pct(f_both, 0.95), 2) if floor else None,
             "again_p50_ms": pct(again, 0.5), "again_p95_ms": pct(again, 0.95),
             "ratio_p95_again": round(pct(again, 0.95) / pct(f_both, 0.95), 2) if floor and again else None,
             "steps_p95_ms": {name: pct(v, 0.95) for name, v in steps.items()},
             "first_questions": len(first), "first_question_p50_ms": pct(first, 0.5),
             "first_question_steps_p50_ms": {name: pct(v, 0.5) for name, v in first_steps.items()},
             "later_p50_ms": pct(later, 0.5), "later_p95_ms": pct(later, 0.95),
             "recall_at_20": round(statistics.mean(recall), 4) if recall else None,
             "recall_at_20_min": round(min(recall), 4) if recall else None,
             "recall_at_20_without_iterative_scan": round(statistics.mean(trap), 4) if trap else None,
             "plans": sorted(plans)}
        classes[cls] = c
        print(f"{cls:6s} ({c['organizations']} × {c['chunks_each']} chunks): p50 {c['p50_ms']} ms, "
              f"p95 {c['p95_ms']} ms (whole turn to fusion {c['whole_turn_p95_ms']} ms); floor p95 "
              f"{c['floor_p95_ms']} ms (vector {c['floor_vector_p95_ms']}, keyword {c['floor_keyword_p95_ms']}; "
              f"ratio {c['ratio_p95']}; the same questions again p50 {c['again_p50_ms']} / p95 {c['again_p95_ms']} ms, "
              f"ratio {c['ratio_p95_again']}); recall@20 {c['recall_at_20']} (min {c['recall_at_20_min']}; "
              f"without iterative scan {c['recall_at_20_without_iterative_scan']}), plan {c['plans']}; "
              f"steps p95 {c['steps_p95_ms']}; the {c['first_questions']} first questions to an organization "
              f"p50 {c['first_question_p50_ms']} ms (steps {c['first_question_steps_p50_ms']}), the others p50 "
              f"{c['later_p50_ms']} / p95 {c['later_p95_ms']} ms", flush=True)
    raw.close()
    floor_conns.close()
    return classes


def run(size: int | None = None, n_questions: int = 200) -> dict:
    from kbframework.hooks import registry

    size = size or int(os.environ.get("KB_BENCH_SCALE_SIZE", "100000"))
    n_questions = int(os.environ.get("KB_BENCH_SCALE_QUESTIONS", n_questions))
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
    if os.environ.get("KB_BENCH_DATA_DIR"):  # a kept load: what after_load needs to measure it again
        (Path(os.environ["KB_BENCH_DATA_DIR"]) / "scale-orgs.json").write_text(json.dumps(orgs, default=str))
    return after_load(result, orgs, rng, pool, provider, n_questions)


def after_load(result: dict, orgs: list[dict], rng: random.Random, pool: list[str], provider,
               n_questions: int) -> dict:
    """Everything after the COPY: the product's post-load step, then the measurements (a
    dataset loaded once by ``load`` can be measured again after a change)."""
    from sqlalchemy import text

    from kbframework.db import get_engine
    from kbframework.retrieval import vector_index

    # the product's post-load step, and nothing else: `kbf db indexes --build` (each model's
    # index, then VACUUM (ANALYZE) of chunks and documents), as a user's load gets it
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
    print(f"post-load: the organizations' HNSW and full-text indexes, VACUUM (ANALYZE), word counts {result['index_build_seconds']} s "
          f"({result['index_mb']} MB; {built}); heap {result['chunks_heap_mb']} MB, "
          f"total with TOAST and indexes {result['chunks_total_mb']} MB", flush=True)
    questions = [pool[rng.randrange(len(pool))][:80] for _ in range(n_questions)]
    result["classes"] = measure_classes(orgs, questions, provider.model, provider.dim)
    if os.environ.get("KB_BENCH_SCALE_SWEEP"):
        result["sweep_large"] = sweep(orgs, questions, provider.model, provider.dim)
    result["bench_process_peak_rss_mb"] = round(rss_peak_mb(os.getpid()), 1)
    try:
        result["ingestion"] = ingestion(rng, pool, orgs)
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
