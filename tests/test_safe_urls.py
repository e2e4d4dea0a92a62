"""Safe URLs end to end: a ``javascript:`` permalink (and image) served by the WooCommerce
store is dropped at ingestion with a logged reason and never leaves the system -- not in
the public API, the admin API nor the admin pages -- and a bad link written to the database
some other way is still filtered on the way out. Key settings go through one validation
whichever route writes them."""
from __future__ import annotations

import logging
import sys
import uuid
from pathlib import Path

import pytest
from sqlalchemy import select, update

from kbframework.db import session_scope
from kbframework.models import AssistantKey, Document
from kbframework.sources.sync import run_sync

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.embed_support import make_key  # noqa: E402
from fakes.woocommerce_server import FakeWooStore  # noqa: E402

CSV = ROOT.parent / "shared" / "data" / "woocommerce" / "sample_data" / "sample_products.csv"
SHOP = "https://shop.example"
EVIL = "javascript:alert(document.cookie)//"
pytestmark = pytest.mark.skipif(not CSV.exists(), reason="shared WooCommerce fixtures missing")


def _evil_store(store: FakeWooStore) -> dict:
    """Give one published product a javascript: permalink, image and external URL."""
    pid = next(p["id"] for p in store.products if p["status"] == "publish" and p["type"] == "simple")
    with store._lock:
        p = store._products[pid]
        p["permalink"] = EVIL
        if p.get("images"):
            p["images"][0]["src"] = "data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg=="
        p["external_url"] = "javascript:void(0)"
    return store.get(pid)


def _assert_clean(text: str, where: str):
    low = text.lower()
    assert "javascript:" not in low and "data:text/html" not in low, f"an unsafe URL left through {where}"


def test_javascript_permalink_never_leaves_the_system(kb_admin, kb_app, caplog):
    from kbframework.testing import set_org_extra

    with FakeWooStore.from_sample_csv(str(CSV)) as store:
        product = _evil_store(store)
        set_org_extra(kb_admin.org, allow_private_network=True)
        r = kb_admin.post("/api/admin/v1/sources", json={"type": "woocommerce", "name": "Shop", "config": {
            "store_url": store.url, "consumer_key": store.consumer_key,
            "consumer_secret": store.consumer_secret}})
        assert r.status_code == 201, r.get_data(as_text=True)
        with caplog.at_level(logging.WARNING, logger="kbframework.sources.apply"):
            res = run_sync(r.get_json()["id"], "full", inline_ingest=True)
        assert res["status"] == "ok", res
    # dropped at ingestion, with a logged reason
    with session_scope() as s:
        doc = s.scalar(select(Document).where(Document.external_id == str(product["id"])))
        assert doc is not None and doc.status == "active"
        assert doc.source_url is None and doc.primary_image_url is None
        assert "external_url" not in (doc.metadata_ or {})
        doc_id = str(doc.id)
    reasons = [r.getMessage() for r in caplog.records]
    assert any("dropped source_url" in m and "not http or https" in m for m in reasons), reasons

    # public JSON (plain and streamed)
    key = make_key(kb_admin.org["id"], [SHOP], rate_per_ip_minute=1000)
    c = kb_app.test_client()
    r = c.post(f"/api/embed/v1/{key['key']}/chat", json={"message": product["name"]}, headers={"Origin": SHOP})
    assert r.status_code == 200
    out = r.get_json()
    assert doc_id in {s["document_id"] for s in out["sources"]} | {c_["document_id"] for c_ in out["cards"]}
    _assert_clean(r.get_data(as_text=True), "the public chat")
    # admin JSON
    for url in ("/api/admin/v1/documents?per_page=100", f"/api/admin/v1/documents/{doc_id}"):
        _assert_clean(kb_admin.get(url).get_data(as_text=True), url)
    r = kb_admin.post("/api/admin/v1/chat", json={"question": product["name"]})
    assert r.status_code == 200
    _assert_clean(r.get_data(as_text=True), "the admin chat")
    # admin pages
    for url in ("/admin/documents", f"/admin/documents/{doc_id}"):
        r = kb_admin.get(url)
        assert r.status_code == 200
        _assert_clean(r.get_data(as_text=True), url)


def test_a_bad_link_already_in_the_database_is_filtered_on_the_way_out(kb_admin, kb_app):
    r = kb_admin.post("/api/admin/v1/documents/manual?wait=1", json={
        "title": "Gift cards", "body": "Gift cards are sold at the front desk and never expire.",
        "source_url": "https://shop.example/gift-cards"})
    assert r.status_code == 201, r.get_data(as_text=True)
    doc_id = r.get_json()["id"]
    with session_scope() as s:  # as a row written before the ingestion check existed
        s.execute(update(Document).where(Document.id == uuid.UUID(doc_id)).values(
            source_url="JavaScript:alert(1)", primary_image_url="javascript:alert(2)"))
    key = make_key(kb_admin.org["id"], [SHOP], rate_per_ip_minute=1000)
    r = kb_app.test_client().post(f"/api/embed/v1/{key['key']}/chat", json={"message": "gift cards expire?"},
                                  headers={"Origin": SHOP})
    out = r.get_json()
    assert doc_id in {s["document_id"] for s in out["sources"]}
    _assert_clean(r.get_data(as_text=True), "the public chat")
    _assert_clean(kb_admin.post("/api/admin/v1/chat", json={"question": "gift cards expire?"})
                  .get_data(as_text=True), "the admin chat")
    for url in (f"/api/admin/v1/documents/{doc_id}", f"/admin/documents/{doc_id}", "/admin/documents"):
        _assert_clean(kb_admin.get(url).get_data(as_text=True), url)
    # an admin typing a bad link gets a clear 400
    r = kb_admin.put(f"/api/admin/v1/documents/manual/{doc_id}", json={"source_url": "javascript:alert(3)"})
    assert r.status_code == 400


def test_key_settings_are_validated_on_every_route(kb_admin):
    r = kb_admin.post("/api/admin/v1/keys", json={"allowed_origins": [SHOP], "settings": {"logo": "javascript:x()"}})
    assert r.status_code == 400, r.get_data(as_text=True)
    r = kb_admin.post("/api/admin/v1/keys", json={"allowed_origins": [SHOP]})
    assert r.status_code == 201
    kid = r.get_json()["id"]
    for bad in ({"logo": "javascript:alert(1)"}, {"logo": "data:image/svg+xml,<svg onload=alert(1)>"},
                {"color": "red;background:url(x)"}, {"position": "top"}, {"unknown": 1},
                {"limits": {"max_body_bytes": "lots"}}, "not an object"):
        r = kb_admin.put(f"/api/admin/v1/keys/{kid}", json={"settings": bad})
        assert r.status_code == 400, (bad, r.get_data(as_text=True))
    r = kb_admin.put(f"/api/admin/v1/keys/{kid}", json={"settings": {"logo": "https://shop.example/logo.png",
                                                                    "color": "#ABCDEF"}})
    assert r.status_code == 200 and r.get_json()["settings"] == {"logo": "https://shop.example/logo.png",
                                                                 "color": "#abcdef"}
    with session_scope() as s:
        assert s.get(AssistantKey, uuid.UUID(kid)).settings == {"logo": "https://shop.example/logo.png",
                                                                "color": "#abcdef"}
