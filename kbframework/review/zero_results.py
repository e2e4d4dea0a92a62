"""Questions that found nothing, grouped by their normalized text, so the admin sees what
knowledge is missing."""
from __future__ import annotations

from datetime import timedelta

from sqlalchemy import func, select, text

from kbframework.clock import iso, utcnow
from kbframework.models import ChatLog
from kbframework.orgs.accounts import as_uuid


def zero_results(s, oid, *, days: int = 7, limit: int = 100, channel: str | None = None) -> dict:
    """Questions that found nothing, grouped by their normalized text, most asked first."""
    since = utcnow() - timedelta(days=max(1, int(days)))
    norm = func.lower(func.regexp_replace(func.btrim(ChatLog.query), r"[\s?!.]+$", "")).label("norm")
    conds = [ChatLog.organization_id == as_uuid(oid), ChatLog.zero_result.is_(True), ChatLog.created_at >= since]
    if channel:
        conds.append(ChatLog.channel == channel)
    sub = select(ChatLog.id, ChatLog.query, ChatLog.created_at, ChatLog.reason, ChatLog.channel, norm).where(
        *conds).subquery()
    q = select(sub.c.norm, func.count().label("n"), func.max(sub.c.created_at).label("last"),
               func.min(sub.c.created_at).label("first"),
               func.array_agg(func.distinct(sub.c.reason)).label("reasons"),
               func.array_agg(func.distinct(sub.c.channel)).label("channels"),
               (func.array_agg(sub.c.query.op("ORDER BY")(sub.c.created_at.desc())))[1].label("example"),
               (func.array_agg(sub.c.id.op("ORDER BY")(sub.c.created_at.desc())))[1].label("last_id")
               ).group_by(sub.c.norm).order_by(text("n DESC"), text("last DESC"))
    rows = s.execute(q.limit(limit)).all()
    total = s.scalar(select(func.count()).select_from(ChatLog).where(*conds)) or 0
    return {"days": int(days), "total": total, "groups": len(rows),
            "items": [{"query": r.example, "count": r.n, "last_asked": iso(r.last), "first_asked": iso(r.first),
                       "reasons": [x for x in (r.reasons or []) if x], "channels": [x for x in (r.channels or []) if x],
                       "last_log_id": str(r.last_id)} for r in rows]}
