"""The local WooCommerce REST v3 server, and webhook signatures on the real deliveries."""
from __future__ import annotations

import base64
import json
import re
import socket
import sys
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlencode

import pytest

ROOT = Path(__file__).resolve().parents[2]
for extra in (ROOT, ROOT / "plugins" / "woocommerce"):
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))

from kbframework_woocommerce.webhooks import classify_delivery, compute_signature, verify_signature  # noqa: E402
from fakes.woocommerce_server import FakeWooStore, php_json_encode  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "woocommerce"
EXAMPLES = DATA / "rest_api_v3" / "examples"
WEBHOOKS = DATA / "webhooks"
CSV = DATA / "sample_data" / "sample_products.csv"

pytestmark = pytest.mark.skipif(not DATA.exists(), reason="shared WooCommerce fixtures missing")


def example(name: str):
    return json.loads((EXAMPLES / name).read_text())["response"]


# ----------------------------------------------------------------------------- helpers

def call(store: FakeWooStore, path: str, params: dict | None = None, *, method: str = "GET",
         auth: str = "basic", key: str | None = None, secret: str | None = None,
         body: dict | None = None, url: str | None = None, timeout: float = 10):
    """(status, headers, parsed JSON or raw text)."""
    key = key or store.consumer_key
    secret = secret or store.consumer_secret
    params = dict(params or {})
    headers = {}
    if auth == "basic":
        headers["Authorization"] = "Basic " + base64.b64encode(f"{key}:{secret}".encode()).decode()
    elif auth == "query":
        params.update(consumer_key=key, consumer_secret=secret)
    if url is None:
        url = store.api_url + path + ("?" + urlencode(params) if params else "")
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    req = urllib.request.Request(url, data=data, headers=headers, method=method)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            status, hdrs, raw = resp.status, resp.headers, resp.read()
    except urllib.error.HTTPError as err:
        status, hdrs, raw = err.code, err.headers, err.read()
    try:
        parsed = json.loads(raw)
    except ValueError:
        parsed = raw.decode("utf-8", "replace")
    return status, hdrs, parsed


def links(headers) -> dict[str, str]:
    out = {}
    for url, rel in re.findall(r'<([^>]*)>;\s*rel="([^"]+)"', headers.get("Link") or ""):
        out[rel] = url
    return out


class Receiver:
    """A tiny webhook endpoint that records what it gets."""

    def __init__(self, status: int = 200):
        self.status = status
        self.received: list[dict] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                outer.received.append({"path": self.path, "headers": dict(self.headers.items()),
                                       "body": raw, "version": self.request_version})
                self.send_response(outer.status)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *a):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks/woo"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05},
                                       daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture()
def store():
    with FakeWooStore.from_sample_csv(str(CSV)) as s:
        yield s


@pytest.fixture()
def receiver():
    r = Receiver()
    yield r
    r.close()


# ----------------------------------------------------------------------------- real deliveries

DELIVERIES = json.loads((WEBHOOKS / "deliveries.json").read_text()) if WEBHOOKS.exists() else {"cases": [], "secret": ""}


@pytest.mark.parametrize("case", DELIVERIES["cases"], ids=lambda c: c["name"])
def test_fixture_deliveries(case):
    raw = (WEBHOOKS / case["body_file"]).read_bytes()
    assert len(raw) == case["body_length"]
    secret = DELIVERIES["secret"]
    info = classify_delivery(case["headers"], raw)
    signature = case["headers"].get("X-WC-Webhook-Signature")
    if case["name"] == "ping":
        assert signature is None
        assert info["kind"] == "ping" and info["webhook_id"] == 142
        assert verify_signature(raw, signature, secret) is False
        return
    assert info["kind"] == "product"
    assert info["product_id"] == 794
    assert info["delivery_id"] == case["headers"]["X-WC-Webhook-Delivery-ID"]
    assert info["topic"] == case["headers"]["X-WC-Webhook-Topic"]
    assert info["event"] == case["headers"]["X-WC-Webhook-Event"]
    assert info["webhook_id"] == 142
    if case["expect"] == "accept":
        assert verify_signature(raw, signature, secret) is True
    else:
        assert verify_signature(raw, signature, secret) is False
    if info["event"] == "deleted":
        assert info["date_modified_gmt"] is None
    elif "tampered" not in case["name"]:
        assert info["date_modified_gmt"].isoformat() == "2017-03-23T20:01:14+00:00"


def test_signature_is_over_raw_bytes_not_reencoded_json():
    raw = (WEBHOOKS / "product_updated.body.json").read_bytes()
    assert b"https:\\/\\/example.com" in raw
    header = DELIVERIES["cases"][0]["headers"]["X-WC-Webhook-Signature"]
    reencoded = json.dumps(json.loads(raw), separators=(",", ":")).encode()
    assert verify_signature(raw, header, DELIVERIES["secret"])
    assert not verify_signature(reencoded, header, DELIVERIES["secret"])
    assert not verify_signature(raw, "", DELIVERIES["secret"])
    assert not verify_signature(raw, header, "")
    assert not verify_signature(raw, "not base64 ✓", DELIVERIES["secret"])
    assert compute_signature(raw, DELIVERIES["secret"]) == header


def test_classify_other_shapes():
    assert classify_delivery({"x-wc-webhook-topic": "order.created"}, b"{}")["kind"] == "other"
    assert classify_delivery({}, b"hello")["kind"] == "other"
    assert classify_delivery([("Content-Type", "application/x-www-form-urlencoded")], "webhook_id=7")["webhook_id"] == 7
    bad = classify_delivery({"X-WC-Webhook-Topic": "product.updated"}, b"{not json")
    assert bad["kind"] == "product" and bad["error"] == "invalid_json"
    s = classify_delivery({"X-WC-Webhook-Topic": "product.deleted"}, b'{"id":"794"}')
    assert s["product_id"] == 794 and s["event"] == "deleted"


def test_php_json_encoding_matches_fixture():
    raw = (WEBHOOKS / "product_updated.body.json").read_bytes()
    assert php_json_encode(json.loads(raw)).encode() == raw
    assert php_json_encode({"a": "é/\x7f"}) == '{"a":"\\u00e9\\/\x7f"}'


# ----------------------------------------------------------------------------- shapes

def test_product_and_variation_shapes_match_docs(store):
    docs_product = example("products__retrieve-a-product__03.json")
    docs_variation = example("product-variations__retrieve-a-product-variation__02.json")
    status, _, product = call(store, "/products/45")
    assert status == 200
    assert list(product) == list(docs_product)
    assert product["type"] == "variable" and len(product["variations"]) == 4
    assert [list(i) for i in product["images"]][0] == list(docs_product["images"][0])
    assert list(product["attributes"][0]) == ["id", "name", "position", "visible", "variation", "options"]
    assert product["categories"] == [{"id": product["categories"][0]["id"], "name": "Hoodies", "slug": "hoodies"}]
    status, _, variations = call(store, "/products/45/variations")
    assert status == 200 and len(variations) == 4
    for v in variations:
        assert list(v) == list(docs_variation)
        assert v["date_modified_gmt"] and v["stock_status"] == "instock" and v["price"]
        assert all(list(a) == ["id", "name", "option"] for a in v["attributes"])
    red = next(v for v in variations if {"id": 1, "name": "Color", "option": "Red"} in v["attributes"])
    assert red["on_sale"] is True and red["price"] == "42" and red["regular_price"] == "45"
    # "Any Size" variations leave the attribute out, as WooCommerce does
    _, _, tee_variations = call(store, "/products/44/variations")
    assert all([a["name"] for a in v["attributes"]] == ["Color"] for v in tee_variations)


def test_verbatim_docs_product_webhook_body_is_byte_identical():
    with FakeWooStore(site_url="https://example.com", links_url="https://example.com") as s:
        s.add(example("products__retrieve-a-product__03.json"), verbatim=True)
        assert s.webhook_body("product.updated", 794) == (WEBHOOKS / "product_updated.body.json").read_bytes()
        assert s.webhook_body("product.deleted", 794) == (WEBHOOKS / "product_deleted.body.json").read_bytes()


def test_single_product_errors_match_docs(store):
    status, _, body = call(store, "/products/999999")
    assert status == 404
    assert body == {"code": "woocommerce_rest_product_invalid_id", "message": "Invalid ID.", "data": {"status": 404}}
    status, _, body = call(store, "/nope")
    assert status == 404
    assert body == json.loads((EXAMPLES / "introduction__errors__01.json").read_text())["response"]
    status, _, body = call(store, "/products", method="DELETE")
    assert status == 404 and body["code"] == "rest_no_route"


# ----------------------------------------------------------------------------- paging

def test_paging_headers_and_link(store):
    status, headers, page1 = call(store, "/products", {"per_page": 5})
    assert status == 200
    assert headers["X-WP-Total"] == "18" and headers["X-WP-TotalPages"] == "4"
    assert set(links(headers)) == {"next"}
    assert len(page1) == 5
    status, headers, page2 = call(store, "/products", {"per_page": 5, "page": 2})
    rels = links(headers)
    assert set(rels) == {"prev", "next"}
    assert "page=1" in rels["prev"] and "page=3" in rels["next"] and "per_page=5" in rels["next"]
    assert re.fullmatch(r'<[^>]+>; rel="prev", <[^>]+>; rel="next"', headers["Link"])
    _, headers, page4 = call(store, "/products", {"per_page": 5, "page": 4})
    assert set(links(headers)) == {"prev"} and len(page4) == 3
    _, headers, past = call(store, "/products", {"per_page": 5, "page": 9})
    assert past == [] and headers["X-WP-Total"] == "18" and "page=4" in links(headers)["prev"]


def test_default_page_size_and_order(store):
    _, headers, items = call(store, "/products")
    assert len(items) == 10 and headers["X-WP-TotalPages"] == "2"
    created = [p["date_created_gmt"] for p in items]
    assert created == sorted(created, reverse=True)
    _, _, asc = call(store, "/products", {"orderby": "id", "order": "asc", "per_page": 100})
    assert [p["id"] for p in asc] == sorted(p["id"] for p in asc)
    _, _, included = call(store, "/products", {"include": "47,44", "orderby": "include"})
    assert [p["id"] for p in included] == [47, 44]


def test_following_next_links_collects_everything():
    with FakeWooStore.generate(237, seed=1) as s:
        url, seen, pages = None, [], 0
        status, headers, items = call(s, "/products", {"per_page": 100}, auth="query")
        while True:
            assert status == 200
            seen.extend(p["id"] for p in items)
            pages += 1
            url = links(headers).get("next")
            if not url:
                break
            status, headers, items = call(s, "", url=url, auth="none")  # credentials ride in the link
        assert pages == 3 and len(seen) == len(set(seen)) == 237


def test_per_page_limits(store):
    status, _, body = call(store, "/products", {"per_page": 101})
    assert status == 400 and body["code"] == "rest_invalid_param"
    assert body["message"] == "Invalid parameter(s): per_page"
    assert body["data"]["status"] == 400
    assert body["data"]["params"]["per_page"] == "per_page must be between 1 (inclusive) and 100 (inclusive)"
    assert call(store, "/products", {"per_page": 0})[0] == 400
    assert call(store, "/products", {"page": "x"})[0] == 400
    assert call(store, "/products", {"status": "bogus"})[0] == 400
    assert call(store, "/products", {"per_page": 100})[0] == 200


def test_status_filter(store):
    store.unpublish(46)
    store.delete(47)
    _, h, _ = call(store, "/products", {"status": "any"})
    assert h["X-WP-Total"] == "17"  # the trashed one is gone; the draft stays
    _, h, drafts = call(store, "/products", {"status": "draft"})
    assert [p["id"] for p in drafts] == [46]
    _, h, _ = call(store, "/products", {"status": "publish"})
    assert h["X-WP-Total"] == "16"
    status, _, trashed = call(store, "/products/47")
    assert status == 200 and trashed["status"] == "trash"
    store.delete(48, force=True)
    assert call(store, "/products/48")[0] == 404


# ----------------------------------------------------------------------------- modified_after

def test_modified_after_strictly_after(store):
    _, _, items = call(store, "/products", {"per_page": 100})
    newest = max(p["date_modified_gmt"] for p in items)
    _, h, none = call(store, "/products", {"modified_after": newest})
    assert none == [] and h["X-WP-Total"] == "0"  # equal is not after
    before = store.get(46)["date_modified_gmt"]
    updated = store.update(46, name="Hoodie with Logo v2")
    assert updated["date_modified_gmt"] > before
    _, _, changed = call(store, "/products", {"modified_after": newest})
    assert [p["id"] for p in changed] == [46]
    assert changed[0]["name"] == "Hoodie with Logo v2"
    # two updates in the same second still move date_modified forward
    first = store.update(46, regular_price="40")["date_modified_gmt"]
    second = store.update(46, regular_price="41")["date_modified_gmt"]
    assert second > first
    assert call(store, "/products", {"modified_after": "yesterday"})[0] == 400


def test_variation_change_bumps_parent(store):
    newest = max([p["date_modified_gmt"] for p in store.products]
                 + [v["date_modified_gmt"] for pid in store.product_ids() for v in store.variations_of(pid)])
    vid = store.variations_of(45)[0]["id"]
    store.update_variation(45, vid, stock_status="outofstock")
    _, _, changed = call(store, "/products", {"modified_after": newest})
    assert [p["id"] for p in changed] == [45]
    _, _, vs = call(store, "/products/45/variations", {"modified_after": newest})
    assert [v["id"] for v in vs] == [vid]


def test_modified_after_site_timezone_semantics():
    """WP_Date_Query: offsets are converted to site time and compared with the local
    column; ``dates_are_gmt=true`` compares a naive value with the GMT column."""
    with FakeWooStore(utc_offset_hours=-3) as s:
        s.add({"id": 10, "name": "Old", "regular_price": "1", "date_created_gmt": "2024-05-01T10:00:00"})
        s.add({"id": 11, "name": "New", "regular_price": "1", "date_created_gmt": "2024-05-01T12:00:00"})
        assert s.get(11)["date_modified"] == "2024-05-01T09:00:00"
        ids = lambda params: sorted(p["id"] for p in call(s, "/products", params)[2])  # noqa: E731
        assert ids({"modified_after": "2024-05-01T11:00:00Z"}) == [11]
        assert ids({"modified_after": "2024-05-01T11:00:00", "dates_are_gmt": "true"}) == [11]
        assert ids({"modified_after": "2024-05-01T08:00:00"}) == [11]  # naive = site time
        # the two traps: naive GMT without the flag, offset with the flag
        assert ids({"modified_after": "2024-05-01T11:00:00"}) == []
        assert ids({"modified_after": "2024-05-01T11:00:00Z", "dates_are_gmt": "true"}) == [10, 11]


def test_link_keeps_query_values_unencoded_like_woocommerce(store):
    _, headers, _ = call(store, "/products", {"per_page": 5, "modified_after": "2020-01-01T00:00:00+00:00"})
    nxt = links(headers)["next"]
    assert "modified_after=2020-01-01T00:00:00+00:00" in nxt
    status, _, body = call(store, "", url=nxt)  # '+' now reads as a space
    assert status == 400 and body["code"] == "rest_invalid_param"
    _, headers, _ = call(store, "/products", {"per_page": 5, "modified_after": "2020-01-01T00:00:00Z"})
    assert call(store, "", url=links(headers)["next"])[0] == 200


# ----------------------------------------------------------------------------- auth

CANNOT_LIST = {"code": "woocommerce_rest_cannot_view", "message": "Sorry, you cannot list resources.",
               "data": {"status": 401}}


def test_auth_failures(store):
    assert call(store, "/products", auth="none")[:3:2] == (401, CANNOT_LIST)
    assert call(store, "/products", key="ck_wrong")[:3:2] == (401, CANNOT_LIST)
    status, headers, body = call(store, "/products", secret="cs_wrong")
    assert status == 401 and body == {"code": "woocommerce_rest_authentication_error",
                                      "message": "Consumer secret is invalid.", "data": {"status": 401}}
    assert headers["WWW-Authenticate"].startswith("Basic realm=")
    status, _, body = call(store, "/products/46", auth="none")
    assert status == 401 and body["message"] == "Sorry, you cannot view this resource."
    assert call(store, "/products", auth="query")[0] == 200
    assert call(store, "/products", auth="basic")[0] == 200


def test_read_only_key_cannot_register_webhooks(receiver):
    with FakeWooStore(permissions="read") as s:
        assert call(s, "/products")[0] == 200
        status, _, body = call(s, "/webhooks", method="POST",
                               body={"topic": "product.updated", "delivery_url": receiver.url})
        assert status == 401 and body["message"] == "The API key provided does not have write permissions."


# ----------------------------------------------------------------------------- failures

def test_fail_next_429_with_retry_after(store):
    store.fail_next(2, status=429, retry_after=2)
    for _ in range(2):
        status, headers, body = call(store, "/products")
        assert status == 429 and headers["Retry-After"] == "2"
        assert body["data"]["status"] == 429
    assert call(store, "/products")[0] == 200


def test_fail_next_500(store):
    store.fail_next(1)
    status, headers, body = call(store, "/products")
    assert status == 500 and body["code"] == "internal_server_error" and "Retry-After" not in headers
    assert call(store, "/products")[0] == 200


def test_down_503_and_refused(store):
    store.set_down(True)
    status, headers, body = call(store, "/products")
    assert status == 503 and "maintenance" in body
    store.set_down(False)
    assert call(store, "/products")[0] == 200
    store.set_down(True, mode="refuse")
    with pytest.raises(urllib.error.URLError):
        call(store, "/products", timeout=2)
    store.set_down(False)
    assert call(store, "/products")[0] == 200


def test_delay_causes_client_timeouts(store):
    store.delay = 0.6
    with pytest.raises((socket.timeout, TimeoutError, urllib.error.URLError)):
        call(store, "/products", timeout=0.2)
    store.delay = 0
    assert call(store, "/products")[0] == 200


def test_requests_are_recorded(store):
    store.reset_requests()
    call(store, "/products", {"per_page": 3, "page": 2})
    method, path, query = store.requests[-1]
    assert (method, path) == ("GET", "/wp-json/wc/v3/products")
    assert query == {"per_page": "3", "page": "2"}
    assert store.requests[-1] == ("GET", "/wp-json/wc/v3/products", {"per_page": "3", "page": "2"})


# ----------------------------------------------------------------------------- webhooks

def test_register_webhook_pings_and_lists(store, receiver):
    docs = example("webhooks__create-a-webhook__01.json")
    status, headers, body = call(store, "/webhooks", method="POST",
                                 body={"name": "KB sync", "topic": "product.updated",
                                       "delivery_url": receiver.url, "secret": "s3cret"})
    assert status == 201
    assert list(body) == list(docs)
    assert body["topic"] == "product.updated" and body["resource"] == "product" and body["event"] == "updated"
    assert body["status"] == "active" and "secret" not in body
    assert headers["Location"].endswith(f"/webhooks/{body['id']}")
    # WooCommerce pings the delivery URL before answering
    assert len(receiver.received) == 1
    ping = receiver.received[0]
    assert ping["body"] == f"webhook_id={body['id']}".encode()
    assert "X-WC-Webhook-Topic" not in ping["headers"]
    assert classify_delivery(ping["headers"], ping["body"])["kind"] == "ping"
    assert store.webhooks[0]["secret"] == "s3cret"
    _, h, listed = call(store, "/webhooks")
    assert [w["id"] for w in listed] == [body["id"]] and h["X-WP-Total"] == "1"
    status, _, err = call(store, "/webhooks", method="POST", body={"topic": "product.updated"})
    assert status == 400 and err["code"] == "rest_missing_callback_param"
    status, _, err = call(store, "/webhooks", method="POST", body={"topic": "nope", "delivery_url": receiver.url})
    assert status == 400 and err["code"] == "woocommerce_rest_shop_webhook_invalid_topic"


def test_deliver_signs_like_woocommerce(store, receiver):
    status, _ = store.deliver(receiver.url, "product.updated", 46, "s3cret")
    assert status == 200
    got = receiver.received[-1]
    h = got["headers"]
    assert h["Content-Type"] == "application/json"
    assert re.fullmatch(r"WooCommerce/[\d.]+ Hookshot \(WordPress/[\d.]+\)", h["User-Agent"])
    for name in ("X-WC-Webhook-Source", "X-WC-Webhook-Topic", "X-WC-Webhook-Resource", "X-WC-Webhook-Event",
                 "X-WC-Webhook-Signature", "X-WC-Webhook-ID", "X-WC-Webhook-Delivery-ID"):
        assert h.get(name), name
    assert h["X-WC-Webhook-Source"] == store.site_url + "/"
    assert re.fullmatch(r"[0-9a-f]{32}", h["X-WC-Webhook-Delivery-ID"])
    assert b"\\/" in got["body"]
    assert verify_signature(got["body"], h["X-WC-Webhook-Signature"], "s3cret")
    assert not verify_signature(got["body"], h["X-WC-Webhook-Signature"], "other")
    info = classify_delivery(h, got["body"])
    assert info["kind"] == "product" and info["product_id"] == 46 and info["event"] == "updated"
    assert json.loads(got["body"]) == call(store, "/products/46")[2]

    store.delete(46)
    store.deliver(receiver.url, "product.deleted", 46, "s3cret")
    got = receiver.received[-1]
    assert got["body"] == b'{"id":46}'
    assert verify_signature(got["body"], got["headers"]["X-WC-Webhook-Signature"], "s3cret")

    status, _ = store.ping(receiver.url)
    assert status == 200 and classify_delivery(receiver.received[-1]["headers"], receiver.received[-1]["body"])["kind"] == "ping"


def test_deliver_for_a_variation_points_at_the_parent(store, receiver):
    vid = store.variations_of(45)[0]["id"]
    store.deliver(receiver.url, "product.updated", vid, "s3cret")
    got = receiver.received[-1]
    info = classify_delivery(got["headers"], got["body"])
    assert info["product_id"] == vid and info["is_variation"] and info["parent_id"] == 45


def test_tampered_delivery_fails_verification(store, receiver):
    body = store.webhook_body("product.updated", 46)
    signature = store.sign(body, "s3cret")
    store.deliver(receiver.url, "product.updated", 46, "s3cret", body=body.replace(b"Hoodie", b"Hoody"))
    got = receiver.received[-1]
    assert got["headers"]["X-WC-Webhook-Signature"] == signature
    assert not verify_signature(got["body"], got["headers"]["X-WC-Webhook-Signature"], "s3cret")


def test_failing_endpoint_gets_webhook_disabled(store):
    bad = Receiver(status=500)
    try:
        store.ping_on_create = False
        _, _, wh = call(store, "/webhooks", method="POST",
                        body={"topic": "product.updated", "delivery_url": bad.url, "secret": "x"})
        for n in range(7):
            assert store.webhooks[0]["status"] == "active", n
            store.deliver(bad.url, "product.updated", 46, None)
        assert store.webhooks[0]["status"] == "disabled"  # more than 5 failures in a row
        assert call(store, f"/webhooks/{wh['id']}")[2]["status"] == "disabled"
    finally:
        bad.close()


def test_dispatch_webhooks_uses_registered_secret(store, receiver):
    store.ping_on_create = False
    call(store, "/webhooks", method="POST",
         body={"topic": "product.updated", "delivery_url": receiver.url, "secret": "reg-secret"})
    assert store.dispatch_webhooks("product.updated", 47) == [(store.webhooks[0]["id"], 200)]
    got = receiver.received[-1]
    assert verify_signature(got["body"], got["headers"]["X-WC-Webhook-Signature"], "reg-secret")


# ----------------------------------------------------------------------------- scale

def test_five_thousand_products_build_and_serve_fast():
    t0 = time.perf_counter()
    s = FakeWooStore.generate(5000, seed=7)
    built = time.perf_counter() - t0
    with s:
        t1 = time.perf_counter()
        _, headers, items = call(s, "/products", {"per_page": 100})
        seen = len(items)
        while "next" in links(headers):
            _, headers, items = call(s, "", url=links(headers)["next"])
            seen += len(items)
        served = time.perf_counter() - t1
    assert seen == 5000 and headers["X-WP-Total"] == "5000"
    # times are printed, not asserted (a loaded machine is not a slow fake); bench measures
    print(f"5,000 products: built in {built:.2f} s, served in {served:.2f} s")


def test_add_partial_variable_product_syncs_parent():
    with FakeWooStore() as s:
        p = s.add({"name": "Festival Pass", "type": "variable", "categories": ["Events > Festivals"],
                   "attributes": [{"name": "Day", "options": ["Fri", "Sat"], "variation": True}]},
                  variations=[{"attributes": {"Day": "Fri"}, "regular_price": "30"},
                              {"attributes": {"Day": "Sat"}, "regular_price": "35", "sale_price": "29",
                               "stock_status": "outofstock"}])
        assert p["price"] == "29" and p["regular_price"] == "" and p["on_sale"] is True
        assert len(p["variations"]) == 2 and p["stock_status"] == "instock"
        assert p["categories"] == [{"id": p["categories"][0]["id"], "name": "Festivals", "slug": "festivals"}]
        _, _, vs = call(s, f"/products/{p['id']}/variations")
        assert sorted(v["price"] for v in vs) == ["29", "30"]
        grown = s.generate(20)  # on an instance: adds to this store
        assert grown is s and len(s.products) == 21
