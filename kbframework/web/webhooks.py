"""Webhook receivers: ``POST /api/webhooks/v1/<type>/<source_id>``.

The host finds the source, checks that its type matches, and hands the raw request to the
connector's ``handle_webhook``; the connector verifies it and says what to do. Deliveries
are recorded (and a repeated delivery id ignored) before any work is queued; no embedding
happens in the request.
"""
from __future__ import annotations

from datetime import datetime, timezone

from flask import Blueprint, request
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from kbframework import registry
from kbframework.accounts import as_uuid
from kbframework.db import session_scope
from kbframework.errors import KBError, NotFound
from kbframework.models import Source, WebhookEvent
from kbframework.security import decrypt_json

bp = Blueprint("webhooks", __name__, url_prefix="/api/webhooks/v1")


@bp.post("/<type_>/<source_id>")
def receive(type_, source_id):
    with session_scope() as s:
        src = s.get(Source, as_uuid(source_id))
        if src is None or src.type != type_:
            raise NotFound("No such webhook receiver.")
        connector = registry.source_types().get(src.type)
        if connector is None or not hasattr(connector, "handle_webhook"):
            raise NotFound("This source type does not take webhooks.")
        secrets = decrypt_json(src.secrets)
        org_id, status = src.organization_id, src.status
    raw = request.get_data(cache=True)
    verdict = connector.handle_webhook(dict(request.headers), raw, secrets)
    # verdict: {"ok": bool, "kind": "ping"|"item", "delivery_id", "topic", "external_id", "event", "payload"}
    if not verdict.get("ok"):
        with session_scope() as s:
            s.add(WebhookEvent(organization_id=org_id, source_id=as_uuid(source_id), delivery_id=None,
                               topic=verdict.get("topic"), outcome="rejected", detail=verdict.get("reason")))
        raise KBError(verdict.get("reason") or "The webhook signature is not valid.", code="bad_signature",
                      status=401)
    now = datetime.now(timezone.utc)
    with session_scope() as s:
        s.get(Source, as_uuid(source_id)).last_webhook_at = now
    if verdict.get("kind") == "ping":
        return {"ok": True, "ping": True}
    delivery = verdict.get("delivery_id")
    try:
        with session_scope() as s:
            ev = WebhookEvent(organization_id=org_id, source_id=as_uuid(source_id), delivery_id=delivery,
                              topic=verdict.get("topic"), external_id=verdict.get("external_id"),
                              outcome="queued" if status != "disabled" else "source_disabled")
            s.add(ev)
            s.flush()
            event_id = ev.id
    except IntegrityError:
        return {"ok": True, "duplicate": True}
    if status == "disabled":
        return {"ok": True, "ignored": "source disabled"}
    from kbframework.webhook_queue import schedule_item

    job_id = schedule_item(str(source_id), verdict["external_id"], verdict.get("event", "updated"), event_id)
    return {"ok": True, "queued": True, "job_id": job_id}, 202
