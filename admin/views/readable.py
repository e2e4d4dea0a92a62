"""``|readable``: a filter value (a date range, a price range, a list of categories) written
for people, instead of raw JSON that wraps letter by letter in a narrow column."""
from __future__ import annotations

import re
from datetime import datetime
from zoneinfo import ZoneInfo

from flask import g

from kbframework.admin.views.base import bp

_ISO = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}")


def _when(v: str) -> str:
    try:
        d = datetime.fromisoformat(v)
    except ValueError:
        return v
    if d.tzinfo is not None:
        d = d.astimezone(ZoneInfo(getattr(g, "org_tz", "UTC") or "UTC"))
    return d.strftime("%a %d %b %Y, %H:%M")


def readable(value, depth: int = 0) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (int, float)):
        return f"{value:g}" if isinstance(value, float) else str(value)
    if isinstance(value, datetime):
        return _when(value.isoformat())
    if isinstance(value, str):
        return _when(value) if _ISO.match(value) else value
    if isinstance(value, (list, tuple, set)):
        return ", ".join(readable(v, depth + 1) for v in value) or "—"
    if isinstance(value, dict):
        if "start" in value or "end" in value:
            rng = f"{readable(value.get('start'))} → {readable(value.get('end'))}"
            rest = {k: v for k, v in value.items() if k not in ("start", "end") and v not in (None, False, "")}
            return rng + (f" ({readable(rest, depth + 1)})" if rest else "")
        if ("min" in value or "max" in value) and len(value) <= 3:
            lo, hi = value.get("min"), value.get("max")
            return f"{readable(lo) if lo is not None else '…'} – {readable(hi) if hi is not None else '…'}" + (
                f" {value['currency']}" if value.get("currency") else "")
        return "; ".join(f"{k}: {readable(v, depth + 1)}" for k, v in value.items()) or "—"
    return str(value)


bp.add_app_template_filter(readable, "readable")
