"""Monthly budgets per organization: a soft warning (80 % by default), a hard stop at 100 %.

A budget names its unit. ``tokens``: every metered model call counts, offline models included
(query and ingestion embeddings, completions, rewrites, the planner). ``cost``: the estimated
USD of the same calls, where offline calls cost 0. At the hard stop the answer pipeline makes
no model call of any kind (not even the query embedding) and the public chat gets a fixed
message. The month runs in the organization's time zone. Near the limit, model calls of an
organization are serialized by a Redis reservation held from the check until the ledger row is
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
from kbframework.errors import KBError
from kbframework.hooks import registry
from kbframework.models import Organization, Setting, UsageLedger
from kbframework.orgs.accounts import as_uuid

log = logging.getLogger("kbframework.orgs.budget")

UNITS = ("tokens", "cost")
EXCEEDED_TEXT = ("Our assistant has reached its usage limit for this month. Please try again later "
                 "or contact us directly.")


def budget_settings(s, org_id) -> dict:
    st = s.scalar(select(Setting).where(Setting.organization_id == org_id))
    unit = (st.budget_unit if st else None) or "none"
    limit = st.budget_limit if st else None
    if unit not in UNITS or not limit:
        unit, limit = "none", None
    return {"unit": unit, "limit": float(limit) if limit is not None else None,
            "soft_pct": float(st.budget_soft_pct if st and st.budget_soft_pct else 80),
            "hard_stop": bool(st.budget_hard_stop) if st and st.budget_hard_stop is not None else True}


def _used(used: dict, unit: str) -> float:
    return float(used["all_tokens"] if unit == "tokens" else used["cost_usd"])


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
    pct = None if b["unit"] == "none" else 100.0 * _used(used, b["unit"]) / b["limit"]
    state = "unlimited" if pct is None else "exceeded" if pct >= 100 else "warning" if pct >= b["soft_pct"] else "ok"
    out = {"month": label, "month_start": start.isoformat(), "month_end": end.isoformat(), **used,
           "budget": b, "used": _used(used, b["unit"]) if b["unit"] != "none" else None,
           "percent": round(pct, 2) if pct is not None else None, "state": state}
    if state in ("warning", "exceeded"):
        _warn_once(org_id, label, out)
    return out


def _warn_once(org_id, label, st) -> None:
    try:
        from kbframework.jobs.queues import get_redis

        if get_redis().set(f"kbf:budget:warned:{org_id}:{label}:{st['state']}", "1", nx=True, ex=40 * 86400):
            log.warning("organization %s has used %.1f%% of its %s budget (%s)", org_id, st["percent"], label,
                        st["state"])
    except Exception:  # Redis down: the warning is a courtesy, the answer goes on
        log.warning("cannot record the budget warning of organization %s", org_id, exc_info=True)


def _budget(org_id) -> dict:
    """The organization's budget settings: one settings read, so organizations without a
    budget never pay for summing the month's ledger on the answer path."""
    with session_scope() as s:
        return budget_settings(s, org_id)


def blocked(org_id) -> dict | None:
    """The status when the hard stop applies, else None (checking also logs the 80 % warning)."""
    b = _budget(org_id)
    if b["unit"] == "none":
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
    if not b["hard_stop"] or b["unit"] == "none":
        yield None
        return
    st = status(org_id)
    b = st["budget"]
    from kbframework.jobs.queues import get_redis

    est = _average_call(org_id, purpose, st, b["unit"])
    r = get_redis()
    key = f"kbf:budget:resv:{org_id}:{st['month']}:{b['unit']}"
    pipe = r.pipeline()
    pipe.incrbyfloat(key, est)
    pipe.expire(key, 3600)
    others = float(pipe.execute()[0]) - est
    # read the usage AFTER reserving: a call that finished meanwhile wrote its ledger row
    # before releasing its reservation, so it is counted at least once, never zero times
    st = status(org_id)
    over = st["used"] + others >= b["limit"]
    try:
        if over or st["state"] == "exceeded":
            raise BudgetExceeded(st)
        yield st
    finally:
        r.incrbyfloat(key, -est)


def _average_call(org_id, purpose: str, st, unit: str) -> float:
    """This month's average size of a call for the purpose, in the budget's unit."""
    size = (UsageLedger.tokens_in + UsageLedger.tokens_out) if unit == "tokens" else UsageLedger.cost_usd
    with session_scope() as s:
        avg = s.scalar(select(func.avg(size)).where(
            UsageLedger.organization_id == org_id, UsageLedger.purpose == purpose,
            UsageLedger.created_at >= datetime.fromisoformat(st["month_start"])))
    return float(avg) if avg else (1000.0 if unit == "tokens" else 0.001)


class BudgetExceeded(KBError):
    """A hard-stop budget refused a paid model call. The answer pipeline turns it into the
    budget message; anywhere else it is a 429, never a 500."""

    status = 429
    code = "budget_exceeded"

    def __init__(self, st):
        super().__init__("monthly budget exceeded")
        self.budget = st  # the budget's state when the call was refused


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
    cost = round(sum(x["cost_usd"] for x in days), 6)
    used = None if b["unit"] == "none" else (tin + tout if b["unit"] == "tokens" else cost)
    return {"month": label, "timezone": tz, "tokens_in": tin, "tokens_out": tout, "tokens": tin + tout,
            "cost_usd": cost, "calls": sum(x["calls"] for x in days),
            "totals": usage_totals(s, org.id, start, end), "budget": b,
            "budget_used": round(used / b["limit"], 4) if used is not None else None,
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
