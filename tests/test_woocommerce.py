"""The WooCommerce connector end to end, against the local server that speaks WooCommerce
REST v3 (the package fakes/woocommerce/) fed with the official sample catalogue, on the
real PostgreSQL + pgvector and Redis. Webhooks travel over real HTTP to the app served on
127.0.0.1, signed like WooCommerce signs them.
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import http.client
import json
import sys
import threading
import time
import uuid
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from sqlalchemy import select

from kbframework.db import session_scope
from kbframework.models import Chunk, Document, Setting, Source, SyncRun, WebhookEvent
from kbframework.sources.sync import run_sync

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from fakes.woocommerce_server import FakeWooStore  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "woocommerce"
CSV = DATA / "sample_data" / "sample_products.csv"
SECRET = "whsec_kbf_test_7c1d"

pytestmark = pytest.mark.skipif(not CSV.exists(), reason="shared WooCommerce fixtures missing")


# ----------------------------------------------------------------------------- fixtures

@pytest.fixture(scope="module")
def live_url(kb_app):
    """The app on a real port: WooCommerce delivers webhooks (and pings) over HTTP."""
    from werkzeug.serving import make_server

    srv = make_server("127.0.0.1", 0, kb_app, threaded=True)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{srv.server_port}"
    srv.shutdown()


@pytest.fixture
def store():
    with FakeWooStore.from_sample_csv(str(CSV)) as st:
        yield st


@pytest.fixture
def fast_retries(monkeypatch):
    """Record the connector's waits instead of sleeping them."""
    from kbframework_woocommerce import connector

    waits: list[float] = []
    monkeypatch.setattr(connector, "_sleep", waits.append)
    return waits


def allow_private(org_id: str) -> None:
    with session_scope() as s:
        st = s.scalar(select(Setting).where(Setting.organization_id == org_id))
        st.allow_private_network = True


def add_source(admin, store: FakeWooStore, **config) -> dict:
    allow_private(admin.org["id"])
    cfg = {"store_url": store.url, "consumer_key": store.consumer_key,
           "consumer_secret": store.consumer_secret, "webhook_secret": SECRET, **config}
    r = admin.post("/api/admin/v1/sources", json={"type": "woocommerce", "name": "Shop", "config": cfg})
    assert r.status_code == 201, r.get_data(as_text=True)
    return r.get_json()


def synced(admin, store, **config) -> dict:
    src = add_source(admin, store, **config)
    res = run_sync(src["id"], "full", inline_ingest=True)
    assert res["status"] == "ok", res
    return src


def docs(source_id) -> dict[str, Document]:
    with session_scope() as s:
        rows = s.scalars(select(Document).where(Document.source_id == source_id)).all()
        s.expunge_all()
        return {d.external_id: d for d in rows}


def chunk_ids(doc_id) -> list[int]:
    with session_scope() as s:
        return sorted(s.scalars(select(Chunk.id).where(Chunk.document_id == doc_id)).all())


def all_chunk_ids(source_id) -> dict[str, list[int]]:
    return {ext: chunk_ids(d.id) for ext, d in docs(source_id).items()}


def hook_url(live_url: str, source_id: str) -> str:
    return f"{live_url}/api/webhooks/v1/woocommerce/{source_id}"


def post_raw(url: str, body: bytes, headers: dict) -> tuple[int, dict]:
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    try:
        conn.request("POST", parts.path, body=body, headers={"Content-Type": "application/json", **headers})
        resp = conn.getresponse()
        data = resp.read()
        return resp.status, (json.loads(data) if data else {})
    finally:
        conn.close()


def wc_headers(topic: str, body: bytes, secret: str, delivery_id: str | None = None) -> dict:
    resource, _, event = topic.partition(".")
    sig = base64.b64encode(hmac.new(secret.encode(), body, hashlib.sha256).digest()).decode()
    return {"X-WC-Webhook-Topic": topic, "X-WC-Webhook-Resource": resource, "X-WC-Webhook-Event": event,
            "X-WC-Webhook-Signature": sig, "X-WC-Webhook-ID": "142",
            "X-WC-Webhook-Delivery-ID": delivery_id or uuid.uuid4().hex,
            "X-WC-Webhook-Source": "http://shop.test/"}


def shop_preset(admin) -> None:
    """A shop uses the shopping preset (product cards) when it is installed."""
    from kbframework.hooks import registry

    if "shopping" in registry.presets():
        r = admin.put("/api/admin/v1/settings", json={"preset": "shopping"})
        assert r.status_code == 200, r.get_data(as_text=True)


def chat(admin, question: str) -> dict:
    r = admin.post("/api/admin/v1/chat", json={"question": question})
    assert r.status_code == 200, r.get_data(as_text=True)
    return r.get_json()


def card_for(out: dict, doc_id) -> dict | None:
    return next((c for c in out["cards"] if c["document_id"] == str(doc_id)), None)


def scheduled_webhook_jobs() -> list[str]:
    from rq.registry import ScheduledJobRegistry

    from kbframework.jobs.queues import queue

    q = queue("webhook")
    return list(ScheduledJobRegistry(queue=q).get_job_ids()) + list(q.job_ids)


def events(source_id) -> list[WebhookEvent]:
    with session_scope() as s:
        rows = s.scalars(select(WebhookEvent).where(WebhookEvent.source_id == source_id)
                         .order_by(WebhookEvent.id)).all()
        s.expunge_all()
        return rows


# ----------------------------------------------------------------------------- tests

def test_cli_add_sync_webhook_price_and_unpublish(kb_admin, store, live_url, kb_drain):
    """The "done when": a shop admin adds the source from the CLI, the catalogue syncs, a
    price changed by webhook shows in the next answer's card, an unpublished product
    disappears from answers."""
    from click.testing import CliRunner

    from kbframework.cli.commands import cli as main

    allow_private(kb_admin.org["id"])
    shop_preset(kb_admin)
    cli = CliRunner()
    config = {"store_url": store.url, "consumer_key": store.consumer_key,
              "consumer_secret": store.consumer_secret, "currency": "EUR", "sync_interval_minutes": 30}
    r = cli.invoke(main, ["source", "add", "--org", "test-org", "--type", "woocommerce", "--name", "Shop",
                          "--config", json.dumps(config)])
    assert r.exit_code == 0, r.output
    source_id = r.output.split()[1]
    secret = cli.invoke(main, ["source", "secret", source_id]).output.strip()
    assert len(secret) >= 20  # generated, since none was given

    # secrets are encrypted at rest and never shown back in full
    src = kb_admin.get(f"/api/admin/v1/sources/{source_id}").get_json()
    assert store.consumer_secret not in json.dumps(src) and store.consumer_key not in json.dumps(src)
    assert set(src["secrets"]) == {"consumer_key", "consumer_secret", "webhook_secret"}
    assert src["sync_interval_minutes"] == 30 and src["config"]["api_path"] == "wc/v3"
    with session_scope() as s:
        assert store.consumer_secret.encode() not in (s.get(Source, source_id).secrets or "").encode()

    r = cli.invoke(main, ["source", "sync", source_id, "--wait"])
    assert r.exit_code == 0, r.output
    stats = json.loads(r.output)["stats"]
    assert stats["fetched"] == 18 and stats["created"] == 17 and stats["ignored"] == 1  # 64 is hidden
    # paged as asked, variations fetched for the two variable products
    listing = [q for q in store.requests if q.path == "/wp-json/wc/v3/products"]
    assert listing[0].query["per_page"] == "100" and listing[0].query["orderby"] == "id"
    assert {q.path for q in store.requests} >= {"/wp-json/wc/v3/products/44/variations",
                                                "/wp-json/wc/v3/products/45/variations"}

    d = docs(source_id)
    assert "64" not in d and all(x.status == "active" and x.chunk_count > 0 for x in d.values())
    hoodie = d["45"]
    assert hoodie.document_role == "product" and hoodie.type == "woo_product"
    assert hoodie.source_url == "http://127.0.0.1:%d/product/hoodie/" % store.port
    assert hoodie.primary_image_url.endswith("hoodie-2.jpg")
    assert hoodie.metadata_["price_min"] == 42 and hoodie.metadata_["price_max"] == 45
    assert hoodie.metadata_["in_stock"] is True and len(hoodie.metadata_["variations"]) == 4
    assert hoodie.source_modified_at is not None and "<p>" not in hoodie.normalized_content
    logo = d["46"]
    assert logo.metadata_["price"] == 45 and logo.metadata_["currency"] == "EUR"

    out = chat(kb_admin, "Hoodie with Logo")
    card = card_for(out, logo.id)
    assert card and card["price"] == "€45" and card["url"].endswith("/product/hoodie-with-logo/")
    before = chunk_ids(logo.id)

    # a price change arrives by webhook: columns, metadata and card change, no re-embedding
    store.update(46, regular_price="39")
    status, body = store.deliver(hook_url(live_url, source_id), "product.updated", 46, secret=secret)
    assert status == 202, body
    kb_drain()
    assert chunk_ids(logo.id) == before
    assert docs(source_id)["46"].metadata_["price"] == 39
    out = chat(kb_admin, "Hoodie with Logo")
    assert card_for(out, logo.id)["price"] == "€39"
    assert "price: €39; url: %s/product/hoodie-with-logo/" % store.url in out["debug"]["prompt"]

    # unpublished in the store → gone from answers and cards, its chunks purged
    store.unpublish(46)
    status, _ = store.deliver(hook_url(live_url, source_id), "product.updated", 46, secret=secret)
    assert status == 202
    kb_drain()
    assert chunk_ids(logo.id) == [] and docs(source_id)["46"].status == "deleted"
    out = chat(kb_admin, "Hoodie with Logo")
    assert card_for(out, logo.id) is None
    assert all(src["document_id"] != str(logo.id) for src in out["sources"])
    assert [e.outcome for e in events(source_id)] == ["cheap", "unpublished"]
    assert kb_admin.get(f"/api/admin/v1/sources/{source_id}").get_json()["last_webhook_at"]


def test_incremental_sync_deletions_and_full_reconcile(kb_admin, store):
    src = synced(kb_admin, store)
    sid = src["id"]
    before = all_chunk_ids(sid)
    with session_scope() as s:
        watermark = s.get(Source, sid).watermark
    newest = max([p["date_modified_gmt"] for p in store.products]
                 + [v["date_modified_gmt"] for p in store.products for v in store.variations_of(p["id"])])
    assert watermark.strftime("%Y-%m-%dT%H:%M:%S") == newest  # the newest date_modified_gmt seen
    watermark_minus_1s = (watermark - timedelta(seconds=1)).strftime("%Y-%m-%dT%H:%M:%S")

    store.update(47, name="T-Shirt Organic", description="<p>Soft <b>organic</b> cotton tee.</p>")
    store.update(48, stock_status="outofstock")  # zero stock is fine: stays retrievable
    store.delete(60)  # trashed: product.deleted
    new = store.add({"name": "Rain Jacket", "regular_price": "80", "description": "<p>Keeps you dry.</p>"})
    store.reset_requests()
    res = run_sync(sid, "incremental", inline_ingest=True)
    assert res["status"] == "ok" and res["kind"] == "incremental", res
    st = res["stats"]
    assert (st["fetched"], st["created"], st["changed"], st["cheap"], st["unpublished"]) == (4, 1, 1, 1, 1)
    listing = [q.query for q in store.requests if q.path == "/wp-json/wc/v3/products"]
    assert {q["status"] for q in listing} == {"any", "trash"}
    for q in listing:  # a naive GMT value with dates_are_gmt, one second before the watermark
        assert q["dates_are_gmt"] == "true" and q["modified_after"] == watermark_minus_1s
    d = docs(sid)
    assert chunk_ids(d["47"].id) != before["47"] and "organic cotton" in d["47"].normalized_content
    assert chunk_ids(d["48"].id) == before["48"] and d["48"].metadata_["in_stock"] is False
    assert d["48"].status == "active"
    assert d["60"].status == "deleted" and chunk_ids(d["60"].id) == []
    assert d[str(new["id"])].status == "active"
    untouched = [k for k in before if k not in ("47", "48", "60")]
    assert all(chunk_ids(d[k].id) == before[k] for k in untouched)

    # deleted for good: only a full sync notices, and purges it
    store.delete(58, force=True)
    assert run_sync(sid, "incremental", inline_ingest=True)["stats"]["purged"] == 0
    assert docs(sid)["58"].status == "active"
    res = run_sync(sid, "full", inline_ingest=True)
    assert res["stats"]["purged"] == 1 and res["stats"]["embedded_documents"] == 0
    assert docs(sid)["58"].status == "deleted" and chunk_ids(docs(sid)["58"].id) == []


def test_mapping_change_reindexes_only_what_it_changes(kb_admin, store, kb_drain):
    src = synced(kb_admin, store)
    sid = src["id"]
    before = all_chunk_ids(sid)
    colour = {"44", "45", "46", "47", "48", "60", "68", "70", "83", "85"}
    assert all("Color:" in docs(sid)[k].normalized_content for k in colour)

    # bad mappings are refused with a clear JSON error
    r = kb_admin.put(f"/api/admin/v1/sources/{sid}", json={"config": {"field_mapping": {"attributes": {"Color": "sideways"}}}})
    assert r.status_code == 400 and "sideways" in json.dumps(r.get_json())

    # Color moves from the text to the filterable tags: those products are re-embedded
    r = kb_admin.put(f"/api/admin/v1/sources/{sid}", json={"config": {"field_mapping": {"attributes": {"Color": "tags"}}}})
    assert r.status_code == 200, r.get_data(as_text=True)
    assert r.get_json()["resync_job_id"] and store.consumer_secret not in r.get_data(as_text=True)
    kb_drain()
    d = docs(sid)
    for k, ids in before.items():
        if k in colour:
            assert chunk_ids(d[k].id) != ids, k
            assert "Color:" not in d[k].normalized_content
        else:
            assert chunk_ids(d[k].id) == ids, k
    assert set(d["44"].tags) == {"Blue", "Green", "Red"} and d["47"].tags == ["Gray"]
    with session_scope() as s:
        run = s.scalars(select(SyncRun).where(SyncRun.source_id == sid).order_by(SyncRun.started_at.desc())).first()
        assert run.kind == "full" and run.stats["changed"] == len(colour) and run.stats["stale"] == 0

    # a mapping that only touches metadata re-embeds nothing
    after = all_chunk_ids(sid)
    r = kb_admin.put(f"/api/admin/v1/sources/{sid}", json={"config": {"field_mapping": {
        "attributes": {"Color": "tags"}, "meta": {"_wpcom_is_markdown": "metadata"}}}})
    assert r.status_code == 200
    kb_drain()
    assert all_chunk_ids(sid) == after
    assert docs(sid)["46"].metadata_["_wpcom_is_markdown"] == "1"


def test_webhook_signatures_ping_duplicates_and_real_payloads(kb_admin, store, live_url, kb_drain, shared_data):
    recorded = json.loads((shared_data / "woocommerce" / "webhooks" / "deliveries.json").read_text())
    src = synced(kb_admin, store, webhook_secret=recorded["secret"])
    sid, url = src["id"], hook_url(live_url, src["id"])
    hooks_dir = shared_data / "woocommerce" / "webhooks"

    # the real recorded deliveries, byte for byte
    for case in recorded["cases"]:
        body = (hooks_dir / case["body_file"]).read_bytes()
        t0 = time.perf_counter()
        status, answer = post_raw(url, body, case["headers"])
        assert time.perf_counter() - t0 < 0.5
        if case["expect"].startswith("reject"):
            assert status == 401 and answer["error"]["code"] == "bad_signature", case["name"]
        elif case["name"] == "ping":
            assert status == 200 and answer.get("ping"), case["name"]
        else:
            assert case["expect"] == "accept" and status == 202, (case["name"], answer)
    # product 794 of the docs' payloads is not in this store: re-fetched, found gone
    kb_drain()
    outcomes = [(e.topic, e.outcome) for e in events(sid)]
    assert outcomes == [("product.updated", "gone"), ("product.created", "gone"), ("product.deleted", "gone"),
                        ("product.updated", "rejected"), ("product.updated", "rejected")]

    # forged: nothing changes, nothing is queued
    store.update(47, regular_price="99")
    n_events = len(events(sid))
    forged = store.webhook_body("product.updated", 47)
    status, answer = post_raw(url, forged, wc_headers("product.updated", forged, "not-the-secret"))
    assert status == 401 and answer["error"]["code"] == "bad_signature"
    status, _ = post_raw(url, forged, {k: v for k, v in wc_headers("product.updated", forged, SECRET).items()
                                       if k != "X-WC-Webhook-Signature"})
    assert status == 401
    assert scheduled_webhook_jobs() == [] and len(events(sid)) == n_events + 2
    assert {e.outcome for e in events(sid)[-2:]} == {"rejected"}
    assert docs(sid)["47"].metadata_["price"] == 18

    # valid, then the same delivery again: recorded once, ignored the second time
    status, answer = store.deliver(url, "product.updated", 47, secret=recorded["secret"], delivery_id="dup-1")
    assert status == 202
    status, answer = store.deliver(url, "product.updated", 47, secret=recorded["secret"], delivery_id="dup-1")
    assert status == 200 and json.loads(answer)["duplicate"] is True
    assert len(scheduled_webhook_jobs()) == 1
    kb_drain()
    assert docs(sid)["47"].metadata_["price"] == 99
    mine = [e for e in events(sid) if e.delivery_id and e.delivery_id.startswith("dup-1:")]
    assert len(mine) == 1 and mine[0].outcome == "cheap" and mine[0].topic == "product.updated"

    # WooCommerce's ping (unsigned form body) gets a 200; deleted + restored resolve by re-fetch
    status, answer = store.ping(url)
    assert status == 200 and json.loads(answer)["ping"] is True
    store.delete(70)
    assert store.deliver(url, "product.deleted", 70, secret=recorded["secret"])[0] == 202
    kb_drain()
    assert docs(sid)["70"].status == "deleted"
    store.restore(70)
    assert store.deliver(url, "product.restored", 70, secret=recorded["secret"])[0] == 202
    kb_drain()
    assert docs(sid)["70"].status == "active" and chunk_ids(docs(sid)["70"].id)


def test_out_of_order_delivery_is_ignored(kb_admin, store, live_url, kb_drain):
    src = synced(kb_admin, store)
    sid, url = src["id"], hook_url(live_url, src["id"])
    store.update(62, regular_price="80")
    old_body = store.webhook_body("product.updated", 62)  # carries 80 and its timestamp
    store.update(62, regular_price="70")
    assert store.deliver(url, "product.updated", 62, secret=SECRET)[0] == 202
    kb_drain()
    assert docs(sid)["62"].metadata_["price"] == 70

    # the older delivery arrives late, validly signed: ignored and recorded as stale
    status, answer = post_raw(url, old_body, wc_headers("product.updated", old_body, SECRET))
    assert status == 200 and answer["stale"] is True
    assert scheduled_webhook_jobs() == []
    assert events(sid)[-1].outcome == "stale"
    assert docs(sid)["62"].metadata_["price"] == 70

    # the same rule guards the job (a late re-fetch) and the sync: nothing older applies
    from kbframework.sources.apply import apply_draft
    from kbframework_woocommerce.normalize import product_to_draft

    draft = product_to_draft(json.loads(old_body), None, {}, "EUR")
    with session_scope() as s:
        doc, action = apply_draft(s, s.get(Source, sid), draft)
        assert action == "stale"
    assert docs(sid)["62"].metadata_["price"] == 70


def test_store_outage_retries_then_error_and_old_documents_keep_answering(kb_admin, store, fast_retries):
    shop_preset(kb_admin)
    src = synced(kb_admin, store)
    sid = src["id"]

    # 429 with Retry-After, then success: honoured, not an error
    store.update(73, regular_price="12")
    store.fail_next(2, status=429, retry_after=3)
    res = run_sync(sid, "incremental", inline_ingest=True)
    assert res["status"] == "ok" and fast_retries[:2] == [3.0, 3.0]

    # down: retries with backoff, then the source is in error with the reason
    fast_retries.clear()
    store.set_down(True, mode="503")
    res = run_sync(sid, "incremental", inline_ingest=True)
    assert res["status"] == "error" and "503" in res["error"]
    assert len(fast_retries) == 3 and fast_retries == sorted(fast_retries)  # exponential backoff
    src = kb_admin.get(f"/api/admin/v1/sources/{sid}").get_json()
    assert src["status"] == "error" and "503" in src["last_error"]
    out = chat(kb_admin, "Sunglasses")
    assert any(c["title"] == "Sunglasses" for c in out["cards"])

    store.set_down(True, mode="refuse")
    res = run_sync(sid, "incremental", inline_ingest=True)
    assert res["status"] == "error" and "unreachable" in res["error"]
    store.set_down(False)

    # too slow: the read timeout counts as a failure and is retried like one
    r = kb_admin.put(f"/api/admin/v1/sources/{sid}", json={"config": {"timeout_seconds": 1, "max_retries": 1}})
    assert r.status_code == 200, r.get_data(as_text=True)
    store.delay = 1.3
    try:
        res = run_sync(sid, "incremental", inline_ingest=True)
    finally:
        store.delay = 0
    assert res["status"] == "error" and "did not answer in time" in res["error"] and "2 attempts" in res["error"]

    # a wrong secret: 401, no retries, a clear reason
    fast_retries.clear()
    r = kb_admin.put(f"/api/admin/v1/sources/{sid}", json={"config": {"consumer_secret": "cs_wrong_secret"}})
    assert r.status_code == 200
    res = run_sync(sid, "full", inline_ingest=True)
    assert res["status"] == "error" and "Consumer secret is invalid" in res["error"] and fast_retries == []
    assert all(d.status == "active" for k, d in docs(sid).items())

    # back to normal: the source recovers
    kb_admin.put(f"/api/admin/v1/sources/{sid}", json={"config": {"consumer_secret": store.consumer_secret}})
    assert run_sync(sid, "incremental", inline_ingest=True)["status"] == "ok"
    assert kb_admin.get(f"/api/admin/v1/sources/{sid}").get_json()["status"] == "active"


def test_ten_variation_webhooks_become_one_job(kb_admin, store, live_url, kb_drain):
    src = synced(kb_admin, store)
    sid, url = src["id"], hook_url(live_url, src["id"])
    before = chunk_ids(docs(sid)["45"].id)
    variation_ids = [v["id"] for v in store.variations_of(45)]
    job_ids, slowest = set(), 0.0
    for i in range(10):
        vid = variation_ids[i % len(variation_ids)]
        store.update_variation(45, vid, regular_price=str(50 + i))
        t0 = time.perf_counter()
        status, answer = store.deliver(url, "product.updated", vid, secret=SECRET)
        slowest = max(slowest, time.perf_counter() - t0)
        assert status == 202, answer
        job_ids.add(json.loads(answer)["job_id"])
    assert slowest < 0.5
    assert len(job_ids) == 1 and scheduled_webhook_jobs() == list(job_ids)
    store.reset_requests()
    kb_drain()
    fetched = [q.path for q in store.requests]
    assert fetched.count("/wp-json/wc/v3/products/45") == 1, fetched
    assert fetched.count("/wp-json/wc/v3/products/45/variations") == 1
    hoodie = docs(sid)["45"]
    assert hoodie.metadata_["price_max"] == 59 and chunk_ids(hoodie.id) == before  # cheap
    outcomes = [e.outcome for e in events(sid)]
    assert len(outcomes) == 10 and set(outcomes) == {"cheap"}


def test_register_webhooks_on_the_store(kb_admin, store, live_url, kb_drain):
    src = synced(kb_admin, store)
    sid = src["id"]
    r = kb_admin.post(f"/api/admin/v1/sources/{sid}/register-webhooks", json={"base_url": live_url})
    assert r.status_code == 200, r.get_data(as_text=True)
    out = r.get_json()
    assert out["delivery_url"] == hook_url(live_url, sid)
    hooks = store.webhooks
    assert sorted(h["topic"] for h in hooks) == ["product.created", "product.deleted", "product.restored",
                                                 "product.updated"]
    assert all(h["secret"] == SECRET and h["delivery_url"] == out["delivery_url"] for h in hooks)
    assert all(p["result"][0] == 200 for p in store.pings)  # our endpoint answered the pings
    # registering again (here from the CLI) re-points the same webhooks instead of adding more
    from click.testing import CliRunner

    from kbframework.cli.commands import cli as main

    r = CliRunner().invoke(main, ["source", "register-webhooks", sid, "--base-url", live_url])
    assert r.exit_code == 0 and out["delivery_url"] in r.output and r.output.count("(updated)") == 4, r.output
    assert len(store.webhooks) == 4

    # the store now delivers on its own
    store.update(85, regular_price="21", sale_price="")
    assert store.dispatch_webhooks("product.updated", 85) == [(next(h["id"] for h in hooks
                                                                    if h["topic"] == "product.updated"), 202)]
    kb_drain()
    assert docs(sid)["85"].metadata_["price"] == 21

    # a read-only key cannot: a clear error, nothing registered
    store.permissions = "read"
    r = kb_admin.post(f"/api/admin/v1/sources/{sid}/register-webhooks", json={"base_url": live_url})
    assert r.status_code == 400 and "write permissions" in r.get_json()["error"]["message"]


def test_config_validation_and_paging(kb_admin, store):
    allow_private(kb_admin.org["id"])
    bad = kb_admin.post("/api/admin/v1/sources", json={"type": "woocommerce", "name": "Shop", "config": {
        "store_url": "ftp://shop", "consumer_key": "ck_x"}})
    assert bad.status_code == 400
    details = bad.get_json()["error"]["details"]
    assert "store_url" in details and "consumer_secret" in details

    # many pages: built here, ordered by id, every product once, variations attached
    from kbframework.types import SyncContext
    from kbframework_woocommerce.connector import WooCommerceConnector

    store.generate(230, seed=3)
    conn = WooCommerceConnector()
    cfg = conn.config_schema().load({"store_url": store.url, "consumer_key": store.consumer_key,
                                     "consumer_secret": store.consumer_secret})
    ctx = SyncContext(organization_id=kb_admin.org["id"], allow_private_network=True)
    store.reset_requests()
    records = list(conn.fetch_all(cfg, ctx))
    ids = [int(r.external_id) for r in records]
    assert len(ids) == len(set(ids)) == 248 and ids == sorted(ids)
    pages = [q.query for q in store.requests if q.path == "/wp-json/wc/v3/products" and "_fields" not in q.query]
    assert [q["page"] for q in pages] == ["1", "2", "3"]
    variable = [r for r in records if r.payload["product"]["type"] == "variable"]
    assert variable and all(r.payload["variations"] for r in variable)
    draft = conn.normalize(variable[0], cfg, ctx)
    assert draft.metadata["price_min"] <= draft.metadata["price_max"]

    # without the organization's permission, a private address is refused
    from kbframework.net import BlockedAddress

    with pytest.raises(BlockedAddress):
        list(conn.fetch_all(cfg, SyncContext(organization_id=kb_admin.org["id"])))


def test_an_unmapped_colour_attribute_filters_the_catalogue(kb_admin, store):
    """WooCommerce's sample shop maps nothing: its Color attribute alone answers 'in blue?'."""
    allow_private(kb_admin.org["id"])
    shop_preset(kb_admin)
    synced(kb_admin, store)

    def ask(question, session="colours"):
        r = kb_admin.post("/api/admin/v1/chat", json={"question": question, "session_id": session})
        assert r.status_code == 200, r.get_data(as_text=True)
        return r.get_json()

    out = ask("any hoodies in blue?")
    assert {c["title"] for c in out["cards"]} == {"Hoodie", "Hoodie with Logo"}  # not the zipper one
    assert out["debug"]["filters"]["merged"]["tags"] == ["Blue"]
    out = ask("what about in green?")
    assert [c["title"] for c in out["cards"]] == ["Hoodie"]  # still hoodies, now green
    out = ask("is there anything yellow?", session="another")
    assert [c["title"] for c in out["cards"]] == ["Cap"]


def test_a_gift_for_a_music_fan_is_the_music_category(kb_admin, store):
    """"gift", "fan", "lover" say what kind of answer is wanted: beside the label 'Music' the
    question is all constraints, and the category's products are the answer (not the fallback)."""
    allow_private(kb_admin.org["id"])
    shop_preset(kb_admin)
    synced(kb_admin, store)
    for q in ("I need a gift for a music fan", "something for a music lover?"):
        out = chat(kb_admin, q)
        assert out["debug"]["reason"] is None, (q, out["debug"].get("gate"))
        assert {c["title"] for c in out["cards"]} == {"Album", "Single"}, q
    assert chat(kb_admin, "do you have gift cards?")["debug"]["reason"] == "no_results_above_threshold"


def test_a_price_that_leaves_nothing_offers_the_nearest_prices(kb_admin, store):
    allow_private(kb_admin.org["id"])
    shop_preset(kb_admin)
    synced(kb_admin, store)
    out = chat(kb_admin, "accessories under 15")  # the cheapest accessory is the Cap at 16
    assert out["debug"]["reason"] == "pre_filter_empty" and out["cards"] == []
    alt = out["alternatives"]
    assert alt["relaxed"] == ["price"] and alt["label"] == "Nothing at that price — the nearest prices"
    assert [c["title"] for c in alt["cards"]] == ["Cap", "Beanie", "Beanie with Logo"]  # 16, 18, 18
    # the other constraints hold: a red hoodie, not the cheapest red things
    assert [c["title"] for c in chat(kb_admin, "red hoodie under 10")["alternatives"]["cards"]] == ["Hoodie"]
    # not the price's fault: the usual alternatives without filters
    out = chat(kb_admin, "sunglasses under 50 in stock")
    assert "relaxed" not in (out.get("alternatives") or {})


def test_the_cheapest_and_the_dearest_of_a_category(kb_admin, store):
    allow_private(kb_admin.org["id"])
    shop_preset(kb_admin)
    synced(kb_admin, store)
    # the variable Hoodie starts at 42, the other two at 45: the cards follow the prices
    assert [c["title"] for c in chat(kb_admin, "What is your cheapest hoodie?")["cards"]][0] == "Hoodie"
    cards = [c["title"] for c in chat(kb_admin, "your most expensive accessory?")["cards"]]
    assert cards[:2] == ["Sunglasses", "Belt"], cards  # 90, 55
