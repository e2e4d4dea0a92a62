"""The ics connector on the real host: embedded PostgreSQL + pgvector and Redis from
kbframework.testing; only the venue's web server is faked (kb_http_server serves the
sample programme.ics over HTTP)."""
from datetime import datetime, timezone
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from kbframework import ValidationFailed
from kbframework_ics.calendar import parse_feed

SAMPLE = (Path(__file__).parent / "programme.ics").read_bytes()
BELGRADE = ZoneInfo("Europe/Belgrade")
NOW = datetime(2026, 3, 2, 9, 0, tzinfo=BELGRADE)  # a Monday; the sample's events are in March 2026


def utc(*a):
    return datetime(*a, tzinfo=timezone.utc)


@pytest.fixture
def frozen(monkeypatch):
    """The connector expands recurrences from "now": freeze it at NOW."""
    monkeypatch.setattr("kbframework_ics.connector.now", lambda: NOW)
    return NOW


@pytest.fixture
def venue(kb_http_server):
    """The venue's web server: /programme.ics, replaceable per test through ``venue.feed``."""
    state = {"feed": SAMPLE, "status": 200}

    def handler(method, path, headers, body):
        if path != "/programme.ics":
            return 404, {}, "not found"
        return state["status"], {"Content-Type": "text/calendar; charset=utf-8"}, state["feed"]

    srv = kb_http_server(handler)
    srv.state = state
    return srv


# --------------------------------------------------------------------------- the host loads it


def test_the_host_loaded_the_plugin(kb_admin):
    data = kb_admin.get("/api/admin/v1/plugins").get_json()
    mine = [p for p in data["plugins"] if p["name"] == "ics"]
    assert mine, "not loaded: is the distribution installed (pip install -e .) and KB_LOAD_PLUGINS unset?"
    assert not mine[0].get("error"), mine[0].get("error")
    assert mine[0]["hooks"] == ["kb_source_types"]
    assert "ics" in data["source_types"]
    types = {t["name"]: t for t in kb_admin.get("/api/admin/v1/source-types").get_json()["items"]}
    assert {f["name"] for f in types["ics"]["fields"]} >= {"url", "venue", "city", "weeks_ahead"}


# --------------------------------------------------------------------------- parsing, no services


def test_the_feed_becomes_occurrences():
    occ = {o["external_id"]: o for o in parse_feed(SAMPLE, now=NOW, weeks_ahead=6, keep_past_days=0)}
    mic = sorted(k for k in occ if k.startswith("open-mic@"))
    # weekly on Thursdays from 5 March to 9 April; 19 March is an EXDATE
    assert [k.split("/")[1] for k in mic] == ["20260305T190000Z", "20260312T190000Z", "20260326T190000Z",
                                               "20260402T180000Z", "20260409T180000Z"]
    # 20:00 in Belgrade before and after the switch to summer time (29 March)
    assert datetime.fromisoformat(occ[mic[0]]["start"]) == utc(2026, 3, 5, 19)
    assert datetime.fromisoformat(occ[mic[3]]["start"]) == utc(2026, 4, 2, 18)
    # the RECURRENCE-ID override moves one instance and renames it
    poetry = occ["open-mic@dom-omladine.example/20260326T190000Z"]
    assert poetry["summary"] == "Open mic night: poetry special"
    assert datetime.fromisoformat(poetry["start"]) == utc(2026, 3, 26, 20)
    jazz = occ["jazz-trio-balkan-2026@dom-omladine.example"]
    assert datetime.fromisoformat(jazz["start"]) == utc(2026, 3, 13, 20)
    assert datetime.fromisoformat(jazz["end"]) == utc(2026, 3, 13, 22, 30)
    assert jazz["categories"] == ["Jazz", "Concert"] and "1200 RSD" in jazz["description"]
    # floating time: read in the feed's X-WR-TIMEZONE
    assert datetime.fromisoformat(occ["little-prince@dom-omladine.example"]["start"]) == utc(2026, 3, 15, 10)
    # UTC start with a DURATION
    radio = occ["radio-talk@dom-omladine.example"]
    assert datetime.fromisoformat(radio["end"]) == utc(2026, 3, 10, 18, 30)
    fair = occ["book-fair-weekend@dom-omladine.example"]
    assert fair["all_day"] and fair["start"].startswith("2026-03-21T00:00") and fair["end"].startswith("2026-03-23")
    assert occ["film-club-stalker@dom-omladine.example"]["status"] == "CANCELLED"
    assert "winter-concert@dom-omladine.example" not in occ  # ended in January
    # a longer look back brings the 26 February instance in, a shorter window drops April
    more = {o["external_id"] for o in parse_feed(SAMPLE, now=NOW, weeks_ahead=3, keep_past_days=5)}
    assert "open-mic@dom-omladine.example/20260226T190000Z" in more
    assert "open-mic@dom-omladine.example/20260402T180000Z" not in more


def test_not_a_calendar_is_a_clear_error():
    from kbframework_ics.calendar import FeedError

    with pytest.raises(FeedError, match="not an iCalendar feed"):
        parse_feed(b"<html><body>Our programme</body></html>", now=NOW)


# --------------------------------------------------------------------------- sync and answers


def test_sync_makes_event_documents_that_answer(kb_source, venue, frozen):
    src = kb_source("ics", {"url": venue.url + "/programme.ics", "weeks_ahead": 6, "keep_past_days": 0,
                            "venue": "Dom omladine"})
    result = src.sync()
    assert result["status"] == "ok", result
    docs = {d["external_id"]: d for d in src.documents()}
    assert len(docs) == 9  # 10 occurrences in the window; the cancelled film club is not kept
    assert "film-club-stalker@dom-omladine.example" not in docs
    assert all(d["document_role"] == "event" and d["status"] == "active" and d["chunk_count"] >= 1
               for d in docs.values())
    jazz = docs["jazz-trio-balkan-2026@dom-omladine.example"]
    assert jazz["title"] == "Jazz night: Trio Balkan" and jazz["type"] == "ics_event"
    assert jazz["event_start"] == "2026-03-13T20:00:00+00:00" and jazz["event_end"] == "2026-03-13T22:30:00+00:00"
    assert (jazz["venue"], jazz["city"]) == ("Dom omladine", "Beograd")
    assert jazz["source_url"] == "https://dom-omladine.example/program/jazz-trio-balkan"
    assert jazz["tags"] == ["jazz", "concert"]
    assert "When: Friday 13 March 2026, 21:00–23:30" in jazz["normalized_content"]
    radio = docs["radio-talk@dom-omladine.example"]
    assert radio["venue"] == "Dom omladine" and radio["city"] is None  # no LOCATION: the configured venue
    assert docs["book-fair-weekend@dom-omladine.example"]["venue"] == "Velika sala"

    # the built-in "default" preset shows event cards in every installation (an events site
    # would pick the "events" preset of kbframework-preset-events)
    out = src.ask("When does the Trio Balkan play jazz?", mode="default", now=NOW)
    assert out["sources"][0]["document_title"] == "Jazz night: Trio Balkan"
    assert "13 March" in out["answer"]
    card = next(c for c in out["cards"] if c["title"] == "Jazz night: Trio Balkan")
    assert card["type"] == "event" and card["venue"] == "Dom omladine" and card["date"].startswith("2026-03-13")
    assert card["url"] == "https://dom-omladine.example/program/jazz-trio-balkan"

    out = src.ask("Is there a poetry open mic?", now=NOW)
    assert out["sources"][0]["document_title"] == "Open mic night: poetry special"
    # event_start/event_end are real columns: the host's date filter narrows on them
    out = src.ask("What's on on Saturday 21 March?", now=NOW)
    assert {s["document_title"] for s in out["sources"]} == {"Small press book fair"}


def test_resync_changes_cancellations_and_removals(kb_source, venue, frozen):
    src = kb_source("ics", {"url": venue.url + "/programme.ics", "weeks_ahead": 6, "keep_past_days": 0})
    assert src.sync()["status"] == "ok"
    again = src.sync(kind="incremental")
    assert again["status"] == "ok" and again["stats"]["embedded_documents"] == 0  # nothing changed
    # the venue cancels the jazz night (newer LAST-MODIFIED) and drops the radio talk
    feed = SAMPLE.decode().replace("\r\n", "\n")  # whatever line ends a checkout gave the sample
    feed = feed.replace("LAST-MODIFIED:20260201T100000Z\nDTSTART;TZID=Europe/Belgrade:20260313T210000",
                        "LAST-MODIFIED:20260301T100000Z\nSTATUS:CANCELLED\n"
                        "DTSTART;TZID=Europe/Belgrade:20260313T210000")
    start = feed.index("BEGIN:VEVENT\nUID:radio-talk@")
    feed = feed[:start] + feed[feed.index("END:VEVENT\n", start) + len("END:VEVENT\n"):]
    assert "STATUS:CANCELLED\nDTSTART;TZID=Europe/Belgrade:20260313T210000" in feed and "radio-talk@" not in feed
    venue.state["feed"] = feed.encode()
    res = src.sync(kind="incremental")
    assert res["status"] == "ok" and res["stats"]["unpublished"] == 1
    left = {d["external_id"] for d in src.documents()}
    assert "jazz-trio-balkan-2026@dom-omladine.example" not in left
    assert "radio-talk@dom-omladine.example" in left  # an incremental sync does not purge
    res = src.sync(kind="full")
    assert res["status"] == "ok" and res["stats"]["purged"] == 1
    assert "radio-talk@dom-omladine.example" not in {d["external_id"] for d in src.documents()}


def test_feed_failures_mark_the_source(kb_source, venue, frozen):
    src = kb_source("ics", {"url": venue.url + "/programme.ics"})
    venue.state["status"] = 503
    res = src.sync()
    assert res["status"] == "error" and "HTTP 503" in res["error"]
    assert src.info()["status"] == "error" and "HTTP 503" in src.info()["last_error"]
    venue.state.update(status=200, feed=b"<html>Programme coming soon</html>")
    res = src.sync()
    assert res["status"] == "error" and "not an iCalendar feed" in res["error"]
    venue.state["feed"] = SAMPLE
    assert src.sync()["status"] == "ok" and src.info()["status"] == "active"


def test_bad_config_is_refused(kb_source):
    with pytest.raises(ValidationFailed) as exc:
        kb_source("ics", {"url": "ftp://example.com/programme.ics"})
    assert "url" in exc.value.details
    with pytest.raises(ValidationFailed) as exc:
        kb_source("ics", {"url": "https://example.com/p.ics", "timezone": "Mars/Olympus"})
    assert "timezone" in exc.value.details
