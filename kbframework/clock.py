"""Time helpers every layer shares: now in UTC, ISO text for JSON, and the calendar periods
(a month, a day) of an organization's time zone, returned as UTC instants for queries."""
from __future__ import annotations

from datetime import date, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

from kbframework.errors import ValidationFailed


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


def iso(value):
    """A datetime or date as ISO 8601 text; anything else (None included) unchanged."""
    return value.isoformat() if isinstance(value, (datetime, date)) else value


def month_bounds(tz: str, now: datetime | None = None, month: str | None = None) -> tuple[datetime, datetime, str]:
    """[start, end) of a calendar month in the time zone ``tz``, as UTC instants, and its label.

    ``month`` is ``"2025-05"``; without it, the month ``now`` (default: this instant) falls in
    there. A malformed month is a ValidationFailed the caller can show as it is."""
    zone = ZoneInfo(tz or "UTC")
    if month:
        try:
            y, m = (int(x) for x in str(month).split("-"))
            datetime(y, m, 1)
        except ValueError:
            raise ValidationFailed(f"'{month}' is not a month like 2025-05.")
    else:
        local = (now or utcnow()).astimezone(zone)
        y, m = local.year, local.month
    start = datetime(y, m, 1, tzinfo=zone)
    end = datetime(y + (m == 12), m % 12 + 1, 1, tzinfo=zone)
    return start.astimezone(timezone.utc), end.astimezone(timezone.utc), f"{y:04d}-{m:02d}"


def day_start(value: str | None, tz: str, end: bool = False) -> datetime | None:
    """``"2025-05-01"`` → the start (or, with ``end``, the end) of that day in ``tz``."""
    if not value:
        return None
    try:
        d = date.fromisoformat(str(value)[:10])
    except ValueError:
        raise ValidationFailed(f"'{value}' is not a date like 2025-05-01.")
    start = datetime(d.year, d.month, d.day, tzinfo=ZoneInfo(tz or "UTC"))
    return start + timedelta(days=1) if end else start
