"""The WooCommerce source type: REST API v3 sync, webhooks, webhook registration.

Fetching
--------
* ``GET /wp-json/<api_path>/products?per_page=100&page=N&orderby=id&order=asc&status=any``
  page by page until ``X-WP-TotalPages``; page URLs are built here (``Link`` headers repeat
  the query without URL-encoding it). Ordering by id keeps pages stable while products
  are added during a sync. A listing that spans several pages ends with a cheap
  ``_fields=id`` pass, so a product skipped because a deletion shifted the pages is
  fetched by id rather than purged as "gone".
* Variable products that are published and visible get their variations
  (``/products/<id>/variations``), fetched concurrently, unless the sync already holds the
  product at that ``date_modified_gmt`` (WooCommerce re-saves the parent when a variation
  changes); a mapping change (``ctx.extra["reapply"]``) fetches them all. Records carry
  the newest timestamp of product and variations (``record_timestamps``), so the host
  skips unchanged products before normalizing them.
* Incremental: ``modified_after=<watermark - 1 s>`` as a naive GMT value with
  ``dates_are_gmt=true`` (WooCommerce compares whole seconds, strictly after), for
  ``status=any`` and then ``status=trash`` so trashed products are purged too.
* Every request: HTTP Basic with the consumer key/secret (or query-string auth),
  through ``kbframework.net.SafeSession`` (private addresses only when the organization
  allows them). Connection errors, timeouts, 429 and 5xx are retried with exponential
  backoff, honouring ``Retry-After``; then :class:`SourceUnavailable`. 401/403 raise
  :class:`ConnectorAuthError` with WooCommerce's own message.

Webhooks
--------
``handle_webhook`` answers WooCommerce's ping (``webhook_id=N``, unsigned), verifies
``X-WC-Webhook-Signature`` (base64 HMAC-SHA256 of the raw body, constant time) and names
the product to re-fetch: a variation's delivery names its parent. Every product topic is
handled by re-fetching the product when the job runs (a trashed product comes back with
``status: trash`` and is purged; a deleted one is a 404 and is purged too), so a burst of
deliveries (one per saved variation, or deleted-then-restored) resolves to the store's
current state. The delivery key is ``<delivery id>:<topic>:<body hash>`` because
WooCommerce's delivery id is ``wp_hash(webhook_id . time())`` and repeats within a second.
"""
from __future__ import annotations

import email.utils
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta, timezone
from typing import Any, Iterator, Optional

import requests

from kbframework import ConnectorAuthError, KBError, SourceUnavailable
from kbframework import DocumentDraft, RawRecord, SourceConnector, SyncContext
from kbframework_woocommerce.normalize import parse_gmt, product_to_draft
from kbframework_woocommerce.schema import SECRET_FIELDS, WooCommerceConfig
from kbframework_woocommerce.webhooks import classify_delivery, verify_signature

log = logging.getLogger("kbframework.woocommerce")

PER_PAGE = 100
VARIATION_WORKERS = 8
BACKOFF_BASE = 0.5  # seconds; doubled per attempt
BACKOFF_MAX = 30.0
MAX_RETRY_AFTER = 120.0  # never wait longer than this for one Retry-After
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504, 520, 521, 522, 523, 524})
WEBHOOK_TOPICS = ("product.created", "product.updated", "product.deleted", "product.restored")

_sleep = time.sleep  # tests replace it to record the waits


def retry_after_seconds(value: Optional[str]) -> Optional[float]:
    """``Retry-After`` as seconds: a number, or an HTTP date."""
    if value is None or str(value).strip() == "":
        return None
    text = str(value).strip()
    try:
        return max(0.0, float(text))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, (when - datetime.now(timezone.utc)).total_seconds())


def _wc_message(resp: requests.Response) -> str:
    try:
        data = resp.json()
    except ValueError:
        return ""
    if isinstance(data, dict):
        code, message = data.get("code"), data.get("message")
        if message:
            return f"{message} ({code})" if code else str(message)
    return ""


class WooClient:
    """A small WooCommerce REST client with retries; one per sync (thread-safe for GETs)."""

    def __init__(self, config: dict, ctx: Optional[SyncContext] = None):
        from kbframework import SafeSession

        self.config = config
        self.base = f"{config['store_url'].rstrip('/')}/wp-json/{(config.get('api_path') or 'wc/v3').strip('/')}"
        self.max_retries = int(config.get("max_retries", 3) if config.get("max_retries") is not None else 3)
        timeout = float(config.get("timeout_seconds") or 30.0)
        allow = (ctx.allow_private_network or False) if ctx is not None else False
        self.session = SafeSession(allow_private=allow, timeout=(min(10.0, timeout), timeout),
                                   max_bytes=50_000_000)
        self.session.headers["Accept"] = "application/json"
        key, secret = config.get("consumer_key") or "", config.get("consumer_secret") or ""
        self._query_auth = {"consumer_key": key, "consumer_secret": secret} \
            if config.get("query_string_auth") else None
        if not self._query_auth:
            self.session.auth = (key, secret)
        self.log = ctx.log if ctx is not None else (lambda m: None)
        self.requests = 0
        self._lock = threading.Lock()

    def close(self) -> None:
        self.session.close()

    def _scrub(self, text: str) -> str:
        """Error texts may quote the URL; with query-string auth it holds the credentials."""
        for secret in (self.config.get("consumer_secret"), self.config.get("consumer_key")):
            if secret:
                text = text.replace(str(secret), "•••")
        return text

    def __enter__(self) -> "WooClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------------ requests

    def request(self, method: str, path: str, params: Optional[dict] = None, json: Any = None,
                *, allow_404: bool = False) -> Optional[requests.Response]:
        url = self.base + path
        params = dict(params or {})
        if self._query_auth:
            params.update(self._query_auth)
        attempt = 0
        while True:
            with self._lock:
                self.requests += 1
            wait: Optional[float] = None
            try:
                resp = self.session.request(method, url, params=params, json=json)
            except KBError:
                raise  # a blocked address, a body too large: retrying cannot help
            except requests.exceptions.Timeout as exc:
                reason = f"the store did not answer in time ({exc.__class__.__name__})"
            except requests.exceptions.RequestException as exc:
                reason = f"the store is unreachable: {exc.__class__.__name__}: {self._scrub(_short(exc))}"
            else:
                status = resp.status_code
                if 200 <= status < 300:
                    return resp
                if status == 404 and allow_404:
                    return None
                if status in (401, 403):
                    msg = _wc_message(resp) or resp.reason or "not allowed"
                    raise ConnectorAuthError(
                        f"WooCommerce refused the API key ({status}): {msg}. Check the consumer key and "
                        "secret and their permissions (WooCommerce → Settings → Advanced → REST API).",
                        details={"status": status, "url": url})
                if status in RETRY_STATUSES:
                    wait = retry_after_seconds(resp.headers.get("Retry-After"))
                    reason = f"the store answered {status}" + (f": {_wc_message(resp)}" if _wc_message(resp) else "")
                elif status == 404:
                    msg = _wc_message(resp)
                    raise SourceUnavailable(
                        f"The WooCommerce REST API was not found at {url} (404{': ' + msg if msg else ''}). "
                        "Check the store URL, that WooCommerce is active and that pretty permalinks are on.",
                        details={"status": 404, "url": url})
                else:
                    msg = _wc_message(resp) or (resp.text or "")[:200]
                    raise SourceUnavailable(f"The store answered {status} for {path}: {msg}",
                                            details={"status": status, "url": url})
            if attempt >= self.max_retries or (method == "POST" and wait is None):
                # a POST is only repeated when the store said when to (429/503 + Retry-After)
                raise SourceUnavailable(f"WooCommerce at {self.config['store_url']}: {reason} "
                                        f"(gave up after {attempt + 1} attempts)",
                                        details={"url": url})
            delay = min(BACKOFF_MAX, BACKOFF_BASE * (2 ** attempt))
            if wait is not None:
                delay = min(MAX_RETRY_AFTER, max(wait, 0.0))
            attempt += 1
            self.log(f"{method} {path}: {reason}; retry {attempt}/{self.max_retries} in {delay:.2f}s")
            _sleep(delay)

    def get_json(self, path: str, params: Optional[dict] = None, *, allow_404: bool = False):
        resp = self.request("GET", path, params, allow_404=allow_404)
        if resp is None:
            return None, None
        try:
            data = resp.json()
        except ValueError:
            raise SourceUnavailable(
                f"WooCommerce at {self.config['store_url']} did not answer JSON for {path} "
                f"(got {resp.headers.get('Content-Type') or 'no content type'}); a security or cache "
                "plugin may be intercepting the REST API.", details={"url": self.base + path})
        return data, resp

    # ------------------------------------------------------------------ products

    def iter_product_pages(self, extra: Optional[dict] = None) -> Iterator[tuple[list[dict], requests.Response]]:
        page = 1
        while True:
            params = {"per_page": PER_PAGE, "page": page, "orderby": "id", "order": "asc"}
            params.update(extra or {})
            data, resp = self.get_json("/products", params)
            if not isinstance(data, list):
                raise SourceUnavailable(f"WooCommerce answered something other than a product list for page {page}.")
            yield data, resp
            try:
                total_pages = int(resp.headers.get("X-WP-TotalPages") or 0)
            except ValueError:
                total_pages = 0
            if not data:
                return
            if total_pages and page >= total_pages:
                return
            if not total_pages and len(data) < PER_PAGE:
                return
            page += 1

    def variations(self, product_id: Any) -> list[dict]:
        out: list[dict] = []
        page = 1
        while True:
            data, resp = self.get_json(f"/products/{product_id}/variations",
                                       {"per_page": PER_PAGE, "page": page, "orderby": "id", "order": "asc"},
                                       allow_404=True)
            if data is None:
                return out
            out.extend(v for v in data if isinstance(v, dict))
            try:
                total_pages = int(resp.headers.get("X-WP-TotalPages") or 1)
            except ValueError:
                total_pages = 1
            if not data or page >= total_pages:
                return out
            page += 1

    def product(self, product_id: Any) -> Optional[dict]:
        data, _ = self.get_json(f"/products/{product_id}", allow_404=True)
        return data if isinstance(data, dict) else None


def _short(exc: Exception) -> str:
    text = str(exc)
    return text if len(text) <= 200 else text[:197] + "..."


def wants_variations(product: dict) -> bool:
    """Only a shown variable product needs its variations (others are purged anyway)."""
    return (product.get("type") == "variable" and product.get("status") == "publish"
            and product.get("catalog_visibility") != "hidden")


def to_record(product: dict, variations: Optional[list[dict]]) -> RawRecord:
    """The record's timestamp is the newest of the product's and its variations' (never older
    than the draft's, which only counts enabled variations: ``record_timestamps``)."""
    stamps = [parse_gmt(product.get("date_modified_gmt")) or parse_gmt(product.get("date_modified"))]
    stamps += [parse_gmt(v.get("date_modified_gmt")) for v in variations or () if isinstance(v, dict)]
    stamps = [t for t in stamps if t is not None]
    return RawRecord(external_id=str(product.get("id")), kind="product",
                     payload={"product": product, "variations": variations},
                     source_modified_at=max(stamps) if stamps else None, url=product.get("permalink"))


def _held(product: dict, ctx: Optional[SyncContext]) -> bool:
    """True when we hold this product at this timestamp already (and the sync is not
    re-deriving everything): its variations need not be fetched; the host skips it.
    WooCommerce re-saves the parent when a variation changes, so a changed variation
    shows as a newer parent."""
    if ctx is None or ctx.extra.get("reapply"):
        return False
    held = (ctx.extra.get("known_modified") or {}).get(str(product.get("id")))
    modified = parse_gmt(product.get("date_modified_gmt"))
    return held is not None and modified is not None and modified <= held


#: the admin's "Insert example" for the field mapping
MAPPING_EXAMPLE = {
    "attributes": {"Color": "text+tags", "Size": "metadata", "Brand": "text+metadata"},
    "meta": {"_warranty": "text", "gtin": "metadata"},
    "acf": {"material": "text"},
    "columns": {"acf.venue_name": "venue", "acf.city": "city"},
}


class WooCommerceConnector(SourceConnector):
    name = "woocommerce"
    label = "WooCommerce products"
    config_schema = WooCommerceConfig
    secret_fields = SECRET_FIELDS
    supports_sync = True
    record_timestamps = True  # a record is never older than its draft (see to_record)
    mapping_help = ("Targets: text, metadata, tags, ignore, column:venue (or city, event_start, event_end, "
                    "expires_at, primary_image_url, source_url), joined with + like text+tags. Sections: "
                    "attributes, meta, acf, columns.")
    mapping_example = MAPPING_EXAMPLE
    accepts_webhooks = True
    registers_webhooks = True
    webhook_topics = WEBHOOK_TOPICS

    # ------------------------------------------------------------------ fetching

    def _records(self, client: WooClient, products: list[dict], pool: ThreadPoolExecutor,
                 ctx: Optional[SyncContext] = None) -> list[RawRecord]:
        wanted = [p for p in products if isinstance(p, dict) and wants_variations(p) and not _held(p, ctx)]
        found = dict(zip([p["id"] for p in wanted], pool.map(lambda p: client.variations(p["id"]), wanted)))
        return [to_record(p, found.get(p.get("id"))) for p in products if isinstance(p, dict) and "id" in p]

    def _listing(self, config: dict, ctx: SyncContext, extra: dict, *, id_pass: bool) -> Iterator[RawRecord]:
        with WooClient(config, ctx) as client, ThreadPoolExecutor(VARIATION_WORKERS) as pool:
            seen: set[int] = set()
            pages = 0
            for products, _resp in client.iter_product_pages(extra):
                pages += 1
                for record in self._records(client, products, pool, ctx):
                    seen.add(int(record.external_id))
                    yield record
            if id_pass and pages > 1:
                # Offset paging skips an item when one before it is deleted mid-sync: list the
                # ids alone and fetch whatever the main pass missed, so it is not purged.
                ids: list[int] = []
                for items, _resp in client.iter_product_pages({**extra, "_fields": "id"}):
                    ids.extend(int(p["id"]) for p in items if isinstance(p, dict) and "id" in p)
                missed = [i for i in ids if i not in seen]
                for start in range(0, len(missed), PER_PAGE):
                    batch = missed[start:start + PER_PAGE]
                    data, _ = client.get_json("/products", {**extra, "include": ",".join(map(str, batch)),
                                                            "per_page": PER_PAGE, "orderby": "id", "order": "asc"})
                    for record in self._records(client, data or [], pool, ctx):
                        yield record
            ctx.log(f"woocommerce: {len(seen)} products listed, {client.requests} requests")

    def fetch_all(self, config: dict, ctx: SyncContext) -> Iterator[RawRecord]:
        return self._listing(config, ctx, {"status": "any"}, id_pass=True)

    def fetch_changed(self, config: dict, since: datetime, ctx: SyncContext) -> Iterator[RawRecord]:
        if since.tzinfo is None:
            since = since.replace(tzinfo=timezone.utc)
        # whole seconds, strictly after: step back one second so a product saved in the
        # watermark's own second is not missed (the freshness rule skips what we hold)
        after = (since.astimezone(timezone.utc) - timedelta(seconds=1)).replace(tzinfo=None, microsecond=0)
        extra = {"modified_after": after.strftime("%Y-%m-%dT%H:%M:%S"), "dates_are_gmt": "true"}

        def both() -> Iterator[RawRecord]:
            yield from self._listing(config, ctx, {**extra, "status": "any"}, id_pass=False)
            yield from self._listing(config, ctx, {**extra, "status": "trash"}, id_pass=False)

        return both()

    def fetch_one(self, config: dict, external_id: str, ctx: SyncContext) -> Optional[RawRecord]:
        with WooClient(config, ctx) as client:
            product = client.product(external_id)
            if product is None:
                return None
            if product.get("type") == "variation" and product.get("parent_id"):
                product = client.product(product["parent_id"])
                if product is None:
                    return None
            variations = client.variations(product["id"]) if wants_variations(product) else None
            return to_record(product, variations)

    def normalize(self, record: RawRecord, config: dict, ctx: SyncContext) -> DocumentDraft:
        payload = record.payload or {}
        product = payload.get("product", payload)
        return product_to_draft(product, payload.get("variations"), config.get("field_mapping") or {},
                                config.get("currency") or "EUR")

    # ------------------------------------------------------------------ webhooks

    def handle_webhook(self, headers: dict, raw_body: bytes, secrets: dict) -> dict:
        info = classify_delivery(headers, raw_body)
        if info["kind"] == "ping":
            return {"ok": True, "kind": "ping", "topic": "ping", "delivery_id": None,
                    "webhook_id": info["webhook_id"]}
        signature = next((str(v) for k, v in (headers or {}).items()
                          if str(k).lower() == "x-wc-webhook-signature"), None)
        if not verify_signature(raw_body or b"", signature, (secrets or {}).get("webhook_secret")):
            return {"ok": False, "kind": "item", "topic": info["topic"],
                    "reason": "The webhook signature is not valid." if signature else
                    "The webhook is not signed (X-WC-Webhook-Signature is missing)."}
        delivery = info["delivery_id"]
        key = f"{delivery or '-'}:{info['topic'] or '-'}:{info['body_sha256'][:16]}"
        if info["kind"] != "product" or info["error"] or info["product_id"] is None:
            return {"ok": True, "kind": "ignored", "topic": info["topic"], "delivery_id": key,
                    "reason": info["error"] or f"topic {info['topic'] or '(none)'} is not a product topic"}
        external_id = info["parent_id"] or info["product_id"]
        return {"ok": True, "kind": "item", "topic": info["topic"], "delivery_id": key,
                "external_id": str(external_id),
                # always re-fetched: a trashed product reads back as status "trash" and is
                # purged; a product deleted for good is a 404 and is purged as "gone"
                "event": "updated",
                # lets the host drop a late delivery carrying older data without a fetch
                "source_modified_at": info["date_modified_gmt"],
                "is_variation": info["is_variation"]}

    # ------------------------------------------------------------------ webhook registration

    def register_webhooks(self, config: dict, delivery_url: str, secret: str,
                          ctx: Optional[SyncContext] = None) -> list[dict]:
        """Create (or re-point) the product webhooks on the store. Needs a Read/Write key.
        Returns one dict per topic: id, topic, status, action (created|updated)."""
        if not secret:
            raise KBError("This source has no webhook secret.", code="no_webhook_secret")
        out = []
        with WooClient(config, ctx) as client:
            existing, _ = client.get_json("/webhooks", {"per_page": 100, "status": "all"})
            by_topic = {w.get("topic"): w for w in (existing or [])
                        if isinstance(w, dict) and w.get("delivery_url") == delivery_url}
            for topic in WEBHOOK_TOPICS:
                body = {"name": f"kbframework {topic}", "topic": topic, "delivery_url": delivery_url,
                        "secret": secret, "status": "active"}
                if topic in by_topic:
                    resp = client.request("PUT", f"/webhooks/{by_topic[topic]['id']}", json=body)
                    action = "updated"
                else:
                    resp = client.request("POST", "/webhooks", json=body)
                    action = "created"
                data = resp.json() if resp is not None else {}
                out.append({"id": data.get("id"), "topic": data.get("topic", topic),
                            "status": data.get("status"), "action": action})
        return out
