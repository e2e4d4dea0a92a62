"""The product builds and shows its own vector indexes, one per organization that outgrows an
exact scan, and the HNSW path (iterative index scan, exact re-rank) returns what an exact scan
of the organization returns."""
import json
import os
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest

KBF = str(Path(sys.executable).parent / "kbf")
LIMIT = 50  # KB_EXACT_SCAN_MAX_ROWS in these tests: the 60-chunk seed outgrows it, a 20-chunk one does not


@pytest.fixture(autouse=True)
def small_exact_scan(monkeypatch, kb_services):
    """An organization above 50 chunks gets its own index (the product's default is 20,000),
    in this process and in every `kbf` it starts; and no index left by an earlier test."""
    from sqlalchemy import text

    from kbframework.config import reset_config
    from kbframework.db import get_engine
    from kbframework.retrieval import vector_index

    monkeypatch.setenv("KB_EXACT_SCAN_MAX_ROWS", str(LIMIT))
    reset_config()
    with get_engine().connect() as conn:
        for (old,) in conn.execute(text("SELECT indexname FROM pg_indexes WHERE tablename = 'chunks' "
                                        "AND (indexname LIKE 'ix_chunks_hnsw_%' OR indexname LIKE 'ix_chunks_fts_%')")).all():
            conn.execute(text(f"DROP INDEX IF EXISTS {old}"))
        conn.commit()
    vector_index.forget()
    yield
    monkeypatch.delenv("KB_EXACT_SCAN_MAX_ROWS")
    reset_config()
    vector_index.forget()


def kbf(*args, env, check=True):
    r = subprocess.run([KBF, *args], capture_output=True, text=True, env={**os.environ, **env}, timeout=300)
    if check and r.returncode != 0:
        raise AssertionError(f"kbf {' '.join(args)} failed ({r.returncode}): {r.stderr}{r.stdout}")
    return r


def _env(kb_services):
    return {"KB_DATA_DIR": str(kb_services.data_dir), "DATABASE_URL": "", "REDIS_URL": "",
            "KB_EXACT_SCAN_MAX_ROWS": str(LIMIT)}


def _seed(org_id, n=60, start=0):
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
        for i in range(start, start + n):
            body = f"# Note {i}\n\nAll about {topics[i % len(topics)]}, variant {i}. " * 3
            d, _ = apply_draft(s, src, DocumentDraft(title=f"Note {i}", normalized_content=body, type="manual",
                                                     document_role="manual", external_id=f"n{i}"), doc=None)
            ids.append(str(d.id))
    return ingest_documents(ids)


def _large_and_small(large: str, kb_drain) -> str:
    """``large`` with 60 chunks, above the tests' exact-scan size, and a new organization with
    20, below it, indexed by the worker; returns the small one's id."""
    from kbframework.db import session_scope
    from kbframework.orgs.accounts import create_org
    from kbframework.retrieval.search import forget_counts

    with session_scope() as s:
        small = str(create_org(s, "Small Org", "Europe/Belgrade", "small-org").id)
    _seed(large)
    _seed(small, n=20)
    kb_drain()
    forget_counts()
    return small


def test_ingestion_queues_the_index_and_kbf_db_indexes_shows_and_rebuilds_it(kb_org, kb_drain, kb_services):
    from sqlalchemy import text

    from kbframework.db import get_engine
    from kbframework.hooks import registry
    from kbframework.retrieval import vector_index

    env = _env(kb_services)
    model = registry.embedder().model
    name = vector_index.index_name(model, kb_org["id"])
    fts = vector_index.fulltext_index_name(kb_org["id"])
    assert all(r.action == "indexed" for r in _seed(kb_org["id"]))
    rows = json.loads(kbf("db", "indexes", "--json", env=env).stdout)
    assert [(r["name"], r["organization"], r["rows"], r["state"]) for r in rows] == [
        (name, kb_org["slug"], 60, "missing"), (fts, kb_org["slug"], 60, "missing")]
    kb_drain()  # the worker builds both, behind the load
    rows = json.loads(kbf("db", "indexes", "--json", env=env).stdout)
    assert [(r["name"], r["organization_id"], r["model"], r["kind"], r["dim"], r["state"]) for r in rows] == [
        (name, kb_org["id"], model, "vector", 256, "valid"), (fts, kb_org["id"], None, "full text", None, "valid")]
    assert rows[0]["bytes"] > 0 and rows[1]["bytes"] > 0
    listing = kbf("db", "indexes", env=env).stdout
    assert name in listing and kb_org["slug"] in listing and "60 chunks" in listing and "valid" in listing
    with get_engine().connect() as conn:
        definition = conn.execute(text("SELECT pg_get_indexdef(CAST(:n AS regclass))"), {"n": name}).scalar()
    assert "hnsw" in definition and "halfvec(256)" in definition and model in definition
    assert f"organization_id = '{kb_org['id']}'::uuid" in definition
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
        assert vector_index.has_index(s, provider.model, kb_org["id"])
        pf = Prefilter(organization_id=kb_org["id"], now=datetime.now(timezone.utc))
        exact, plan_e = vector_search(s, pf, provider.model, provider.dim, vec, k=10, force="exact")
        hnsw, plan_h = vector_search(s, pf, provider.model, provider.dim, vec, k=10, force="hnsw")
        from sqlalchemy import text

        s.execute(text("SET LOCAL enable_seqscan = off"))  # a tiny table: show that the expression matches
        s.execute(text("SET LOCAL enable_sort = off"))
        explain = s.execute(text(
            "EXPLAIN SELECT id FROM chunks WHERE embedding_model = :m AND organization_id = :org ORDER BY "
            "(embedding_half::halfvec(256)) <=> CAST(:q AS halfvec(256)) LIMIT 10"),
            {"m": provider.model, "org": kb_org["id"],
             "q": "[" + ",".join(str(float(x)) for x in vec) + "]"}).all()
    assert plan_h["plan"] == "hnsw" and plan_h["iterative_scan"] == "relaxed_order" and plan_e["plan"] == "exact"
    assert any(vector_index.index_name(provider.model, kb_org["id"]) in line[0] for line in explain)
    assert [h.chunk_id for h in hnsw] == [h.chunk_id for h in exact]
    assert all(abs(a.score - b.score) < 1e-6 for a, b in zip(hnsw, exact))  # re-ranked on full precision


def test_kbf_db_indexes_build_sees_the_chunks_through_row_level_security(kb_org, kb_drain, kb_services):
    """The build runs in autocommit (CREATE INDEX CONCURRENTLY), where a transaction-local
    organization scope would be gone by the next statement and every chunk hidden."""
    from sqlalchemy import text

    from kbframework.db import get_engine
    from kbframework.hooks import registry
    from kbframework.retrieval import vector_index

    env = _env(kb_services)
    model = registry.embedder().model
    name = vector_index.index_name(model, kb_org["id"])
    _seed(kb_org["id"])
    kb_drain()
    with get_engine().connect() as conn:  # the worker built it: start again without one
        conn.execute(text(f"DROP INDEX IF EXISTS {name}"))
        conn.commit()
    vector_index.forget()
    with get_engine().connect() as conn:
        before = conn.execute(text("SELECT now()")).scalar()
    out = kbf("db", "indexes", "--build", env=env).stdout
    assert f"{name}: built in" in out
    # the post-load step vacuums the loaded rows before visitors read them (and analyzes them)
    assert "chunks, documents: vacuumed and analyzed in" in out
    with get_engine().connect() as conn:
        done = dict(conn.execute(text(
            "SELECT relname, least(last_vacuum, last_analyze) FROM pg_stat_user_tables "
            "WHERE relname IN ('chunks', 'documents')")).all())
    assert set(done) == {"chunks", "documents"} and all(t and t >= before for t in done.values()), done
    rows = json.loads(kbf("db", "indexes", "--json", env=env).stdout)
    assert [(r["name"], r["state"]) for r in rows] == [
        (name, "valid"), (vector_index.fulltext_index_name(kb_org["id"]), "valid")]
    with get_engine().connect() as conn:  # an index from older build parameters is brought up to date
        conn.execute(text(f"DROP INDEX {name}"))
        conn.execute(text(vector_index.create_sql(model, 256, kb_org["id"], concurrently=False).replace(
            f"ef_construction = {vector_index.HNSW_EF_CONSTRUCTION}", "ef_construction = 32")))
        conn.commit()
    kbf("db", "indexes", "--rebuild", name, env=env)
    with get_engine().connect() as conn:
        definition = conn.execute(text("SELECT pg_get_indexdef(CAST(:n AS regclass))"), {"n": name}).scalar()
    assert f"ef_construction='{vector_index.HNSW_EF_CONSTRUCTION}'" in definition


def test_the_three_vector_plans_return_the_same_hits(kb_org, kb_drain):
    """HNSW with the pre-filter probed per candidate, the organization's chunks each probing
    its document, and the passing documents first: one answer, whichever plan the pre-filter's
    count picks."""
    from kbframework.db import session_scope
    from kbframework.hooks import registry
    from kbframework.retrieval.search import (PREFILTER_CAP, Prefilter, count_candidates, forget_counts,
                                              vector_plan, vector_search)

    _seed(kb_org["id"])
    kb_drain()
    forget_counts()
    provider = registry.embedder()
    vec = provider.embed_batch(["techno night at the bunker"])[0]
    with session_scope() as s:
        pf = Prefilter(organization_id=kb_org["id"], now=datetime.now(timezone.utc))
        # 60 chunks, more than an exact scan serves here: its own index, the pre-filter not counted
        assert vector_plan(s, pf, provider.model) == "hnsw"
        assert vector_plan(s, pf, provider.model, force="exact") == "exact"  # not counted, not selective
        assert count_candidates(s, pf) == 60 < PREFILTER_CAP
        assert vector_plan(s, pf, provider.model) == "exact_documents"  # few documents pass
        by_docs, note = vector_search(s, pf, provider.model, provider.dim, vec, k=10)
        assert note["access"] == "exact_documents"
        pf.counted = None
        by_chunks, note = vector_search(s, pf, provider.model, provider.dim, vec, k=10, force="exact")
        assert note["access"] == "exact"
        hnsw, note = vector_search(s, pf, provider.model, provider.dim, vec, k=10)
        assert note["access"] == "hnsw"
    assert len(by_docs) == 10
    assert [h.chunk_id for h in by_docs] == [h.chunk_id for h in by_chunks] == [h.chunk_id for h in hnsw]


def test_a_document_the_pre_filter_refuses_gives_no_vector_hit_in_any_plan(kb_org, kb_drain):
    from sqlalchemy import text

    from kbframework.db import session_scope
    from kbframework.hooks import registry
    from kbframework.retrieval.search import Prefilter, forget_counts, vector_search

    _seed(kb_org["id"])
    kb_drain()
    forget_counts()
    provider = registry.embedder()
    vec = provider.embed_batch(["techno night at the bunker"])[0]
    with session_scope() as s:
        pf = Prefilter(organization_id=kb_org["id"], now=datetime.now(timezone.utc))
        top = vector_search(s, pf, provider.model, provider.dim, vec, k=5)[0][0]
        s.execute(text("UPDATE documents SET expires_at = now() - interval '1 day' WHERE id = :d"),
                  {"d": top.document_id})
        for force, counted in ((None, 59), (None, None), ("hnsw", None)):
            pf.counted = counted
            hits, note = vector_search(s, pf, provider.model, provider.dim, vec, k=20, force=force)
            assert hits and top.document_id not in {h.document_id for h in hits}, note["access"]


def test_the_index_build_memory_grows_with_the_rows_and_stays_bounded(monkeypatch):
    from kbframework.retrieval.vector_index import build_memory

    monkeypatch.delenv("KB_INDEX_BUILD_MEMORY", raising=False)
    mb = lambda rows, dim: int(build_memory(rows, dim).removesuffix("MB"))  # noqa: E731
    assert mb(0, 256) == mb(100_000, 256) == 1024  # never below the old fixed 1 GB
    assert 1024 < mb(1_000_000, 256) < mb(2_000_000, 256) <= 4096
    assert mb(50_000_000, 1536) <= 4096
    monkeypatch.setenv("KB_INDEX_BUILD_MEMORY", "512MB")
    assert build_memory(1_000_000, 256) == "512MB"


def test_only_an_organization_that_outgrows_an_exact_scan_gets_an_index_of_its_own(kb_org, kb_drain):
    """A small organization's chunks are scanned exactly and its writes touch no graph; the
    large one's index holds its rows only, so its walk never wades through another tenant's."""
    from sqlalchemy import text

    from kbframework.db import get_engine, session_scope
    from kbframework.hooks import registry
    from kbframework.retrieval import vector_index
    from kbframework.retrieval.search import Prefilter, vector_plan, vector_search

    small = _large_and_small(kb_org["id"], kb_drain)
    provider = registry.embedder()
    big_name, small_name = (vector_index.index_name(provider.model, o) for o in (kb_org["id"], small))
    with get_engine().connect() as conn:
        names = set(vector_index.existing(conn))
    assert big_name in names and small_name not in names
    vec = provider.embed_batch(["gift cards and vouchers"])[0]
    with session_scope() as s:
        for org, want in ((kb_org["id"], "hnsw"), (small, "exact")):
            pf = Prefilter(organization_id=org, now=datetime.now(timezone.utc))
            assert vector_plan(s, pf, provider.model) == want
            hits, _ = vector_search(s, pf, provider.model, provider.dim, vec, k=5)
            assert hits
            owned = {str(d) for (d,) in s.execute(text("SELECT id FROM documents WHERE organization_id = :o"),
                                                   {"o": org}).all()}
            assert {h.document_id for h in hits} <= owned
        s.execute(text("SET LOCAL enable_seqscan = off"))
        explain = "\n".join(r[0] for r in s.execute(text(
            "EXPLAIN SELECT id FROM chunks WHERE embedding_model = :m AND organization_id = :org ORDER BY "
            "(embedding_half::halfvec(256)) <=> CAST(:q AS halfvec(256)) LIMIT 10"),
            {"m": provider.model, "org": small, "q": "[" + ",".join(str(float(x)) for x in vec) + "]"}).all())
    assert big_name not in explain  # another organization's index cannot answer for the small one


def test_kbf_db_indexes_build_drops_what_no_longer_serves(kb_org, kb_drain, kb_services):
    """An earlier release's index over every organization is superseded once each organization
    has its own; a deleted organization's index goes with it."""
    from sqlalchemy import text

    from kbframework.db import get_engine
    from kbframework.hooks import registry
    from kbframework.orgs.lifecycle import delete_organization
    from kbframework.retrieval import vector_index

    env = _env(kb_services)
    model = registry.embedder().model
    _seed(kb_org["id"])
    kb_drain()
    shared, own = vector_index.index_name(model), vector_index.index_name(model, kb_org["id"])
    fts = vector_index.fulltext_index_name(kb_org["id"])
    with get_engine().connect() as conn:
        conn.execute(text(vector_index.create_sql(model, 256, concurrently=False)))  # as an earlier release made it
        conn.commit()
    rows = {r["name"]: r["state"] for r in json.loads(kbf("db", "indexes", "--json", env=env).stdout)}
    assert rows == {own: "valid", fts: "valid", shared: "superseded"}
    out = kbf("db", "indexes", "--build", env=env).stdout
    assert f"{shared}: dropped (superseded)" in out and f"{own}: already valid" in out
    rows = {r["name"]: r["state"] for r in json.loads(kbf("db", "indexes", "--json", env=env).stdout)}
    assert rows == {own: "valid", fts: "valid"}
    gone = delete_organization(kb_org["id"])
    assert sorted(gone["vector_indexes"]) == sorted([own, fts])
    with get_engine().connect() as conn:
        assert not {own, fts} & set(vector_index.existing(conn))


def test_an_organization_above_the_exact_scan_size_matches_words_in_its_own_full_text_index(kb_org, kb_drain):
    """Its question reads no other organization's entries and not the posting list of its own
    every chunk in the shared (organization_id, tsv) index; the keyword leg finds the same."""
    from sqlalchemy import text

    from kbframework.db import session_scope
    from kbframework.retrieval import vector_index
    from kbframework.retrieval.search import Prefilter, keyword_search

    small = _large_and_small(kb_org["id"], kb_drain)
    own = vector_index.fulltext_index_name(kb_org["id"])
    with session_scope() as s:
        names = {r[0] for r in s.execute(text("SELECT indexname FROM pg_indexes WHERE tablename = 'chunks'")).all()}
        assert own in names and vector_index.fulltext_index_name(small) not in names
        # the plan of the matching function's statement, as its owner, its settings and a custom
        # plan make it (under the tenant role's policy `@@` could use no index at all)
        s.execute(text("SET LOCAL ROLE NONE"))
        s.execute(text("SET LOCAL enable_seqscan = off"))
        s.execute(text("SET LOCAL enable_indexscan = off"))
        plans = {org: "\n".join(r[0] for r in s.execute(text(
            "EXPLAIN SELECT id FROM chunks WHERE organization_id = CAST(:org AS uuid) "
            "AND tsv @@ websearch_to_tsquery('english', 'gift vouchers')"), {"org": org}).all())
            for org in (kb_org["id"], small)}
    assert own in plans[kb_org["id"]] and "ix_chunks_org_tsv" in plans[small] and own not in plans[small]
    with session_scope() as s:
        pf = Prefilter(organization_id=kb_org["id"], now=datetime.now(timezone.utc))
        hits, dbg = keyword_search(s, pf, "gift cards and vouchers")
    assert len(hits) == 10 and dbg["tiers"][0]["candidates"] == 10  # notes 5, 11, … 59 hold every word


def test_a_load_in_many_jobs_counts_the_organization_only_once_it_may_near_the_size(kb_org, kb_drain):
    """Each job of a load would count the organization's chunks again; a process that counted it
    and knows what it wrote since skips the count while that stays within half the exact-scan
    size, and counts (and asks for the index) once it may not."""
    from sqlalchemy import event

    from kbframework.db import get_engine
    from kbframework.hooks import registry
    from kbframework.retrieval import vector_index

    counts = []

    def catch(conn, cursor, statement, parameters, context, executemany):
        if "SELECT count(*) FROM (SELECT 1 FROM chunks" in statement:
            counts.append(statement)

    event.listen(get_engine(), "before_cursor_execute", catch)
    try:
        _seed(kb_org["id"], n=20)  # 20 of 50: counted once
        assert len(counts) == 1
        _seed(kb_org["id"], n=4, start=20)  # 24, within half the size: not counted again
        assert len(counts) == 1
        _seed(kb_org["id"], n=32, start=24)  # 56 may be past it: counted, and it is
        assert len(counts) == 2
    finally:
        event.remove(get_engine(), "before_cursor_execute", catch)
    kb_drain()
    with get_engine().connect() as conn:
        assert vector_index.index_name(registry.embedder().model, kb_org["id"]) in set(vector_index.existing(conn))


def _superuser():
    """A plain connection as the embedded server's superuser (the product's own connections are
    the tenant role): pg_buffercache, which shows what is in the shared buffers, is for it."""
    import psycopg2

    from kbframework.config import get_config
    from kbframework.embedded import pg_url

    conn = psycopg2.connect(pg_url(get_config()).replace("postgresql+psycopg2://", "postgresql://"))
    conn.autocommit = True
    conn.cursor().execute("CREATE EXTENSION IF NOT EXISTS pg_buffercache")
    return conn


def _in_buffers(su, name: str) -> tuple[int, int]:
    """(blocks of ``name`` in the shared buffers, blocks it has)."""
    cur = su.cursor()
    cur.execute("SELECT (SELECT count(*) FROM pg_buffercache b "
                "WHERE b.relfilenode = pg_relation_filenode(%s::regclass) "
                "AND b.reldatabase = (SELECT oid FROM pg_database WHERE datname = current_database())), "
                "pg_relation_size(%s::regclass) / current_setting('block_size')::int", (name, name))
    return tuple(cur.fetchone())


def test_a_new_index_is_loaded_into_the_shared_buffers_before_the_first_question(kb_org, kb_drain, kb_services):
    """After a restart or a build an index's pages are not in the shared buffers: the first
    questions read them one by one. The product reads a built or rebuilt index in one pass."""
    from kbframework.hooks import registry
    from kbframework.retrieval import vector_index

    env = _env(kb_services)
    name = vector_index.index_name(registry.embedder().model, kb_org["id"])
    _seed(kb_org["id"])
    out = kbf("db", "indexes", "--build", env=env).stdout
    assert f"{name}: built in" in out and "blocks loaded into shared buffers" in out
    su = _superuser()
    try:
        loaded, blocks = _in_buffers(su, name)
        assert blocks > 0 and loaded == blocks
        su.cursor().execute("SELECT pg_buffercache_evict_relation(%s::regclass)", (name,))  # as after a restart
        assert _in_buffers(su, name)[0] == 0
        with vector_index._autocommit_conn() as conn:  # the tenant role, as the worker and the CLI
            assert vector_index.prewarm(conn, name) == blocks
        assert _in_buffers(su, name) == (blocks, blocks)
        out = kbf("db", "indexes", "--rebuild", name, env=env).stdout
        assert f"rebuilt {name}" in out and "blocks loaded into shared buffers" in out
        assert _in_buffers(su, name)[0] == _in_buffers(su, name)[1] > 0
    finally:
        su.close()


def test_the_post_load_step_loads_its_indexes_after_the_word_counts_that_would_push_them_out(kb_org, kb_drain,
                                                                                             monkeypatch):
    """Counting an organization's words reads every tsvector of its chunks through the shared
    buffers: on the 1M bench's post-load step the counts after the builds left 3,723 of the
    114,532 index blocks the builds had loaded. So ``ensure_all`` loads its indexes last, and a
    word count on its own loads the organization's indexes again. The counts here stand in for
    that by evicting the index right after counting."""
    from sqlalchemy import text

    from kbframework import tenancy
    from kbframework.db import session_scope
    from kbframework.hooks import registry
    from kbframework.retrieval import term_stats, vector_index

    name = vector_index.index_name(registry.embedder().model, kb_org["id"])
    _seed(kb_org["id"])
    kb_drain()
    su = _superuser()
    real = term_stats.refresh_term_stats  # refresh_if_incomplete and refresh_stale_term_stats call it by name

    def count_then_evict(org):
        out = real(org)
        su.cursor().execute("SELECT pg_buffercache_evict_relation(%s::regclass)", (name,))
        return out

    monkeypatch.setattr(term_stats, "refresh_term_stats", count_then_evict)
    try:
        with tenancy.system("the test's stale word list"), session_scope() as s:  # counted again by ensure_all
            s.execute(text("UPDATE term_stats_state SET counted_changes = NULL WHERE organization_id = :o"),
                      {"o": kb_org["id"]})
        with vector_index._autocommit_conn() as conn:
            conn.execute(text(f"DROP INDEX {name}"))
        out = vector_index.ensure_all()
        assert any(r["name"] == name and r.get("built") for r in out), out
        assert any(r["name"].startswith("word counts of") for r in out), out
        loaded, blocks = _in_buffers(su, name)
        assert blocks > 0 and loaded == blocks
        assert next(r for r in out if r["name"] == name)["prewarmed_blocks"] == blocks

        # a count on its own, the job behind a load, loads them again too
        from kbframework.ingest.behind_the_load import refresh_word_counts_queued

        assert refresh_word_counts_queued(kb_org["id"], force=True)["counted"]
        assert _in_buffers(su, name) == (blocks, blocks)
    finally:
        su.close()


def test_an_index_too_large_for_the_shared_buffers_is_left_to_the_questions(kb_org, kb_drain, monkeypatch):
    from sqlalchemy import text

    from kbframework.hooks import registry
    from kbframework.retrieval import vector_index

    name = vector_index.index_name(registry.embedder().model, kb_org["id"])
    _seed(kb_org["id"])
    kb_drain()
    monkeypatch.setattr(vector_index, "PREWARM_SHARE", 10 ** 9)  # no index fits in a billionth of them
    with vector_index._autocommit_conn() as conn:
        assert vector_index.prewarm(conn, name) is None
        # the tenant role may load an index of the chunks, and nothing else
        with pytest.raises(Exception, match="is not an index of chunks"):
            conn.execute(text("SELECT kbf_prewarm_index('ix_documents_vocabulary'::regclass)"))

