"""Monthly budgets per organization: a soft warning at 80 %, a hard stop at 100 %.

The month runs in the organization's time zone. Only billable calls count (offline models
record their tokens at zero cost and never stop anything). Near the limit, model calls of an
organization are serialized by a Redis lock held from the check until the ledger row is
written, so concurrent requests overshoot the limit by at most one request.
"""
from __future__ import annotations

import logging
from contextlib import contextmanager
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from sqlalchemy import func, select

from kbframework.clock import month_bounds
from kbframework.db import session_scope
from kbframework.hooks import registry
from kbframework.models import Organization, Setting, UsageLedger
from kbframework.orgs.accounts import as_uuid

log = logging.getLogger("kbframework.orgs.budget")

EXCEEDED_TEXT = ("Our assistant has reached its usage limit for this month. Please try again later "
                 "or contact us directly.")


def budget_settings(s, org_id) -> dict:
    st = s.scalar(select(Setting).where(Setting.organization_id == org_id))
    b = ((st.extra if st else {}) or {}).get("budget") or {}
    return {"monthly_tokens": b.get("monthly_tokens"), "monthly_usd": b.get("monthly_usd"),
            "soft_pct": float(b.get("soft_pct", 80)), "hard_stop": b.get("hard_stop", True) is not False}


def usage_totals(s, org_id, start, end) -> dict:
    row = s.execute(select(
        func.coalesce(func.sum(UsageLedger.tokens_in + UsageLedger.tokens_out).filter(
            UsageLedger.provider.notin_(registry.offline_provider_names())), 0),
        func.coalesce(func.sum(UsageLedger.tokens_in + UsageLedger.tokens_out), 0),
        func.coalesce(func.sum(UsageLedger.cost_usd), 0)).where(
        UsageLedger.organization_id == org_id, UsageLedger.created_at >= start,
        UsageLedger.created_at < end)).one()
    return {"billable_tokens": int(row[0]), "all_tokens": int(row[1]), "cost_usd": float(row[2])}


def status(org_id, now: datetime | None = None) -> dict:
    with session_scope() as s:
        org = s.get(Organization, org_id)
        start, end, label = month_bounds(org.timezone, now)
        b = budget_settings(s, org.id)
        used = usage_totals(s, org.id, start, end)
    pct = None
    if b["monthly_tokens"]:
        pct = 100.0 * used["billable_tokens"] / float(b["monthly_tokens"])
    if b["monthly_usd"]:
        p2 = 100.0 * used["cost_usd"] / float(b["monthly_usd"])
        pct = p2 if pct is None else max(pct, p2)
    state = "unlimited" if pct is None else "exceeded" if pct >= 100 else "warning" if pct >= b["soft_pct"] else "ok"
    out = {"month": label, "month_start": start.isoformat(), "month_end": end.isoformat(), **used,
           "budget": b, "percent": round(pct, 2) if pct is not None else None, "state": state}
    if state in ("warning", "exceeded"):
        _warn_once(org_id, label, out)
    return out


def _warn_once(org_id, label, st) -> None:
    try:
        from kbframework.jobs.queues import get_redis

        if get_redis().set(f"kbf:budget:warned:{org_id}:{label}:{st['state']}", "1", nx=True, ex=40 * 86400):
            log.warning("organization %s has used %.1f%% of its %s budget (%s)", org_id, st["percent"], label,
                        st["state"])
    except Exception:
        pass


def _budget(org_id) -> dict:
    """The organization's budget settings: one settings read, so organizations without a
    budget never pay for summing the month's ledger on the answer path."""
    with session_scope() as s:
        return budget_settings(s, org_id)


def blocked(org_id) -> dict | None:
    """The status when the hard stop applies, else None (checking also logs the 80 % warning)."""
    b = _budget(org_id)
    if not (b["monthly_tokens"] or b["monthly_usd"]):
        return None
    st = status(org_id)
    if st["state"] == "exceeded" and st["budget"]["hard_stop"]:
        return st
    return None


@contextmanager
def spending(org_id, purpose: str = "completion"):
    """Wrap a paid model call. Each call in flight reserves its expected size (this month's
    average for the purpose) in Redis; a call is admitted only while the month's usage plus
    the calls already in flight stay under the limit, so concurrent requests overshoot the
    hard limit by at most one request. The reservation is released after the ledger row is
    written (inside the ``with``)."""
    b = _budget(org_id)
    if not (b["hard_stop"] and (b["monthly_tokens"] or b["monthly_usd"])):
        yield None
        return
    st = status(org_id)
    b = st["budget"]
    from kbframework.jobs.queues import get_redis

    est_tokens, est_usd = _average_call(org_id, purpose, st)
    r = get_redis()
    kt, ku = f"kbf:budget:resv:{org_id}:{st['month']}:t", f"kbf:budget:resv:{org_id}:{st['month']}:u"
    pipe = r.pipeline()
    pipe.incrby(kt, est_tokens)
    pipe.incrbyfloat(ku, est_usd)
    pipe.expire(kt, 3600)
    pipe.expire(ku, 3600)
    tot_t, tot_u = pipe.execute()[:2]
    others_t, others_u = int(tot_t) - est_tokens, float(tot_u) - est_usd
    # read the usage AFTER reserving: a call that finished meanwhile wrote its ledger row
    # before releasing its reservation, so it is counted at least once, never zero times
    st = status(org_id)
    over = (b["monthly_tokens"] and st["billable_tokens"] + others_t >= b["monthly_tokens"]) or \
           (b["monthly_usd"] and st["cost_usd"] + others_u >= b["monthly_usd"])
    try:
        if over or st["state"] == "exceeded":
            raise BudgetExceeded(st)
        yield st
    finally:
        pipe = r.pipeline()
        pipe.decrby(kt, est_tokens)
        pipe.incrbyfloat(ku, -est_usd)
        pipe.execute()


def _average_call(org_id, purpose: str, st) -> tuple[int, float]:
    with session_scope() as s:
        row = s.execute(select(func.avg(UsageLedger.tokens_in + UsageLedger.tokens_out),
                               func.avg(UsageLedger.cost_usd)).where(
            UsageLedger.organization_id == org_id, UsageLedger.purpose == purpose,
            UsageLedger.created_at >= datetime.fromisoformat(st["month_start"]))).one()
    return int(row[0] or 1000), float(row[1] or 0.001)


class BudgetExceeded(Exception):
    def __init__(self, st):
        super().__init__("monthly budget exceeded")
        self.status = st


def usage_summary(s, org_id, month: str | None = None) -> dict:
    """One month of the ledger in the organization's time zone: totals, every day (zeros
    included), per purpose and per model, and the budget. The admin page, the admin API and
    ``kbf usage`` all read this."""
    org = s.get(Organization, as_uuid(org_id))
    tz = org.timezone if org else "UTC"
    start, end, label = month_bounds(tz, month=month)
    conds = [UsageLedger.organization_id == org.id, UsageLedger.created_at >= start, UsageLedger.created_at < end]
    day = func.date(func.timezone(tz, UsageLedger.created_at)).label("day")
    rows = s.execute(select(day, func.sum(UsageLedger.tokens_in), func.sum(UsageLedger.tokens_out),
                            func.sum(UsageLedger.cost_usd), func.count()).where(*conds)
                     .group_by(day).order_by(day)).all()
    by_day = {r[0]: r for r in rows}
    days = []
    zone = ZoneInfo(tz)
    d, last = start.astimezone(zone).date(), end.astimezone(zone).date()
    while d < last:
        r = by_day.get(d)
        days.append({"day": d.isoformat(), "tokens_in": int(r[1] or 0) if r else 0,
                     "tokens_out": int(r[2] or 0) if r else 0, "cost_usd": float(r[3] or 0) if r else 0.0,
                     "calls": int(r[4]) if r else 0})
        d += timedelta(days=1)
    model_rows = s.execute(select(UsageLedger.purpose, UsageLedger.provider, UsageLedger.model,
                                  func.sum(UsageLedger.tokens_in), func.sum(UsageLedger.tokens_out),
                                  func.sum(UsageLedger.cost_usd), func.count()).where(*conds)
                           .group_by(UsageLedger.purpose, UsageLedger.provider, UsageLedger.model)
                           .order_by(func.sum(UsageLedger.cost_usd).desc(), UsageLedger.model)).all()
    by_model = [{"purpose": r[0], "provider": r[1], "model": r[2], "tokens_in": int(r[3] or 0),
                 "tokens_out": int(r[4] or 0), "cost_usd": float(r[5] or 0), "calls": int(r[6])}
                for r in model_rows]
    by_purpose: dict = {}
    for m in by_model:
        p = by_purpose.setdefault(m["purpose"], {"purpose": m["purpose"], "tokens": 0, "cost_usd": 0.0, "calls": 0})
        p["tokens"] += m["tokens_in"] + m["tokens_out"]
        p["cost_usd"] = round(p["cost_usd"] + m["cost_usd"], 6)
        p["calls"] += m["calls"]
    tin = sum(x["tokens_in"] for x in days)
    tout = sum(x["tokens_out"] for x in days)
    b = budget_settings(s, org.id)
    cap = b["monthly_tokens"]
    return {"month": label, "timezone": tz, "tokens_in": tin, "tokens_out": tout, "tokens": tin + tout,
            "cost_usd": round(sum(x["cost_usd"] for x in days), 6), "calls": sum(x["calls"] for x in days),
            "totals": usage_totals(s, org.id, start, end), "budget": b,
            "budget_tokens": int(cap) if cap else None,
            "budget_used": round((tin + tout) / int(cap), 4) if cap else None,
            "days": days, "by_model": by_model, "by_purpose": list(by_purpose.values())}


class MeteredLLM:
    """An LLM provider wrapped so every call is budget-checked and written to the ledger."""

    def __init__(self, llm, org_id, purpose: str):
        self._llm, self._org, self._purpose = llm, org_id, purpose
        self.name, self.model = llm.name, llm.model

    def available(self) -> bool:
        return self._llm.available()

    def complete(self, messages, **kw):
        from kbframework.orgs.usage import record_usage

        with spending(self._org, self._purpose):
            res = self._llm.complete(messages, **kw)
            record_usage(self._org, self._purpose, self._llm.name, res.model, res.tokens_in, res.tokens_out)
        return res
