"""A source's sync health in one word and a reason, for people rather than machines."""
from __future__ import annotations


from kbframework.clock import iso, utcnow
from kbframework.hooks import registry
from kbframework.models import Source, SyncRun


def run_to_dict(r: SyncRun) -> dict:
    took = (r.finished_at - r.started_at).total_seconds() if r.finished_at and r.started_at else None
    return {"id": str(r.id), "kind": r.kind, "status": r.status, "stats": r.stats or {}, "error": r.error,
            "started_at": iso(r.started_at), "finished_at": iso(r.finished_at),
            "seconds": round(took, 1) if took is not None else None}


def source_health(src: Source, last_run: SyncRun | None) -> dict:
    """One word and a reason for a source's sync health, for people rather than machines."""
    connector = registry.source_types().get(src.type)
    if connector is None:
        return {"state": "error", "label": "plugin missing",
                "reason": f"The '{src.type}' plugin is not installed."}
    if src.status == "disabled":
        return {"state": "disabled", "label": "disabled", "reason": "Disabled: not synced, documents kept."}
    if not connector.supports_sync:
        return {"state": "ok", "label": "healthy", "reason": "Edited here; nothing to sync."}
    if src.status == "error" or (last_run is not None and last_run.status == "error"):
        return {"state": "error", "label": "failing", "reason": src.last_error or (last_run.error if last_run else "")}
    if src.status == "syncing" or (last_run is not None and last_run.status == "running"):
        return {"state": "syncing", "label": "syncing", "reason": "A sync is running."}
    if src.last_sync_at is None:
        return {"state": "warn", "label": "never synced", "reason": "Run a first sync."}
    if last_run is not None and last_run.status == "partial":
        return {"state": "warn", "label": "partial", "reason": "The last sync skipped some items."}
    if src.sync_interval_minutes:
        age = (utcnow() - src.last_sync_at).total_seconds() / 60
        if age > 3 * src.sync_interval_minutes:
            return {"state": "warn", "label": "stale",
                    "reason": f"No sync for {int(age)} minutes (every {src.sync_interval_minutes} expected)."}
    return {"state": "ok", "label": "healthy", "reason": "The last sync succeeded."}
