"""Plain dataclasses shared by the host and its plugins.

Plugins see these, never ORM rows or database sessions, so a plugin can be written and
unit-tested without a database, and the host can change its storage freely.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Callable, Iterator, Optional

DOCUMENT_ROLES = ("product", "event", "article", "support", "manual")


@dataclass
class Segment:
    """A piece of a document's text that carries its own position (a PDF page)."""

    text: str
    page: Optional[int] = None


@dataclass
class RawRecord:
    """One item as a connector fetched it, before any mapping."""

    external_id: str
    payload: dict
    kind: str = "item"  # e.g. product, post, page, event, url
    source_modified_at: Optional[datetime] = None
    url: Optional[str] = None


@dataclass
class DocumentDraft:
    """What a connector or the manual editor wants the knowledge base to hold.

    ``published=False`` means: this item must not be retrievable (draft, private,
    hidden, trashed); the host purges its chunks and marks the document ``deleted``.
    ``cheap_fields`` lists the columns/metadata keys that may change without
    re-embedding (price, stock, sale state).
    """

    title: str
    normalized_content: str
    type: str  # origin: woo_product, wp_post, wp_page, pdf, manual, event, <cpt slug>
    document_role: str = "article"
    external_id: Optional[str] = None
    raw_content: Optional[str] = None
    source_url: Optional[str] = None
    source_modified_at: Optional[datetime] = None
    event_start: Optional[datetime] = None
    event_end: Optional[datetime] = None
    venue: Optional[str] = None
    city: Optional[str] = None
    primary_image_url: Optional[str] = None
    tags: list[str] = field(default_factory=list)
    expires_at: Optional[datetime] = None
    metadata: dict[str, Any] = field(default_factory=dict)
    segments: Optional[list[Segment]] = None
    published: bool = True


@dataclass
class ChunkDraft:
    """A chunk before embedding."""

    index: int
    content: str
    token_count: int
    heading: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass
class FilterPart:
    """One thing an extractor found in a query; merged by the host into a filter set."""

    field: str  # date_range | price_min | price_max | category | tag | in_stock | city | venue | currency | past
    value: Any
    extractor: str
    matched: str = ""


@dataclass
class Card:
    type: str  # product | event | article
    document_id: str
    title: str
    url: Optional[str] = None
    image: Optional[str] = None
    data: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict:
        out = {"type": self.type, "document_id": self.document_id, "title": self.title,
               "url": self.url, "image": self.image}
        out.update(self.data)
        return out


@dataclass
class Preset:
    """A mode preset: prompt template, retrieval defaults, role boosts, cards."""

    name: str
    mode: str
    label: str
    prompt_template: str
    fallback_text: str = "I don't have information about that. Want me to search more broadly?"
    role_priority: list[str] = field(default_factory=list)  # highest first; ×1.3, ×1.1, ×1.0
    card_types: list[str] = field(default_factory=lambda: ["product", "event", "article"])
    retrieval_limit: int = 6
    future_events_only: bool = True
    knowledge: str = "strict"  # strict | general
    # tilts of Reciprocal Rank Fusion by leg ({"keyword": 1.5}); equal weights when empty
    fusion_weights: dict = field(default_factory=dict)


class EmbeddingProvider:
    """An embedding model. Subclass it; only ``embed_batch`` does work, the host batches and
    retries. What the host needs to know about a provider it reads from these attributes,
    never from its name: ``is_offline`` (runs here, costs nothing, never budget-stopped),
    ``needs_key`` (an API key must be configured)."""

    name: str = ""  # provider name, e.g. "wordllama"
    model: str = ""  # model id stored on each chunk, e.g. "wordllama-l2_supercat-256"
    dim: int = 0
    batch_size: int = 64
    is_offline: bool = False
    needs_key: bool = False

    def available(self) -> bool:
        return True

    def embed_batch(self, texts: list[str]) -> list[list[float]]:
        raise NotImplementedError

    def count_tokens(self, text: str) -> int:
        return len(text.split())


@dataclass
class LLMResult:
    text: str
    model: str
    tokens_in: int = 0
    tokens_out: int = 0
    used_llm: bool = True
    note: str = ""


class LLMProvider:
    """A chat model. Subclass it. Its capabilities are attributes, never inferred from its name:
    ``is_offline`` (runs here, costs nothing, never budget-stopped), ``needs_key``,
    ``supports_streaming`` (calls ``on_token`` as text arrives), and ``quotes_passages``: it
    does not write from the prompt but answers by quoting the passages it is given
    (``complete(..., passages=, question=)``), so it is never asked to rewrite or plan."""

    name: str = ""
    model: str = ""
    is_offline: bool = False
    needs_key: bool = False
    supports_streaming: bool = False
    quotes_passages: bool = False

    def available(self) -> bool:
        return True

    def complete(self, messages: list[dict], *, max_tokens: int = 600,
                 temperature: float = 0.2, stream: bool = False,
                 on_token: Optional[Callable[[str], None]] = None) -> LLMResult:
        raise NotImplementedError


class SourceConnector:
    """A source type (woocommerce, wordpress, sitemap, pdf, manual, ...). Subclass it.

    Connectors yield raw records; ``normalize`` turns one into a DocumentDraft. Network
    errors surface as ``SourceUnavailable`` / ``ConnectorAuthError`` from kbframework.errors.

    Optional features are attributes with defaults; the host (sync, webhooks, the admin)
    reads them and never asks which connector it is looking at:

    * ``record_timestamps = True`` promises that a record's ``source_modified_at`` is never
      older than its draft's; the sync then skips records that are not newer than the live
      document (as stale), without normalizing them. During a sync,
      ``ctx.extra["known_modified"]`` maps external ids of live documents to their stored
      ``source_modified_at`` and ``ctx.extra["reapply"]`` says every item is re-derived
      (first sync or a mapping change), so a connector can skip fetching details it would
      only throw away.
    * ``edited_in_admin = True``: documents are written in the admin's knowledge editor;
      implement ``draft_from_input(data)``.
    * ``accepts_uploads = True``: documents come from uploaded files (``POST
      /api/admin/v1/sources/<type>/upload``, ``kbf doc add FILE --type <type>``); the host
      stores the file and runs the document's lifecycle, the connector implements
      ``check_upload(data, max_bytes)`` and ``draft_from_file(path, ...)``.
    * ``mapping_help`` / ``mapping_example``: text and an example for the admin's
      field-mapping editor.
    * ``discovers_fields = True``: ``discover(config, ctx, sample)`` says what the remote
      system offers (``POST /api/admin/v1/sources/<type>/discover``).
    * ``admin_links``: extra entry points (``{"label", "url"}``) shown on the admin's source page.
    * ``accepts_webhooks = True``: ``handle_webhook(headers, raw_body, secrets)`` verifies
      and parses a push; ``registers_webhooks = True``: ``register_webhooks(...)`` creates
      them on the remote system.
    """

    name: str = ""
    label: str = ""
    config_schema: Any = None  # a marshmallow Schema class
    secret_fields: tuple[str, ...] = ()
    supports_sync: bool = True
    record_timestamps: bool = False
    edited_in_admin: bool = False
    accepts_uploads: bool = False
    upload_suffix: str = ""
    mapping_help: Optional[str] = None
    mapping_example: Optional[dict] = None
    discovers_fields: bool = False
    accepts_webhooks: bool = False
    registers_webhooks: bool = False
    admin_links: tuple = ()  # ({"label", "url"}, ...): extra entry points on the admin's source page

    def fetch_all(self, config: dict, ctx: "SyncContext") -> Iterator[RawRecord]:
        raise NotImplementedError

    def fetch_changed(self, config: dict, since: datetime, ctx: "SyncContext") -> Iterator[RawRecord]:
        raise NotImplementedError

    def fetch_one(self, config: dict, external_id: str, ctx: "SyncContext") -> Optional[RawRecord]:
        raise NotImplementedError

    def normalize(self, record: RawRecord, config: dict, ctx: "SyncContext") -> DocumentDraft:
        raise NotImplementedError

    def draft_from_input(self, data: dict) -> DocumentDraft:
        raise NotImplementedError

    def check_upload(self, data: bytes, max_bytes: int) -> None:
        """Reject a file that is not what this type reads (a ValidationFailed the user sees)."""

    def draft_from_file(self, path, *, title: Optional[str], role: str, external_id: Optional[str],
                        filename: Optional[str]) -> DocumentDraft:
        raise NotImplementedError

    def discover(self, config: dict, ctx: "SyncContext", sample: bool = True) -> dict:
        raise NotImplementedError

    def handle_webhook(self, headers: dict, raw_body: bytes, secrets: dict) -> dict:
        raise NotImplementedError

    def register_webhooks(self, config: dict, delivery_url: str, secret: Optional[str], ctx: "SyncContext") -> list:
        raise NotImplementedError


@dataclass
class SyncContext:
    """What the host tells a connector about the organization it syncs for."""

    organization_id: str
    timezone: str = "UTC"
    # What the connector's SafeSession may reach besides public addresses: False, or a
    # kbframework.addresses.AddressPolicy the host computed (operator setting, narrowed by the
    # organization). Pass it unchanged as SafeSession(allow_private=...), never bool() it.
    allow_private_network: Any = False
    source_id: Optional[str] = None
    log: Callable[[str], None] = lambda msg: None
    extra: dict[str, Any] = field(default_factory=dict)


class NothingToFetch(SourceConnector):
    """Base for source types whose documents are made here (notes, uploads): there is no
    remote system to fetch from or sync with."""

    supports_sync = False

    def fetch_all(self, config, ctx):
        return iter(())

    def fetch_changed(self, config, since, ctx):
        return iter(())

    def fetch_one(self, config, external_id, ctx):
        return None
