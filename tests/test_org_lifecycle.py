"""Deleting an organization removes everything it owns — rows in every table, its stored files,
its Redis keys, its queued jobs — and nothing of another organization; visitors' privacy:
erasing a conversation, the retention purge through the scheduler."""
import os
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from sqlalchemy import func, select, update

from kbframework.db import session_scope
from kbframework.models import (ChatFeedback, ChatLog, Document, Source, SyncRun, UsageLedger, UserSession,
                                WebhookEvent)
from kbframework.orgs.lifecycle import count_rows, org_row_counts

KBF = str(Path(sys.executable).parent / "kbf")
ORIGIN = "https://shop.example"


def kbf(*args, env=None):
    return subprocess.run([KBF, *args], capture_output=True, text=True, timeout=180,
                          env={**os.environ, **(env or {})})


def populate(admin, tag: str, shared_hash: str) -> dict:
    """Something in every table for the admin's organization, a stored file of its own and one
    shared with another organization, Redis keys and a queued job."""
    from kbframework.config import get_config
    from kbframework.orgs.keys import create_key
    from kbframework.jobs.queues import enqueue

    oid = admin.org["id"]
    r = admin.post("/api/admin/v1/documents/manual?wait=1", json={
        "title": f"Return policy {tag}", "body": "You can return items within 30 days for a full refund."})
    assert r.status_code == 201
    with session_scope() as s:
        key = create_key(s, oid, [ORIGIN], f"site {tag}")
        kval = key.key
        src = s.scalar(select(Source).where(Source.organization_id == oid))
        own_hash = f"{tag}{'0' * (64 - len(tag))}"
        for h in (own_hash, shared_hash):
            s.add(Document(organization_id=oid, source_id=src.id, title=f"file {h[:6]}", type="pdf",
                           status="active", external_id=h, metadata_={"file_sha256": h}))
        s.add(SyncRun(organization_id=oid, source_id=src.id, kind="full", status="success"))
        s.add(WebhookEvent(organization_id=oid, source_id=src.id, delivery_id=f"d-{tag}", topic="x"))
        src_id = str(src.id)
    files = get_config().data_dir / "files" / "pdf"
    files.mkdir(parents=True, exist_ok=True)
    for h in (own_hash, shared_hash):
        (files / f"{h}.pdf").write_bytes(b"%PDF-1.4 test")
    r = admin.client.post(f"/api/embed/v1/{kval}/chat", json={"message": "return policy?", "session_id": f"v-{tag}"},
                          headers={"Origin": ORIGIN})
    assert r.status_code == 200
    admin.client.post(f"/api/embed/v1/{kval}/feedback", json={
        "message_id": r.get_json()["message_id"], "rating": "down", "session_id": f"v-{tag}"},
        headers={"Origin": ORIGIN})
    from kbframework.testing import set_org_settings

    set_org_settings(admin.org, budget_unit="tokens", budget_limit=10_000_000)
    admin.post("/api/admin/v1/chat", json={"question": "return policy?"})  # budget reservation key
    from kbframework.orgs import budget

    budget.status(oid)
    job = enqueue("sync", "kbframework.jobs.tasks.sync_source_job", src_id, "full")
    from kbframework.models import JobOutbox

    with session_scope() as s:  # a job held while Redis was down
        s.add(JobOutbox(queue="sync", func="kbframework.jobs.tasks.sync_source_job", args=[src_id, "full"],
                        reason="Redis was down"))
    return {"own_file": files / f"{own_hash}.pdf", "shared_file": files / f"{shared_hash}.pdf", "job": job.id,
            "source": src_id, "key": kval}


def redis_keys_naming(*ids):
    from kbframework.jobs.queues import get_redis

    r = get_redis()
    return [k for i in ids for k in r.scan_iter(match=f"*{i}*")]


def test_org_delete_leaves_nothing_of_it_and_everything_of_the_other(kb_app, kb_admin):
    from kbframework.orgs.accounts import create_org
    from kbframework.jobs.queues import queue
    from kbframework.testing import login_client

    shared = "5" * 64
    with session_scope() as s:
        o = create_org(s, "Keep me", "UTC", "keep-me")
        keep = {"id": str(o.id), "slug": o.slug}
    other = login_client(kb_app, keep, "keeper@keep.example", "keep horse battery")
    kept = populate(other, "b", shared)
    gone = populate(kb_admin, "a", shared)
    oid = kb_admin.org["id"]
    with session_scope() as s:
        before, mine, theirs = count_rows(s), org_row_counts(s, oid), org_row_counts(s, keep["id"])
    assert all(mine[t] > 0 for t in mine), mine  # the test covers every table an organization owns
    # tables without an organization column: users (deleted when they belong nowhere else) and
    # the held-jobs outbox (a job naming the organization's sources is removed)
    assert set(mine) | {"users", "job_outbox"} == set(before), set(before) - set(mine)
    assert redis_keys_naming(oid) and gone["job"] in queue("sync").get_job_ids()

    r = kbf("org", "delete", kb_admin.org["slug"])
    assert r.returncode != 0 and "would delete" in r.stdout and "--yes" in r.stdout
    with session_scope() as s:
        assert count_rows(s) == before  # nothing happened without --yes
    r = kbf("org", "delete", kb_admin.org["slug"], "--yes")
    assert r.returncode == 0, r.stderr
    # the queued jobs it had: two, and the count of its words queued behind its ingestion
    assert "3 queued jobs" in r.stdout and "1 files" in r.stdout

    with session_scope() as s:
        after = count_rows(s)
        assert org_row_counts(s, oid) == {t: 0 for t in mine}
        assert org_row_counts(s, keep["id"]) == theirs
    expected = {t: before[t] - mine.get(t, 0) for t in before}
    expected["users"] = before["users"] - 1  # the deleted organization's only admin
    expected["job_outbox"] = before["job_outbox"] - 1  # its held job; the other's stays
    assert after == expected
    assert not gone["own_file"].exists() and gone["shared_file"].exists() and kept["own_file"].exists()
    assert redis_keys_naming(oid, gone["source"]) == []
    jobs = queue("sync").get_job_ids()
    assert gone["job"] not in jobs and kept["job"] in jobs
    r = kbf("org", "delete", kb_admin.org["slug"], "--yes")
    assert r.returncode != 0 and "No organization" in r.stderr


def test_operator_deletes_an_organization_from_the_admin(kb_app, kb_admin, monkeypatch):
    from tests.test_admin_pages import form_post

    monkeypatch.delenv("KB_OPERATOR_EMAILS", raising=False)
    assert "Delete this organization" not in kb_admin.get("/admin/settings").get_data(as_text=True)
    r = form_post(kb_admin, "/admin/organization/delete", {"confirm": "test-org"}, kb_admin.csrf)
    assert r.status_code == 403
    monkeypatch.setenv("KB_OPERATOR_EMAILS", "ops@example.com, admin@test.example")
    assert "Delete this organization" in kb_admin.get("/admin/settings").get_data(as_text=True)
    r = form_post(kb_admin, "/admin/organization/delete", {"confirm": "wrong"}, kb_admin.csrf)
    assert r.status_code == 400
    r = form_post(kb_admin, "/admin/organization/delete", {"confirm": "test-org"}, kb_admin.csrf)
    assert r.status_code == 302 and "/login" in r.headers["Location"]
    with session_scope() as s:
        assert sum(org_row_counts(s, kb_admin.org["id"]).values()) == 0


def test_privacy_erase_from_the_cli(kb_admin):
    from kbframework.orgs.keys import create_key

    kb_admin.post("/api/admin/v1/documents/manual?wait=1", json={"title": "Hours", "body": "We open at 9 every day."})
    with session_scope() as s:
        kval = create_key(s, kb_admin.org["id"], [ORIGIN]).key
    for sid in ("erase-me", "erase-me", "keep-me"):
        r = kb_admin.client.post(f"/api/embed/v1/{kval}/chat", json={"message": "when do you open?", "session_id": sid},
                                 headers={"Origin": ORIGIN})
        kb_admin.client.post(f"/api/embed/v1/{kval}/feedback", json={
            "message_id": r.get_json()["message_id"], "rating": "up", "session_id": sid}, headers={"Origin": ORIGIN})
    r = kbf("privacy", "erase", "--org", kb_admin.org["slug"], "--session", "erase-me")
    assert r.returncode == 0, r.stderr
    assert "2 turns, 2 feedback" in r.stdout
    with session_scope() as s:
        assert s.scalars(select(ChatLog.session_id)).all() == ["keep-me"]
        assert s.scalar(select(func.count()).select_from(ChatFeedback)) == 1
    r = kbf("privacy", "erase", "--org", kb_admin.org["slug"], "--session", "erase-me")
    assert r.returncode != 0 and "No conversation" in r.stderr


def test_visitor_addresses_are_never_stored_in_the_clear(kb_admin):
    from kbframework.orgs.keys import create_key
    from kbframework.jobs.queues import get_redis

    with session_scope() as s:
        kval = create_key(s, kb_admin.org["id"], [ORIGIN]).key
        sess = s.scalars(select(UserSession.ip)).all()
    assert sess and all(ip in (None, "127.0.0.0") for ip in sess)  # the admin's login: network part only
    kb_admin.client.post(f"/api/embed/v1/{kval}/chat", json={"message": "hello there"},
                         headers={"Origin": ORIGIN}, environ_base={"REMOTE_ADDR": "203.0.113.77"})
    r = get_redis()
    assert not [k for k in r.scan_iter() if b"203.0.113" in k]
    assert not [k for k in r.scan_iter("kbf:rl:ip:*") if k.decode().split(":")[4] in (
        __import__("hashlib").sha256(b"203.0.113.77").hexdigest()[:20],)]
    with session_scope() as s:
        for row in s.scalars(select(ChatLog)):
            assert "203.0.113" not in str(row.retrieval_debug) + str(row.flags)


def test_retention_purge_runs_through_the_scheduler(kb_services, kb_admin, kb_drain):
    from rq import Queue

    from kbframework.jobs.queues import get_redis
    from kbframework.testing import set_org_settings

    for q in ("old question", "recent question", "fresh question"):
        kb_admin.post("/api/admin/v1/chat", json={"question": q})
    now = datetime.now(timezone.utc)
    with session_scope() as s:
        logs = {x.query: x.id for x in s.scalars(select(ChatLog))}
        for q, age in (("old question", 40), ("recent question", 20)):
            s.execute(update(ChatLog).where(ChatLog.id == logs[q]).values(created_at=now - timedelta(days=age)))
            s.add(ChatFeedback(organization_id=kb_admin.org["id"], chat_log_id=logs[q], rating="down",
                               created_at=now - timedelta(days=age)))
        s.add(UsageLedger(organization_id=kb_admin.org["id"], purpose="completion", provider="x", model="m",
                          tokens_in=5, created_at=now - timedelta(days=40)))
    set_org_settings(kb_admin.org, retention_days=30)
    env = {"KB_DATA_DIR": str(kb_services.data_dir), "DATABASE_URL": "", "REDIS_URL": ""}
    proc = subprocess.Popen([KBF, "scheduler"], env={**os.environ, **env})
    try:
        deadline = time.time() + 40
        q = Queue("reindex", connection=get_redis())
        while time.time() < deadline and not any(
                (j.func_name or "").endswith("retention_job") for j in q.get_jobs()):
            time.sleep(0.3)
    finally:
        proc.terminate()
        proc.wait(10)
    kb_drain()
    with session_scope() as s:
        assert sorted(s.scalars(select(ChatLog.query))) == ["fresh question", "recent question"]
        assert s.scalar(select(func.count()).select_from(ChatFeedback)) == 1
        assert s.scalar(select(func.count()).select_from(UsageLedger)) == 1  # usage is not visitor data
