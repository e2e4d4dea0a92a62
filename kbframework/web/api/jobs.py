"""``GET /api/admin/v1/jobs``: the organization's background work an admin should know about:
what is queued, running, waiting for a retry, held while Redis was away, and what failed
and why (the same listing as ``kbf jobs``, limited to the caller's organization)."""
from __future__ import annotations

from flask import request
from flask_login import login_required

from kbframework.errors import ValidationFailed
from kbframework.jobs.listing import STATES, held_jobs, list_jobs, tag_organization
from kbframework.web.api.common import blueprint, org_id

bp = blueprint("jobs", __name__)


@bp.get("/jobs")
@login_required
def jobs():
    from kbframework.jobs.queues import redis_ok

    states = [s for s in (request.args.get("state") or "").split(",") if s] or list(STATES)
    unknown = sorted(set(states) - set(STATES))
    if unknown:
        raise ValidationFailed(f"Unknown state {', '.join(unknown)}; use {', '.join(STATES)}.")
    org = str(org_id())
    if redis_ok():
        rows = list_jobs(states, limit=100, organization_id=org)
        queue_reachable = True
    else:  # Redis away: what is held in the outbox is all there is to show
        rows = held_jobs(100) if "held" in states else []
        tag_organization(rows)
        rows = [r for r in rows if r.get("organization_id") == org]
        queue_reachable = False
    for r in rows:
        r.pop("_first", None)
        r.pop("organization_id", None)
    counts: dict = {}
    for r in rows:
        counts[r["state"]] = counts.get(r["state"], 0) + 1
    return {"jobs": rows, "counts": counts, "queue_reachable": queue_reachable}
