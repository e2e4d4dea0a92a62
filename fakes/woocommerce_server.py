"""A local HTTP server that speaks the WooCommerce REST API v3 (``/wp-json/wc/v3``).

For tests and benchmarks: an in-memory catalogue served by a threaded ``http.server``
on 127.0.0.1, in the exact JSON shape of the official docs' examples
(``shared/data/woocommerce/rest_api_v3/examples``), with WooCommerce's paging headers,
error bodies, authentication rules and webhook delivery format.

Quick use::

    with FakeWooStore.from_sample_csv(".../sample_products.csv") as store:
        store.url                      # http://127.0.0.1:<port>
        store.consumer_key, store.consumer_secret
        store.fail_next(2, status=429, retry_after=1)
        store.update(46, regular_price="39")      # bumps date_modified_gmt
        status, body = store.deliver(app_url, "product.updated", 46, secret="s3cret")

Behaviour copied from WooCommerce / WordPress (sources: woocommerce
``includes/rest-api/Controllers/Version3/class-wc-rest-crud-controller.php``,
``includes/class-wc-rest-authentication.php``, ``includes/class-wc-webhook.php``,
WordPress ``WP_REST_Request`` / ``WP_Date_Query``):

* JSON bodies are encoded like PHP's ``json_encode`` (compact, ``\\/``, ``\\uXXXX``).
* ``GET /products`` defaults: ``per_page=10`` (1..100, else 400 ``rest_invalid_param``),
  ``page=1``, ``status=any`` (everything but trash), ``orderby=date``, ``order=desc``
  (ties broken by ID). A page past the end is ``[]`` with the totals, not an error.
* ``X-WP-Total``, ``X-WP-TotalPages`` and one ``Link`` header holding
  ``<...>; rel="prev", <...>; rel="next"``. Like WooCommerce's CRUD controller, the link
  URLs repeat the request's query values *without* URL-encoding them (``add_query_arg``),
  so a ``+`` in ``modified_after=...+00:00`` becomes a space when the link is followed.
* ``modified_after``/``modified_before``/``after``/``before`` compare against the
  site-local column unless ``dates_are_gmt=true``; the value is first converted to the
  site's wall-clock time when it carries an offset (``WP_Date_Query``). So with
  ``utc_offset_hours != 0`` only two forms are right: an offset-carrying value without
  ``dates_are_gmt``, or a naive GMT value with ``dates_are_gmt=true``. Strictly after,
  whole seconds.
* Auth: ``consumer_key``/``consumer_secret`` query parameters are used first, then HTTP
  Basic. An unknown key is simply "not logged in" (401 ``woocommerce_rest_cannot_view``);
  a known key with a wrong secret is 401 ``woocommerce_rest_authentication_error``
  "Consumer secret is invalid." (plus ``WWW-Authenticate``). A ``read`` key cannot POST.
  (Real WooCommerce accepts key/secret only over HTTPS; over plain HTTP it wants OAuth
  1.0a. This fake accepts them over http.)
* ``POST /webhooks`` answers 201 with the docs' webhook JSON and, like WooCommerce,
  sends the ping (``webhook_id=N`` form body) to the delivery URL synchronously before
  answering (``ping_on_create``).
* Changing a variation bumps the parent's ``date_modified`` (WooCommerce re-saves the
  parent when it syncs prices/stock). ``delete()`` moves to trash by default (what the
  admin does, and what fires ``product.deleted``); ``delete(force=True)`` removes it.

Test controls: ``set_down``, ``fail_next``, ``delay``, ``update``, ``update_variation``,
``unpublish``, ``delete``, ``add``, ``requests``, ``webhooks``, ``deliver``, ``ping``,
``dispatch_webhooks``.
"""
from __future__ import annotations

import base64
import copy
import csv
import hashlib
import hmac
import http.client
import json
import math
import random
import re
import secrets
import socket
import threading
import time
from collections import namedtuple
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterable, Optional
from urllib.parse import parse_qsl, urlsplit

WC_NAMESPACE = "/wp-json/wc/v3"
DEFAULT_CONSUMER_KEY = "ck_4f2a9c1e7b3d5f8a0c6e2b4d9f1a3c5e7b9d0f2a"
DEFAULT_CONSUMER_SECRET = "cs_8e1b3d5f7a9c0e2b4d6f8a1c3e5b7d9f0a2c4e6b"

Request = namedtuple("Request", "method path query")

_CURRENCY_SYMBOLS = {
    "EUR": "&euro;", "USD": "&#36;", "GBP": "&pound;", "CHF": "CHF", "JPY": "&yen;",
    "SEK": "&#107;&#114;", "NOK": "&#107;&#114;", "DKK": "kr.", "PLN": "&#122;&#322;",
    "CAD": "&#36;", "AUD": "&#36;",
}

_NO_ROUTE = {"code": "rest_no_route",
             "message": "No route was found matching the URL and request method",
             "data": {"status": 404}}
_FATAL_MESSAGE = ('<p>There has been a critical error on this website.</p><p>'
                  '<a href="https://wordpress.org/documentation/article/faq-troubleshooting/">'
                  'Learn more about troubleshooting WordPress.</a></p>')
_MAINTENANCE_HTML = ('<!DOCTYPE html><html><head><meta charset="utf-8"><title>Maintenance</title>'
                     '</head><body><h1>Briefly unavailable for scheduled maintenance. '
                     'Check back in a minute.</h1></body></html>')

_WEBHOOK_TOPIC_HOOKS = {
    "coupon.created": ["woocommerce_process_shop_coupon_meta", "woocommerce_new_coupon"],
    "coupon.updated": ["woocommerce_process_shop_coupon_meta", "woocommerce_update_coupon"],
    "coupon.deleted": ["wp_trash_post"],
    "coupon.restored": ["untrashed_post"],
    "customer.created": ["user_register", "woocommerce_created_customer", "woocommerce_new_customer"],
    "customer.updated": ["profile_update", "woocommerce_update_customer"],
    "customer.deleted": ["delete_user"],
    "order.created": ["woocommerce_new_order"],
    "order.updated": ["woocommerce_update_order", "woocommerce_order_refunded",
                      "woocommerce_delete_order_refund"],
    "order.deleted": ["wp_trash_post", "woocommerce_trash_order"],
    "order.restored": ["untrashed_post", "woocommerce_untrash_order"],
    "product.created": ["woocommerce_process_product_meta", "woocommerce_new_product",
                        "woocommerce_new_product_variation"],
    "product.updated": ["woocommerce_process_product_meta", "woocommerce_update_product",
                        "woocommerce_update_product_variation"],
    "product.deleted": ["wp_trash_post"],
    "product.restored": ["untrashed_post"],
    "product.published": ["woocommerce_product_published"],
}

_PRODUCT_STATUSES = ("any", "future", "trash", "draft", "pending", "private", "publish")
_PRODUCT_ORDERBY = ("date", "id", "include", "title", "slug", "modified", "menu_order",
                    "price", "popularity", "rating")
_DATE_RE = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|[+-]\d{2}(?::?\d{2})?)?$")
_PHP_DEL_RE = re.compile(r"(?<!\\)((?:\\\\)*)\\u007f")


# --------------------------------------------------------------------------- helpers

def php_json_encode(obj: Any) -> str:
    """Encode like PHP's ``json_encode($x)`` with default flags (what WordPress sends)."""
    s = json.dumps(obj, ensure_ascii=True, separators=(",", ":"))
    s = s.replace("/", "\\/")  # '/' only ever occurs inside strings in JSON text
    if "\\u007f" in s:  # PHP leaves DEL unescaped
        s = _PHP_DEL_RE.sub(lambda m: m.group(1) + "\x7f", s)
    return s


def wpautop(text: str) -> str:
    """A small ``wpautop``: blank-line separated paragraphs → ``<p>…</p>\\n``."""
    text = (text or "").replace("\r\n", "\n").strip()
    if not text:
        return ""
    out = []
    for para in re.split(r"\n\s*\n", text):
        para = para.strip()
        if not para:
            continue
        if re.match(r"(?is)^<(p|div|ul|ol|table|h[1-6]|blockquote|pre|figure)\b", para):
            out.append(para + "\n")
        else:
            out.append("<p>" + para.replace("\n", "<br />\n") + "</p>\n")
    return "".join(out)


def slugify(value: str) -> str:
    value = re.sub(r"[^\w\s-]", "", (value or "").lower(), flags=re.UNICODE)
    return re.sub(r"[\s_-]+", "-", value).strip("-") or "item"


def _fmt(dt: datetime) -> str:
    return dt.strftime("%Y-%m-%dT%H:%M:%S")


def _parse_gmt(value: Optional[str]) -> Optional[datetime]:
    if not value:
        return None
    dt = datetime.fromisoformat(value.replace("Z", "+00:00"))
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return dt.astimezone(timezone.utc)


def _num(value: Any) -> Optional[float]:
    if value in (None, ""):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _price_str(value: Any) -> str:
    """WooCommerce keeps prices as entered (``"45"``, ``"11.05"``)."""
    if value in (None, ""):
        return ""
    if isinstance(value, float):
        text = repr(value)
        return text[:-2] if text.endswith(".0") else text
    text = str(value).strip()
    return "0" + text if text.startswith(".") else text


def _decimal_str(value: Any) -> str:
    text = "" if value in (None, "") else str(value).strip()
    return "0" + text if text.startswith(".") else text


class _Hybrid:
    """A method callable on the class (builds a new store) or on an instance (loads into it)."""

    def __init__(self, func):
        self.func = func
        self.__doc__ = func.__doc__

    def __get__(self, obj, cls):
        func = self.func
        if obj is not None:
            def bound(*args, **kwargs):
                return func(obj, *args, **kwargs)
        else:
            def bound(*args, **kwargs):
                ctor = {k: kwargs.pop(k) for k in list(kwargs) if k in FakeWooStore.CONSTRUCTOR_ARGS}
                return func(cls(**ctor), *args, **kwargs)
        bound.__doc__ = func.__doc__
        return bound


class _ApiError(Exception):
    def __init__(self, status: int, code: str, message: str, data: Optional[dict] = None,
                 headers: Optional[dict] = None):
        super().__init__(message)
        self.status = status
        self.body = {"code": code, "message": message, "data": {"status": status, **(data or {})}}
        self.headers = headers or {}


def _invalid_params(errors: dict[str, tuple[str, str]]) -> _ApiError:
    """WordPress' ``rest_invalid_param`` (WP_REST_Request::has_valid_params)."""
    return _ApiError(
        400, "rest_invalid_param", "Invalid parameter(s): " + ", ".join(errors),
        {"params": {k: msg for k, (code, msg) in errors.items()},
         "details": {k: {"code": code, "message": msg, "data": None}
                     for k, (code, msg) in errors.items()}})


# --------------------------------------------------------------------------- HTTP plumbing

class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "Apache"
    sys_version = ""

    def setup(self):
        super().setup()
        self.server.store._track(self.connection, True)

    def finish(self):
        try:
            super().finish()
        finally:
            self.server.store._track(self.connection, False)

    def _dispatch(self):
        self.server.store._handle(self)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = _dispatch

    def log_message(self, format, *args):  # noqa: A002 - signature from the base class
        pass


# --------------------------------------------------------------------------- the store

class FakeWooStore:
    """An in-memory WooCommerce store behind a local REST API v3 server."""

    CONSTRUCTOR_ARGS = frozenset({
        "consumer_key", "consumer_secret", "permissions", "require_auth", "site_url",
        "currency", "utc_offset_hours", "wc_version", "wp_version", "ping_on_create",
        "host", "port", "links_url",
    })

    def __init__(self, *, consumer_key: str = DEFAULT_CONSUMER_KEY,
                 consumer_secret: str = DEFAULT_CONSUMER_SECRET,
                 permissions: str = "read_write", require_auth: bool = True,
                 site_url: Optional[str] = None, currency: str = "EUR",
                 utc_offset_hours: float = 0.0, wc_version: str = "9.8.5",
                 wp_version: str = "6.8.1", ping_on_create: bool = True,
                 host: str = "127.0.0.1", port: int = 0, links_url: Optional[str] = None):
        self.consumer_key = consumer_key
        self.consumer_secret = consumer_secret
        self.permissions = permissions  # read | write | read_write
        self.require_auth = require_auth
        self.currency = currency
        self.utc_offset = timedelta(hours=utc_offset_hours)
        self.wc_version = wc_version
        self.wp_version = wp_version
        self.ping_on_create = ping_on_create
        self.delay: float = 0.0
        self.clock: Callable[[], datetime] = lambda: datetime.now(timezone.utc)
        self.auto_deliver = False  # deliver registered webhooks after mutations

        self.requests: list[Request] = []
        self.request_log: list[dict] = []
        self.pings: list[dict] = []
        self.deliveries: list[dict] = []

        self._lock = threading.RLock()
        self._products: dict[int, dict] = {}
        self._variations: dict[int, dict[int, dict]] = {}
        self._variation_parent: dict[int, int] = {}
        self._categories: dict[int, dict] = {}
        self._tags: dict[int, dict] = {}
        self._attr_ids: dict[str, int] = {}
        self._webhooks: dict[int, dict] = {}
        self._webhook_failures: dict[int, int] = {}
        self._next_id = 10
        self._next_image_id = 100000
        self._next_term_id = 9
        self._next_meta_id = 1000
        self._next_webhook_id = 142
        self._fail_queue: list[tuple[int, Optional[float]]] = []
        self._down: Optional[str] = None
        self._down_retry_after: Optional[float] = None
        self._conns: set = set()
        self._thread: Optional[threading.Thread] = None
        self._started = False

        self._host = host
        self._server = _Server((host, port), _Handler)
        self._server.store = self
        self.port = self._server.server_address[1]
        self.url = f"http://{host}:{self.port}"
        self.api_url = self.url + WC_NAMESPACE
        self.site_url = (site_url or self.url).rstrip("/")
        # Where ``_links`` and ``Link`` headers point (real WC: the site URL). Defaults to
        # this server so that clients can follow them.
        self.links_url = (links_url or self.url).rstrip("/") + WC_NAMESPACE

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> "FakeWooStore":
        with self._lock:
            if self._started:
                return self
            self._started = True
            if self._down != "refuse":
                self._serve()
        return self

    def stop(self) -> None:
        with self._lock:
            self._started = False
            self._unserve()

    def __enter__(self) -> "FakeWooStore":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def _serve(self) -> None:
        if self._server is None:
            self._server = _Server((self._host, self.port), _Handler)
            self._server.store = self
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": 0.05},
                                        name=f"FakeWooStore:{self.port}", daemon=True)
        self._thread.start()

    def _unserve(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            if self._thread is not None:
                server.shutdown()
                self._thread.join(timeout=5)
                self._thread = None
            server.server_close()
        for conn in list(self._conns):
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._conns.clear()

    def _track(self, conn, opened: bool) -> None:
        with self._lock:
            if opened:
                self._conns.add(conn)
            else:
                self._conns.discard(conn)

    # ------------------------------------------------------------------ test controls

    def set_down(self, down: bool = True, mode: str = "503",
                 retry_after: Optional[float] = None) -> None:
        """``mode="503"``: every request gets WordPress' maintenance page (503, HTML).
        ``mode="refuse"``: the port is closed (connection refused) until ``set_down(False)``."""
        if mode not in ("503", "refuse"):
            raise ValueError("mode must be '503' or 'refuse'")
        with self._lock:
            was = self._down
            self._down = mode if down else None
            self._down_retry_after = retry_after
            if down and mode == "refuse" and was != "refuse":
                self._unserve()
            elif was == "refuse" and self._down != "refuse" and self._started:
                self._serve()

    _DEFAULT = object()

    def fail_next(self, n: int = 1, status: int = 500, retry_after: Any = _DEFAULT) -> None:
        """The next ``n`` requests fail with ``status``. 429/503 carry ``Retry-After``
        (default 2 s; pass ``retry_after=None`` to omit it)."""
        if retry_after is self._DEFAULT:
            retry_after = 2 if status in (429, 503) else None
        with self._lock:
            self._fail_queue.extend([(status, retry_after)] * n)

    def reset_requests(self) -> None:
        with self._lock:
            self.requests.clear()
            self.request_log.clear()

    def now(self) -> datetime:
        return self.clock().astimezone(timezone.utc).replace(microsecond=0)

    @property
    def webhooks(self) -> list[dict]:
        """Registered webhooks as the API shows them, plus ``secret`` and ``failure_count``."""
        with self._lock:
            out = []
            for wid, wh in sorted(self._webhooks.items()):
                item = copy.deepcopy(wh)
                item["failure_count"] = self._webhook_failures.get(wid, 0)
                out.append(item)
            return out

    @property
    def products(self) -> list[dict]:
        with self._lock:
            return [copy.deepcopy(p) for _, p in sorted(self._products.items())]

    def get(self, product_id: int) -> Optional[dict]:
        with self._lock:
            p = self._products.get(int(product_id))
            return copy.deepcopy(p) if p is not None else None

    def variations_of(self, product_id: int) -> list[dict]:
        with self._lock:
            return [copy.deepcopy(v) for _, v in
                    sorted(self._variations.get(int(product_id), {}).items())]

    def product_ids(self, status: Optional[str] = None) -> list[int]:
        with self._lock:
            return sorted(i for i, p in self._products.items()
                          if status is None or p["status"] == status)

    # ------------------------------------------------------------------ mutations

    def add(self, product: dict, variations: Optional[Iterable[dict]] = None, *,
            verbatim: bool = False) -> dict:
        """Add a product. ``product`` may be a full WC JSON object (e.g. a docs example) or
        a partial spec (name, type, regular_price, sale_price, categories as names or
        ``"A > B"`` paths, tags as names, images as URLs, attributes with
        name/options/visible/variation, meta_data as a dict...). Descriptions are taken
        as HTML, verbatim. ``verbatim=True`` stores a real payload untouched (it must
        have an ``id``), so that the API and webhooks return it byte for byte.
        Returns the stored product."""
        if verbatim:
            with self._lock:
                p = copy.deepcopy(product)
                self._reserve_id(p["id"])
                for c in p.get("categories", []):
                    self._categories.setdefault(c["id"], {**c, "parent": 0})
                for t in p.get("tags", []):
                    self._tags.setdefault(t["id"], dict(t))
                self._products[p["id"]] = p
                self._variations.setdefault(p["id"], {})
                for spec in variations or ():
                    v = copy.deepcopy(spec)
                    self._variations[p["id"]][v["id"]] = v
                    self._variation_parent[v["id"]] = p["id"]
                result = copy.deepcopy(p)
            self._auto("product.created", result["id"])
            return result
        with self._lock:
            p = self._build_product(dict(product))
            self._products[p["id"]] = p
            self._variations.setdefault(p["id"], {})
            for spec in variations or ():
                self._add_variation(p, dict(spec))
            if p["type"] == "variable":
                self._sync_parent(p)
            self._finish_product(p)
            result = copy.deepcopy(p)
        self._auto("product.created", result["id"])
        return result

    def add_variation(self, product_id: int, variation: dict) -> dict:
        with self._lock:
            parent = self._require(product_id)
            v = self._add_variation(parent, dict(variation))
            self._sync_parent(parent)
            self._bump(parent)
            result = copy.deepcopy(v)
        self._auto("product.created", result["id"])
        return result

    def update(self, product_id: int, **fields) -> dict:
        """Change fields of a product and bump ``date_modified(_gmt)`` by ≥ 1 s.
        ``price=`` alone sets the regular price (and clears a sale); ``regular_price`` /
        ``sale_price`` recompute ``price``; categories/tags/images accept names/URLs."""
        with self._lock:
            p = self._require(product_id)
            self._apply_fields(p, fields)
            if p["type"] == "variable":
                self._sync_parent(p)
            self._bump(p)
            self._finish_product(p)
            result = copy.deepcopy(p)
        self._auto("product.updated", product_id)
        return result

    def update_variation(self, product_id: int, variation_id: int, **fields) -> dict:
        """Change a variation; bumps the variation's and its parent's date_modified."""
        with self._lock:
            parent = self._require(product_id)
            v = self._variations.get(parent["id"], {}).get(int(variation_id))
            if v is None:
                raise KeyError(f"variation {variation_id} of {product_id} not found")
            if "attributes" in fields:
                fields["attributes"] = self._variation_attributes(parent, fields["attributes"])
            if "image" in fields:
                fields["image"] = self._image(fields["image"], self.now())
            self._apply_prices(v, fields)
            for key, value in fields.items():
                v[key] = value
            self._bump(v)
            self._sync_parent(parent)
            self._bump(parent)
            self._finish_product(parent)
            result = copy.deepcopy(v)
        self._auto("product.updated", variation_id)
        return result

    def unpublish(self, product_id: int, status: str = "draft") -> dict:
        return self.update(product_id, status=status)

    def hide(self, product_id: int) -> dict:
        return self.update(product_id, catalog_visibility="hidden")

    def delete(self, product_id: int, force: bool = False) -> None:
        """Move to trash (status ``trash``: gone from ``status=any`` listings, still
        readable by ID), or with ``force=True`` delete for good (404 afterwards)."""
        with self._lock:
            p = self._require(product_id)
            if force:
                del self._products[p["id"]]
                for vid in self._variations.pop(p["id"], {}):
                    self._variation_parent.pop(vid, None)
            else:
                p["status"] = "trash"
                if not p["slug"].endswith("__trashed"):
                    p["slug"] += "__trashed"
                self._bump(p)
        if not force:
            self._auto("product.deleted", product_id)

    def restore(self, product_id: int) -> dict:
        with self._lock:
            p = self._require(product_id)
            p["status"] = "publish"
            p["slug"] = p["slug"].replace("__trashed", "")
            self._bump(p)
            result = copy.deepcopy(p)
        self._auto("product.restored", product_id)
        return result

    def _require(self, product_id: int) -> dict:
        p = self._products.get(int(product_id))
        if p is None:
            raise KeyError(f"product {product_id} not found")
        return p

    def _bump(self, obj: dict) -> None:
        now = self.now()
        prev = _parse_gmt(obj.get("date_modified_gmt"))
        new = now if prev is None or now >= prev + timedelta(seconds=1) else prev + timedelta(seconds=1)
        obj["date_modified"] = _fmt((new + self.utc_offset).replace(tzinfo=None))
        obj["date_modified_gmt"] = _fmt(new.replace(tzinfo=None))

    def _dates(self, dt_gmt: datetime) -> tuple[str, str]:
        dt_gmt = dt_gmt.astimezone(timezone.utc).replace(microsecond=0)
        return (_fmt((dt_gmt + self.utc_offset).replace(tzinfo=None)),
                _fmt(dt_gmt.replace(tzinfo=None)))

    # ------------------------------------------------------------------ building products

    def _new_id(self) -> int:
        while self._next_id in self._products or self._next_id in self._variation_parent:
            self._next_id += 1
        value = self._next_id
        self._next_id += 1
        return value

    def _reserve_id(self, value: int) -> None:
        self._next_id = max(self._next_id, int(value) + 1)

    def _term(self, registry: dict, name: str, parent: int = 0) -> dict:
        for term in registry.values():
            if term["name"] == name and term.get("parent", 0) == parent:
                return term
        term_id = self._next_term_id
        self._next_term_id += 1
        slug = slugify(name)
        if any(t["slug"] == slug for t in registry.values()):
            slug = f"{slug}-{term_id}"
        term = {"id": term_id, "name": name, "slug": slug, "parent": parent}
        registry[term_id] = term
        return term

    def _categories_for(self, items: Any) -> list[dict]:
        out = []
        for item in items or []:
            if isinstance(item, dict):
                if "id" in item and item["id"] in self._categories and "name" not in item:
                    term = self._categories[item["id"]]
                elif "name" in item:
                    term = None
                    if "id" in item and item["id"] in self._categories:
                        term = self._categories[item["id"]]
                    if term is None:
                        term = self._term(self._categories, item["name"])
                        if "id" in item and item["id"] not in self._categories:
                            # keep the caller's id
                            del self._categories[term["id"]]
                            term["id"] = int(item["id"])
                            if item.get("slug"):
                                term["slug"] = item["slug"]
                            self._categories[term["id"]] = term
                else:
                    continue
            else:
                parent = 0
                term = None
                path = [s.strip() for s in str(item).split(">") if s.strip()]
                if len(path) == 1:  # a bare name: reuse an existing term wherever it sits
                    term = next((t for t in self._categories.values() if t["name"] == path[0]), None)
                    path = [] if term else path
                # WooCommerce's CSV importer creates the path but assigns only the leaf.
                for part in path:
                    term = self._term(self._categories, part, parent)
                    parent = term["id"]
                if term is None:
                    continue
            out.append({"id": term["id"], "name": term["name"], "slug": term["slug"]})
        return out

    def _tags_for(self, items: Any) -> list[dict]:
        out = []
        for item in items or []:
            name = item.get("name") if isinstance(item, dict) else str(item).strip()
            if not name:
                continue
            term = self._term(self._tags, name)
            out.append({"id": term["id"], "name": term["name"], "slug": term["slug"]})
        return out

    def _image(self, item: Any, when: datetime) -> Optional[dict]:
        if not item:
            return None
        if isinstance(item, dict) and "src" not in item:
            return None
        src = item["src"] if isinstance(item, dict) else str(item).strip()
        local, gmt = self._dates(when)
        image_id = item.get("id") if isinstance(item, dict) else None
        if not image_id:
            image_id = self._next_image_id
            self._next_image_id += 1
        name = item.get("name") if isinstance(item, dict) else None
        if name is None:
            name = re.sub(r"\.[a-z0-9]+$", "", src.rsplit("/", 1)[-1], flags=re.I)
        return {"id": image_id, "date_created": local, "date_created_gmt": gmt,
                "date_modified": local, "date_modified_gmt": gmt, "src": src,
                "name": name, "alt": item.get("alt", "") if isinstance(item, dict) else ""}

    def _attribute(self, item: dict, position: int) -> dict:
        name = item.get("name") or ""
        options = item.get("options", [])
        if isinstance(options, str):
            options = [o.strip() for o in options.split(",") if o.strip()]
        attr_id = item.get("id")
        if attr_id is None:
            if item.get("global"):
                attr_id = self._attr_ids.setdefault(name.lower(), len(self._attr_ids) + 1)
            else:
                attr_id = self._attr_ids.get(name.lower(), 0) if item.get("global") is None else 0
        return {"id": int(attr_id), "name": name, "position": item.get("position", position),
                "visible": bool(item.get("visible", True)),
                "variation": bool(item.get("variation", False)), "options": list(options)}

    def _meta(self, meta: Any) -> list[dict]:
        if not meta:
            return []
        items = meta.items() if isinstance(meta, dict) else [
            (m["key"], m.get("value")) for m in meta]
        out = []
        for key, value in items:
            out.append({"id": self._next_meta_id, "key": key, "value": value})
            self._next_meta_id += 1
        return out

    def _template(self) -> dict:
        return {
            "id": 0, "name": "", "slug": "", "permalink": "",
            "date_created": None, "date_created_gmt": None,
            "date_modified": None, "date_modified_gmt": None,
            "type": "simple", "status": "publish", "featured": False,
            "catalog_visibility": "visible", "description": "", "short_description": "",
            "sku": "", "price": "", "regular_price": "", "sale_price": "",
            "date_on_sale_from": None, "date_on_sale_from_gmt": None,
            "date_on_sale_to": None, "date_on_sale_to_gmt": None,
            "price_html": "", "on_sale": False, "purchasable": False, "total_sales": 0,
            "virtual": False, "downloadable": False, "downloads": [],
            "download_limit": -1, "download_expiry": -1, "external_url": "",
            "button_text": "", "tax_status": "taxable", "tax_class": "",
            "manage_stock": False, "stock_quantity": None, "stock_status": "instock",
            "backorders": "no", "backorders_allowed": False, "backordered": False,
            "sold_individually": False, "weight": "",
            "dimensions": {"length": "", "width": "", "height": ""},
            "shipping_required": True, "shipping_taxable": True, "shipping_class": "",
            "shipping_class_id": 0, "reviews_allowed": True, "average_rating": "0.00",
            "rating_count": 0, "related_ids": [], "upsell_ids": [], "cross_sell_ids": [],
            "parent_id": 0, "purchase_note": "", "categories": [], "tags": [], "images": [],
            "attributes": [], "default_attributes": [], "variations": [],
            "grouped_products": [], "menu_order": 0, "meta_data": [], "_links": {},
        }

    def _build_product(self, spec: dict) -> dict:
        p = self._template()
        pid = spec.pop("id", None)
        if pid and (int(pid) in self._products or int(pid) in self._variation_parent):
            raise ValueError(f"id {pid} already exists")
        p["id"] = int(pid) if pid else self._new_id()
        self._reserve_id(p["id"])
        created = spec.pop("date_created_gmt", None) or spec.pop("date_created", None)
        modified = spec.pop("date_modified_gmt", None) or spec.pop("date_modified", None)
        spec.pop("date_created", None), spec.pop("date_modified", None)
        created_dt = (created if isinstance(created, datetime) else _parse_gmt(created)) or self.now()
        modified_dt = (modified if isinstance(modified, datetime) else _parse_gmt(modified)) or created_dt
        p["date_created"], p["date_created_gmt"] = self._dates(created_dt)
        p["date_modified"], p["date_modified_gmt"] = self._dates(modified_dt)
        spec.pop("_links", None)
        spec.pop("permalink", None)
        spec.pop("price_html", None)
        spec.pop("variations", None)
        if "categories" in spec:
            spec["categories"] = self._categories_for(spec["categories"])
        if "tags" in spec:
            spec["tags"] = self._tags_for(spec["tags"])
        if "images" in spec:
            spec["images"] = [i for i in (self._image(x, created_dt) for x in spec["images"]) if i]
        if "attributes" in spec:
            spec["attributes"] = [self._attribute(a, n) for n, a in enumerate(spec["attributes"])]
            for a in spec["attributes"]:
                if a["id"]:
                    self._attr_ids.setdefault(a["name"].lower(), a["id"])
        if "meta_data" in spec:
            spec["meta_data"] = self._meta(spec["meta_data"])
        for key in ("regular_price", "sale_price", "price"):
            if key in spec:
                spec[key] = _price_str(spec[key])
        if not spec.get("slug"):
            spec["slug"] = self._unique_slug(slugify(spec.get("name", "product")), p["id"])
        self._apply_prices(p, spec)
        for key, value in spec.items():
            p[key] = value
        if p["stock_quantity"] is not None and "manage_stock" not in spec:
            p["manage_stock"] = True
        return p

    def _unique_slug(self, slug: str, own_id: int) -> str:
        taken = {p["slug"] for i, p in self._products.items() if i != own_id}
        if slug not in taken:
            return slug
        n = 2
        while f"{slug}-{n}" in taken:
            n += 1
        return f"{slug}-{n}"

    @staticmethod
    def _apply_prices(obj: dict, fields: dict) -> None:
        """Keep price / regular_price / sale_price / on_sale consistent, as WC does."""
        for key in ("regular_price", "sale_price", "price"):
            if key in fields:
                fields[key] = _price_str(fields[key])
        if "price" in fields and "regular_price" not in fields and "sale_price" not in fields:
            fields.setdefault("regular_price", fields["price"])
            fields.setdefault("sale_price", "")
        if "regular_price" in fields or "sale_price" in fields:
            regular = fields.get("regular_price", obj.get("regular_price", ""))
            sale = fields.get("sale_price", obj.get("sale_price", ""))
            r, s = _num(regular), _num(sale)
            on_sale = s is not None and (r is None or s < r)
            fields.setdefault("price", sale if on_sale else regular)
            fields.setdefault("on_sale", on_sale)

    def _apply_fields(self, p: dict, fields: dict) -> None:
        fields = dict(fields)
        when = self.now()
        if "categories" in fields:
            fields["categories"] = self._categories_for(fields["categories"])
        if "tags" in fields:
            fields["tags"] = self._tags_for(fields["tags"])
        if "images" in fields:
            fields["images"] = [i for i in (self._image(x, when) for x in fields["images"]) if i]
        if "attributes" in fields:
            fields["attributes"] = [self._attribute(a, n) for n, a in enumerate(fields["attributes"])]
        if "meta_data" in fields:
            fields["meta_data"] = self._meta(fields["meta_data"])
        if "name" in fields and "slug" not in fields:
            fields["slug"] = self._unique_slug(slugify(fields["name"]), p["id"])
        if "stock_quantity" in fields and "manage_stock" not in fields:
            fields["manage_stock"] = fields["stock_quantity"] is not None
        self._apply_prices(p, fields)
        for key, value in fields.items():
            p[key] = value

    def _variation_attributes(self, parent: dict, attrs: Any) -> list[dict]:
        if isinstance(attrs, dict):
            attrs = [{"name": k, "option": v} for k, v in attrs.items()]
        out = []
        by_name = {a["name"].lower(): a for a in parent.get("attributes", [])}
        for a in attrs or []:
            option = a.get("option")
            if option in (None, ""):
                continue  # "Any <attribute>": WooCommerce leaves it out of the variation
            pa = by_name.get(str(a.get("name", "")).lower())
            attr_id = a.get("id", pa["id"] if pa else 0)
            out.append({"id": attr_id, "name": pa["name"] if pa else a.get("name"), "option": option})
        return out

    def _add_variation(self, parent: dict, spec: dict) -> dict:
        vid = spec.pop("id", None)
        vid = int(vid) if vid else self._new_id()
        self._reserve_id(vid)
        created = spec.pop("date_created_gmt", None) or spec.pop("date_created", None)
        created_dt = (created if isinstance(created, datetime) else _parse_gmt(created)) \
            or _parse_gmt(parent["date_created_gmt"]) or self.now()
        modified = spec.pop("date_modified_gmt", None) or spec.pop("date_modified", None)
        modified_dt = (modified if isinstance(modified, datetime) else _parse_gmt(modified)) or created_dt
        c_local, c_gmt = self._dates(created_dt)
        m_local, m_gmt = self._dates(modified_dt)
        attrs = self._variation_attributes(parent, spec.pop("attributes", []))
        image = self._image(spec.pop("image", None), created_dt)
        query = "&".join(
            f"attribute_{'pa_' + slugify(a['name']) if a['id'] else slugify(a['name'])}="
            f"{slugify(a['option']) if a['id'] else a['option']}" for a in attrs)
        v = {
            "id": vid, "date_created": c_local, "date_created_gmt": c_gmt,
            "date_modified": m_local, "date_modified_gmt": m_gmt, "description": "",
            "permalink": f"{self.site_url}/product/{parent['slug']}/" + (f"?{query}" if query else ""),
            "sku": "", "price": "", "regular_price": "", "sale_price": "",
            "date_on_sale_from": None, "date_on_sale_from_gmt": None,
            "date_on_sale_to": None, "date_on_sale_to_gmt": None, "on_sale": False,
            "status": "publish", "purchasable": True, "virtual": False, "downloadable": False,
            "downloads": [], "download_limit": -1, "download_expiry": -1,
            "tax_status": "taxable", "tax_class": "", "manage_stock": False,
            "stock_quantity": None, "stock_status": "instock", "backorders": "no",
            "backorders_allowed": False, "backordered": False, "weight": "",
            "dimensions": {"length": "", "width": "", "height": ""}, "shipping_class": "",
            "shipping_class_id": 0, "image": image, "attributes": attrs, "menu_order": 0,
            "meta_data": [], "_links": {},
        }
        if "meta_data" in spec:
            spec["meta_data"] = self._meta(spec["meta_data"])
        self._apply_prices(v, spec)
        for key, value in spec.items():
            v[key] = value
        if v["stock_quantity"] is not None and "manage_stock" not in spec:
            v["manage_stock"] = True
        v["purchasable"] = v["price"] != "" and v["status"] == "publish"
        base = f"{self.links_url}/products/{parent['id']}/variations"
        v["_links"] = {"self": [{"href": f"{base}/{vid}"}], "collection": [{"href": base}],
                       "up": [{"href": f"{self.links_url}/products/{parent['id']}"}]}
        self._variations.setdefault(parent["id"], {})[vid] = v
        self._variation_parent[vid] = parent["id"]
        return v

    def _sync_parent(self, p: dict) -> None:
        """WC_Product_Variable::sync: prices, on_sale and stock status from the children."""
        children = [v for v in self._variations.get(p["id"], {}).values() if v["status"] == "publish"]
        p["variations"] = [v["id"] for v in sorted(
            self._variations.get(p["id"], {}).values(),
            key=lambda v: (v["menu_order"], v["id"]))]
        priced = [v for v in children if v["price"] != ""]
        # A variable parent has no prices of its own: REST shows the lowest active
        # variation price as ``price`` and empty regular/sale prices.
        p["regular_price"] = p["sale_price"] = ""
        if priced:
            p["price"] = min((v["price"] for v in priced), key=float)
            p["on_sale"] = any(v["on_sale"] for v in priced)
        else:
            p["price"] = ""
            p["on_sale"] = False
        statuses = {v["stock_status"] for v in children}
        if "instock" in statuses:
            p["stock_status"] = "instock"
        elif "onbackorder" in statuses:
            p["stock_status"] = "onbackorder"
        elif children:
            p["stock_status"] = "outofstock"

    def _amount(self, value: float) -> str:
        symbol = _CURRENCY_SYMBOLS.get(self.currency, self.currency)
        return ('<span class="woocommerce-Price-amount amount"><bdi>'
                f'<span class="woocommerce-Price-currencySymbol">{symbol}</span>{value:,.2f}'
                '</bdi></span>')

    def _price_html(self, p: dict) -> str:
        symbol = _CURRENCY_SYMBOLS.get(self.currency, self.currency)
        if p["type"] == "variable":
            prices = [float(v["price"]) for v in self._variations.get(p["id"], {}).values()
                      if v["status"] == "publish" and v["price"] != ""]
            if not prices:
                return ""
            lo, hi = min(prices), max(prices)
            return self._amount(lo) if lo == hi else f"{self._amount(lo)} &ndash; {self._amount(hi)}"
        if p["type"] == "grouped":
            children = [self._products.get(i) for i in p.get("grouped_products", [])]
            prices = [float(c["price"]) for c in children if c and c["price"] != ""]
            if not prices:
                return ""
            lo, hi = min(prices), max(prices)
            return self._amount(lo) if lo == hi else f"{self._amount(lo)} &ndash; {self._amount(hi)}"
        price = _num(p["price"])
        if price is None:
            return ""
        regular = _num(p["regular_price"])
        if p["on_sale"] and regular is not None:
            return (f'<del aria-hidden="true">{self._amount(regular)}</del> '
                    f'<span class="screen-reader-text">Original price was: {symbol}{regular:,.2f}.</span>'
                    f'<ins aria-hidden="true">{self._amount(price)}</ins>'
                    f'<span class="screen-reader-text">Current price is: {symbol}{price:,.2f}.</span>')
        return self._amount(price)

    def _finish_product(self, p: dict) -> None:
        if p["type"] == "grouped":
            children = [self._products.get(i) for i in p.get("grouped_products", [])]
            prices = [c["price"] for c in children if c and c["price"] != ""]
            p["price"] = min(prices, key=float) if prices else ""
        p["permalink"] = f"{self.site_url}/product/{p['slug']}/"
        p["price_html"] = self._price_html(p)
        p["purchasable"] = p["price"] != "" and p["status"] == "publish" if p["type"] != "external" \
            else bool(p["price"]) and p["status"] == "publish"
        p["backorders_allowed"] = p["backorders"] in ("yes", "notify")
        p["_links"] = {"self": [{"href": f"{self.links_url}/products/{p['id']}"}],
                       "collection": [{"href": f"{self.links_url}/products"}]}
        if p.get("parent_id"):
            p["_links"]["up"] = [{"href": f"{self.links_url}/products/{p['parent_id']}"}]

    def _variation_as_product(self, v: dict) -> dict:
        """What ``GET /products/<variation id>`` returns (and a webhook for a variation)."""
        parent = self._products[self._variation_parent[v["id"]]]
        p = self._template()
        for key in p:
            if key in v and key not in ("_links",):
                p[key] = copy.deepcopy(v[key])
        options = ", ".join(a["option"] for a in v["attributes"])
        p["name"] = parent["name"] + (f" - {options}" if options else "")
        p["slug"] = slugify(p["name"])
        p["type"] = "variation"
        p["parent_id"] = parent["id"]
        p["permalink"] = v["permalink"]
        p["catalog_visibility"] = "visible"
        p["images"] = [copy.deepcopy(v["image"])] if v.get("image") else []
        p["attributes"] = copy.deepcopy(v["attributes"])
        p["price_html"] = self._amount(float(v["price"])) if v["price"] != "" else ""
        p["_links"] = {"self": [{"href": f"{self.links_url}/products/{v['id']}"}],
                       "collection": [{"href": f"{self.links_url}/products"}],
                       "up": [{"href": f"{self.links_url}/products/{parent['id']}"}]}
        return p

    def _finalize_all(self) -> None:
        by_cat: dict[int, list[int]] = {}
        for p in self._products.values():
            for c in p["categories"]:
                by_cat.setdefault(c["id"], []).append(p["id"])
        for p in self._products.values():
            if p["type"] == "variable":
                self._sync_parent(p)
            if not p["related_ids"]:
                related: list[int] = []
                for c in p["categories"]:
                    for other in by_cat.get(c["id"], []):
                        if other != p["id"] and other not in related:
                            related.append(other)
                        if len(related) >= 5:
                            break
                p["related_ids"] = related[:5]
        for p in self._products.values():
            self._finish_product(p)

    # ------------------------------------------------------------------ seeding

    @_Hybrid
    def from_sample_csv(self, path: str) -> "FakeWooStore":
        """Load WooCommerce's product CSV (the official ``sample_products.csv``) into the
        store. Call on the class for a new store (constructor kwargs accepted) or on an
        instance to load into it."""
        with open(path, newline="", encoding="utf-8-sig") as fh:
            rows = list(csv.DictReader(fh))
        with self._lock:
            base = datetime(2024, 1, 15, 9, 0, 0, tzinfo=timezone.utc)
            sku_to_id: dict[str, int] = {}
            pending_variations: list[tuple[int, dict]] = []
            grouped: dict[int, str] = {}
            for n, row in enumerate(rows):
                when = base + timedelta(minutes=n)
                kinds = [k.strip() for k in (row.get("Type") or "simple").split(",")]
                if "variation" in kinds:
                    pending_variations.append((n, row))
                    continue
                ptype = next((k for k in kinds if k in ("simple", "variable", "grouped", "external")), "simple")
                spec = self._spec_from_row(row, ptype, kinds, when)
                used_for_variations = self._variation_attr_names(rows, row)
                for a in spec.get("attributes", []):
                    a["variation"] = ptype == "variable" and a["name"].lower() in used_for_variations
                p = self._build_product(spec)
                self._products[p["id"]] = p
                self._variations.setdefault(p["id"], {})
                if row.get("SKU"):
                    sku_to_id[row["SKU"].strip()] = p["id"]
                if row.get("Grouped products"):
                    grouped[p["id"]] = row["Grouped products"]
            for n, row in pending_variations:
                parent_ref = (row.get("Parent") or "").strip()
                parent_id = int(parent_ref[3:]) if parent_ref.startswith("id:") else sku_to_id.get(parent_ref)
                parent = self._products.get(parent_id) if parent_id else None
                if parent is None:
                    continue
                when = base + timedelta(minutes=n)
                attrs = []
                for i in range(1, 10):
                    name = (row.get(f"Attribute {i} name") or "").strip()
                    if name:
                        attrs.append({"name": name, "option": (row.get(f"Attribute {i} value(s)") or "").strip()})
                images = [u.strip() for u in (row.get("Images") or "").split(",") if u.strip()]
                spec = {
                    "id": int(row["ID"]) if row.get("ID") else None, "sku": row.get("SKU", "").strip(),
                    "description": wpautop(row.get("Description", "")),
                    "regular_price": row.get("Regular price", ""), "sale_price": row.get("Sale price", ""),
                    "stock_status": self._stock_status(row.get("In stock?", "1")),
                    "menu_order": int(row.get("Position") or 0), "attributes": attrs,
                    "image": images[0] if images else None, "date_created": when,
                    "status": "publish" if (row.get("Published") or "1").strip() == "1" else "private",
                    "weight": _decimal_str(row.get("Weight (lbs)")),
                }
                if (row.get("Stock") or "").strip():
                    spec["stock_quantity"] = int(float(row["Stock"]))
                v = self._add_variation(parent, spec)
                if v["sku"]:
                    sku_to_id[v["sku"]] = v["id"]
            for pid, refs in grouped.items():
                ids = []
                for ref in [r.strip() for r in refs.split(",") if r.strip()]:
                    ref_id = int(ref[3:]) if ref.startswith("id:") else sku_to_id.get(ref)
                    if ref_id:
                        ids.append(ref_id)
                self._products[pid]["grouped_products"] = ids
            for p in self._products.values():
                for key in ("upsell_ids", "cross_sell_ids"):
                    if f"_{key}_refs" in p:
                        refs = p.pop(f"_{key}_refs")
                        p[key] = [sku_to_id[r.strip()] for r in refs.split(",") if r.strip() in sku_to_id]
            self._finalize_all()
        return self

    @staticmethod
    def _stock_status(value: str) -> str:
        value = (value or "").strip().lower()
        if value in ("1", "yes", "instock", "true"):
            return "instock"
        if value in ("backorder", "onbackorder"):
            return "onbackorder"
        return "outofstock"

    @staticmethod
    def _variation_attr_names(rows: list[dict], parent_row: dict) -> set[str]:
        sku = (parent_row.get("SKU") or "").strip()
        pid = f"id:{parent_row.get('ID')}"
        names = set()
        for row in rows:
            if (row.get("Parent") or "").strip() in (sku, pid) and sku:
                for i in range(1, 10):
                    name = (row.get(f"Attribute {i} name") or "").strip()
                    if name:
                        names.add(name.lower())
        return names

    def _spec_from_row(self, row: dict, ptype: str, kinds: list[str], when: datetime) -> dict:
        published = (row.get("Published") or "1").strip()
        status = {"1": "publish", "0": "private", "-1": "draft"}.get(published, "publish")
        attrs = []
        for i in range(1, 10):
            name = (row.get(f"Attribute {i} name") or "").strip()
            if not name:
                continue
            attrs.append({"name": name, "options": row.get(f"Attribute {i} value(s)", ""),
                          "visible": (row.get(f"Attribute {i} visible") or "0").strip() == "1",
                          "global": (row.get(f"Attribute {i} global") or "0").strip() == "1"})
        meta = {k[len("Meta: "):]: v for k, v in row.items() if k and k.startswith("Meta: ") and v not in (None, "")}
        downloads = []
        for i in range(1, 10):
            name, url = row.get(f"Download {i} name"), row.get(f"Download {i} URL")
            if url:
                downloads.append({"id": hashlib.md5(url.encode()).hexdigest(), "name": name or "", "file": url})
        spec: dict[str, Any] = {
            "id": int(row["ID"]) if (row.get("ID") or "").strip() else None,
            "type": ptype, "sku": (row.get("SKU") or "").strip(), "name": (row.get("Name") or "").strip(),
            "status": status, "featured": (row.get("Is featured?") or "0").strip() == "1",
            "catalog_visibility": (row.get("Visibility in catalog") or "visible").strip(),
            "short_description": wpautop(row.get("Short description", "")),
            "description": wpautop(row.get("Description", "")),
            "tax_status": (row.get("Tax status") or "taxable").strip(),
            "tax_class": (row.get("Tax class") or "").strip(),
            "stock_status": self._stock_status(row.get("In stock?", "1")),
            "backorders": {"1": "yes", "notify": "notify"}.get((row.get("Backorders allowed?") or "0").strip(), "no"),
            "sold_individually": (row.get("Sold individually?") or "0").strip() == "1",
            "weight": _decimal_str(row.get("Weight (lbs)")),
            "dimensions": {"length": _decimal_str(row.get("Length (in)")),
                           "width": _decimal_str(row.get("Width (in)")),
                           "height": _decimal_str(row.get("Height (in)"))},
            "reviews_allowed": (row.get("Allow customer reviews?") or "1").strip() == "1",
            "purchase_note": row.get("Purchase note") or "",
            "categories": [c.strip() for c in (row.get("Categories") or "").split(",") if c.strip()],
            "tags": [t.strip() for t in (row.get("Tags") or "").split(",") if t.strip()],
            "shipping_class": (row.get("Shipping class") or "").strip(),
            "images": [u.strip() for u in (row.get("Images") or "").split(",") if u.strip()],
            "download_limit": int(row["Download limit"]) if (row.get("Download limit") or "").strip() else -1,
            "download_expiry": int(row["Download expiry days"]) if (row.get("Download expiry days") or "").strip() else -1,
            "external_url": (row.get("External URL") or "").strip(),
            "button_text": (row.get("Button text") or "").strip(),
            "menu_order": int(row.get("Position") or 0),
            "attributes": attrs, "meta_data": meta, "downloads": downloads,
            "virtual": "virtual" in kinds, "downloadable": "downloadable" in kinds,
            "date_created": when,
            "_upsell_ids_refs": row.get("Upsells") or "", "_cross_sell_ids_refs": row.get("Cross-sells") or "",
        }
        if spec["virtual"]:
            spec["shipping_required"] = False
        if (row.get("Stock") or "").strip():
            spec["stock_quantity"] = int(float(row["Stock"]))
        if ptype in ("simple", "external"):
            spec["regular_price"] = row.get("Regular price", "")
            spec["sale_price"] = row.get("Sale price", "")
        return spec

    @_Hybrid
    def generate(self, n: int, *, seed: int = 0, variable_ratio: float = 0.2,
                 draft_ratio: float = 0.0, hidden_ratio: float = 0.0,
                 out_of_stock_ratio: float = 0.1) -> "FakeWooStore":
        """Add ``n`` synthetic products (deterministic for a seed). ``variable_ratio`` of
        them are variable with 2–6 Color/Size variations. Fast: 5,000 in well under 2 s.
        Call on the class for a new store, or on an instance to add to it."""
        rng = random.Random(seed)
        adjectives = ["Classic", "Organic", "Vintage", "Slim", "Heavy", "Light", "Premium",
                      "Everyday", "Outdoor", "Urban", "Cozy", "Sport", "Travel", "Eco", "Deluxe"]
        materials = ["Cotton", "Wool", "Linen", "Leather", "Denim", "Bamboo", "Merino", "Canvas",
                     "Ceramic", "Oak", "Steel", "Glass"]
        nouns = {
            "Clothing > Tshirts": ["T-Shirt", "Tee", "Polo", "Tank Top"],
            "Clothing > Hoodies": ["Hoodie", "Sweatshirt", "Zip Hoodie"],
            "Clothing > Accessories": ["Beanie", "Cap", "Scarf", "Belt", "Sunglasses"],
            "Decor": ["Vase", "Lamp", "Pennant", "Poster", "Cushion"],
            "Kitchen": ["Mug", "Bowl", "Cutting Board", "Teapot"],
            "Music": ["Album", "Single", "Vinyl"],
        }
        colours = ["Black", "White", "Red", "Blue", "Green", "Gray", "Yellow", "Navy"]
        sizes = ["Small", "Medium", "Large", "XL"]
        tags_pool = ["summer", "gift", "bestseller", "new", "sale", "limited", "eco"]
        cat_paths = list(nouns)
        with self._lock:
            base = datetime(2024, 3, 1, 8, 0, 0, tzinfo=timezone.utc)
            start_id = max([self._next_id, *self._products, *self._variation_parent, 1000]) + 1
            self._next_id = start_id
            for i in range(n):
                cat = cat_paths[i % len(cat_paths)]
                noun = rng.choice(nouns[cat])
                name = f"{rng.choice(adjectives)} {rng.choice(materials)} {noun} {i + 1}"
                when = base + timedelta(seconds=i)
                variable = rng.random() < variable_ratio
                status = "draft" if rng.random() < draft_ratio else "publish"
                regular = round(rng.uniform(5, 250), 2)
                on_sale = rng.random() < 0.15
                colour_opts = rng.sample(colours, rng.randint(1, 3))
                desc = (f"<p>The {name.lower()} is made of {rng.choice(materials).lower()} and "
                        f"built for {rng.choice(['daily use', 'long trips', 'cold days', 'the beach', 'the office'])}."
                        f"</p>\n<ul>\n<li>Colour: {', '.join(colour_opts)}</li>\n"
                        f"<li>Care: {rng.choice(['machine wash', 'hand wash', 'wipe clean'])}</li>\n</ul>\n")
                spec: dict[str, Any] = {
                    "name": name, "slug": f"{slugify(name)}", "type": "variable" if variable else "simple",
                    "status": status,
                    "catalog_visibility": "hidden" if rng.random() < hidden_ratio else "visible",
                    "sku": f"GEN-{i + 1:06d}",
                    "short_description": f"<p>{rng.choice(adjectives)} {noun.lower()} for every day.</p>\n",
                    "description": desc, "categories": [cat],
                    "tags": rng.sample(tags_pool, rng.randint(0, 2)),
                    "images": [f"{self.site_url}/wp-content/uploads/2024/03/{slugify(name)}.jpg"],
                    "date_created": when,
                    "stock_status": "outofstock" if rng.random() < out_of_stock_ratio else "instock",
                    "attributes": [{"name": "Color", "options": colour_opts, "visible": True,
                                    "variation": variable, "global": True}],
                }
                if variable:
                    size_opts = rng.sample(sizes, rng.randint(1, 2))
                    spec["attributes"].append({"name": "Size", "options": size_opts, "visible": True,
                                               "variation": True, "global": True})
                else:
                    spec["regular_price"] = f"{regular:.2f}"
                    if on_sale:
                        spec["sale_price"] = f"{regular * 0.8:.2f}"
                p = self._build_product(spec)
                self._products[p["id"]] = p
                self._variations.setdefault(p["id"], {})
                if variable:
                    for colour in colour_opts:
                        for size in size_opts:
                            price = round(regular + rng.choice([0, 0, 5, 10]), 2)
                            self._add_variation(p, {
                                "sku": f"{spec['sku']}-{colour[:3].upper()}-{size[:1]}",
                                "regular_price": f"{price:.2f}",
                                "sale_price": f"{price * 0.8:.2f}" if on_sale else "",
                                "stock_status": "outofstock" if rng.random() < out_of_stock_ratio else "instock",
                                "attributes": {"Color": colour, "Size": size},
                                "date_created": when,
                            })
            self._finalize_all()
        return self

    # ------------------------------------------------------------------ request handling

    def _track_request(self, method: str, path: str, query: dict, headers: dict) -> None:
        with self._lock:
            self.requests.append(Request(method, path, query))
            self.request_log.append({"method": method, "path": path, "query": query,
                                     "headers": headers, "time": time.time()})

    def _handle(self, h: _Handler) -> None:
        method = h.command
        parts = urlsplit(h.path)
        path = parts.path
        pairs = parse_qsl(parts.query, keep_blank_values=True)
        query: dict[str, Any] = {}
        for key, value in pairs:
            if key in query:
                query[key] = (query[key] if isinstance(query[key], list) else [query[key]]) + [value]
            else:
                query[key] = value
        length = int(h.headers.get("Content-Length") or 0)
        body = h.rfile.read(length) if length else b""
        self._track_request(method, path, query, dict(h.headers.items()))

        if self.delay:
            time.sleep(self.delay)

        with self._lock:
            down, down_retry = self._down, self._down_retry_after
            failure = self._fail_queue.pop(0) if self._fail_queue else None
        if down == "503":
            headers = {"Content-Type": "text/html; charset=utf-8"}
            if down_retry is not None:
                headers["Retry-After"] = str(int(down_retry))
            return self._send(h, 503, _MAINTENANCE_HTML.encode(), headers)
        if failure is not None:
            return self._send_failure(h, *failure)

        if not (path == "/wp-json" or path.startswith("/wp-json/")):
            return self._send(h, 404, b"<!DOCTYPE html><html><body><h1>Not Found</h1></body></html>",
                              {"Content-Type": "text/html; charset=UTF-8"})
        try:
            status, data, headers = self._route(method, path, query, body, h.headers)
        except _ApiError as err:
            status, data, headers = err.status, err.body, err.headers
        except Exception as exc:  # pragma: no cover - a bug in the fake shows as a 500
            status, data, headers = 500, {"code": "internal_server_error", "message": _FATAL_MESSAGE,
                                          "data": {"status": 500}, "additional_errors": [],
                                          "fake_error": repr(exc)}, {}
        payload = php_json_encode(data).encode("ascii")
        base_headers = {
            "Content-Type": "application/json; charset=UTF-8",
            "X-Robots-Tag": "noindex",
            "X-Content-Type-Options": "nosniff",
            "Access-Control-Expose-Headers": "X-WP-Total, X-WP-TotalPages, Link",
            "Access-Control-Allow-Headers": "Authorization, X-WP-Nonce, Content-Disposition, Content-MD5, Content-Type",
        }
        base_headers.update(headers)
        self._send(h, status, payload, base_headers, head_only=method == "HEAD")

    def _send_failure(self, h: _Handler, status: int, retry_after: Optional[float]) -> None:
        headers: dict[str, str] = {}
        if retry_after is not None:
            headers["Retry-After"] = str(int(math.ceil(retry_after)))
        if status == 500:
            data = {"code": "internal_server_error", "message": _FATAL_MESSAGE,
                    "data": {"status": 500}, "additional_errors": []}
        elif status == 429:
            wait = int(math.ceil(retry_after)) if retry_after is not None else 1
            data = {"code": "rate_limit_exceeded",
                    "message": f"Too many requests. Please wait {wait} seconds before trying again.",
                    "data": {"status": 429}}
        elif status in (502, 503, 504):
            headers["Content-Type"] = "text/html"
            return self._send(h, status, f"<html><body><h1>{status} {http.client.responses.get(status, '')}"
                                         f"</h1></body></html>".encode(), headers)
        else:
            data = {"code": f"http_{status}", "message": http.client.responses.get(status, "Error"),
                    "data": {"status": status}}
        headers["Content-Type"] = "application/json; charset=UTF-8"
        self._send(h, status, php_json_encode(data).encode("ascii"), headers)

    @staticmethod
    def _send(h: _Handler, status: int, payload: bytes, headers: dict, head_only: bool = False) -> None:
        try:
            h.send_response(status)
            for key, value in headers.items():
                h.send_header(key, str(value))
            h.send_header("Content-Length", str(len(payload)))
            h.end_headers()
            if not head_only:
                h.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError, OSError):
            h.close_connection = True

    # ------------------------------------------------------------------ routing

    def _authenticate(self, query: dict, headers) -> Optional[bool]:
        """True: authenticated; None: no/unknown credentials; raises on a wrong secret."""
        key = secret = ""
        q_key, q_secret = query.get("consumer_key"), query.get("consumer_secret")
        if isinstance(q_key, str) and isinstance(q_secret, str) and q_key and q_secret:
            key, secret = q_key, q_secret
        else:
            auth = headers.get("Authorization") or ""
            if auth[:6].lower() == "basic ":
                try:
                    decoded = base64.b64decode(auth[6:].strip()).decode("utf-8")
                    key, _, secret = decoded.partition(":")
                except (ValueError, UnicodeDecodeError):
                    key = secret = ""
        if not key or not secret:
            return None
        if not hmac.compare_digest(key, self.consumer_key):
            return None  # WooCommerce: unknown key → not logged in (no error of its own)
        if not hmac.compare_digest(secret, self.consumer_secret):
            raise _ApiError(401, "woocommerce_rest_authentication_error", "Consumer secret is invalid.",
                            headers={"WWW-Authenticate": 'Basic realm="WooCommerce API. Use a consumer key in '
                                     'the username field and a consumer secret in the password field."'})
        return True

    def _route(self, method: str, path: str, query: dict, body: bytes, headers) -> tuple[int, Any, dict]:
        authed = self._authenticate(query, headers)
        if authed:
            if method in ("GET", "HEAD") and self.permissions not in ("read", "read_write"):
                raise _ApiError(401, "woocommerce_rest_authentication_error",
                                "The API key provided does not have read permissions.")
            if method in ("POST", "PUT", "PATCH", "DELETE") and self.permissions not in ("write", "read_write"):
                raise _ApiError(401, "woocommerce_rest_authentication_error",
                                "The API key provided does not have write permissions.")
        allowed = bool(authed) or not self.require_auth
        route = path[len(WC_NAMESPACE):] if path.startswith(WC_NAMESPACE) else None
        if route is None:
            raise _ApiError(404, **{k: _NO_ROUTE[k] for k in ("code", "message")})
        route = route.rstrip("/") or "/"
        get = method in ("GET", "HEAD")

        def deny(kind: str = "list") -> None:
            if not allowed:
                if kind == "list":
                    raise _ApiError(401, "woocommerce_rest_cannot_view", "Sorry, you cannot list resources.")
                if kind == "view":
                    raise _ApiError(401, "woocommerce_rest_cannot_view", "Sorry, you cannot view this resource.")
                if kind == "create":
                    raise _ApiError(401, "woocommerce_rest_cannot_create",
                                    "Sorry, you are not allowed to create resources.")
                if kind == "edit":
                    raise _ApiError(401, "woocommerce_rest_cannot_edit", "Sorry, you are not allowed to edit this resource.")
                raise _ApiError(401, "woocommerce_rest_cannot_delete", "Sorry, you are not allowed to delete this resource.")

        m = None
        if route == "/products" and get:
            params = self._collection_params(query, products=True)
            deny("list")
            return self._list_products(params, query)
        if route == "/products/categories" and get:
            params = self._collection_params(query, products=False)
            deny("list")
            with self._lock:
                items = [self._category_json(c) for c in sorted(self._categories.values(), key=lambda c: c["name"])]
            return self._page(items, params, query, "/products/categories", links=False)
        if (m := re.fullmatch(r"/products/(\d+)", route)) and get:
            deny("view")
            pid = int(m.group(1))
            with self._lock:
                if pid in self._products:
                    data = self._fields(copy.deepcopy(self._products[pid]), query)
                elif pid in self._variation_parent:
                    v = self._variations[self._variation_parent[pid]][pid]
                    data = self._fields(self._variation_as_product(v), query)
                else:
                    raise _ApiError(404, "woocommerce_rest_product_invalid_id", "Invalid ID.")
            return 200, data, {"Allow": "GET, POST, PUT, PATCH, DELETE"}
        if (m := re.fullmatch(r"/products/(\d+)/variations", route)) and get:
            params = self._collection_params(query, products=False)
            deny("list")
            pid = int(m.group(1))
            with self._lock:
                items = list(self._variations.get(pid, {}).values())
                items = self._filter_dates(items, params)
                if params.get("include"):
                    items = [v for v in items if v["id"] in params["include"]]
                items.sort(key=lambda v: (v["date_created_gmt"], v["id"]), reverse=params["order"] == "desc")
                items = [copy.deepcopy(v) for v in items]
            return self._page(items, params, query, f"/products/{pid}/variations")
        if (m := re.fullmatch(r"/products/(\d+)/variations/(\d+)", route)) and get:
            deny("view")
            pid, vid = int(m.group(1)), int(m.group(2))
            with self._lock:
                v = self._variations.get(pid, {}).get(vid)
                if v is None:
                    raise _ApiError(404, "woocommerce_rest_product_variation_invalid_id", "Invalid ID.")
                data = self._fields(copy.deepcopy(v), query)
            return 200, data, {}
        if route == "/webhooks":
            if get:
                params = self._collection_params(query, products=False)
                deny("list")
                wanted = query.get("status", "all")
                with self._lock:
                    items = [self._webhook_json(w) for _, w in sorted(self._webhooks.items(), reverse=True)
                             if wanted in ("all", w["status"])]
                return self._page(items, params, query, "/webhooks")
            if method == "POST":
                return self._create_webhook(self._body_params(body, headers), deny)
        if m := re.fullmatch(r"/webhooks/(\d+)", route):
            wid = int(m.group(1))
            if get:
                deny("view")
                with self._lock:
                    wh = self._webhooks.get(wid)
                    if wh is None:
                        raise _ApiError(404, "woocommerce_rest_shop_webhook_invalid_id", "Invalid ID.")
                    return 200, self._webhook_json(wh), {}
            if method in ("PUT", "PATCH", "POST"):
                deny("edit")
                return self._update_webhook(wid, self._body_params(body, headers))
            if method == "DELETE":
                deny("delete")
                force = str(query.get("force", "")).lower() in ("1", "true")
                with self._lock:
                    wh = self._webhooks.get(wid)
                    if wh is None:
                        raise _ApiError(404, "woocommerce_rest_shop_webhook_invalid_id", "Invalid ID.")
                    if not force:
                        raise _ApiError(501, "woocommerce_rest_trash_not_supported",
                                        "Webhooks do not support trashing.")
                    del self._webhooks[wid]
                    return 200, self._webhook_json(wh), {}
        raise _ApiError(404, **{k: _NO_ROUTE[k] for k in ("code", "message")})

    # ------------------------------------------------------------------ params

    def _collection_params(self, query: dict, products: bool) -> dict:
        errors: dict[str, tuple[str, str]] = {}
        out: dict[str, Any] = {}

        def single(key: str) -> Optional[str]:
            value = query.get(key)
            return value[-1] if isinstance(value, list) else value

        def integer(key: str, default: Optional[int], lo: Optional[int], hi: Optional[int]) -> None:
            raw = single(key)
            if raw is None:
                out[key] = default
                return
            try:
                value = int(raw.strip())
            except ValueError:
                errors[key] = ("rest_invalid_type", f"{key} is not of type integer.")
                return
            if lo is not None and hi is not None and not lo <= value <= hi:
                errors[key] = ("rest_out_of_bounds", f"{key} must be between {lo} (inclusive) and {hi} (inclusive)")
            elif lo is not None and value < lo:
                errors[key] = ("rest_out_of_bounds", f"{key} must be greater than or equal to {lo}")
            else:
                out[key] = value

        def enum(key: str, default: str, values: tuple) -> None:
            raw = single(key)
            if raw is None:
                out[key] = default
            elif raw not in values:
                errors[key] = ("rest_not_in_enum", f"{key} is not one of {', '.join(values)}.")
            else:
                out[key] = raw

        def id_list(key: str) -> None:
            raw = query.get(key)
            if raw is None:
                raw = query.get(f"{key}[]")
            if raw is None:
                indexed = [v for k, v in query.items() if re.fullmatch(rf"{key}\[\d+\]", k)]
                raw = indexed or None
            if raw is None:
                out[key] = []
                return
            values = raw if isinstance(raw, list) else [raw]
            ids = []
            for v in values:
                ids.extend(int(x) for x in re.split(r"[\s,]+", str(v)) if x.strip().isdigit())
            out[key] = ids

        integer("page", 1, 1, None)
        integer("per_page", 10, 1, 100)
        integer("offset", None, None, None)
        enum("order", "desc", ("asc", "desc"))
        enum("orderby", "date", _PRODUCT_ORDERBY if products else
             ("date", "id", "include", "title", "slug", "modified"))
        id_list("include")
        id_list("exclude")
        raw_gmt = single("dates_are_gmt")
        if raw_gmt is None or raw_gmt.lower() in ("", "0", "false"):
            out["dates_are_gmt"] = False
        elif raw_gmt.lower() in ("1", "true"):
            out["dates_are_gmt"] = True
        else:
            errors["dates_are_gmt"] = ("rest_invalid_type", "dates_are_gmt is not of type boolean.")
        for key in ("after", "before", "modified_after", "modified_before"):
            raw = single(key)
            if raw is None:
                continue
            local = self._wp_date_to_local(raw)
            if local is None:
                errors[key] = ("rest_invalid_date", "Invalid date.")
            else:
                out[key] = local
        if products:
            enum("status", "any", _PRODUCT_STATUSES)
            enum("type", "", ("", "simple", "grouped", "external", "variable"))
            enum("stock_status", "", ("", "instock", "outofstock", "onbackorder"))
            for key in ("sku", "search", "slug", "category", "tag", "featured", "on_sale"):
                if single(key) is not None:
                    out[key] = single(key)
        if errors:
            raise _invalid_params(errors)
        return out

    def _wp_date_to_local(self, raw: str) -> Optional[str]:
        """WP_Date_Query::build_mysql_datetime: offsets → site wall-clock time; naive = site time."""
        m = _DATE_RE.match(raw.strip())
        if not m:
            return None
        y, mo, d, hh, mi, ss, _frac, tz = m.groups()
        try:
            dt = datetime(int(y), int(mo), int(d), int(hh), int(mi), int(ss))
        except ValueError:
            return None
        if tz:
            if tz in ("Z", "z"):
                offset = timedelta(0)
            else:
                sign = 1 if tz[0] == "+" else -1
                digits = tz[1:].replace(":", "")
                offset = sign * timedelta(hours=int(digits[:2]), minutes=int(digits[2:4] or 0))
            dt = dt - offset + self.utc_offset  # to UTC, then to the site's wall clock
        return _fmt(dt)

    @staticmethod
    def _filter_dates(items: list[dict], params: dict) -> list[dict]:
        suffix = "_gmt" if params.get("dates_are_gmt") else ""
        checks = []
        if params.get("after"):
            checks.append((f"date_created{suffix}", ">", params["after"]))
        if params.get("before"):
            checks.append((f"date_created{suffix}", "<", params["before"]))
        if params.get("modified_after"):
            checks.append((f"date_modified{suffix}", ">", params["modified_after"]))
        if params.get("modified_before"):
            checks.append((f"date_modified{suffix}", "<", params["modified_before"]))
        for column, op, value in checks:
            if op == ">":
                items = [i for i in items if (i.get(column) or "") > value]
            else:
                items = [i for i in items if (i.get(column) or "") < value]
        return items

    @staticmethod
    def _body_params(body: bytes, headers) -> dict:
        if not body:
            return {}
        ctype = (headers.get("Content-Type") or "").lower()
        if "json" in ctype or body.lstrip()[:1] in (b"{", b"["):
            try:
                data = json.loads(body.decode("utf-8"))
            except (ValueError, UnicodeDecodeError):
                raise _ApiError(400, "rest_invalid_json", "Invalid JSON body passed.",
                                {"json_error_code": 4, "json_error_message": "Syntax error"})
            return data if isinstance(data, dict) else {}
        return dict(parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True))

    # ------------------------------------------------------------------ collections

    def _list_products(self, params: dict, query: dict) -> tuple[int, Any, dict]:
        with self._lock:
            items = list(self._products.values())
            status = params["status"]
            if status == "any":
                items = [p for p in items if p["status"] not in ("trash", "auto-draft")]
            else:
                items = [p for p in items if p["status"] == status]
            if params["include"]:
                wanted = set(params["include"])
                items = [p for p in items if p["id"] in wanted]
            if params["exclude"]:
                unwanted = set(params["exclude"])
                items = [p for p in items if p["id"] not in unwanted]
            if params.get("type"):
                items = [p for p in items if p["type"] == params["type"]]
            if params.get("stock_status"):
                items = [p for p in items if p["stock_status"] == params["stock_status"]]
            if "sku" in params:
                skus = {s.strip() for s in params["sku"].split(",")}
                items = [p for p in items if p["sku"] in skus]
            if "slug" in params:
                items = [p for p in items if p["slug"] == params["slug"]]
            if "category" in params:
                cats = {int(c) for c in re.split(r"[\s,]+", params["category"]) if c.isdigit()}
                items = [p for p in items if any(c["id"] in cats for c in p["categories"])]
            if "tag" in params:
                tags = {int(t) for t in re.split(r"[\s,]+", params["tag"]) if t.isdigit()}
                items = [p for p in items if any(t["id"] in tags for t in p["tags"])]
            if "featured" in params:
                flag = params["featured"].lower() in ("1", "true")
                items = [p for p in items if p["featured"] == flag]
            if "on_sale" in params:
                flag = params["on_sale"].lower() in ("1", "true")
                items = [p for p in items if p["on_sale"] == flag]
            if params.get("search"):
                needle = params["search"].lower()
                items = [p for p in items if needle in p["name"].lower()
                         or needle in p["description"].lower() or needle in p["short_description"].lower()]
            items = self._filter_dates(items, params)
            orderby, reverse = params["orderby"], params["order"] == "desc"
            if orderby == "include" and params["include"]:
                rank = {pid: n for n, pid in enumerate(params["include"])}
                items.sort(key=lambda p: rank.get(p["id"], 0))
            else:
                keyfunc = {
                    "date": lambda p: (p["date_created_gmt"], p["id"]),
                    "id": lambda p: (p["id"],),
                    "include": lambda p: (p["date_created_gmt"], p["id"]),
                    "title": lambda p: (p["name"].lower(), p["id"]),
                    "slug": lambda p: (p["slug"], p["id"]),
                    "modified": lambda p: (p["date_modified_gmt"], p["id"]),
                    "menu_order": lambda p: (p["menu_order"], p["name"].lower()),
                    "price": lambda p: (_num(p["price"]) or 0.0, p["id"]),
                    "popularity": lambda p: (p["total_sales"], p["id"]),
                    "rating": lambda p: (float(p["average_rating"] or 0), p["id"]),
                }[orderby]
                items.sort(key=keyfunc, reverse=reverse)
            total = len(items)
            per_page, page = params["per_page"], params["page"]
            start = params["offset"] if params.get("offset") is not None else (page - 1) * per_page
            chunk = items[start:start + per_page]
            data = [self._fields(copy.deepcopy(p), query) for p in chunk]
        return self._headers_for(data, total, params, query, "/products")

    def _page(self, items: list, params: dict, query: dict, route: str, links: bool = True):
        total = len(items)
        per_page, page = params["per_page"], params["page"]
        start = params["offset"] if params.get("offset") is not None else (page - 1) * per_page
        data = [self._fields(i, query) for i in items[start:start + per_page]]
        return self._headers_for(data, total, params, query, route)

    def _headers_for(self, data: list, total: int, params: dict, query: dict, route: str):
        per_page, page = params["per_page"], params["page"]
        max_pages = int(math.ceil(total / per_page)) if per_page else 0
        headers = {"X-WP-Total": str(total), "X-WP-TotalPages": str(max_pages), "Allow": "GET, POST"}
        links = []
        if page > 1:
            links.append(f'<{self._page_url(route, query, min(page - 1, max_pages))}>; rel="prev"')
        if max_pages > page:
            links.append(f'<{self._page_url(route, query, page + 1)}>; rel="next"')
        if links:
            headers["Link"] = ", ".join(links)
        return 200, data, headers

    def _page_url(self, route: str, query: dict, page: int) -> str:
        # add_query_arg( $request->get_query_params(), rest_url(...) ) then add_query_arg('page', n):
        # values are NOT url-encoded again (spaces aside, which we keep legal).
        pairs: list[tuple[str, str]] = []
        seen_page = False
        for key, value in query.items():
            values = value if isinstance(value, list) else [value]
            if key == "page":
                pairs.append(("page", str(page)))
                seen_page = True
                continue
            for v in values:
                pairs.append((key, v))
        if not seen_page:
            pairs.append(("page", str(page)))
        text = "&".join(f"{k}={v}" for k, v in pairs).replace(" ", "%20")
        return f"{self.links_url}{route}?{text}"

    @staticmethod
    def _fields(obj: dict, query: dict) -> dict:
        raw = query.get("_fields")
        if not raw:
            return obj
        raw = ",".join(raw) if isinstance(raw, list) else raw
        wanted = [f.strip() for f in raw.split(",") if f.strip()]
        out: dict = {}
        for field in wanted:
            head, _, rest = field.partition(".")
            if head not in obj:
                continue
            if rest and isinstance(obj[head], dict):
                sub = FakeWooStore._fields(obj[head], {"_fields": rest})
                out.setdefault(head, {}).update(sub)
            else:
                out[head] = obj[head]
        return out

    def _category_json(self, c: dict) -> dict:
        count = sum(1 for p in self._products.values()
                    if p["status"] == "publish" and any(x["id"] == c["id"] for x in p["categories"]))
        return {"id": c["id"], "name": c["name"], "slug": c["slug"], "parent": c.get("parent", 0),
                "description": "", "display": "default", "image": None, "menu_order": 0, "count": count,
                "_links": {"self": [{"href": f"{self.links_url}/products/categories/{c['id']}"}],
                           "collection": [{"href": f"{self.links_url}/products/categories"}]}}

    # ------------------------------------------------------------------ webhooks (API side)

    def _webhook_json(self, wh: dict) -> dict:
        keys = ("id", "name", "status", "topic", "resource", "event", "hooks", "delivery_url",
                "date_created", "date_created_gmt", "date_modified", "date_modified_gmt")
        data = {k: copy.deepcopy(wh[k]) for k in keys}
        data["_links"] = {"self": [{"href": f"{self.links_url}/webhooks/{wh['id']}"}],
                          "collection": [{"href": f"{self.links_url}/webhooks"}]}
        return data

    @staticmethod
    def _valid_topic(topic: str) -> bool:
        if topic.startswith("action.") and len(topic) > 7:
            return True
        return topic in _WEBHOOK_TOPIC_HOOKS

    def _create_webhook(self, params: dict, deny) -> tuple[int, Any, dict]:
        missing = [k for k in ("topic", "delivery_url") if not params.get(k)]
        if missing:
            raise _ApiError(400, "rest_missing_callback_param",
                            "Missing parameter(s): " + ", ".join(missing), {"params": missing})
        deny("create")
        topic = str(params["topic"]).strip().lower()
        if not self._valid_topic(topic):
            raise _ApiError(400, "woocommerce_rest_shop_webhook_invalid_topic",
                            "Webhook topic is required and must be valid.")
        url = str(params["delivery_url"]).strip()
        if not re.match(r"^https?://", url):
            raise _ApiError(400, "woocommerce_rest_shop_webhook_invalid_delivery_url",
                            "Webhook delivery URL must be a valid URL starting with http:// or https://.")
        with self._lock:
            wid = self._next_webhook_id
            self._next_webhook_id += 1
            local, gmt = self._dates(self.now())
            resource, _, event = topic.partition(".")
            wh = {
                "id": wid,
                "name": params.get("name") or "Webhook created on "
                        + (self.now() + self.utc_offset).strftime("%b %d, %Y @ %I:%M %p"),
                "status": params.get("status") or "active", "topic": topic,
                "resource": resource, "event": event,
                "hooks": [event] if resource == "action" else list(_WEBHOOK_TOPIC_HOOKS.get(topic, [])),
                "delivery_url": url, "date_created": local, "date_created_gmt": gmt,
                "date_modified": local, "date_modified_gmt": gmt,
                "secret": params.get("secret") or secrets.token_urlsafe(38)[:50],
                "api_version": params.get("api_version") or "wp_api_v3",
            }
            self._webhooks[wid] = wh
            data = self._webhook_json(wh)
        if self.ping_on_create:
            result = self.ping(url, webhook_id=wid, timeout=5)
            with self._lock:
                self.pings.append({"webhook_id": wid, "url": url, "result": result})
        return 201, data, {"Location": f"{self.links_url}/webhooks/{wid}"}

    def _update_webhook(self, wid: int, params: dict) -> tuple[int, Any, dict]:
        with self._lock:
            wh = self._webhooks.get(wid)
            if wh is None:
                raise _ApiError(400, "woocommerce_rest_shop_webhook_invalid_id", "ID is invalid.")
            if "topic" in params:
                topic = str(params["topic"]).strip().lower()
                if not self._valid_topic(topic):
                    raise _ApiError(400, "woocommerce_rest_shop_webhook_invalid_topic",
                                    "Webhook topic must be valid.")
                resource, _, event = topic.partition(".")
                wh.update(topic=topic, resource=resource, event=event,
                          hooks=[event] if resource == "action" else list(_WEBHOOK_TOPIC_HOOKS.get(topic, [])))
            for key in ("name", "status", "delivery_url", "secret"):
                if params.get(key):
                    wh[key] = params[key]
            if params.get("status") == "active":
                self._webhook_failures[wid] = 0
            wh["date_modified"], wh["date_modified_gmt"] = self._dates(self.now())
            return 200, self._webhook_json(wh), {}

    # ------------------------------------------------------------------ webhooks (delivery side)

    def webhook_body(self, topic: str, resource_id: int) -> bytes:
        """The exact bytes WooCommerce would POST for ``topic`` about ``resource_id``."""
        event = topic.partition(".")[2]
        if event == "deleted":
            payload: Any = {"id": int(resource_id)}
        else:
            with self._lock:
                rid = int(resource_id)
                if rid in self._products:
                    payload = copy.deepcopy(self._products[rid])
                elif rid in self._variation_parent:
                    payload = self._variation_as_product(self._variations[self._variation_parent[rid]][rid])
                else:
                    payload = {"code": "woocommerce_rest_product_invalid_id", "message": "Invalid ID.",
                               "data": {"status": 404}}
        return php_json_encode(payload).strip().encode("ascii")

    @staticmethod
    def sign(body: bytes, secret: str) -> str:
        return base64.b64encode(hmac.new(secret.encode("utf-8"), body, hashlib.sha256).digest()).decode("ascii")

    def _user_agent(self) -> str:
        return f"WooCommerce/{self.wc_version} Hookshot (WordPress/{self.wp_version})"

    def _find_webhook(self, target_url: str, topic: Optional[str]) -> Optional[dict]:
        with self._lock:
            for wh in self._webhooks.values():
                if wh["delivery_url"] == target_url and (topic is None or wh["topic"] == topic):
                    return wh
        return None

    def deliver(self, target_url: str, topic: str, product_id: int, secret: Optional[str] = None,
                delivery_id: Optional[str] = None, *, webhook_id: Optional[int] = None,
                body: Optional[bytes] = None, timeout: float = 60) -> tuple[int, bytes]:
        """POST a webhook to ``target_url`` exactly as WooCommerce does. ``secret=None``
        uses the secret of a registered webhook for that URL/topic. ``body`` overrides
        the payload (e.g. to tamper with it after signing, sign first with ``sign``).
        Returns ``(status, response body)``; status 0 when the URL cannot be reached."""
        wh = self._find_webhook(target_url, topic)
        if webhook_id is None:
            webhook_id = wh["id"] if wh else 142
        if secret is None:
            if wh is None:
                raise ValueError("no secret given and no webhook registered for that URL/topic")
            secret = wh["secret"]
        raw = self.webhook_body(topic, product_id)
        signature = self.sign(raw, secret)
        if body is not None:
            raw = body
        if delivery_id is None:
            # wp_hash( $webhook_id . strtotime('now') ): same id for two deliveries in one second
            delivery_id = hmac.new(b"fake-wp-salt", f"{webhook_id}{int(time.time())}".encode(),
                                   hashlib.md5).hexdigest()
        resource, _, event = topic.partition(".")
        headers = {
            "User-Agent": self._user_agent(),
            "Content-Type": "application/json",
            "X-WC-Webhook-Source": self.site_url + "/",
            "X-WC-Webhook-Topic": topic,
            "X-WC-Webhook-Resource": resource,
            "X-WC-Webhook-Event": event,
            "X-WC-Webhook-Signature": signature,
            "X-WC-Webhook-ID": str(webhook_id),
            "X-WC-Webhook-Delivery-ID": delivery_id,
        }
        status, response = self._post(target_url, raw, headers, timeout)
        with self._lock:
            self.deliveries.append({"webhook_id": webhook_id, "topic": topic, "resource_id": int(product_id),
                                    "delivery_id": delivery_id, "status": status, "url": target_url})
            if webhook_id in self._webhooks:
                if 200 <= status < 303:
                    self._webhook_failures[webhook_id] = 0
                else:  # WC_Webhook::failed_delivery: disabled after more than 5 failures in a row
                    failures = self._webhook_failures.get(webhook_id, 0)
                    if failures > 5:
                        self._webhooks[webhook_id]["status"] = "disabled"
                    else:
                        self._webhook_failures[webhook_id] = failures + 1
        return status, response

    def ping(self, target_url: str, webhook_id: Optional[int] = None, timeout: float = 5) -> tuple[int, bytes]:
        """WC_Webhook::deliver_ping(): form body ``webhook_id=N``, no X-WC headers."""
        if webhook_id is None:
            wh = self._find_webhook(target_url, None)
            webhook_id = wh["id"] if wh else 142
        headers = {"User-Agent": self._user_agent(),
                   "Content-Type": "application/x-www-form-urlencoded"}
        return self._post(target_url, f"webhook_id={webhook_id}".encode(), headers, timeout)

    def dispatch_webhooks(self, topic: str, resource_id: int) -> list[tuple[int, int]]:
        """Deliver ``topic`` to every active registered webhook for it, like WC would."""
        results = []
        for wh in self.webhooks:
            if wh["status"] == "active" and wh["topic"] == topic:
                status, _ = self.deliver(wh["delivery_url"], topic, resource_id, wh["secret"],
                                         webhook_id=wh["id"])
                results.append((wh["id"], status))
        return results

    def _auto(self, topic: str, resource_id: int) -> None:
        if self.auto_deliver:
            threading.Thread(target=self.dispatch_webhooks, args=(topic, resource_id), daemon=True).start()

    @staticmethod
    def _post(url: str, body: bytes, headers: dict, timeout: float) -> tuple[int, bytes]:
        parts = urlsplit(url)
        conn_cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        try:
            conn = conn_cls(parts.hostname, parts.port, timeout=timeout)
            conn._http_vsn, conn._http_vsn_str = 10, "HTTP/1.0"  # WC posts with httpversion 1.0
            try:
                conn.putrequest("POST", target, skip_accept_encoding=True)
                for key, value in {**headers, "Content-Length": str(len(body)),
                                   "Connection": "close"}.items():
                    conn.putheader(key, value)
                conn.endheaders(body)
                response = conn.getresponse()  # redirection = 0: never follow
                return response.status, response.read()
            finally:
                conn.close()
        except (OSError, http.client.HTTPException):
            return 0, b""
