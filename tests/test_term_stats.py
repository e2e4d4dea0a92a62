"""Stored word counts for the keyword ranking of organizations above the exact-scan size:
refreshed after loads, read before counting, counted when missing, tenant-scoped."""
import pytest

LIMIT = 50


@pytest.fixture(autouse=True)
def small_exact_scan(monkeypatch, kb_services):
    from kbframework.config import reset_config

    monkeypatch.setenv("KB_EXACT_SCAN_MAX_ROWS", str(LIMIT))
    reset_config()
    yield
    monkeypatch.delenv("KB_EXACT_SCAN_MAX_ROWS")
    reset_config()


def _seed(org_id, n, start=0):
    from kbframework.db import session_scope
    from kbframework.ingest.pipeline import ingest_documents
    from kbframework.orgs.accounts import ensure_source
    from kbframework.sources.apply import apply_draft
    from kbframework.types import DocumentDraft

    topics = ["return policy and refunds", "shipping to Serbia", "techno night at the bunker",
              "red summer dress in cotton", "opening hours on Sunday"]
    with session_scope() as s:
        src = ensure_source(s, org_id, "manual", "Manual knowledge")
        ids = []
        for i in range(start, start + n):
            body = f"# Note {i}\n\nAll about {topics[i % len(topics)]}, variant {i}."
            d, _ = apply_draft(s, src, DocumentDraft(title=f"Note {i}", normalized_content=body, type="manual",
                                                     document_role="manual", external_id=f"n{i}"), doc=None)
            ids.append(str(d.id))
    return ingest_documents(ids)


def _stored(org_id):
    from sqlalchemy import text

    from kbframework import tenancy
    from kbframework.db import session_scope

    with tenancy.organization(org_id), session_scope() as s:
        return dict(s.execute(text("SELECT lexeme, df FROM term_stats WHERE organization_id = :o"),
                              {"o": org_id}).all())


def test_a_large_organization_keeps_stored_counts_that_the_keyword_ranking_reads(kb_org):
    from sqlalchemy import text

    from kbframework import tenancy
    from kbframework.db import session_scope
    from kbframework.orgs.accounts import create_org
    from kbframework.retrieval.corpus_stats import document_frequency, forget_counts, words_used
    from kbframework.retrieval.term_stats import refresh_stale_term_stats

    with session_scope() as s:
        small = str(create_org(s, "Small Org", "Europe/Belgrade", "small-org").id)
    _seed(kb_org["id"], 60)
    _seed(small, 10)
    done = refresh_stale_term_stats()
    assert [d["organization_id"] for d in done] == [kb_org["id"]]  # the small one counts on first sight
    assert done[0]["chunks"] == 60 and done[0]["words"] > 10
    stored = _stored(kb_org["id"])
    assert stored["techno"] == 12 and stored["refund"] == 12 and stored["note"] == 60
    assert _stored(small) == {}
    assert refresh_stale_term_stats() == []  # nothing changed since
    forget_counts()
    with tenancy.organization(kb_org["id"]), session_scope() as s:
        dfs, n = document_frequency(s, kb_org["id"], ["techno", "note", "perfume"])
        assert dfs == {"techno": 12, "note": 60, "perfume": 0} and n == 60
        # the stored value is what is read (not a count): make it say something a count could not
        s.execute(text("UPDATE term_stats SET df = 777 WHERE organization_id = :o AND lexeme = 'techno'"),
                  {"o": kb_org["id"]})
    forget_counts()
    with tenancy.organization(kb_org["id"]), session_scope() as s:
        assert document_frequency(s, kb_org["id"], ["techno"])[0] == {"techno": 777}
        assert words_used(s, kb_org["id"], ["techno", "perfume", "cotton"]) == {"techno", "cotton"}
    with tenancy.organization(small), session_scope() as s:  # another tenant sees none of them
        assert s.execute(text("SELECT count(*) FROM term_stats")).scalar() == 0
        assert document_frequency(s, small, ["techno"])[0] == {"techno": 2}  # its own, counted


def test_counts_follow_the_organization_as_it_grows_and_shrinks(kb_org):
    from sqlalchemy import text

    from kbframework import tenancy
    from kbframework.db import session_scope
    from kbframework.retrieval.term_stats import refresh_stale_term_stats

    _seed(kb_org["id"], 60)
    assert len(refresh_stale_term_stats()) == 1
    _seed(kb_org["id"], 5, start=60)  # under a tenth more: the stored counts stay
    assert refresh_stale_term_stats() == []
    _seed(kb_org["id"], 10, start=65)
    again = refresh_stale_term_stats()
    assert [d["chunks"] for d in again] == [75] and _stored(kb_org["id"])["note"] == 75
    with tenancy.organization(kb_org["id"]), session_scope() as s:
        s.execute(text("DELETE FROM chunks WHERE id IN (SELECT id FROM chunks WHERE organization_id = :o "
                       "ORDER BY id LIMIT 30)"), {"o": kb_org["id"]})
        left = s.execute(text("SELECT count(*) FROM chunks WHERE organization_id = :o"), {"o": kb_org["id"]}).scalar()
    assert left <= LIMIT
    assert refresh_stale_term_stats() == [] and _stored(kb_org["id"]) == {}  # below the size: dropped


def test_kbf_db_indexes_build_refreshes_the_stored_counts(kb_org, kb_services):
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    _seed(kb_org["id"], 60)
    env = {**os.environ, "KB_DATA_DIR": str(kb_services.data_dir), "DATABASE_URL": "", "REDIS_URL": "",
           "KB_EXACT_SCAN_MAX_ROWS": str(LIMIT)}
    kbf = str(Path(sys.executable).parent / "kbf")
    r = subprocess.run([kbf, "db", "indexes", "--build"], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    assert f"word counts of {kb_org['id']}: built in" in r.stdout
    assert _stored(kb_org["id"])["note"] == 60
    r = subprocess.run([kbf, "db", "indexes", "--json"], capture_output=True, text=True, env=env, timeout=300)
    assert json.loads(r.stdout)  # the organization's vector index is listed beside
