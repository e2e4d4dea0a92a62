"""The data model. Every row carries ``organization_id``; queries go through
``kbframework.tenancy`` helpers that scope them, so another organization's object is 404.

Schema changes go through Alembic migrations in ``kbframework/migrations``.
"""
from __future__ import annotations

import uuid
from datetime import datetime

from pgvector.sqlalchemy import Vector
from sqlalchemy import (BigInteger, Boolean, Computed, DateTime, Float, ForeignKey, Identity,
                        Index, Integer, Numeric, String, Text, UniqueConstraint, func, text)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB, TSVECTOR, UUID
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship


class Base(DeclarativeBase):
    pass


def _uuid_pk():
    return mapped_column(UUID(as_uuid=True), primary_key=True, default=uuid.uuid4,
                         server_default=text("gen_random_uuid()"))


def _org_fk(index: bool = True):
    """``index=False`` where a composite index or unique constraint already leads with the
    column: a second B-tree on it alone serves no query and costs every insert (migration
    0014_redundant_indexes; ``tests/test_schema_indexes.py`` keeps it so)."""
    return mapped_column(UUID(as_uuid=True), ForeignKey("organizations.id", ondelete="CASCADE"),
                         nullable=False, index=index)


def _created():
    return mapped_column(DateTime(timezone=True), nullable=False, server_default=func.now())


def _updated():
    return mapped_column(DateTime(timezone=True), nullable=False, server_default=func.now(),
                         onupdate=func.now())


class Organization(Base):
    __tablename__ = "organizations"
    id: Mapped[uuid.UUID] = _uuid_pk()
    name: Mapped[str] = mapped_column(String(200), nullable=False)
    slug: Mapped[str] = mapped_column(String(100), nullable=False, unique=True)
    timezone: Mapped[str] = mapped_column(String(64), nullable=False, server_default="UTC")
    created_at: Mapped[datetime] = _created()
    updated_at: Mapped[datetime] = _updated()


class User(Base):
    __tablename__ = "users"
    id: Mapped[uuid.UUID] = _uuid_pk()
    email: Mapped[str] = mapped_column(String(320), nullable=False)
    name: Mapped[str | None] = mapped_column(String(200))
    password_hash: Mapped[str] = mapped_column(Text, nullable=False)
    is_active: Mapped[bool] = mapped_column(Boolean, nullable=False, server_default=text("true"))
    created_at: Mapped[datetime] = _created()
    last_login_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    __table_args__ = (Index("uq_users_email_lower", func.lower(email), unique=True),)


class Membership(Base):
    __tablename__ = "memberships"
    id: Mapped[uuid.UUID] = _uuid_pk()
    organization_id: Mapped[uuid.UUID] = _org_fk(index=False)
    user_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True),
                                               ForeignKey("users.id", ondelete="CASCADE"),
                                               nullable=False, index=True)
    role: Mapped[str] = mapped_column(String(20), nullable=False, server_default="member")
    created_at: Mapped[datetime] = _created()
    __table_args__ = (UniqueConstraint("organization_id", "user_id"),)
    organization = relationship(Organization, lazy="joined")


class UserSession(Base):
    """Server-side login sessions: the cookie holds a random token, we keep its hash."""

    __tablename__ = "user_sessions"
    id: Mapped[uuid.UUID] = _uuid_pk()
    organization_id: Mapped[uuid.UUID] = _org_fk()
    user_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True),
                                               ForeignKey("users.id", ondelete="CASCADE"),
                                               nullable=False, index=True)
    token_hash: Mapped[str] = mapped_column(String(64), nullable=False, unique=True)
    created_at: Mapped[datetime] = _created()
    last_seen_at: Mapped[datetime] = _created()
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    ip: Mapped[str | None] = mapped_column(String(64))
    user_agent: Mapped[str | None] = mapped_column(String(300))


class Source(Base):
    __tablename__ = "sources"
    id: Mapped[uuid.UUID] = _uuid_pk()
    organization_id: Mapped[uuid.UUID] = _org_fk(index=False)
    name: Mapped[str] = mapped_column(String(200), nullable=False)
    type: Mapped[str] = mapped_column(String(50), nullable=False)
    status: Mapped[str] = mapped_column(String(20), nullable=False, server_default="active")
    config: Mapped[dict] = mapped_column(JSONB, nullable=False, server_default=text("'{}'::jsonb"))
    secrets: Mapped[str | None] = mapped_column(Text)  # Fernet token of a JSON dict
    sync_interval_minutes: Mapped[int | None] = mapped_column(Integer)
    watermark: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    last_sync_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    last_error: Mapped[str | None] = mapped_column(Text)
    last_webhook_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    created_at: Mapped[datetime] = _created()
    updated_at: Mapped[datetime] = _updated()
    __table_args__ = (Index("ix_sources_org_type", "organization_id", "type"),)


class SyncRun(Base):
    __tablename__ = "sync_runs"
    id: Mapped[uuid.UUID] = _uuid_pk()
    organization_id: Mapped[uuid.UUID] = _org_fk()
    source_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True),
                                                 ForeignKey("sources.id", ondelete="CASCADE"),
                                                 nullable=False, index=True)
    kind: Mapped[str] = mapped_column(String(20), nullable=False)  # full|incremental|webhook
    status: Mapped[str] = mapped_column(String(20), nullable=False, server_default="running")
    started_at: Mapped[datetime] = _created()
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    stats: Mapped[dict] = mapped_column(JSONB, nullable=False, server_default=text("'{}'::jsonb"))
    error: Mapped[str | None] = mapped_column(Text)
    # the RQ job running it, or "pid:<host>:<pid>" for a run in a CLI process
    job_id: Mapped[str | None] = mapped_column(String(200))
    __table_args__ = (Index("ix_sync_runs_running", "status", postgresql_where=text("status = 'running'")),)


class Document(Base):
    __tablename__ = "documents"
    id: Mapped[uuid.UUID] = _uuid_pk()
    organization_id: Mapped[uuid.UUID] = _org_fk(index=False)
    source_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True),
                                                 ForeignKey("sources.id", ondelete="CASCADE"),
                                                 nullable=False, index=False)  # uq_documents_source_external leads with it
    title: Mapped[str] = mapped_column(Text, nullable=False)
    type: Mapped[str] = mapped_column(String(60), nullable=False)
    document_role: Mapped[str] = mapped_column(String(20), nullable=False, server_default="article")
    status: Mapped[str] = mapped_column(String(20), nullable=False, server_default="syncing")
    source_url: Mapped[str | None] = mapped_column(Text)
    external_id: Mapped[str | None] = mapped_column(String(300))
    raw_content: Mapped[str | None] = mapped_column(Text)
    normalized_content: Mapped[str | None] = mapped_column(Text)
    override_content: Mapped[str | None] = mapped_column(Text)
    sync_hash: Mapped[str | None] = mapped_column(String(64))
    indexed_hash: Mapped[str | None] = mapped_column(String(64))  # what the live chunks were built from
    source_modified_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    last_synced_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    event_start: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    event_end: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    venue: Mapped[str | None] = mapped_column(Text)
    city: Mapped[str | None] = mapped_column(Text)
    primary_image_url: Mapped[str | None] = mapped_column(Text)
    tags: Mapped[list[str] | None] = mapped_column(ARRAY(Text))
    expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    metadata_: Mapped[dict] = mapped_column("metadata", JSONB, nullable=False,
                                            server_default=text("'{}'::jsonb"))
    chunk_count: Mapped[int] = mapped_column(Integer, nullable=False, server_default="0")
    created_at: Mapped[datetime] = _created()
    updated_at: Mapped[datetime] = _updated()
    __table_args__ = (
        UniqueConstraint("source_id", "external_id", name="uq_documents_source_external"),
        Index("ix_documents_org_status", "organization_id", "status"),
        Index("ix_documents_org_role", "organization_id", "document_role"),
        Index("ix_documents_org_event", "organization_id", "event_start", "event_end"),
        Index("ix_documents_tags", "tags", postgresql_using="gin"),
        Index("ix_documents_org_title", "organization_id", func.lower(text("title"))),
        # the documents that give the filter vocabulary anything (migration 0011_documents_vocabulary)
        Index("ix_documents_vocabulary", "organization_id",
              postgresql_where=text("document_role IN ('product', 'event') OR (city IS NOT NULL AND city <> '') "
                                    "OR (venue IS NOT NULL AND venue <> '')")),
    )


class Chunk(Base):
    __tablename__ = "chunks"
    id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    organization_id: Mapped[uuid.UUID] = _org_fk(index=False)
    document_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True),
                                                   ForeignKey("documents.id", ondelete="CASCADE"),
                                                   nullable=False, index=True)
    chunk_index: Mapped[int] = mapped_column(Integer, nullable=False)
    heading: Mapped[str] = mapped_column(Text, nullable=False, server_default="")
    content: Mapped[str] = mapped_column(Text, nullable=False)
    token_count: Mapped[int] = mapped_column(Integer, nullable=False)
    embedding = mapped_column(Vector(), nullable=True)
    embedding_model: Mapped[str | None] = mapped_column(String(120))
    # the title (the heading before the first " › ") weighs A, the section path B, the body C
    # (migration 0007_weighted_fulltext; the keyword leg ranks by these weights)
    tsv = mapped_column(TSVECTOR, Computed(
        "setweight(to_tsvector('english', split_part(coalesce(heading, ''), ' › ', 1)), 'A') || "
        "setweight(to_tsvector('english', CASE WHEN strpos(coalesce(heading, ''), ' › ') > 0 "
        "THEN substr(heading, strpos(heading, ' › ') + 3) ELSE '' END), 'B') || "
        "setweight(to_tsvector('english', content), 'C')", persisted=True))
    metadata_: Mapped[dict] = mapped_column("metadata", JSONB, nullable=False,
                                            server_default=text("'{}'::jsonb"))
    created_at: Mapped[datetime] = _created()
    __table_args__ = (
        Index("ix_chunks_org_tsv", "organization_id", "tsv", postgresql_using="gin"),
        Index("ix_chunks_org_model", "organization_id", "embedding_model"),
    )


class Setting(Base):
    __tablename__ = "settings"
    id: Mapped[uuid.UUID] = _uuid_pk()
    organization_id: Mapped[uuid.UUID] = mapped_column(
        UUID(as_uuid=True), ForeignKey("organizations.id", ondelete="CASCADE"), nullable=False,
        unique=True)
    preset: Mapped[str] = mapped_column(String(50), nullable=False, server_default="support")
    brand: Mapped[str | None] = mapped_column(String(200))
    system_prompt: Mapped[str | None] = mapped_column(Text)
    mode: Mapped[str | None] = mapped_column(String(30))
    retrieval_limit: Mapped[int] = mapped_column(Integer, nullable=False, server_default="6")
    similarity_floor: Mapped[float] = mapped_column(Float, nullable=False, server_default="0.2")
    response_style: Mapped[str | None] = mapped_column(String(50))
    history_window: Mapped[int] = mapped_column(Integer, nullable=False, server_default="6")
    night_cutoff: Mapped[str] = mapped_column(String(5), nullable=False, server_default="05:00")
    # declared in kbframework.settings (name, type, default, range, who may change it)
    fallback_text: Mapped[str | None] = mapped_column(Text)
    knowledge: Mapped[str | None] = mapped_column(String(20))
    char_budget: Mapped[int] = mapped_column(Integer, default=18000, nullable=False, server_default="18000")
    weekend_starts_friday: Mapped[bool] = mapped_column(Boolean, default=False, nullable=False, server_default=text("false"))
    place_names: Mapped[list] = mapped_column(JSONB, default=list, nullable=False, server_default=text("'[]'::jsonb"))
    answer_threshold: Mapped[float | None] = mapped_column(Float)
    synonyms: Mapped[dict] = mapped_column(JSONB, default=dict, nullable=False, server_default=text("'{}'::jsonb"))
    query_planner: Mapped[bool] = mapped_column(Boolean, default=True, nullable=False, server_default=text("true"))
    planner_timeout: Mapped[float] = mapped_column(Float, default=8.0, nullable=False, server_default="8")
    chunking: Mapped[dict] = mapped_column(JSONB, default=dict, nullable=False, server_default=text("'{}'::jsonb"))
    embedding_provider: Mapped[str | None] = mapped_column(String(60))
    branding_title: Mapped[str | None] = mapped_column(String(200))
    branding_color: Mapped[str | None] = mapped_column(String(7))
    branding_logo: Mapped[str | None] = mapped_column(Text)
    branding_welcome: Mapped[str | None] = mapped_column(Text)
    budget_unit: Mapped[str] = mapped_column(String(10), default="none", nullable=False, server_default="none")
    budget_limit: Mapped[float | None] = mapped_column(Float)
    budget_soft_pct: Mapped[int] = mapped_column(Integer, default=80, nullable=False, server_default="80")
    budget_hard_stop: Mapped[bool] = mapped_column(Boolean, default=True, nullable=False, server_default=text("true"))
    prices: Mapped[dict] = mapped_column(JSONB, default=dict, nullable=False, server_default=text("'{}'::jsonb"))
    retention_days: Mapped[int] = mapped_column(Integer, default=90, nullable=False, server_default="90")
    allow_private_network: Mapped[bool] = mapped_column(Boolean, default=False, nullable=False, server_default=text("false"))
    created_at: Mapped[datetime] = _created()
    updated_at: Mapped[datetime] = _updated()


class AssistantKey(Base):
    __tablename__ = "assistant_keys"
    id: Mapped[uuid.UUID] = _uuid_pk()
    organization_id: Mapped[uuid.UUID] = _org_fk()
    name: Mapped[str] = mapped_column(String(200), nullable=False, server_default="Website")
    key: Mapped[str] = mapped_column(String(80), nullable=False, unique=True)
    allowed_origins: Mapped[list[str]] = mapped_column(ARRAY(Text), nullable=False,
                                                       server_default=text("'{}'"))
    rate_per_minute: Mapped[int] = mapped_column(Integer, nullable=False, server_default="60")
    rate_per_day: Mapped[int] = mapped_column(Integer, nullable=False, server_default="1000")
    rate_per_ip_minute: Mapped[int] = mapped_column(Integer, nullable=False, server_default="10")
    status: Mapped[str] = mapped_column(String(20), nullable=False, server_default="active")
    expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))  # grace end
    replaced_by_id: Mapped[uuid.UUID | None] = mapped_column(UUID(as_uuid=True))
    settings: Mapped[dict] = mapped_column(JSONB, nullable=False, server_default=text("'{}'::jsonb"))
    created_at: Mapped[datetime] = _created()
    updated_at: Mapped[datetime] = _updated()


class ChatLog(Base):
    __tablename__ = "chat_logs"
    id: Mapped[uuid.UUID] = _uuid_pk()
    organization_id: Mapped[uuid.UUID] = _org_fk(index=False)
    user_id: Mapped[uuid.UUID | None] = mapped_column(UUID(as_uuid=True))
    assistant_key_id: Mapped[uuid.UUID | None] = mapped_column(UUID(as_uuid=True))
    session_id: Mapped[str | None] = mapped_column(String(100), index=True)
    channel: Mapped[str] = mapped_column(String(20), nullable=False, server_default="admin")
    query: Mapped[str] = mapped_column(Text, nullable=False)
    rewritten_query: Mapped[str | None] = mapped_column(Text)
    filters: Mapped[dict] = mapped_column(JSONB, nullable=False, server_default=text("'{}'::jsonb"))
    mode: Mapped[str | None] = mapped_column(String(30))
    final_answer: Mapped[str | None] = mapped_column(Text)
    used_document_ids: Mapped[list] = mapped_column(JSONB, nullable=False,
                                                    server_default=text("'[]'::jsonb"))
    used_chunk_ids: Mapped[list] = mapped_column(JSONB, nullable=False,
                                                 server_default=text("'[]'::jsonb"))
    scores: Mapped[list] = mapped_column(JSONB, nullable=False, server_default=text("'[]'::jsonb"))
    retrieval_debug: Mapped[dict] = mapped_column(JSONB, nullable=False,
                                                  server_default=text("'{}'::jsonb"))
    prompt: Mapped[str | None] = mapped_column(Text)
    model: Mapped[str | None] = mapped_column(String(120))
    tokens_in: Mapped[int] = mapped_column(Integer, nullable=False, server_default="0")
    tokens_out: Mapped[int] = mapped_column(Integer, nullable=False, server_default="0")
    zero_result: Mapped[bool] = mapped_column(Boolean, nullable=False, server_default=text("false"))
    reason: Mapped[str | None] = mapped_column(String(60))
    latency_ms: Mapped[float | None] = mapped_column(Float)
    flags: Mapped[list] = mapped_column(JSONB, nullable=False, server_default=text("'[]'::jsonb"))
    created_at: Mapped[datetime] = _created()
    __table_args__ = (Index("ix_chat_logs_org_created", "organization_id", "created_at"),)


class ChatFeedback(Base):
    __tablename__ = "chat_feedback"
    id: Mapped[uuid.UUID] = _uuid_pk()
    organization_id: Mapped[uuid.UUID] = _org_fk()
    chat_log_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True),
                                                   ForeignKey("chat_logs.id", ondelete="CASCADE"),
                                                   nullable=False, index=True)
    rating: Mapped[str] = mapped_column(String(10), nullable=False)
    comment: Mapped[str | None] = mapped_column(Text)
    user_session_id: Mapped[str | None] = mapped_column(String(100))
    addressed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    created_at: Mapped[datetime] = _created()


class UsageLedger(Base):
    __tablename__ = "usage_ledger"
    id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    organization_id: Mapped[uuid.UUID] = _org_fk(index=False)
    purpose: Mapped[str] = mapped_column(String(30), nullable=False)
    provider: Mapped[str] = mapped_column(String(50), nullable=False)
    model: Mapped[str] = mapped_column(String(120), nullable=False)
    tokens_in: Mapped[int] = mapped_column(Integer, nullable=False, server_default="0")
    tokens_out: Mapped[int] = mapped_column(Integer, nullable=False, server_default="0")
    cost_usd: Mapped[float] = mapped_column(Numeric(14, 8), nullable=False, server_default="0")
    ref: Mapped[str | None] = mapped_column(String(100))
    created_at: Mapped[datetime] = _created()
    __table_args__ = (Index("ix_usage_org_created", "organization_id", "created_at"),)


class JobOutbox(Base):
    """A job accepted while Redis was unreachable; the sweeper puts it on its queue."""
    __tablename__ = "job_outbox"
    id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    queue: Mapped[str] = mapped_column(String(40), nullable=False)
    func: Mapped[str] = mapped_column(String(300), nullable=False)
    args: Mapped[list] = mapped_column(JSONB, nullable=False, server_default=text("'[]'::jsonb"))
    kwargs: Mapped[dict] = mapped_column(JSONB, nullable=False, server_default=text("'{}'::jsonb"))
    job_id: Mapped[str | None] = mapped_column(String(200))
    reason: Mapped[str | None] = mapped_column(Text)
    attempts: Mapped[int] = mapped_column(Integer, nullable=False, server_default="0")
    created_at: Mapped[datetime] = _created()


class WebhookEvent(Base):
    __tablename__ = "webhook_events"
    id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    organization_id: Mapped[uuid.UUID] = _org_fk()
    source_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True),
                                                 ForeignKey("sources.id", ondelete="CASCADE"),
                                                 nullable=False)
    delivery_id: Mapped[str | None] = mapped_column(String(200))
    topic: Mapped[str | None] = mapped_column(String(100))
    external_id: Mapped[str | None] = mapped_column(String(300))
    outcome: Mapped[str] = mapped_column(String(40), nullable=False, server_default="received")
    detail: Mapped[str | None] = mapped_column(Text)
    received_at: Mapped[datetime] = _created()
    __table_args__ = (
        Index("uq_webhook_delivery", "source_id", "delivery_id", unique=True,
              postgresql_where=text("delivery_id IS NOT NULL")),
    )


def jsonb_merge(column, data: dict):
    """SQL ``column || data::jsonb``: update a few keys without a read-modify-write race."""
    import json

    from sqlalchemy import cast, literal

    return column.op("||")(cast(literal(json.dumps(data, default=str)), JSONB))


def jsonb_remove(column, *keys: str):
    from sqlalchemy import literal

    expr = column
    for k in keys:
        expr = expr.op("-")(literal(k, Text))
    return expr
