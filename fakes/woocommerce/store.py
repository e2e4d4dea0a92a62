"""The store: one object whose state every part shares (the catalogue, webhooks, the request
log, the controls), put together from the parts in this package."""
from __future__ import annotations

import threading
from datetime import datetime, timedelta, timezone
from typing import Callable, Optional

from fakes.woocommerce.auth import AuthMixin
from fakes.woocommerce.catalog import CatalogMixin
from fakes.woocommerce.products import ProductsMixin
from fakes.woocommerce.queries import QueriesMixin
from fakes.woocommerce.routes import RoutesMixin
from fakes.woocommerce.seeding import SeedingMixin
from fakes.woocommerce.server import Request, ServerMixin, StoreHTTPServer, StoreRequestHandler
from fakes.woocommerce.variations import VariationsMixin
from fakes.woocommerce.webhooks import WebhooksMixin
from fakes.woocommerce.wordpress import WC_NAMESPACE

DEFAULT_CONSUMER_KEY = "ck_4f2a9c1e7b3d5f8a0c6e2b4d9f1a3c5e7b9d0f2a"
DEFAULT_CONSUMER_SECRET = "cs_8e1b3d5f7a9c0e2b4d6f8a1c3e5b7d9f0a2c4e6b"


class FakeWooStore(ServerMixin, AuthMixin, RoutesMixin, QueriesMixin, WebhooksMixin, CatalogMixin,
                   ProductsMixin, VariationsMixin, SeedingMixin):
    """An in-memory WooCommerce store behind a local REST API v3 server. Every part reads and
    changes the state set up here, under ``_lock``."""

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
        self._server = StoreHTTPServer((host, port), StoreRequestHandler)
        self._server.store = self
        self.port = self._server.server_address[1]
        self.url = f"http://{host}:{self.port}"
        self.api_url = self.url + WC_NAMESPACE
        self.site_url = (site_url or self.url).rstrip("/")
        # Where ``_links`` and ``Link`` headers point (real WC: the site URL). Defaults to
        # this server so that clients can follow them.
        self.links_url = (links_url or self.url).rstrip("/") + WC_NAMESPACE

    def now(self) -> datetime:
        """The store's clock (tests may replace ``clock``), to the second as WordPress stores it."""
        return self.clock().astimezone(timezone.utc).replace(microsecond=0)
