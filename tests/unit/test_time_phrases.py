"""Time phrases a visitor actually types: names that are not dates, habits that are not dates,
nights that begin in the evening, a weekday asked on that very day, "now", and "free".

Calendar (2026, Europe/Belgrade and New York, cut-off 05:00): Wed 15 April, Thu 16, Fri 17,
Sat 18, Sun 19, Mon 20. Ranges are local wall-clock times compared as exact instants.
"""
from __future__ import annotations

from datetime import datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest

from kbframework.retrieval.phrases import find_free, find_prices
from kbframework.retrieval.temporal import parse_temporal

BEL = "Europe/Belgrade"
NY = "America/New_York"


def L(tz, mo, d, h=0, mi=0):
    return datetime(2026, mo, d, h, mi, tzinfo=ZoneInfo(tz))


WED_1400 = (4, 15, 14, 0)
WED_2330 = (4, 15, 23, 30)
FRI_1000 = (4, 17, 10, 0)
FRI_2300 = (4, 17, 23, 0)
SAT_0200 = (4, 18, 2, 0)   # Friday's night is under way
SAT_1500 = (4, 18, 15, 0)
SUN_2100 = (4, 19, 21, 0)

# --------------------------------------------------------------------------- nights
# (asked at, query, start (m, d, h), end (m, d, h))
NIGHTS = [
    (WED_1400, "saturday night", (4, 18, 18), (4, 19, 5)),
    (WED_1400, "what's on saturday night?", (4, 18, 18), (4, 19, 5)),
    (WED_1400, "Saturday night in Belgrade", (4, 18, 18), (4, 19, 5)),
    (WED_1400, "on friday night", (4, 17, 18), (4, 18, 5)),
    (WED_1400, "this friday night", (4, 17, 18), (4, 18, 5)),
    (WED_1400, "fri night", (4, 17, 18), (4, 18, 5)),
    (WED_1400, "sat nite", (4, 18, 18), (4, 19, 5)),
    (WED_1400, "sunday evening", (4, 19, 18), (4, 20, 5)),
    (WED_1400, "next saturday night", (4, 25, 18), (4, 26, 5)),
    (WED_1400, "tomorrow night", (4, 16, 18), (4, 17, 5)),
    (WED_1400, "tomorrow evening", (4, 16, 18), (4, 17, 5)),
    (WED_1400, "anything tomorrow night?", (4, 16, 18), (4, 17, 5)),
    (WED_2330, "tomorrow night", (4, 16, 18), (4, 17, 5)),
    (SAT_0200, "tomorrow night", (4, 18, 18), (4, 19, 5)),  # event day Friday: tomorrow = Sat
    (SAT_0200, "friday night", (4, 17, 18), (4, 18, 5)),  # the night under way, whole
    (SAT_0200, "saturday night", (4, 18, 18), (4, 19, 5)),
    (FRI_2300, "friday night", (4, 17, 18), (4, 18, 5)),
    (SUN_2100, "sunday night", (4, 19, 18), (4, 20, 5)),
]


@pytest.mark.parametrize("tz", [BEL, NY])
@pytest.mark.parametrize("asked,query,start,end", NIGHTS, ids=[f"{a}-{q}" for a, q, _, _ in NIGHTS])
def test_nights_run_from_18_to_the_cutoff(tz, asked, query, start, end):
    r = parse_temporal(query, L(tz, *asked), tz)
    assert r is not None, query
    assert (r.start, r.end) == (L(tz, *start), L(tz, *end)), (
        query, r.start.astimezone(ZoneInfo(tz)), r.end.astimezone(ZoneInfo(tz)))


def test_night_with_midnight_cutoff_ends_at_midnight():
    r = parse_temporal("saturday night", L(BEL, *WED_1400), BEL, cutoff=time(0))
    assert (r.start, r.end) == (L(BEL, 4, 18, 18), L(BEL, 4, 19, 0))


def test_tonight_and_daytime_parts_keep_their_ranges():
    now = L(BEL, *WED_1400)
    r = parse_temporal("tonight", now, BEL)
    assert (r.start, r.end, r.kind) == (now, L(BEL, 4, 16, 5), "tonight")
    r = parse_temporal("tomorrow morning", now, BEL)
    assert (r.start, r.end) == (L(BEL, 4, 16, 5), L(BEL, 4, 17, 5))
    r = parse_temporal("saturday", now, BEL)
    assert (r.start, r.end) == (L(BEL, 4, 18, 5), L(BEL, 4, 19, 5))


# --------------------------------------------------------------------------- same day
SAME_DAY = [
    (FRI_1000, "friday", (4, 17, 5), (4, 18, 5)),
    (FRI_1000, "what's on friday?", (4, 17, 5), (4, 18, 5)),
    (FRI_1000, "this friday", (4, 17, 5), (4, 18, 5)),
    (FRI_1000, "on Friday", (4, 17, 5), (4, 18, 5)),
    (FRI_2300, "friday", (4, 17, 5), (4, 18, 5)),
    (SAT_0200, "friday", (4, 17, 5), (4, 18, 5)),  # still Friday's event day
    (SAT_1500, "saturday", (4, 18, 5), (4, 19, 5)),
    (SAT_1500, "parties on saturday", (4, 18, 5), (4, 19, 5)),
    (SAT_1500, "saturday of this week", (4, 18, 5), (4, 19, 5)),
    (SUN_2100, "sunday", (4, 19, 5), (4, 20, 5)),
]


@pytest.mark.parametrize("tz", [BEL, NY])
@pytest.mark.parametrize("asked,query,start,end", SAME_DAY, ids=[f"{a}-{q}" for a, q, _, _ in SAME_DAY])
def test_weekday_asked_on_that_day_is_the_whole_event_day(tz, asked, query, start, end):
    now = L(tz, *asked)
    r = parse_temporal(query, now, tz)
    assert r is not None, query
    assert (r.start, r.end) == (L(tz, *start), L(tz, *end)), query
    assert r.start < now  # not "from now"


def test_until_weekday_still_starts_now():
    now = L(BEL, *FRI_1000)
    r = parse_temporal("until friday", now, BEL)
    assert (r.start, r.end) == (now, L(BEL, 4, 18, 5))


# --------------------------------------------------------------------------- now
NOW_PHRASES = ["now", "what's on now?", "right now", "what's happening right now",
               "what's happening at the moment?", "anything on at the moment", "at this moment",
               "Now?", "parties now"]


@pytest.mark.parametrize("query", NOW_PHRASES)
def test_now_means_under_way_at_this_moment(query):
    now = L(BEL, *SAT_0200)
    r = parse_temporal(query, now, BEL)
    assert r is not None, query
    assert r.kind == "now"
    assert (r.start, r.end) == (now, now + timedelta(minutes=1))


def test_now_is_weak_beside_another_time():
    r = parse_temporal("at the moment I'm looking for saturday", L(BEL, *WED_1400), BEL)
    assert r.kind == "weekday" and r.phrase == "saturday"


# --------------------------------------------------------------------------- not dates
# Names of products, shows and songs, habits of the business, and other idioms: no intent.
# (The Duckling negatives and tests/unit/test_temporal.py NEGATIVES come on top of these.)
NOT_DATES = [
    # product names
    "Weekender holdall",
    "weekender holdall in black",
    "do you have the Weekender holdall?",
    "weekend bag",
    "is the weekend bag waterproof?",
    "Weekend Warrior backpack",
    "Sunday Best dress",
    "Sunday Morning vinyl",
    "sunday morning vinyl",
    "Friday Feeling t-shirt",
    "friday feeling tee",
    "Midnight Sun candle",
    "Monday Blues hoodie",
    "saturday night live poster",
    "Saturday Night Live poster",
    "tomorrowland poster",
    # shows
    "Late Show poster",
    "The Late Show poster",
    "a Late Show poster please",
    "late show poster",
    "Tonight Show tickets",
    "Friday Night Dinner box set",
    "Tomorrow's World dvd",
    "The Weekend Edition",
    # songs and albums
    "Tonight Tonight by Smashing Pumpkins",
    "the song tonight tonight",
    "Monday Monday record",
    "Ruby Tuesday single",
    "Eight Days a Week vinyl",
    "A Hard Day's Night poster",
    "Manic Monday cd",
    "The Weeknd tickets",
    # habits of the business (plural weekdays / weekends)
    "do you deliver on Sundays?",
    "do you ship on saturdays",
    "are you open on mondays?",
    "open sundays?",
    "is the shop closed on sundays",
    "do you deliver on weekends?",
    "are you open on weekends",
    "what are your opening hours on saturdays?",
    "do you usually have techno on fridays?",
    "do you answer emails on weekends",
    "can you deliver every saturday?",
    # idioms
    "not at the moment, thanks",
    "nothing at the moment",
    "buy now",
    "available now",
]


@pytest.mark.parametrize("query", NOT_DATES)
def test_not_dates(query):
    r = parse_temporal(query, L(BEL, *WED_1400), BEL)
    assert r is None, f"{query!r} -> {r}"


def test_not_dates_table_is_big_enough():
    assert len(set(NOT_DATES)) >= 40


# the same words, used as times, stay times
STILL_DATES = [
    ("what's on fridays?", "on fridays"),
    ("every friday", "every friday"),
    ("any parties saturday night in belgrade?", "saturday night"),
    ("weekend parties", "weekend"),
    ("Sat & Sun brunch", "Sat"),
    ("tonight's lineup", "tonight's"),
    ("sunday roast", "sunday"),
    ("are you open on sunday?", "on sunday"),  # one day, not a habit
]


@pytest.mark.parametrize("query,phrase", STILL_DATES)
def test_time_words_outside_names_stay_times(query, phrase):
    r = parse_temporal(query, L(BEL, *WED_1400), BEL)
    assert r is not None and r.phrase == phrase, (query, r)


# --------------------------------------------------------------------------- free
FREE = [
    ("any free events tonight?", "free"),
    ("free entry on saturday", "free entry"),
    ("no cover charge parties", "no cover charge"),
    ("anything with no cover this weekend?", "no cover"),
    ("no-cover parties", "no-cover"),
    ("anything free this weekend?", "anything free"),
    ("what's free tonight", "what's free"),
    ("free things to do", "free things"),
    ("events with free admission", "free admission"),
    ("are there any free parties?", "free"),
    ("where can I go for free", "for free"),
    ("parties that are free", "parties that are free"),
    ("free techno parties", "free techno parties"),
    ("free of charge events", "free of charge"),
    ("no entry fee tonight", "no entry fee"),
]
NOT_FREE = ["is the jazz evening free?", "is entry free?", "do you offer free shipping?",
            "free shipping over 60?", "gluten-free cake", "I'm free tonight, anything on?",
            "are you free tonight", "feel free to tell me", "free returns?", "free gift wrapping",
            "free size dress", "duty free", "hands-free headset", "free delivery on sundays",
            "set me free vinyl", "free jazz", "sugar free gum", "I'm free now, anything on saturday?"]


@pytest.mark.parametrize("query,word", FREE)
def test_free_is_price_zero(query, word):
    got = find_free(query)
    assert len(got) == 1, query
    assert (got[0].field, got[0].value) == ("price_max", 0.0)
    assert word.lower() in got[0].matched.lower()
    assert query[got[0].start:got[0].end] == got[0].matched


@pytest.mark.parametrize("query", NOT_FREE)
def test_free_that_is_not_a_price(query):
    assert find_free(query) == [], query


def test_free_leaves_explicit_prices_alone():
    assert find_free("under €20") == [] and find_prices("free events under €20")[0].value == 20
