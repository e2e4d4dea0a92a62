"""Stored word counts for the keyword ranking and the question expansion: refreshed after loads,
read before counting, counted when missing, complete (a missing word is used by no chunk) while
nothing was written since the count, tenant-scoped."""
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


def _seed(org_id, n, start=0, words=None):
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
            body = f"# Note {i}\n\nAll about {words or topics[i % len(topics)]}, variant {i}."
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
    done = {d["organization_id"]: d for d in refresh_stale_term_stats()}
    assert sorted(done) == sorted([kb_org["id"], small])  # both written since (never) counted
    assert done[kb_org["id"]]["chunks"] == 60 and done[kb_org["id"]]["words"] > 10
    stored = _stored(kb_org["id"])
    assert stored["techno"] == 12 and stored["refund"] == 12 and stored["note"] == 60
    assert _stored(small)["techno"] == 2 and _stored(small)["note"] == 10
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
        seen = s.execute(text("SELECT DISTINCT organization_id::text FROM term_stats")).scalars().all()
        assert seen == [small]  # its own list only
        assert document_frequency(s, small, ["techno"])[0] == {"techno": 2}  # its own


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
    assert left == 45 <= LIMIT
    # a tenth fewer: counted again, and kept below the size too
    assert [d["chunks"] for d in refresh_stale_term_stats()] == [45] and _stored(kb_org["id"])["note"] == 45
    assert refresh_stale_term_stats() == []


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
    words = len(_stored(kb_org["id"]))
    assert f"word lists: 1 organizations with chunks, {words} words stored; 1 complete\n" in r.stdout
    _seed(kb_org["id"], 2, start=60)  # written since its count, above the size
    r = subprocess.run([kbf, "db", "indexes"], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    assert (f"word lists: 1 organizations with chunks, {words} words stored; 0 complete, 1 above {LIMIT} "
            "chunks written since their count") in r.stdout
    r = subprocess.run([kbf, "db", "indexes", "--json"], capture_output=True, text=True, env=env, timeout=300)
    assert json.loads(r.stdout)  # the organization's vector index is listed beside

    # the line is made from the chunk counts the listing already has; counted afresh it says the same
    from kbframework import tenancy
    from kbframework.db import get_engine, session_scope
    from kbframework.retrieval import vector_index
    from kbframework.retrieval.term_stats import summary

    with tenancy.system("the test's comparison"), session_scope() as s, get_engine().connect() as conn:
        sizes = vector_index.org_sizes(vector_index.chunk_counts(conn))
        assert summary(s, sizes) == summary(s) and summary(s, sizes)["written_since_large"] == 1


def _state(org_id):
    from sqlalchemy import text

    from kbframework import tenancy
    from kbframework.db import session_scope

    with tenancy.organization(org_id), session_scope() as s:
        return s.execute(text("SELECT changes, counted_changes FROM term_stats_state WHERE organization_id = :o"),
                         {"o": org_id}).first()


def _forget(org_id, lexeme):
    """Take a word out of the stored list, so that a reader that trusts the list says 0 where a
    count on the index would find it."""
    from sqlalchemy import text

    from kbframework import tenancy
    from kbframework.db import session_scope

    with tenancy.organization(org_id), session_scope() as s:
        s.execute(text("DELETE FROM term_stats WHERE organization_id = :o AND lexeme = :l"), {"o": org_id, "l": lexeme})


def _frequencies(org_id, words):
    from kbframework import tenancy
    from kbframework.db import session_scope
    from kbframework.retrieval.corpus_stats import document_frequency, forget_counts, words_used

    forget_counts()
    with tenancy.organization(org_id), session_scope() as s:
        return document_frequency(s, org_id, words)[0], words_used(s, org_id, words)


def test_a_complete_list_answers_for_the_words_it_lacks_until_chunks_are_written(kb_org):
    from kbframework import tenancy
    from kbframework.db import session_scope
    from kbframework.retrieval.term_stats import mark_changed, refresh_if_incomplete

    _seed(kb_org["id"], 10)
    assert _state(kb_org["id"]) == (1, None)  # written, not counted yet: nothing is trusted
    _forget(kb_org["id"], "techno")
    assert _frequencies(kb_org["id"], ["techno"])[0] == {"techno": 2}
    refresh_if_incomplete(kb_org["id"])  # what the job queued behind the load does (up to the size)
    changes, counted = _state(kb_org["id"])
    assert changes == counted == 1
    _forget(kb_org["id"], "techno")
    dfs, used = _frequencies(kb_org["id"], ["techno", "cotton", "perfume"])
    assert dfs == {"techno": 0, "cotton": 2, "perfume": 0} and used == {"cotton"}  # the list, not a lookup
    with tenancy.organization(kb_org["id"]), session_scope() as s:  # chunks written since the count
        mark_changed(s, [kb_org["id"]])
    dfs, used = _frequencies(kb_org["id"], ["techno", "cotton", "perfume"])
    assert dfs == {"techno": 2, "cotton": 2, "perfume": 0} and used == {"techno", "cotton"}  # looked up
    assert refresh_if_incomplete(kb_org["id"])["complete_at"] == 2
    assert _stored(kb_org["id"])["techno"] == 2 and _state(kb_org["id"]) == (2, 2)
    assert refresh_if_incomplete(kb_org["id"]) is None  # complete: nothing to count


def test_an_organization_above_the_size_is_not_counted_after_each_load(kb_org):
    from kbframework.retrieval.term_stats import refresh_if_incomplete, refresh_stale_term_stats

    _seed(kb_org["id"], 60)
    assert _stored(kb_org["id"]) == {} and _state(kb_org["id"]) == (1, None)  # written, never counted
    assert refresh_if_incomplete(kb_org["id"]) is None  # the job behind the load leaves it
    refresh_stale_term_stats()
    assert _state(kb_org["id"]) == (1, 1)
    _seed(kb_org["id"], 2, start=60)  # under a tenth: left as it is, and read as incomplete
    assert refresh_stale_term_stats() == [] and _state(kb_org["id"]) == (2, 1)
    _forget(kb_org["id"], "techno")
    assert _frequencies(kb_org["id"], ["techno"])[0] == {"techno": 12}  # looked up, not trusted


def test_a_load_through_the_worker_counts_the_words_behind_its_ingest_jobs(kb_org, kb_drain):
    from rq.registry import FinishedJobRegistry

    from kbframework import tenancy
    from kbframework.db import session_scope
    from kbframework.ingest.queue import queue_ingest
    from kbframework.jobs.queues import queue
    from kbframework.orgs.accounts import ensure_source
    from kbframework.sources.apply import apply_draft
    from kbframework.types import DocumentDraft

    with tenancy.organization(kb_org["id"]):
        with session_scope() as s:
            src = ensure_source(s, kb_org["id"], "manual", "Manual knowledge")
            ids = [str(apply_draft(s, src, DocumentDraft(
                title=f"Night {i}", normalized_content=f"Techno night number {i} at the bunker.", type="manual",
                document_role="manual", external_id=f"w{i}"), doc=None)[0].id) for i in range(3)]
        jobs = [queue_ingest(ids[:2]), queue_ingest(ids[2:])]
    kb_drain()
    q = queue("ingest")
    done = {jid: q.fetch_job(jid) for jid in FinishedJobRegistry(queue=q).get_job_ids()}
    counts = [j for j in done.values() if j.func_name.endswith("refresh_word_counts_job")]
    assert counts, "no word count job ran after the load"
    # one count for both ingest jobs (the second found one waiting), after both of them
    counted = [j for j in counts if (j.return_value() or {}).get("counted")]
    assert len(counted) == 1
    assert counted[0].started_at >= max(done[j.id].ended_at for j in jobs)
    assert _state(kb_org["id"]) == (2, 2) and _stored(kb_org["id"])["techno"] == 3


def test_a_load_that_commits_while_the_words_are_counted_leaves_the_list_incomplete(kb_org):
    """The count reads how many loads it has seen before ``ts_stat`` takes its snapshot: a load
    whose chunks come after that snapshot must not be taken as counted, or its new words would be
    answered "used by no chunk" until the next count."""
    from sqlalchemy import event

    from kbframework.db import get_engine
    from kbframework.retrieval.term_stats import refresh_if_incomplete

    _seed(kb_org["id"], 10)
    loaded = []

    def load_during_the_count(conn, cursor, statement, parameters, context, executemany):
        if "FROM ts_stat(" in statement and not loaded:
            loaded.append(_seed(kb_org["id"], 1, start=1000, words="zeppelin moonlight"))

    event.listen(get_engine(), "after_cursor_execute", load_during_the_count)
    try:
        refresh_if_incomplete(kb_org["id"])
    finally:
        event.remove(get_engine(), "after_cursor_execute", load_during_the_count)
    assert loaded and [r.action for r in loaded[0]] == ["indexed"]
    assert "zeppelin" not in _stored(kb_org["id"])  # written after the count's snapshot
    changes, counted = _state(kb_org["id"])
    assert counted == changes - 1  # the load is not taken as counted
    assert _frequencies(kb_org["id"], ["zeppelin"]) == ({"zeppelin": 1}, {"zeppelin"})  # so it is looked up
    refresh_if_incomplete(kb_org["id"])
    assert _stored(kb_org["id"])["zeppelin"] == 1 and _state(kb_org["id"]) == (changes, changes)


def test_a_load_whose_writes_cannot_be_recorded_has_its_words_counted_anyway(kb_org, kb_drain, monkeypatch):
    """When the record of a load's writes fails after its chunks committed, the list would go on
    saying it is complete: the job behind the load counts it whatever it says."""
    from sqlalchemy.exc import OperationalError

    from kbframework import tenancy
    from kbframework.ingest.queue import queue_ingest
    from kbframework.retrieval import term_stats

    _seed(kb_org["id"], 5)
    term_stats.refresh_if_incomplete(kb_org["id"])
    before = _state(kb_org["id"])
    assert before[0] == before[1]  # complete

    def fails(session, org_ids):
        raise OperationalError("UPDATE term_stats_state", {}, Exception("the server went away"))

    monkeypatch.setattr(term_stats, "mark_changed", fails)
    with tenancy.organization(kb_org["id"]):
        from kbframework.db import session_scope
        from kbframework.orgs.accounts import ensure_source
        from kbframework.sources.apply import apply_draft
        from kbframework.types import DocumentDraft

        with session_scope() as s:
            src = ensure_source(s, kb_org["id"], "manual", "Manual knowledge")
            doc = apply_draft(s, src, DocumentDraft(title="Airship", normalized_content="A zeppelin over the river.",
                                                    type="manual", document_role="manual", external_id="z"),
                              doc=None)[0]
        queue_ingest([str(doc.id)])
    kb_drain()
    assert _state(kb_org["id"]) == before  # the write was not recorded: the list says complete…
    assert _stored(kb_org["id"])["zeppelin"] == 1  # …and was counted again, so it is


def test_two_counts_of_one_organization_at_once_both_succeed(kb_org):
    """Two workers may count one organization's words at the same moment (its own job behind a
    load on one, the statistics refresh on the other): each replaces the list in its own
    transaction, and the second waits for the first instead of failing on the rows the first
    just wrote (seen once as a UniqueViolation on term_stats_pkey in the 1M bench)."""
    import threading

    from kbframework import tenancy
    from kbframework.retrieval.term_stats import refresh_term_stats

    _seed(kb_org["id"], 40)
    expected = None
    for _ in range(6):
        gate, errors, done = threading.Barrier(2), [], []

        def count():
            gate.wait()
            try:
                with tenancy.system("the test's concurrent word counts"):
                    done.append(refresh_term_stats(kb_org["id"])["words"])
            except Exception as exc:  # the assertion below names it
                errors.append(repr(exc))

        threads = [threading.Thread(target=count) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == [], errors
        assert len(set(done)) == 1 and done[0] > 0, done
        expected = expected or _stored(kb_org["id"])
        assert _stored(kb_org["id"]) == expected
