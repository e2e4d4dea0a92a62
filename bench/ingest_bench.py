"""Ingestion end to end against the embedder alone on the same texts (issue 15: ≥ 0.7×).

End to end is the product as a user gets it: documents saved the way a sync saves them,
queued by the product's own ``queue_ingest`` in the sync's batch size, indexed by a real
``kbf worker --burst`` process on the real Redis queue and PostgreSQL. The time is the ingest
jobs' own span in RQ's records (the first job's start to the last one's end), so the
worker's start-up (imports, plugins) is shown apart; the jobs a load leaves behind it (the
statistics refresh, the build of a new model's vector index) are timed apart as well.

The floor is the embedder alone in this process on exactly the chunks the worker wrote
(read back): ``embed_texts`` with the same provider in the same batches the worker embedded
(each job's parts, from the documents' traces), and, apart, in a single call; median of
three runs each, after a warm-up. The ratio is floor time ÷ end-to-end time.

Beside it, the database's own least work for the same rows: they are inserted again by a
single ``INSERT … SELECT`` (full-text vector, half-precision copy, every index) in a rolled-back
transaction. And the ratio the machine's cores allow for the CPU seconds both processes spent
(``cpu_bound_ratio``): when PostgreSQL needs about as much CPU a chunk as the embedder, two
cores cannot reach 0.7× however well the two overlap.

Wall times on a shared machine move with its load, so CPU seconds are counted too: the
worker process's (every thread), the embedded PostgreSQL's (every process of the server:
backends, autovacuum, WAL writer) and the floor's; their quotient does not depend on what
else the machine runs, and says what a dedicated machine's cores could reach.

Each load goes into a new organization, below the exact-scan size, so no vector index takes
its rows (the product gives an organization its own index only once it outgrows an exact
scan); ``scale_bench`` runs the same measurement on its table, into new organizations and
into the large organization, whose own HNSW index takes every new row.
"""
from __future__ import annotations

import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench.core_bench import make_docs, rss_peak_mb, sentences


def _create(n_docs: int, rng: random.Random, pool: list[str], label: str,
            org_id: str | None = None) -> tuple[str, list[str]]:
    from kbframework.db import session_scope
    from kbframework.orgs.accounts import create_org, ensure_source
    from kbframework.sources.apply import apply_draft
    from kbframework.types import DocumentDraft

    stamp = time.time_ns()
    with session_scope() as s:
        if org_id is None:
            org_id = create_org(s, f"Ingest {label} {stamp}", "Europe/Belgrade", f"ingest-{label}-{stamp}").id
        src = ensure_source(s, org_id, "manual", "Manual knowledge")
        ids = []
        for i, (title, body) in enumerate(make_docs(n_docs, rng, pool)):
            # the batched path syncs use: no existing row to look up, one flush per batch
            d, _ = apply_draft(s, src, DocumentDraft(title=title, normalized_content=body, type="manual",
                                                     document_role="manual", external_id=f"{label}-{stamp}-{i}"),
                               doc=None, flush=False)
            ids.append(str(d.id))
        return str(org_id), ids


def _jobs_since(t0_wall: float) -> list:
    from rq.registry import FailedJobRegistry, FinishedJobRegistry

    from kbframework.jobs.queues import queue

    q = queue("ingest")
    out = []
    for reg in (FinishedJobRegistry(queue=q), FailedJobRegistry(queue=q)):
        for jid in reg.get_job_ids():
            job = q.fetch_job(jid)
            if job and job.started_at and job.ended_at and job.started_at.timestamp() >= t0_wall - 1:
                out.append(job)
    return out


def _ticks(stat: str) -> tuple[int, int]:
    """(own utime+stime, waited-for children's) in clock ticks from a /proc/<pid>/stat line."""
    f = stat[stat.rindex(")") + 2:].split()
    return int(f[11]) + int(f[12]), int(f[13]) + int(f[14])


def postgres_cpu() -> float | None:
    """CPU seconds the embedded PostgreSQL has used so far: the postmaster, every live child
    and every child that has exited (counted in the postmaster's children's times)."""
    from kbframework.config import get_config
    from kbframework.embedded.postgres import pg_dir, postmaster_info

    cfg = get_config()
    info = None if cfg.database_url else postmaster_info(pg_dir(cfg))
    if not info:
        return None
    root = info["pid"]
    total = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        pid, ppid = int(entry.name), int(stat[stat.rindex(")") + 2:].split()[1])
        if pid == root:
            own, children = _ticks(stat)
            total += own + children
        elif ppid == root:
            total += _ticks(stat)[0]
    return total / os.sysconf("SC_CLK_TCK")


def process_cpu(pid: int) -> float | None:
    """CPU seconds of a worker: the process, its live children (a ``--processes`` pool's
    workers) and the children it has already waited for."""
    try:
        own, waited = _ticks(Path(f"/proc/{pid}/stat").read_text())
    except OSError:
        return None
    return (own + waited + sum(_ticks(Path(f"/proc/{k}/stat").read_text())[0] for k in _children(pid))) \
        / os.sysconf("SC_CLK_TCK")


def _children(pid: int) -> list[int]:
    kids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat[stat.rindex(")") + 2:].split()[1]) == pid:
                kids.append(int(entry.name))
    return kids


def _at(samples: list[tuple], when: float, col: int, after: bool):
    """The sampled value nearest to ``when``: the last before it, or the first after it."""
    vals = [x for x in samples if x[col] is not None]
    pick = [x for x in vals if x[0] >= when] if after else [x for x in vals if x[0] <= when]
    if not pick:
        return None
    return (pick[0] if after else pick[-1])[col]


def breakdown(jobs: list) -> dict:
    """Seconds per step summed over the jobs, from the steps each document's result records:
    chunk (with loading, normalizing, hashing and the content scan), embed and write (a
    batch's time shared among its documents by their chunks). The writes run in their own
    thread, beside the next batch's chunking and embedding."""
    total = {"chunk": 0.0, "embed": 0.0, "write": 0.0}
    for job in jobs:
        for r in (job.return_value() or {}).get("results", []):
            for st in r.get("steps") or []:
                name = {"chunk": "chunk", "embed": "embed", "replace": "write"}.get(st.get("step"))
                if name and st.get("ms") is not None:
                    share = st.get("chunks", 1) / st["batch_chunks"] if st.get("batch_chunks") else 1.0
                    total[name] += st["ms"] * share / 1000
    return {k: round(v, 2) for k, v in total.items()}


def measure(rng: random.Random, pool: list[str], n_docs: int = 1500, label: str = "load",
            per_job: int | None = None, org_id: str | None = None, processes: int = 1) -> dict:
    """One load through a real worker (``kbf worker --processes N``), and the embedder alone
    on the texts it wrote; into a new organization unless ``org_id`` names one."""
    from sqlalchemy import text

    from kbframework.db import session_scope
    from kbframework.hooks import registry
    from kbframework.ingest.embedding import embed_texts
    from kbframework.ingest.pipeline import embedding_input
    from kbframework.ingest.queue import JOB_DOCUMENTS, queue_ingest
    from kbframework.types import ChunkDraft

    per_job = per_job or JOB_DOCUMENTS  # as a sync queues them
    org_id, ids = _create(n_docs, rng, pool, label, org_id)
    t0_wall = time.time()
    jobs = [queue_ingest(ids[k:k + per_job]) for k in range(0, len(ids), per_job)]
    kbf = str(Path(sys.executable).parent / "kbf")
    t0 = time.perf_counter()
    w = subprocess.Popen([kbf, "worker", "--burst", "--queues", "ingest", "--processes", str(processes)])
    peak = 0.0
    samples = []  # (wall clock, PostgreSQL CPU s, worker CPU s), to take the jobs' span out
    while w.poll() is None:
        peak = max([peak, rss_peak_mb(w.pid), *(rss_peak_mb(k) for k in _children(w.pid))])
        samples.append((time.time(), postgres_cpu(), process_cpu(w.pid)))
        time.sleep(0.1)
    elapsed = time.perf_counter() - t0
    ours = {j.id for j in jobs}
    done = _jobs_since(t0_wall)
    ingest = [j for j in done if j.id in ours]
    after = [j for j in done if j.id not in ours]  # what the load queued behind it
    if len(ingest) != len(ours):
        raise RuntimeError(f"{len(ours) - len(ingest)} of {len(ours)} ingest jobs did not finish")
    start = min(j.started_at for j in ingest)
    end = max(j.ended_at for j in ingest)
    span = (end - start).total_seconds()
    after_s = sum((j.ended_at - j.started_at).total_seconds() for j in after)
    cpu = {}
    for name, col in (("worker", 2), ("postgres", 1)):
        a, b = _at(samples, start.timestamp(), col, after=False), _at(samples, end.timestamp(), col, after=True)
        cpu[name] = round(b - a, 2) if a is not None and b is not None else None
    with session_scope() as s:
        # this load's documents only: the organization may hold many more (the scale bench's large one)
        rows = s.execute(text(
            "SELECT c.document_id::text, c.heading, c.content FROM chunks c WHERE c.organization_id = :o "
            "AND c.document_id = ANY(CAST(:ids AS uuid[])) ORDER BY c.id"), {"o": org_id, "ids": ids}).all()
        states = dict(s.execute(text("SELECT status, count(*) FROM documents WHERE organization_id = :o "
                                     "AND id = ANY(CAST(:ids AS uuid[])) GROUP BY status"),
                                {"o": org_id, "ids": ids}).all())
    # the same texts in the batches the worker embedded them in: (job, part) from each trace
    part_of = {}
    for ji, job in enumerate(ingest):
        for r in (job.return_value() or {}).get("results", []):
            emb = [st for st in r.get("steps") or [] if st.get("step") == "embed"]
            part_of[r["document_id"]] = (ji, emb[-1].get("part", 0) if emb else 0)
    batches: dict = {}
    for did, heading, content in rows:
        batches.setdefault(part_of.get(did), []).append(
            embedding_input(ChunkDraft(index=0, heading=heading, content=content, token_count=0)))
    groups = list(batches.values())
    provider = registry.embedder()
    embed_texts(provider, groups[0][:8])  # the model loaded, as it is in a worker that has run a job

    cpu_runs = []

    def timed(fn) -> float:
        runs = []
        for _ in range(3):
            t, c = time.perf_counter(), time.process_time()
            fn()
            runs.append(time.perf_counter() - t)
            cpu_runs.append(time.process_time() - c)
        return statistics.median(runs)

    same_batches = timed(lambda: [embed_texts(provider, g) for g in groups])
    floor_cpu = statistics.median(cpu_runs)
    one_call = timed(lambda: embed_texts(provider, [t for g in groups for t in g]))
    pg_floor = database_floor(org_id, ids)
    n = len(rows)
    both = (cpu.get("worker") or 0) + (cpu.get("postgres") or 0)
    out = {"documents": n_docs, "documents_per_job": per_job, "worker_processes": processes,
           "jobs": len(ingest), "chunks": n,
           "document_states": states,
           "end_to_end_seconds": round(span, 2), "end_to_end_chunks_per_s": round(n / span, 1),
           "embedder_alone_seconds": round(same_batches, 2),
           "embedder_alone_chunks_per_s": round(n / same_batches, 1),
           "embedder_alone_one_call_chunks_per_s": round(n / one_call, 1), "embed_batches": len(groups),
           "ratio": round(same_batches / span, 3), "ratio_vs_one_call": round(one_call / span, 3),
           "with_worker_start_seconds": round(elapsed, 2),
           "ratio_with_worker_start": round(same_batches / elapsed, 3),
           "jobs_after_the_load": sorted({j.func_name.rsplit(".", 1)[-1] for j in after}),
           "jobs_after_the_load_seconds": round(after_s, 2),
           # CPU seconds over the jobs' span (sampled every 0.1 s), which the machine's other
           # work does not inflate
           "cpu_seconds": {**cpu, "embedder_alone": round(floor_cpu, 2)},
           # PostgreSQL's own least work for these rows: the same chunks inserted again by one
           # INSERT … SELECT (tsvector, half-precision copy, every index), rolled back
           "database_alone": pg_floor,
           # the best ratio this machine's cores allow for the CPU both processes spent: the
           # embedder alone against the span their CPU seconds fill on every core
           "cpu_bound_ratio": round(min(1.0, same_batches / (both / (os.cpu_count() or 1))), 3) if both else None,
           "seconds_by_step": breakdown(ingest),
           # the jobs' own time summed; what the span has beyond it is the worker between jobs
           "seconds_in_jobs": round(sum((j.ended_at - j.started_at).total_seconds() for j in ingest), 2),
           "worker_peak_rss_mb": round(peak, 1), "load_average": [round(x, 1) for x in os.getloadavg()]}
    print(f"ingestion ({label}, {n} chunks, {per_job} documents a job, {processes} worker process(es)): {out['end_to_end_chunks_per_s']} chunks/s "
          f"end to end vs {out['embedder_alone_chunks_per_s']} embedder alone → {out['ratio']}× "
          f"({out['ratio_vs_one_call']}× against one embed call; {out['ratio_with_worker_start']}× counting the "
          f"worker's start); by step {out['seconds_by_step']} s, in jobs {out['seconds_in_jobs']} s of {span:.2f}; "
          f"CPU s {out['cpu_seconds']} (the cores allow at most {out['cpu_bound_ratio']}×; the database alone "
          f"{pg_floor.get('cpu_seconds')} CPU s for the same rows); after the load "
          f"{out['jobs_after_the_load']} {after_s:.1f} s; worker peak "
          f"{peak:.0f} MB; load {out['load_average']}", flush=True)
    return out


def database_floor(org_id: str, ids: list[str]) -> dict:
    """PostgreSQL alone on this load's rows: they are inserted again by one statement in a
    transaction that is rolled back, timed by the server's CPU seconds (every process of it)
    and the statement's wall time."""
    from sqlalchemy import text

    from kbframework.db import get_engine
    from kbframework.ingest.chunk_rows import COLUMNS

    cols = ", ".join(COLUMNS)
    with get_engine().connect() as conn:
        a, t = postgres_cpu(), time.perf_counter()
        n = conn.execute(text(f"INSERT INTO chunks ({cols}) SELECT {cols} FROM chunks WHERE organization_id = :o "
                              "AND document_id = ANY(CAST(:ids AS uuid[]))"), {"o": org_id, "ids": ids}).rowcount
        wall, b = time.perf_counter() - t, postgres_cpu()
        conn.rollback()
    return {"rows": n, "seconds": round(wall, 2),
            "cpu_seconds": round(b - a, 2) if a is not None and b is not None else None}


def repeated(rng: random.Random, pool: list[str], n_docs: int, label: str, times: int = 3,
             org_id: str | None = None, processes: int = 1) -> dict:
    """``measure`` several times (the machine's load moves between the two halves of one
    measurement); the run with the median ratio, and every run's ratio."""
    runs = [measure(rng, pool, n_docs, f"{label}{i + 1}", org_id=org_id, processes=processes) for i in range(times)]
    mid = sorted(runs, key=lambda r: r["ratio"])[len(runs) // 2]
    out = {**mid, "ratios": [r["ratio"] for r in runs], "runs": len(runs)}
    print(f"ingestion ({label}): median ratio {mid['ratio']}× of {out['ratios']}", flush=True)
    return out


def run(n_docs: int | None = None) -> dict:
    n_docs = n_docs or int(os.environ.get("KB_BENCH_INGEST_DOCS", "1500"))
    rng = random.Random(5)
    pool = sentences()
    loads = repeated(rng, pool, n_docs, "load")  # new organizations: no vector index takes their rows
    # as `kbf run` starts them on this machine: one worker process per core, up to four
    pooled = repeated(rng, pool, n_docs, "pool", processes=min(4, os.cpu_count() or 1))
    single = measure(rng, pool, max(50, n_docs // 10), "single", per_job=1)  # as the admin's note form queues them
    return {"loads": loads, "loads_one_process_per_core": pooled, "one_document_per_job": single,
            "target_ratio": 0.7}
