"""Reading an iCalendar feed (RFC 5545) into plain event occurrences, without the host.

``parse_feed(data, now=..., weeks_ahead=..., keep_past_days=..., default_tz=...)`` returns
one dict per occurrence, sorted by start:

- a single event is one occurrence, ``external_id`` = its UID;
- a recurring event (RRULE, RDATE, minus EXDATE) is expanded from ``now - keep_past_days``
  to ``now + weeks_ahead`` weeks; each instance is its own occurrence with
  ``external_id`` = ``UID/20260312T200000Z`` (the instance's original start in UTC), and a
  VEVENT with the same UID and a RECURRENCE-ID replaces that one instance (moved time,
  other title, or STATUS:CANCELLED);
- times: TZID-qualified and UTC times are kept; floating times (no zone) and all-day
  dates are read in ``default_tz`` (the feed's X-WR-TIMEZONE wins when it names a real
  zone); recurrences are expanded in the event's wall-clock time, so "every Thursday at
  20:00" stays at 20:00 across daylight-saving changes.

Values are JSON-friendly (ISO strings), so a record can travel through a job queue.
"""
from __future__ import annotations

import hashlib
import re
from datetime import date, datetime, time, timedelta, timezone
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from dateutil.rrule import rrulestr
from icalendar import Calendar, vRecur

MAX_INSTANCES = 1000  # per recurring event, whatever the window


class FeedError(ValueError):
    """The bytes are not an iCalendar feed."""


def _zone(name) -> ZoneInfo | None:
    try:
        return ZoneInfo(str(name)) if name else None
    except (ZoneInfoNotFoundError, ValueError):
        return None


def _text(value) -> str | None:
    if value is None:
        return None
    if isinstance(value, (list, tuple)):
        value = value[0] if value else None
        if value is None:
            return None
    text = str(value).strip()
    return text or None


def _dt(prop):
    """A DTSTART/DTEND/RECURRENCE-ID/EXDATE value → ``date`` or ``datetime`` (aware or floating)."""
    if prop is None:
        return None
    return getattr(prop, "dt", prop)


def _wall(value, tz: ZoneInfo) -> tuple[datetime, bool]:
    """A date or datetime → (naive wall-clock time in ``tz``, all_day)."""
    if isinstance(value, datetime):
        if value.tzinfo is not None:
            return value.astimezone(tz).replace(tzinfo=None), False
        return value, False
    if isinstance(value, date):
        return datetime.combine(value, time(0)), True
    raise FeedError(f"not a date: {value!r}")


def _event_zone(value, default_tz: ZoneInfo) -> ZoneInfo:
    if isinstance(value, datetime) and value.tzinfo is not None:
        key = getattr(value.tzinfo, "key", None) or getattr(value.tzinfo, "zone", None)
        z = _zone(key)
        if z is not None:
            return z
        if value.utcoffset() == timedelta(0):
            return ZoneInfo("UTC")
        # a zone icalendar could not name: keep the instant, expand in UTC
        return ZoneInfo("UTC")
    return default_tz


def _list_values(prop) -> list:
    """EXDATE/RDATE may appear several times, each with several values."""
    if prop is None:
        return []
    props = prop if isinstance(prop, list) else [prop]
    out = []
    for p in props:
        dts = getattr(p, "dts", None)
        if dts is None:
            out.append(_dt(p))
        else:
            out.extend(_dt(d) for d in dts)
    return [v for v in out if isinstance(v, (date, datetime))]


def _categories(ev) -> list[str]:
    prop = ev.get("CATEGORIES")
    if prop is None:
        return []
    props = prop if isinstance(prop, list) else [prop]
    out: list[str] = []
    for p in props:
        cats = getattr(p, "cats", None)
        values = cats if cats is not None else str(p).split(",")
        out.extend(str(c).strip() for c in values if str(c).strip())
    return list(dict.fromkeys(out))


def _plain(text: str | None) -> str:
    """DESCRIPTION is plain text by the RFC, but some publishers put HTML in it."""
    if not text:
        return ""
    if re.search(r"<(p|br|div|a|b|strong|em|ul|li)\b", text, re.I):
        text = re.sub(r"<br\s*/?>|</p>|</div>|</li>", "\n", text, flags=re.I)
        text = re.sub(r"<[^>]+>", "", text)
        text = text.replace("&amp;", "&").replace("&nbsp;", " ").replace("&lt;", "<").replace("&gt;", ">")
    lines = [line.rstrip() for line in text.replace("\r\n", "\n").split("\n")]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


def _modified(ev) -> str | None:
    for key in ("LAST-MODIFIED", "DTSTAMP"):
        v = _dt(ev.get(key))
        if isinstance(v, datetime):
            v = v if v.tzinfo else v.replace(tzinfo=timezone.utc)
            return v.astimezone(timezone.utc).isoformat()
    return None


def _uid(ev) -> str:
    uid = _text(ev.get("UID"))
    if uid:
        return uid
    seed = f"{ev.get('SUMMARY')}|{_dt(ev.get('DTSTART'))}|{ev.get('LOCATION')}"
    return "nouid-" + hashlib.sha1(seed.encode()).hexdigest()[:16]


def _span(ev, default_tz: ZoneInfo):
    """(zone, naive wall start, duration, all_day) of one VEVENT."""
    start_v = _dt(ev.get("DTSTART"))
    if start_v is None:
        raise FeedError("an event has no DTSTART")
    tz = _event_zone(start_v, default_tz)
    start, all_day = _wall(start_v, tz)
    end_v = _dt(ev.get("DTEND"))
    if end_v is not None:
        end, _ = _wall(end_v, tz)
        duration = max(end - start, timedelta(0))
    elif ev.get("DURATION") is not None:
        duration = max(_dt(ev.get("DURATION")), timedelta(0))
    else:
        duration = timedelta(days=1) if all_day else timedelta(0)
    return tz, start, duration, all_day


def _occurrence(ev, uid, tz, start, duration, all_day, calendar_name, rid=None) -> dict:
    aware_start = start.replace(tzinfo=tz)
    aware_end = (start + duration).replace(tzinfo=tz) if duration or all_day else None
    organizer = _text(ev.get("ORGANIZER"))
    organizer_name = getattr(ev.get("ORGANIZER"), "params", {}).get("CN") if ev.get("ORGANIZER") else None
    return {
        "external_id": uid if rid is None else f"{uid}/{rid.astimezone(timezone.utc):%Y%m%dT%H%M%SZ}",
        "uid": uid,
        "recurrence_id": rid.astimezone(timezone.utc).isoformat() if rid is not None else None,
        "summary": _text(ev.get("SUMMARY")) or "Untitled event",
        "description": _plain(_text(ev.get("DESCRIPTION"))),
        "location": _text(ev.get("LOCATION")),
        "url": _text(ev.get("URL")),
        "categories": _categories(ev),
        "status": (_text(ev.get("STATUS")) or "CONFIRMED").upper(),
        "start": aware_start.isoformat(),
        "end": aware_end.isoformat() if aware_end else None,
        "all_day": all_day,
        "timezone": tz.key,
        "modified": _modified(ev),
        "organizer": organizer_name or (organizer.split(":", 1)[-1] if organizer else None),
        "calendar": calendar_name,
    }


def _rule_starts(ev, tz, start, duration, lo: datetime, hi: datetime) -> list[datetime]:
    """Wall-clock starts of a recurring event's instances that overlap [lo, hi] (naive, in tz)."""
    starts: set[datetime] = set()
    rules = ev.get("RRULE")
    for rule in (rules if isinstance(rules, list) else [rules] if rules is not None else []):
        rule = vRecur(rule)  # a copy; UNTIL is applied below, in the event's wall-clock time
        until = rule.pop("UNTIL", None)
        r = rrulestr("RRULE:" + rule.to_ical().decode(), dtstart=start)
        if until:
            u = until[0] if isinstance(until, list) else until
            u_wall, u_is_date = _wall(u, tz)
            r = r.replace(until=u_wall + timedelta(days=1) - timedelta(seconds=1) if u_is_date else u_wall)
        starts.update(r.between(lo - duration, hi, inc=True)[:MAX_INSTANCES])
    for v in _list_values(ev.get("RDATE")):
        s, _ = _wall(v, tz)
        if isinstance(v, date) and not isinstance(v, datetime):
            s = datetime.combine(s.date(), start.time())
        if lo - duration <= s <= hi:
            starts.add(s)
    for v in _list_values(ev.get("EXDATE")):
        s, _ = _wall(v, tz)
        if isinstance(v, date) and not isinstance(v, datetime):
            starts = {x for x in starts if x.date() != s.date()}
        else:
            starts.discard(s)
    return sorted(starts)


def parse_feed(data: bytes | str, *, now: datetime, weeks_ahead: int = 12, keep_past_days: int = 7,
               default_tz: str = "UTC") -> list[dict]:
    try:
        cal = Calendar.from_ical(data)
    except Exception as exc:  # icalendar raises ValueError and friends on broken input
        raise FeedError(f"not an iCalendar feed: {exc}") from None
    if getattr(cal, "name", None) != "VCALENDAR":
        raise FeedError("not an iCalendar feed: no VCALENDAR")
    tz = _zone(_text(cal.get("X-WR-TIMEZONE"))) or _zone(default_tz) or ZoneInfo("UTC")
    calendar_name = _text(cal.get("X-WR-CALNAME"))
    now = now if now.tzinfo else now.replace(tzinfo=timezone.utc)
    lo_abs = now - timedelta(days=keep_past_days)
    hi_abs = now + timedelta(weeks=weeks_ahead)

    masters, overrides = [], {}
    for ev in cal.walk("VEVENT"):
        if ev.get("DTSTART") is None:
            continue
        rid_v = _dt(ev.get("RECURRENCE-ID"))
        if rid_v is None:
            masters.append(ev)
        else:
            overrides[(_uid(ev), rid_v)] = ev

    out: list[dict] = []
    used: set = set()
    for ev in masters:
        uid = _uid(ev)
        etz, start, duration, all_day = _span(ev, tz)
        if ev.get("RRULE") is None and ev.get("RDATE") is None:
            if (start + duration).replace(tzinfo=etz) >= lo_abs:
                out.append(_occurrence(ev, uid, etz, start, duration, all_day, calendar_name))
            continue
        lo = lo_abs.astimezone(etz).replace(tzinfo=None)
        hi = hi_abs.astimezone(etz).replace(tzinfo=None)
        series_cancelled = (_text(ev.get("STATUS")) or "").upper() == "CANCELLED"
        for s in _rule_starts(ev, etz, start, duration, lo, hi):
            rid = s.replace(tzinfo=etz)
            override = None
            for (o_uid, o_rid), o_ev in overrides.items():
                if o_uid == uid and _wall(o_rid, etz)[0] == s:
                    override, key = o_ev, (o_uid, o_rid)
                    break
            if override is not None:
                used.add(key)
                otz, ostart, odur, oall = _span(override, tz)
                occ = _occurrence(override, uid, otz, ostart, odur, oall, calendar_name, rid=rid)
            else:
                occ = _occurrence(ev, uid, etz, s, duration, all_day, calendar_name, rid=rid)
            if series_cancelled:
                occ["status"] = "CANCELLED"
            out.append(occ)
    for key, ev in overrides.items():  # a moved instance whose master is missing or out of the window
        if key in used:
            continue
        uid, rid_v = key
        otz, ostart, odur, oall = _span(ev, tz)
        if (ostart + odur).replace(tzinfo=otz) < lo_abs or ostart.replace(tzinfo=otz) > hi_abs:
            continue
        rid_wall, _ = _wall(rid_v, otz)
        out.append(_occurrence(ev, uid, otz, ostart, odur, oall, calendar_name, rid=rid_wall.replace(tzinfo=otz)))
    out.sort(key=lambda o: (datetime.fromisoformat(o["start"]), o["external_id"]))
    return out
