"""Sources: the installed types, create, read, configure, sync, register webhooks, delete."""
from __future__ import annotations

from flask import request
from flask_login import login_required
from sqlalchemy import select

from kbframework.db import session_scope
from kbframework.errors import KBError, ValidationFailed
from kbframework.hooks import registry
from kbframework.models import Source
from kbframework.sources import config as sources
from kbframework.web.api.common import blueprint, body, org_id
from kbframework.web.auth import admin_required

bp = blueprint("sources", __name__)


@bp.get("/sources")
@login_required
def list_sources():
    with session_scope() as s:
        rows = s.scalars(select(Source).where(Source.organization_id == org_id()).order_by(Source.created_at)).all()
        return {"items": [sources.source_to_dict(r, s) for r in rows]}


@bp.get("/source-types")
@login_required
def source_types():
    return {"items": sources.describe_source_types()}


@bp.post("/sources")
@admin_required
def create_source():
    data = body()
    with session_scope() as s:
        src = sources.create_source(s, org_id(), data)
        return sources.source_to_dict(src, s), 201


@bp.get("/sources/<source_id>")
@login_required
def get_source(source_id):
    with session_scope() as s:
        src = sources.get_source(s, org_id(), source_id)
        out = sources.source_to_dict(src, s)
        out["sync_runs"] = sources.sync_runs(s, src)
        return out


@bp.put("/sources/<source_id>")
@admin_required
def update_source(source_id):
    data = body()
    with session_scope() as s:
        before = (sources.get_source(s, org_id(), source_id).config or {}).get("field_mapping")
        src = sources.update_source(s, org_id(), source_id, data)
        remap = ((src.config or {}).get("field_mapping") != before and src.status != "disabled"
                 and registry.source_type(src.type).supports_sync)
        out = sources.source_to_dict(src, s)
    if remap:  # the mapping decides text and metadata: re-derive every item, re-embed what changed
        from kbframework.jobs.queues import enqueue

        job = enqueue("sync", "kbframework.jobs.tasks.sync_source_job", str(source_id), "full")
        out["resync_job_id"] = job.id
    return out


@bp.post("/sources/<source_id>/register-webhooks")
@admin_required
def register_webhooks(source_id):
    base_url = body().get("base_url") or request.host_url
    if not isinstance(base_url, str) or len(base_url) > 2000:
        raise ValidationFailed("'base_url' must be this app's public address, e.g. https://kb.example.com.")
    return sources.register_webhooks(org_id(), source_id, base_url)


@bp.post("/sources/<source_id>/sync")
@admin_required
def sync_source(source_id):
    from kbframework.jobs.queues import enqueue

    kind = body().get("kind", "incremental")
    if kind not in ("full", "incremental"):
        raise ValidationFailed("kind must be 'full' or 'incremental'.")
    with session_scope() as s:
        src = sources.get_source(s, org_id(), source_id)
        if src.status == "disabled":
            raise KBError("This source is disabled; enable it first.", code="source_disabled", status=409)
    job = enqueue("sync", "kbframework.jobs.tasks.sync_source_job", str(source_id), kind)
    from kbframework.jobs.queues import is_held

    if is_held(job):
        return {"queued": False, "accepted": True, "job_id": job.id, "kind": kind,
                "message": "The job queue is not reachable right now; the sync starts as soon as it is back."}, 202
    return {"queued": True, "job_id": job.id, "kind": kind}, 202


@bp.delete("/sources/<source_id>")
@admin_required
def delete_source(source_id):
    with session_scope() as s:
        s.delete(sources.get_source(s, org_id(), source_id))
    return {"deleted": source_id}


@bp.post("/sources/<type_>/discover")
@admin_required
def discover(type_):
    """What the remote system offers (e.g. a WordPress site's post types and field paths), for
    a saved source (``{"source_id"}``: its settings and secrets) or one being set up
    (``{"config": {...}}``)."""

    from kbframework.sources.sync import org_context, source_config, sync_context

    connector = registry.source_type(type_)
    if not connector.discovers_fields:
        raise ValidationFailed(f"{connector.label or type_} sources have nothing to discover.",
                               code="discovery_not_supported")
    data = body()
    with session_scope() as s:
        if data.get("source_id"):
            src = sources.get_source(s, org_id(), data["source_id"])
            if src.type != type_:
                raise ValidationFailed(f"That source is not a {connector.label or type_} source.")
            config, ctx = source_config(src), sync_context(s, src)
        else:
            config = sources.validate_config(connector, data.get("config"))
            ctx = org_context(s, org_id())
    return connector.discover(config, ctx, sample=bool(data.get("sample", True)))
