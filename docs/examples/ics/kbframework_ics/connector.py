"""The ``ics`` source type: a venue's published programme (an iCalendar feed) as event documents.

fetch  GET the feed through the host's SSRF-guarded client, parse it (calendar.py): one
       RawRecord per event occurrence, recurring events expanded ``weeks_ahead`` weeks.
normalize  one occurrence → a DocumentDraft with document_role "event" and the columns
       event_start, event_end, venue, city, source_url, tags (CATEGORIES); a cancelled
       event is ``published=False``, so the host purges it.

A feed has no "changed since" query: ``fetch_changed`` returns every occurrence and the
host's freshness rule (LAST-MODIFIED, else DTSTAMP, as ``source_modified_at``) and the
text hash decide what is re-embedded. Occurrences that left the feed are purged by a full
sync (``kbf source sync ID --full``).
"""
from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import requests

from kbframework import ConnectorAuthError, SourceUnavailable
from kbframework import BlockedAddress, ResponseTooLarge, safe_get
from kbframework import DocumentDraft, RawRecord, SourceConnector
from kbframework_ics.calendar import FeedError, parse_feed
from kbframework_ics.schema import IcsConfig

MAX_FEED_BYTES = 10_000_000


def now() -> datetime:
    """The connector's clock (a test may replace it to freeze time)."""
    return datetime.now(timezone.utc)


def feed_url(url: str) -> str:
    return "https://" + url[len("webcal://"):] if url.lower().startswith("webcal://") else url


def split_location(location: str | None) -> tuple[str | None, str | None]:
    """``"Dom omladine, Makedonska 22, 11000 Beograd"`` → ("Dom omladine", "Beograd").
    The first part is the venue; with three or more parts, the last one (without its postal
    code) is the city. A two-part location may be "Room, Venue": no city from it."""
    parts = [p.strip() for p in (location or "").split(",") if p.strip()]
    if not parts:
        return None, None
    city = None
    if len(parts) >= 3:
        city = re.sub(r"^\s*[A-Z]{0,3}-?\d[\d\s-]*", "", parts[-1]).strip() or None
    return parts[0], city


class IcsConnector(SourceConnector):
    name = "ics"
    label = "iCalendar feed (.ics)"
    config_schema = IcsConfig
    supports_sync = True

    # ------------------------------------------------------------------ fetching

    def _download(self, config, ctx) -> bytes:
        url = feed_url(config["url"])
        try:
            r = safe_get(url, allow_private=ctx.allow_private_network, max_bytes=MAX_FEED_BYTES,
                         headers={"Accept": "text/calendar, */*;q=0.5"})
        except BlockedAddress as exc:
            raise SourceUnavailable(f"{exc.message} (settings: allow_private_network)") from None
        except ResponseTooLarge:
            raise SourceUnavailable(f"The feed {url} is larger than {MAX_FEED_BYTES} bytes.") from None
        except requests.RequestException as exc:
            raise SourceUnavailable(f"The feed {url} could not be reached: {exc}") from None
        if r.status_code in (401, 403):
            raise ConnectorAuthError(f"The feed {url} refused access (HTTP {r.status_code}).")
        if r.status_code != 200:
            raise SourceUnavailable(f"The feed {url} answered HTTP {r.status_code}.")
        return r.content

    def _occurrences(self, config, ctx) -> list[dict]:
        data = self._download(config, ctx)
        try:
            return parse_feed(data, now=now(), weeks_ahead=int(config.get("weeks_ahead") or 12),
                              keep_past_days=int(config.get("keep_past_days") or 0),
                              default_tz=config.get("timezone") or ctx.timezone or "UTC")
        except FeedError as exc:
            raise SourceUnavailable(f"{feed_url(config['url'])}: {exc}") from None

    @staticmethod
    def _record(occ: dict) -> RawRecord:
        mod = datetime.fromisoformat(occ["modified"]) if occ.get("modified") else None
        return RawRecord(external_id=occ["external_id"], payload=occ, kind="event",
                         source_modified_at=mod, url=occ.get("url"))

    def fetch_all(self, config, ctx):
        for occ in self._occurrences(config, ctx):
            yield self._record(occ)

    def fetch_changed(self, config, since, ctx):
        # no server-side "changed since": new recurrences enter the window with an old
        # LAST-MODIFIED, so everything is offered and the host's freshness rule decides
        return self.fetch_all(config, ctx)

    def fetch_one(self, config, external_id, ctx):
        return next((self._record(o) for o in self._occurrences(config, ctx)
                     if o["external_id"] == str(external_id)), None)

    # ------------------------------------------------------------------ mapping

    def normalize(self, record, config, ctx) -> DocumentDraft:
        e = record.payload
        start = datetime.fromisoformat(e["start"])
        end = datetime.fromisoformat(e["end"]) if e.get("end") else None
        venue, city = split_location(e.get("location"))
        venue = venue or config.get("venue")
        city = config.get("city") or city
        title = e["summary"]
        lines = [f"# {title}", "", f"When: {when_text(start, end, e.get('all_day'), ctx.timezone)}"]
        if e.get("location") or venue:
            lines.append(f"Where: {e.get('location') or venue}" + (f" ({city})" if city and city not in
                                                                   (e.get("location") or "") else ""))
        if e.get("categories"):
            lines.append("Categories: " + ", ".join(e["categories"]))
        if e.get("organizer"):
            lines.append(f"Organizer: {e['organizer']}")
        if e.get("url"):
            lines.append(f"More: {e['url']}")
        if e.get("description"):
            lines += ["", e["description"]]
        return DocumentDraft(
            title=title,
            normalized_content="\n".join(lines).strip(),
            raw_content=e.get("description") or None,
            type="ics_event",
            document_role="event",
            external_id=record.external_id,
            source_url=e.get("url") if (e.get("url") or "").startswith(("http://", "https://")) else None,
            source_modified_at=record.source_modified_at,
            event_start=start,
            event_end=end,
            venue=venue,
            city=city,
            tags=[c.lower() for c in e.get("categories") or []],
            metadata={k: e.get(k) for k in ("uid", "recurrence_id", "all_day", "location", "calendar",
                                            "timezone", "status") if e.get(k) is not None},
            published=e.get("status") != "CANCELLED",
        )


def when_text(start: datetime, end: datetime | None, all_day: bool, tz_name: str | None) -> str:
    """Dates in the organization's zone, the way a visitor asks about them. All-day events
    are calendar dates (DTEND is exclusive), never shifted between zones."""
    if all_day:
        first = start.date()
        last = (end - timedelta(days=1)).date() if end and end - start > timedelta(days=1) else first
        return f"{first:%A %-d %B %Y}" + (f" – {last:%A %-d %B %Y}" if last != first else "") + " (all day)"
    tz = ZoneInfo(tz_name or "UTC")
    s = start.astimezone(tz)
    text = f"{s:%A %-d %B %Y}, {s:%H:%M}"
    if end:
        e = end.astimezone(tz)
        text += f"–{e:%H:%M}" if e.date() == s.date() else f" – {e:%A %-d %B %Y}, {e:%H:%M}"
    return text
