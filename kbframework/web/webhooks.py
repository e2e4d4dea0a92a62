"""Webhook receivers: ``POST /api/webhooks/v1/<type>/<source_id>``.

The host finds the source, checks that its type matches, and hands the raw request to the
connector's ``handle_webhook``; the connector verifies it and says what to do. Deliveries
are recorded (and a repeated delivery id ignored) before any work is queued; no embedding
happens in the request.

The endpoint must answer fast under bursts (WooCommerce sends one delivery per saved
variation): a delivery costs one cached source lookup, the connector's check, one SQL round
trip (stale check, insert-or-ignore, ``last_webhook_at``) and one Redis pipeline.
"""
from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from datetime import datetime, timedelta, timezone

from flask import Blueprint, request
from sqlalchemy import select

from kbframework.hooks import registry
from kbframework.orgs.accounts import as_uuid
from kbframework.db import get_engine, run_autocommit
from kbframework.errors import KBError, NotFound
from kbframework.models import Source, WebhookEvent
from kbframework.security import decrypt_json

bp = Blueprint("webhooks", __name__, url_prefix="/api/webhooks/v1")
log = logging.getLogger("kbframework.webhooks")

_secrets_cache: OrderedDict[str, dict] = OrderedDict()
_cache_lock = threading.Lock()
_CACHE_SIZE = 256

_SOURCE = select(Source.type, Source.status, Source.secrets, Source.organization_id)
_EVENTS = WebhookEvent.__table__


def _secrets(ciphertext: str | None) -> dict:
    if not ciphertext:
        return {}
    with _cache_lock:
        hit = _secrets_cache.get(ciphertext)
        if hit is not None:
            _secrets_cache.move_to_end(ciphertext)
            return dict(hit)
    value = decrypt_json(ciphertext)
    with _cache_lock:
        _secrets_cache[ciphertext] = value
        while len(_secrets_cache) > _CACHE_SIZE:
            _secrets_cache.popitem(last=False)
    return dict(value)


# One query string records a delivery (one round trip, one implicit transaction): the freshness check against the stored document (the same
# rule as knowledge.is_stale_timestamp: older, or equal while the document is live, is
# stale), the insert that ignores a repeated delivery id, and last_webhook_at to the second
# (touched at most once a second, so a burst does not queue on the source's row lock).
# synchronous_commit is off for this transaction only: a crash in the next few hundred ms
# may lose the log row, never the queued job (it is in Redis) nor the item (the scheduled
# reconciliation catches a lost delivery); not waiting for the WAL flush keeps bursts fast.
_DELIVERY_SQL = """
SET LOCAL synchronous_commit TO OFF;
WITH doc AS (
    SELECT source_modified_at AS m, status FROM documents
    WHERE source_id = %(sid)s::uuid AND external_id = %(ext)s AND %(check)s
), ev AS (
    INSERT INTO webhook_events (organization_id, source_id, delivery_id, topic, external_id, outcome, detail)
    SELECT %(org)s::uuid, %(sid)s::uuid, %(did)s, %(topic)s, %(ext)s,
           CASE WHEN EXISTS (SELECT 1 FROM doc WHERE %(mod)s::timestamptz < doc.m
                                OR (%(mod)s::timestamptz = doc.m AND doc.status <> 'deleted'))
                THEN 'stale' ELSE %(outcome)s END,
           %(detail)s
    ON CONFLICT (source_id, delivery_id) WHERE delivery_id IS NOT NULL DO NOTHING
    RETURNING id, outcome
), touch AS (
    UPDATE sources SET last_webhook_at = %(now)s
    WHERE id = %(sid)s::uuid AND (last_webhook_at IS NULL OR last_webhook_at < %(cutoff)s)
    RETURNING 1
)
SELECT (SELECT id FROM ev), (SELECT outcome FROM ev), (SELECT count(*) FROM touch)
"""

_TOUCH_SQL = """
UPDATE sources SET last_webhook_at = %(now)s
WHERE id = %(sid)s::uuid AND (last_webhook_at IS NULL OR last_webhook_at < %(cutoff)s)
"""

_SOURCE_TTL = 5.0  # seconds a receiver trusts its copy of a source row (status, secrets)
_source_cache: dict = {}


def _source(sid):
    """(type, status, secrets, organization_id) of a source, cached for a few seconds per
    process: a disabled source or a rotated webhook secret is seen within ``_SOURCE_TTL``."""
    now = time.monotonic()
    hit = _source_cache.get(sid)
    if hit is not None and hit[0] > now:
        return hit[1]
    from kbframework import tenancy

    with tenancy.system("find a webhook's source by its address"), get_engine().connect() as conn:
        row = conn.execute(_SOURCE.where(Source.id == sid)).first()
    if row is None:
        _source_cache.pop(sid, None)
        return None
    row = tuple(row)
    if len(_source_cache) > 4096:
        _source_cache.clear()
    _source_cache[sid] = (now + _SOURCE_TTL, row)
    return row


def _reject(org_id, sid, verdict) -> None:
    with get_engine().begin() as conn:
        conn.execute(_EVENTS.insert().values(organization_id=org_id, source_id=sid, delivery_id=None,
                                             topic=verdict.get("topic") or None, outcome="rejected",
                                             detail=verdict.get("reason")))


@bp.post("/<type_>/<source_id>")
def receive(type_, source_id):
    sid = as_uuid(source_id)
    row = _source(sid)
    if row is None or row[0] != type_:
        raise NotFound("No such webhook receiver.")
    src_type, status, ciphertext, org_id = row
    from kbframework import tenancy

    tenancy.set_scope(org_id)  # the rest of the request works for that source's organization
    connector = registry.source_types().get(src_type)
    if connector is None or not connector.accepts_webhooks:
        raise NotFound("This source type does not take webhooks.")
    raw = request.get_data(cache=True)
    verdict = connector.handle_webhook(dict(request.headers), raw, _secrets(ciphertext))
    # verdict: {"ok": bool, "kind": "ping"|"item"|"ignored", "delivery_id", "topic", "external_id",
    #           "event", "reason", "source_modified_at" (optional: the payload's timestamp, for the freshness rule)}
    if not verdict.get("ok"):
        _reject(org_id, sid, verdict)
        raise KBError(verdict.get("reason") or "The webhook signature is not valid.", code="bad_signature",
                      status=401)
    now = datetime.now(timezone.utc)
    times = {"sid": str(sid), "now": now, "cutoff": now - timedelta(seconds=1)}
    kind = verdict.get("kind") or "item"
    if kind == "ping":
        run_autocommit(_TOUCH_SQL, times)
        return {"ok": True, "ping": True}
    outcome = "source_disabled" if status == "disabled" else "queued" if kind == "item" else "ignored"
    modified = verdict.get("source_modified_at")
    # the statements of one query string form one transaction
    event_id, outcome, _ = run_autocommit(_DELIVERY_SQL, {
        **times, "org": str(org_id), "did": verdict.get("delivery_id"), "topic": verdict.get("topic") or None,
        "ext": verdict.get("external_id"), "outcome": outcome, "mod": modified,
        "check": bool(modified is not None and outcome == "queued" and verdict.get("external_id")),
        "detail": verdict.get("reason") if kind != "item" else None})
    if event_id is None:
        return {"ok": True, "duplicate": True}
    if status == "disabled":
        return {"ok": True, "ignored": "source disabled"}
    if kind != "item":
        return {"ok": True, "ignored": verdict.get("reason") or "nothing to do"}
    if outcome == "stale":
        log.info("stale webhook ignored for %s/%s (delivery %s): %s is not newer than what we hold",
                 source_id, verdict.get("external_id"), verdict.get("delivery_id"), modified)
        return {"ok": True, "stale": True}
    import redis

    from kbframework.sources.webhook_queue import schedule_item

    event = verdict.get("event", "updated")
    try:
        job_id = schedule_item(str(sid), verdict["external_id"], event, event_id)
    except redis.RedisError as exc:
        # The receipt is stored; its work waits in the outbox (same database) until Redis is
        # back, so the delivery is accepted rather than refused and later called a duplicate.
        from kbframework.jobs.outbox import hold

        held = hold("webhook", "kbframework.jobs.tasks.webhook_job",
                    [str(sid), verdict["external_id"], event, None, event_id], {},
                    f"wh-{sid}-{verdict['external_id']}-held-{event_id}", f"Redis is not reachable: {exc}")
        return {"ok": True, "queued": False, "accepted": True, "job_id": held.id,
                "message": "Accepted: the change is applied as soon as the job queue is reachable again."}, 202
    return {"ok": True, "queued": True, "job_id": job_id}, 202
