"""Platform core through its public surface, on the real PostgreSQL + pgvector and Redis."""
import json

import pytest
from sqlalchemy import func, select

from kbframework.db import session_scope
from kbframework.models import ChatLog, Chunk, Document
from kbframework.testing import login_client

RETURNS = ("# Return policy\n\nYou can return any item within 30 days of delivery for a full refund. "
           "Items must be unused and in their original packaging. Refunds reach your card within five "
           "business days.")


def add_note(admin, title, body, **extra):
    r = admin.post("/api/admin/v1/documents/manual?wait=1", json={"title": title, "body": body, **extra})
    assert r.status_code == 201, r.get_data(as_text=True)
    return r.get_json()


def test_ingest_retrieve_answer_end_to_end(kb_admin):
    doc = add_note(kb_admin, "Return policy", RETURNS, tags=["policy"], role="support")
    add_note(kb_admin, "Opening hours", "We are open Monday to Friday from 9:00 to 17:00.")
    assert doc["status"] == "active" and doc["chunk_count"] == 1
    r = kb_admin.post("/api/admin/v1/chat", json={"question": "what is your return policy?"})
    assert r.status_code == 200, r.get_data(as_text=True)
    out = r.get_json()
    assert "30 days" in out["answer"]
    src = out["sources"][0]
    assert src["document_id"] == doc["id"] and src["document_title"] == "Return policy"
    assert src["source_type"] == "manual" and src["chunk_id"] and src["snippet"]
    assert {"external_id", "source_url"} <= set(src)
    dbg = out["debug"]
    assert dbg["vector"]["hits"] and dbg["keyword"]["hits"] and dbg["fused"]
    assert dbg["fused"][0]["document_id"] == doc["id"]
    assert "Return policy" in dbg["prompt"]
    assert dbg["llm"]["used_llm"] is False and "No LLM" in dbg["llm"]["note"]
    assert set(dbg["timings_ms"]) >= {"embed_query", "vector_search", "keyword_search", "call_llm"}
    with session_scope() as s:
        log = s.scalar(select(ChatLog).where(ChatLog.id == out["message_id"]))
        assert log.query == "what is your return policy?"
        assert log.used_chunk_ids == [src["chunk_id"] for src in out["sources"]]
        assert log.prompt and log.retrieval_debug["fused"]


def test_unchanged_content_is_not_reembedded(kb_admin):
    doc = add_note(kb_admin, "Return policy", RETURNS)
    with session_scope() as s:
        first = s.scalars(select(Chunk.id).where(Chunk.document_id == doc["id"])).all()
    r = kb_admin.put(f"/api/admin/v1/documents/manual/{doc['id']}?wait=1", json={"tags": ["x"]})
    assert r.status_code == 200
    with session_scope() as s:
        assert s.scalars(select(Chunk.id).where(Chunk.document_id == doc["id"])).all() == first
    r = kb_admin.put(f"/api/admin/v1/documents/manual/{doc['id']}?wait=1",
                     json={"body": RETURNS + " Sale items are final."})
    with session_scope() as s:
        new = s.scalars(select(Chunk.id).where(Chunk.document_id == doc["id"])).all()
        assert new and new != first
        assert "Sale items" in s.scalar(select(Chunk.content).where(Chunk.document_id == doc["id"]))


def test_failing_embedder_keeps_old_chunks_serving(kb_admin, monkeypatch):
    doc = add_note(kb_admin, "Return policy", RETURNS)
    from kbframework.hooks import registry

    provider = registry.embedder()

    def boom(texts):
        raise RuntimeError("embedding service down")

    monkeypatch.setattr(provider, "embed_batch", boom)
    r = kb_admin.put(f"/api/admin/v1/documents/manual/{doc['id']}?wait=1",
                     json={"body": "Completely new text about gift cards."})
    assert r.status_code == 200
    d = r.get_json()
    assert d["status"] == "error" and "embedding service down" in d["last_error"]
    with session_scope() as s:
        contents = s.scalars(select(Chunk.content).where(Chunk.document_id == doc["id"])).all()
    assert len(contents) == 1 and "30 days" in contents[0]
    # retrieval degrades to the keyword leg and still answers from the old chunks
    r = kb_admin.post("/api/admin/v1/chat", json={"question": "return policy refund"})
    out = r.get_json()
    assert r.status_code == 200 and out["sources"][0]["document_id"] == doc["id"]
    assert out["debug"]["embedding"]["degraded"] is True
    assert out["debug"]["vector"]["hits"] == []


def test_a_document_whose_chunks_cannot_be_written_fails_alone(kb_admin, monkeypatch):
    """One batch, three changed documents; the database refuses one document's chunks (a NUL
    inside its metadata). The batch's transaction rolls back and each document is written
    alone: the other two get their new chunks once, the refused one keeps its old chunks and
    says why, and no half of its new version is left anywhere."""
    from kbframework.ingest import pipeline

    notes = [add_note(kb_admin, "Return policy", RETURNS),
             add_note(kb_admin, "Opening hours", "We are open Monday to Friday from 9:00 to 17:00."),
             add_note(kb_admin, "Gift cards", "Gift cards never expire.")]
    ids = [n["id"] for n in notes]
    with session_scope() as s:
        before = {i: s.scalars(select(Chunk.content).where(Chunk.document_id == i)).all() for i in ids}
    extras = (" Sale items are final.", " On Saturday from 10:00 to 14:00.", " They can be topped up.")
    for n, extra in zip(notes, extras):
        r = kb_admin.put(f"/api/admin/v1/documents/manual/{n['id']}", json={"body": before[n["id"]][0] + extra})
        assert r.status_code in (200, 202), r.get_data(as_text=True)
    real = pipeline.chunk_step

    def poisoned(title, segments, cs, counts=None):
        chunks = real(title, segments, cs, counts)
        if title == "Opening hours":
            for c in chunks:
                c.metadata["note"] = "\x00"
        return chunks

    monkeypatch.setattr(pipeline, "chunk_step", poisoned)
    results = {r.document_id: r for r in pipeline.ingest_documents(ids)}
    assert [results[i].action for i in ids] == ["indexed", "error", "indexed"]
    with session_scope() as s:
        after = {i: s.scalars(select(Chunk.content).where(Chunk.document_id == i)).all() for i in ids}
        refused = s.get(Document, ids[1])
        assert refused.status == "error" and refused.metadata_["last_error"]
        assert after[ids[1]] == before[ids[1]]  # the old chunks keep serving
        assert refused.chunk_count == 1 and refused.metadata_["last_ingest"]["action"] == "error"
    assert len(after[ids[0]]) == 1 and "Sale items are final." in after[ids[0]][0]
    assert len(after[ids[2]]) == 1 and "topped up" in after[ids[2]][0]


def test_planner_statistics_are_refreshed_once_behind_the_load(kb_admin, kb_drain, monkeypatch):
    """A worker's ingest jobs do not ANALYZE themselves: the job that passes the threshold queues
    one refresh behind the jobs already waiting, and a refresh that finds ingest jobs still
    waiting goes behind them again."""
    from rq.registry import FinishedJobRegistry
    from sqlalchemy import text

    from kbframework.db import get_engine
    from kbframework.ingest import queue as ingest_queue
    from kbframework.jobs.queues import queue

    monkeypatch.setattr(ingest_queue, "ANALYZE_EVERY_CHUNKS", 1)
    for i in range(3):
        r = kb_admin.post("/api/admin/v1/documents/manual",
                          json={"title": f"Note {i}", "body": f"Shop {i} opens at nine."})
        assert r.status_code in (201, 202)
    kb_drain()
    q = queue("ingest")

    def finished():
        jobs = [q.fetch_job(j) for j in FinishedJobRegistry(queue=q).get_job_ids()]
        return sorted((j for j in jobs if j is not None), key=lambda j: j.started_at)

    jobs = finished()
    names = [j.func_name.rsplit(".", 1)[-1] for j in jobs]
    assert names.count("ingest_documents_job") == 3 and names.count("refresh_statistics_job") == 1
    refresh = next(j for j in jobs if j.func_name.endswith("refresh_statistics_job"))
    assert refresh.return_value() == {"analyzed": True, "deferrals": 0}
    assert all(refresh.started_at >= j.ended_at for j in jobs if j.func_name.endswith("ingest_documents_job"))
    with get_engine().connect() as conn:
        assert conn.execute(text("SELECT last_analyze FROM pg_stat_user_tables WHERE relname = 'chunks'")).scalar()
    # a refresh queued ahead of ingest jobs waits behind them
    assert ingest_queue.queue_refresh() and not ingest_queue.queue_refresh()  # one at a time
    kb_admin.post("/api/admin/v1/documents/manual", json={"title": "Late note", "body": "Shop 9 opens at ten."})
    kb_drain()
    results = [j.return_value() for j in finished()[len(jobs):] if j.func_name.endswith("refresh_statistics_job")]
    assert results[0]["deferred"] == 1 and results[-1] == {"analyzed": True, "deferrals": 1}


def test_zero_results_no_llm_and_fallback(kb_admin):
    r = kb_admin.post("/api/admin/v1/chat", json={"question": "do you sell submarines?"})
    out = r.get_json()
    assert r.status_code == 200
    assert out["cards"] == [] and out["sources"] == []
    assert out["debug"]["reason"] == "pre_filter_empty"
    assert "llm" not in out["debug"]
    add_note(kb_admin, "Opening hours", "We are open Monday to Friday from 9:00 to 17:00.")
    with session_scope() as s:
        from kbframework.models import Setting
        s.execute(Setting.__table__.update().values(similarity_floor=0.99))
    r = kb_admin.post("/api/admin/v1/chat", json={"question": "xylophone submarine"})
    out = r.get_json()
    assert out["debug"]["reason"] == "no_results_above_threshold" and out["sources"] == []
    with session_scope() as s:
        assert s.scalar(select(func.count()).select_from(ChatLog).where(ChatLog.zero_result)) == 2


def test_disabled_document_leaves_retrieval(kb_admin):
    doc = add_note(kb_admin, "Return policy", RETURNS)
    r = kb_admin.put(f"/api/admin/v1/documents/{doc['id']}/status", json={"status": "disabled"})
    assert r.get_json()["status"] == "disabled"
    out = kb_admin.post("/api/admin/v1/chat", json={"question": "return policy"}).get_json()
    assert out["sources"] == []
    kb_admin.put(f"/api/admin/v1/documents/{doc['id']}/status", json={"status": "active"})
    out = kb_admin.post("/api/admin/v1/chat", json={"question": "return policy"}).get_json()
    assert out["sources"][0]["document_id"] == doc["id"]


@pytest.mark.parametrize("payload,status,code", [
    ({"question": ""}, 400, "empty_question"),
    ({"question": "x" * 10_000_000}, 413, None),
    ({"history": "nope", "question": "hi"}, 400, "invalid_input"),
])
def test_bad_chat_input(kb_admin, payload, status, code):
    r = kb_admin.post("/api/admin/v1/chat", json=payload)
    assert r.status_code == status
    body = r.get_json()
    assert "error" in body and body["error"]["message"]
    if code:
        assert body["error"]["code"] == code


def test_malformed_json_and_auth_errors(kb_app, kb_admin):
    r = kb_admin.post("/api/admin/v1/chat", data="{not json", content_type="application/json")
    assert r.status_code == 400 and r.get_json()["error"]["code"] == "malformed_json"
    anon = kb_app.test_client()
    r = anon.post("/api/admin/v1/chat", json={"question": "hi"})
    assert r.status_code in (401, 403) and "error" in r.get_json()
    r = anon.post("/api/admin/v1/login", json={"email": "admin@test.example", "password": "wrong"})
    assert r.status_code == 401 and r.get_json()["error"]["code"] == "invalid_credentials"
    # a write without the CSRF token is refused
    r = kb_admin.client.post("/api/admin/v1/documents/manual", json={"title": "t", "body": "b"})
    assert r.status_code == 403 and r.get_json()["error"]["code"] == "csrf_failed"


def test_logout_revokes_the_session(kb_admin):
    assert kb_admin.get("/api/admin/v1/me").status_code == 200
    assert kb_admin.post("/api/admin/v1/logout").status_code == 200
    r = kb_admin.get("/api/admin/v1/me")
    assert r.status_code == 401


def test_cross_organization_access_is_404(kb_app, kb_admin):
    from kbframework.orgs.accounts import create_org

    doc = add_note(kb_admin, "Return policy", RETURNS)
    with session_scope() as s:
        other = create_org(s, "Other Org", "UTC", "other-org")
        other = {"id": str(other.id), "slug": "other-org"}
    intruder = login_client(kb_app, other, "intruder@other.example", "another long password")
    for method, url, body in [
        ("get", f"/api/admin/v1/documents/{doc['id']}", None),
        ("put", f"/api/admin/v1/documents/{doc['id']}/status", {"status": "disabled"}),
        ("put", f"/api/admin/v1/documents/manual/{doc['id']}", {"title": "pwned"}),
        ("post", f"/api/admin/v1/documents/{doc['id']}/reindex", None),
        ("delete", f"/api/admin/v1/documents/{doc['id']}", None),
    ]:
        r = getattr(intruder, method)(url, json=body) if body else getattr(intruder, method)(url)
        assert r.status_code == 404, (method, url, r.status_code)
        assert "Return policy" not in r.get_data(as_text=True)
    assert intruder.get("/api/admin/v1/documents").get_json()["total"] == 0
    out = intruder.post("/api/admin/v1/chat", json={"question": "return policy"}).get_json()
    assert out["sources"] == []
    with session_scope() as s:
        assert s.get(Document, doc["id"]).title == "Return policy"


def test_member_is_read_only(kb_app, kb_org):
    member = login_client(kb_app, kb_org, "member@test.example", "member password 1", role="member")
    assert member.get("/api/admin/v1/documents").status_code == 200
    r = member.post("/api/admin/v1/documents/manual", json={"title": "t", "body": "b"})
    assert r.status_code == 403 and r.get_json()["error"]["code"] == "forbidden"


def test_manual_validation_errors(kb_admin):
    r = kb_admin.post("/api/admin/v1/documents/manual", json={"title": "", "body": "  "})
    assert r.status_code == 400
    err = r.get_json()["error"]
    assert err["code"] == "invalid_input" and "title" in err["details"]
    r = kb_admin.post("/api/admin/v1/documents/manual", json={"title": "t", "body": "b", "role": "boss"})
    assert r.status_code == 400 and "role" in r.get_json()["error"]["details"]
    with session_scope() as s:
        assert s.scalar(select(func.count()).select_from(Document)) == 0


def test_queue_and_worker_index_the_document(kb_admin, kb_drain):
    r = kb_admin.post("/api/admin/v1/documents/manual", json={"title": "Gift cards", "body": "Gift cards never expire."})
    doc = r.get_json()
    assert doc["status"] == "syncing" and doc["chunk_count"] == 0
    kb_drain()
    d = kb_admin.get(f"/api/admin/v1/documents/{doc['id']}").get_json()
    assert d["status"] == "active" and d["chunks"][0]["token_count"] > 0
    assert d["chunks"][0]["embedding_model"] == "wordllama-l2_supercat-256"


def test_public_embed_chat_has_no_debug(kb_app, kb_admin):
    from kbframework.orgs.keys import create_key

    add_note(kb_admin, "Return policy", RETURNS)
    with session_scope() as s:
        key = create_key(s, kb_admin.org["id"], ["https://shop.example"]).key
    c = kb_app.test_client()
    r = c.post(f"/api/embed/v1/{key}/chat", json={"message": "return policy?"},
               headers={"Origin": "https://shop.example"})
    assert r.status_code == 200, r.get_data(as_text=True)
    out = r.get_json()
    assert "30 days" in out["answer"] and out["sources"]
    assert "debug" not in out and "prompt" not in json.dumps(out)
    assert r.headers["Access-Control-Allow-Origin"] == "https://shop.example"
    r = c.post(f"/api/embed/v1/{key}/chat", json={"message": "hi"}, headers={"Origin": "https://evil.example"})
    assert r.status_code == 403
    r = c.post("/api/embed/v1/kb_pk_unknown/chat", json={"message": "hi"}, headers={"Origin": "https://shop.example"})
    assert r.status_code == 404


def test_editing_a_manual_event_keeps_its_event_fields(kb_admin):
    start = "2030-05-01T22:00:00+02:00"
    doc = add_note(kb_admin, "Summer party", "A party on the roof.", role="event", event_start=start,
                   venue="Roof", city="Belgrade", source_url="https://nights.example/summer",
                   metadata={"price": 20, "ticket_url": "https://tickets.example/summer"})
    r = kb_admin.put(f"/api/admin/v1/documents/manual/{doc['id']}?wait=1", json={"body": "A party on the big roof."})
    d = r.get_json()
    assert (d["venue"], d["city"], d["source_url"]) == ("Roof", "Belgrade", "https://nights.example/summer")
    assert d["event_start"].startswith("2030-05-01T20:00")
    full = kb_admin.get(f"/api/admin/v1/documents/{doc['id']}").get_json()
    assert full["metadata"]["ticket_url"] == "https://tickets.example/summer"


def test_expired_session_is_a_clear_401(kb_admin):
    from datetime import datetime, timedelta, timezone

    from kbframework.models import UserSession

    assert kb_admin.get("/api/admin/v1/me").status_code == 200
    with session_scope() as s:
        s.execute(UserSession.__table__.update().values(expires_at=datetime.now(timezone.utc) - timedelta(minutes=1)))
    r = kb_admin.get("/api/admin/v1/me")
    assert r.status_code == 401 and "expired" in r.get_json()["error"]["message"]
    page = kb_admin.get("/admin/")
    assert page.status_code == 302 and "/login" in page.headers["Location"]
