"""Plain dataclasses shared by the host and its plugins.

Plugins see these, never ORM rows or database sessions, so a plugin can be written and
unit-tested without a database, and the host can change its storage freely.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Callable, Iterator, Optional, Protocol

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
    """A mode preset (§9): prompt template, retrieval defaults, role boosts, cards."""

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


class EmbeddingProvider(Protocol):
    """An embedding model. Only ``embed_batch`` does work; the host batches and retries."""

    name: str  # provider name, e.g. "wordllama"
    model: str  # model id stored on each chunk, e.g. "wordllama-l2_supercat-256"
    dim: int
    batch_size: int
    needs_key: bool

    def available(self) -> bool: ...
    def embed_batch(self, texts: list[str]) -> list[list[float]]: ...
    def count_tokens(self, text: str) -> int: ...


@dataclass
class LLMResult:
    text: str
    model: str
    tokens_in: int = 0
    tokens_out: int = 0
    used_llm: bool = True
    note: str = ""


class LLMProvider(Protocol):
    name: str
    model: str

    def available(self) -> bool: ...
    def complete(self, messages: list[dict], *, max_tokens: int = 600,
                 temperature: float = 0.2, stream: bool = False,
                 on_token: Optional[Callable[[str], None]] = None) -> LLMResult: ...


class SourceConnector(Protocol):
    """A source type (woocommerce, wordpress, sitemap, pdf, manual, ...).

    Connectors yield raw records; ``normalize`` turns one into a DocumentDraft. Network
    errors surface as ``SourceUnavailable`` / ``ConnectorAuthError`` from kbframework.errors.

    Optional: ``record_timestamps = True`` promises that a record's ``source_modified_at``
    is never older than its draft's; the sync then skips (as stale, §23) records that are
    not newer than the live document, without normalizing them. During a sync,
    ``ctx.extra["known_modified"]`` maps external ids of live documents to their stored
    ``source_modified_at`` and ``ctx.extra["reapply"]`` says every item is re-derived
    (first sync or a mapping change), so a connector can skip fetching details it would
    only throw away.
    """

    name: str
    label: str
    config_schema: Any  # a marshmallow Schema class
    secret_fields: tuple[str, ...]
    supports_sync: bool

    def fetch_all(self, config: dict, ctx: "SyncContext") -> Iterator[RawRecord]: ...
    def fetch_changed(self, config: dict, since: datetime, ctx: "SyncContext") -> Iterator[RawRecord]: ...
    def fetch_one(self, config: dict, external_id: str, ctx: "SyncContext") -> Optional[RawRecord]: ...
    def normalize(self, record: RawRecord, config: dict, ctx: "SyncContext") -> DocumentDraft: ...


@dataclass
class SyncContext:
    """What the host tells a connector about the organization it syncs for."""

    organization_id: str
    timezone: str = "UTC"
    # What the connector's SafeSession may reach besides public addresses: False, or a
    # kbframework.net.AddressPolicy the host computed (operator setting, narrowed by the
    # organization). Pass it unchanged as SafeSession(allow_private=...), never bool() it.
    allow_private_network: Any = False
    source_id: Optional[str] = None
    log: Callable[[str], None] = lambda msg: None
    extra: dict[str, Any] = field(default_factory=dict)


class NothingToFetch:
    """Mixin for source types whose documents are made here (notes, uploads): there is no
    remote system to fetch from or sync with."""

    supports_sync = False

    def fetch_all(self, config, ctx):
        return iter(())

    def fetch_changed(self, config, since, ctx):
        return iter(())

    def fetch_one(self, config, external_id, ctx):
        return None
