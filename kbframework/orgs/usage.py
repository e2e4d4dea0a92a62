"""The token ledger: one row per model call. Writing it never blocks or breaks an answer."""
from __future__ import annotations

import logging

from kbframework.db import session_scope
from kbframework.models import UsageLedger

log = logging.getLogger("kbframework.orgs.usage")

# USD per 1M tokens (input, output); offline models cost nothing. An organization's ``prices``
# setting overrides or adds models.
DEFAULT_PRICES = {
    "text-embedding-3-small": (0.02, 0.0),
    "text-embedding-3-large": (0.13, 0.0),
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4o": (2.50, 10.00),
    "gpt-4.1-mini": (0.40, 1.60),
}


def estimate_cost(model: str, tokens_in: int, tokens_out: int, prices: dict | None = None) -> float:
    table = {**DEFAULT_PRICES, **(prices or {})}
    pin, pout = table.get(model, (0.0, 0.0))
    return (tokens_in * pin + tokens_out * pout) / 1_000_000


def record_usage(org_id, purpose: str, provider: str, model: str, tokens_in: int, tokens_out: int,
                 ref: str | None = None, cost: float | None = None) -> None:
    try:
        with session_scope() as s:
            from sqlalchemy import text

            # a ledger row is accounting, not an answer: its commit need not wait for the
            # disk (a server crash can lose the last fraction of a second of rows, never
            # corrupt them), which takes the flush off the question's own path
            s.execute(text("SET LOCAL synchronous_commit = off"))
            if cost is None:
                from sqlalchemy import select

                from kbframework.models import Setting

                prices = s.scalar(select(Setting.prices).where(Setting.organization_id == org_id))
                cost = estimate_cost(model, tokens_in, tokens_out, prices or None)
            s.add(UsageLedger(organization_id=org_id, purpose=purpose, provider=provider, model=model,
                              tokens_in=int(tokens_in or 0), tokens_out=int(tokens_out or 0),
                              cost_usd=cost if cost is not None else estimate_cost(model, tokens_in, tokens_out),
                              ref=ref))
    except Exception as exc:
        log.error("usage ledger write failed (%s %s): %s", purpose, model, exc)
