"""The product builds and shows its own vector indexes, and the HNSW path (iterative index
scan, exact re-rank) returns what an exact scan of the organization returns."""
import json
import os
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

KBF = str(Path(sys.executable).parent / "kbf")


def kbf(*args, env, check=True):
    r = subprocess.run([KBF, *args], capture_output=True, text=True, env={**os.environ, **env}, timeout=300)
    if check and r.returncode != 0:
        raise AssertionError(f"kbf {' '.join(args)} failed ({r.returncode}): {r.stderr}{r.stdout}")
    return r


def _seed(org_id, n=60):
    from kbframework.db import session_scope
    from kbframework.ingest.pipeline import ingest_documents
    from kbframework.orgs.accounts import ensure_source
    from kbframework.sources.apply import apply_draft
    from kbframework.types import DocumentDraft

    topics = ["return policy and refunds", "shipping to Serbia and Croatia", "techno night at the bunker",
              "red summer dress in cotton", "opening hours on Sunday", "gift cards and vouchers"]
    with session_scope() as s:
        src = ensure_source(s, org_id, "manual", "Manual knowledge")
        ids = []
        for i in range(n):
            body = f"# Note {i}\n\nAll about {topics[i % len(topics)]}, variant {i}. " * 3
            d, _ = apply_draft(s, src, DocumentDraft(title=f"Note {i}", normalized_content=body, type="manual",
                                                     document_role="manual", external_id=f"n{i}"), doc=None)
            ids.append(str(d.id))
    return ingest_documents(ids)


def test_ingestion_queues_the_index_and_kbf_db_indexes_shows_and_rebuilds_it(kb_org, kb_drain, kb_services):
    from sqlalchemy import text

    from kbframework.db import get_engine
    from kbframework.hooks import registry
    from kbframework.retrieval import vector_index

    env = {"KB_DATA_DIR": str(kb_services.data_dir), "DATABASE_URL": "", "REDIS_URL": ""}
    model = registry.embedder().model
    name = vector_index.index_name(model)
    with get_engine().connect() as conn:  # a clean slate: earlier tests' models left their indexes
        for (old,) in conn.execute(text("SELECT indexname FROM pg_indexes WHERE tablename = 'chunks' "
                                        "AND indexname LIKE 'ix_chunks_hnsw_%'")).all():
            conn.execute(text(f"DROP INDEX IF EXISTS {old}"))
        conn.commit()
    vector_index.forget()
    assert all(r.action == "indexed" for r in _seed(kb_org["id"]))
    rows = json.loads(kbf("db", "indexes", "--json", env=env).stdout)
    assert [(r["name"], r["state"]) for r in rows] == [(name, "missing")]
    kb_drain()  # the worker builds it, behind the load
    rows = json.loads(kbf("db", "indexes", "--json", env=env).stdout)
    assert [(r["name"], r["model"], r["dim"], r["state"]) for r in rows] == [(name, model, 256, "valid")]
    assert rows[0]["bytes"] > 0
    with get_engine().connect() as conn:
        definition = conn.execute(text("SELECT pg_get_indexdef(CAST(:n AS regclass))"), {"n": name}).scalar()
    assert "hnsw" in definition and "halfvec(256)" in definition and model in definition
    out = kbf("db", "indexes", "--rebuild", name, env=env).stdout
    assert f"rebuilt {name}" in out and "valid" in out
    r = kbf("db", "indexes", "--rebuild", "ix_nope", env=env, check=False)
    assert r.returncode != 0 and "No vector index named 'ix_nope'" in r.stderr and "Traceback" not in r.stderr


def test_hnsw_path_with_iterative_scan_matches_the_exact_scan(kb_org, kb_drain):
    from kbframework.db import session_scope
    from kbframework.hooks import registry
    from kbframework.retrieval import vector_index
    from kbframework.retrieval.search import Prefilter, forget_counts, vector_search

    _seed(kb_org["id"])
    kb_drain()
    forget_counts()
    provider = registry.embedder()
    vec = provider.embed_batch(["can I return a dress I bought?"])[0]
    with session_scope() as s:
        assert vector_index.has_index(s, provider.model)
        pf = Prefilter(organization_id=kb_org["id"], now=datetime.now(timezone.utc))
        exact, plan_e = vector_search(s, pf, provider.model, provider.dim, vec, k=10, force="exact")
        hnsw, plan_h = vector_search(s, pf, provider.model, provider.dim, vec, k=10, force="hnsw")
        from sqlalchemy import text

        s.execute(text("SET LOCAL enable_seqscan = off"))  # a tiny table: show that the expression matches
        s.execute(text("SET LOCAL enable_sort = off"))
        explain = s.execute(text(
            "EXPLAIN SELECT id FROM chunks WHERE embedding_model = :m ORDER BY "
            "(embedding_half::halfvec(256)) <=> CAST(:q AS halfvec(256)) LIMIT 10"),
            {"m": provider.model, "q": "[" + ",".join(str(float(x)) for x in vec) + "]"}).all()
    assert plan_h["plan"] == "hnsw" and plan_h["iterative_scan"] == "relaxed_order" and plan_e["plan"] == "exact"
    assert any(vector_index.index_name(provider.model) in line[0] for line in explain)
    assert [h.chunk_id for h in hnsw] == [h.chunk_id for h in exact]
    assert all(abs(a.score - b.score) < 1e-6 for a, b in zip(hnsw, exact))  # re-ranked on full precision
