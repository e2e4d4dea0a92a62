"""When each source syncs again: its interval has passed since the last sync, and a full
sync at least once a day (incremental syncs never see deletions; a full one reconciles them)."""
from __future__ import annotations

import uuid
from datetime import datetime, timedelta

from sqlalchemy import func, select

from kbframework.clock import utcnow
from kbframework.db import session_scope
from kbframework.models import Source, SyncRun

FULL_EVERY = timedelta(hours=24)


def due_sources(now: datetime | None = None) -> list[str]:
    now = now or utcnow()
    out = []
    with session_scope() as s:
        for src in s.scalars(select(Source).where(Source.status.in_(("active", "error")),
                                                  Source.sync_interval_minutes.isnot(None))):
            if src.last_sync_at is None or src.last_sync_at + timedelta(minutes=src.sync_interval_minutes) <= now:
                out.append(str(src.id))
    return out


def due_syncs(now: datetime | None = None) -> dict[str, str]:
    """{source id: "full" or "incremental"} for every source whose sync is due."""
    now = now or utcnow()
    out = {}
    for source_id in due_sources(now):
        with session_scope() as s:
            last_full = s.scalar(select(func.max(SyncRun.started_at)).where(
                SyncRun.source_id == source_id, SyncRun.kind == "full", SyncRun.status.in_(("success", "partial"))))
        out[source_id] = "full" if last_full is None or last_full < now - FULL_EVERY else "incremental"
    return out


def source_organizations(source_ids: list[str]) -> dict[str, str]:
    """{source id: organization id}: the scheduler queues each due sync for its organization."""
    if not source_ids:
        return {}
    with session_scope() as s:
        rows = s.execute(select(Source.id, Source.organization_id).where(Source.id.in_([uuid.UUID(str(i)) for i in source_ids]))).all()
    return {str(sid): str(org) for sid, org in rows}
