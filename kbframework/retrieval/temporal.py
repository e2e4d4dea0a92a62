"""Rule-based temporal intent parser for chat queries (no LLM, no database, no network).

Why this exists
---------------
Many questions asked of a nightlife / events knowledge base carry a time frame: "what's on
tonight?", "parties this weekend", "anything on April 24?", "what happened last weekend?".
``parse_temporal`` turns the *first* such expression into an explicit, timezone-correct
range ``[start, end)`` (aware UTC datetimes, end exclusive) that retrieval uses to filter
event documents. It runs on every chat request, so it is a table of pre-compiled regexes
with small handlers (typically well under 1 ms per query), not a general date parser.

Night cut-off ("event days")
----------------------------
At a nightlife site a "day" does not end at midnight: a party from Friday 23:00 to
Saturday 04:00 is a *Friday* party, and someone asking "what's on tonight?" at 02:00 on
Saturday still means the Friday night that is under way. So a day runs from the night
cut-off (default 05:00 local) to the next cut-off. The *event day* of an instant is the
calendar date of ``local_time - cutoff``; at Saturday 02:00 the event day is Friday, and
at Monday 03:00 it is still Sunday. ``cutoff=time(0, 0)`` gives plain calendar days.

All day boundaries are built in the local zone (``zoneinfo``) as ``date + cutoff`` and only
then converted to UTC, so a day that contains a daylight-saving change is correctly 23 or
25 hours long (never "start + 24 h").

Overlap, not containment
------------------------
Events have a start and an end and may span a cut-off, so the retrieval filter should be
an *overlap* test against the range: ``event_start < range_end AND
coalesce(event_end, event_start) >= range_start`` (see ``event_overlap_sql_params``). A
party that started at 22:00 and is still running at 01:00 matches "tonight" asked at 01:00.

Semantics (``now`` local, ``ed`` = its event day, weeks start on Monday)
-------------------------------------------------------------------------
* "tonight", "today", "this evening/morning/afternoon": now -> next cut-off (the end of the
  current event day). ``kind`` "tonight" / "today".
* "now", "right now", "at the moment", "at this moment": the events under way at this
  instant, ``[now, now + 1 min)`` (the overlap filter keeps what started before and ends
  after). ``kind`` "now". A *weak* match: used only when nothing else in the query is
  temporal; idioms such as "for now", "by now", "buy now", "available now", "not at the
  moment" are ignored.
* "tomorrow": the event day ``ed + 1``, cut-off to cut-off. "tomorrow night/evening":
  18:00 of that day -> its cut-off. "the day after tomorrow": ``ed + 2``.
* "this weekend" / "the weekend" / "weekend(s)" / "this coming weekend": Saturday cut-off
  (or Friday 18:00 local with ``weekend_starts_friday``) -> Monday cut-off of the current
  week; when the weekend is already under way, from now. Monday 03:00 is still Sunday's
  event day, so "this weekend" then means now -> Monday 05:00.
* "next weekend" / "the following weekend": the weekend of *next* week, i.e. the upcoming
  (or current) weekend + 7 days. English is ambiguous here ("next weekend" said on a
  Tuesday may mean the coming one); we pick the unambiguous rule. "this weekend" covers
  the coming one.
* Weekday names ("friday", "on saturday", "this friday", "fridays", "every friday",
  "fri", "Sat." ...): the upcoming event day with that weekday, *today included* while
  its event day lasts -- and then the *whole* event day, not from now (an event that began
  at 20:00 is still "on friday" at 23:00). Asked at Saturday 02:00 (event day Friday),
  "friday" = Friday 05:00 -> Saturday 05:00 and "saturday" = Saturday 05:00 -> Sunday 05:00.
  "<weekday> night/evening": 18:00 of that event day -> its cut-off ("saturday night" =
  Saturday 18:00 -> Sunday 05:00).
  "next friday": the Friday of *next* week (Monday-based), cut-off to cut-off.
  "friday after next": the upcoming Friday (today excluded) + 7 days.
  "friday of this/next/last week", "last week's friday", "friday next week": that week's.
  "until/till/by friday": from now to the end of that Friday event day.
* "this week": now -> next Monday cut-off. "next week"/"the following week": next week's
  Monday cut-off -> the Monday after. "coming/upcoming week": the next 7 event days from
  now (kind "next_days"); "next 3 days" / "next few days": now -> cut-off of ``ed + N``.
* "this month": now -> first day of next month at cut-off. "next month": that month,
  cut-off to cut-off. "this/next year" likewise. "beginning/middle/end of <week|month>":
  Mon-Wed / Wed-Thu / Fri-Sun of the week, days 1-10 / 11-20 / 21-end of the month (for
  a year the whole year). "3 fridays from now" / "2 thursdays ago": the Nth occurrence.
* Explicit dates: "April 24", "24 April", "Apr 24th", "the 3rd of March", "March 3rd 2027",
  "3 March 2027", "24/04" (day/month, European; "2/15" is read as m/d only because 15
  cannot be a month), "24.04.2026", "24.04." (the trailing dot is required without a year,
  "24.04" alone is a decimal number), "2026-04-24", "24-04-2026", "31-Oct-74": that event
  day, cut-off to cut-off. Without a year: the next occurrence (this year if that event
  day has not fully passed, else next year). With a year in the past: ``past=True``.
  "on the 24th" / "the 24th" (digit ordinal followed by end of phrase): next 24th.
  "20th of next month". "first friday of May", "last weekend of October".
* Date ranges: "from April 24 to April 26", "April 24-26", "24-26 April",
  "from the 13th to the 15th of July", "24.04.-26.04.": first day start -> last day end.
* Month names with a preposition/modifier ("in March", "during May", "next March",
  "early/mid/late March", "end of April", "October 2026", "2026-10"): that month (or
  its part); the current month is clipped to start now.
* Past: "yesterday", "last night" (= the previous event day: asked at Saturday 02:00,
  "last night" is Thursday's event day, because Friday night is still "tonight"),
  "earlier today", "last <weekday>", "last weekend"/"this past weekend" (the weekend of the
  previous week), "last week", "last month", "last year", "past 3 days" -> ``past=True``.

Which expression wins
---------------------
The earliest expression in the query wins; among overlapping matches (e.g. "last weekend"
inside "last weekend of October") and a weekday glued to a date ("Fri, Jul 18",
"Tuesday the 19th") the most specific one wins (explicit dates > relative days/weeks >
month names), then the longest.

Precision heuristics (names and quantities are not dates)
---------------------------------------------------------
* Word boundaries everywhere: "Weekender bag", "sunglasses", "wedding" never match.
* Products, shows and songs: a time word followed (within two words) by a product noun
  ("weekend bag", "Sunday Morning vinyl", "saturday night live poster") or said twice
  ("Tonight Tonight", "Monday Monday") is a name, not a date.
* Habits: a plural weekday or "weekends" ("on Sundays", "every saturday") in a question
  about how the business works ("do you deliver ...", "open", "shipping", "usually") is not
  a date: "do you deliver on Sundays?" asks about every Sunday. Without such a marker
  ("what's on fridays?") it is the upcoming one.
* Numbers alone never make a date: a date needs a month name, a d/m or d.m(.y) pattern with
  valid ranges, or ISO. "24 pack", "pack of 24", "size 24", "24 hours", "2025" are not
  dates. Numeric dates followed by a unit ("1/2 hour", "4/5 stars") or preceded by
  "size/page/rated/version/..." or a currency sign are ignored, as are "24/7", "9/11",
  "50/50" and common fractions (unless preceded by "on", "from", a weekday, ...).
  Dashed d-m without year ("15-2") is never a date (scores, ranges, sizes).
* Titles: a capitalised time word that belongs to a Capitalised multi-word title is not
  temporal: a capitalised neighbour on the left that is not at sentence start ("Bloody
  Sunday", "tickets for The Weekend concert", "The Weekend" when "Weekend" itself is
  capitalised mid-sentence), or a capitalised word on the right, possibly after
  "Night"/"Morning"-type words or after an "I"/"I'm" followed by small connector words
  ("Friday Night Lights", "Monday Blues mug", "Tuesday's Gone", "Friday I'm in Love",
  "Tonight Show"). "Friday Night" alone, "on Friday I want ..." or "Friday in Belgrade"
  stay temporal. Known trade-off: "party at Drugstore Saturday" is read as a title.
  Queries written entirely in upper case skip this heuristic.
* Quoted text ("...", '...', curly quotes, guillemets) is never temporal.
* Holiday / idiom prefixes ("Black Friday", "Good Friday", "Cyber Monday", "Easter
  Sunday", "Blue Monday", ...) yield no intent rather than a wrong weekday.
* The ambiguous short forms "sat", "sun", "mon", "wed" ("I sat", "the sun") need a
  temporal context: a modifier or preposition before ("on sat", "next sun"), a range
  ("fri-sun"), a following date/time ("Sun 24", "sat night", "Wed, Feb 13"), or (mon/wed)
  a trailing dot. Unambiguous ones ("fri", "thu", "tue") are accepted alone.
* Lower-case "may" is a month only when the context makes it one ("in may", "may 5th",
  "4th of may"): "this may be", "those 4 may come" are not dates.
* Times of day ("at 8pm", "9:30 - 11:00") are ignored: the granularity is the event day.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, timezone
from typing import Callable, Optional
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from kbframework.retrieval.patterns import compile_on_use

__all__ = ["TemporalIntent", "parse_temporal", "event_overlap_sql_params"]

UTC = timezone.utc
_DEFAULT_CUTOFF = time(5, 0)
_FRIDAY_WEEKEND_START = time(18, 0)


@dataclass
class TemporalIntent:
    """A resolved time frame: ``[start, end)`` as aware UTC datetimes."""

    start: datetime  # aware, UTC
    end: datetime  # aware, UTC, exclusive
    phrase: str  # the matched text, e.g. "this weekend"
    kind: str  # "tonight", "today", "tomorrow", "weekend", "weekday", "date", "past", ...
    past: bool = False  # the user asks about past events
    span: tuple[int, int] = (0, 0)  # character span of ``phrase`` in the query

    def as_dict(self) -> dict:
        return {
            "start": self.start.isoformat(),
            "end": self.end.isoformat(),
            "phrase": self.phrase,
            "kind": self.kind,
            "past": self.past,
            "span": [self.span[0], self.span[1]],
        }


def event_overlap_sql_params(intent: TemporalIntent) -> dict:
    """Bind parameters for the overlap filter.

    Use with ``event_start < :range_end AND coalesce(event_end, event_start) >= :range_start``
    (an event overlaps the range; events without an end are treated as instants).
    """
    return {"range_start": intent.start, "range_end": intent.end}


# --------------------------------------------------------------------------------------
# Vocabulary
# --------------------------------------------------------------------------------------

_WEEKDAY_INDEX = {"mon": 0, "tue": 1, "wed": 2, "thu": 3, "fri": 4, "sat": 5, "sun": 6}
_MONTH_INDEX = {"jan": 1, "feb": 2, "mar": 3, "apr": 4, "may": 5, "jun": 6, "jul": 7,
                "aug": 8, "sep": 9, "oct": 10, "nov": 11, "dec": 12}

_ORD_UNITS = ["first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth",
              "ninth"]
_ORDINAL_WORDS: dict[str, int] = {w: i + 1 for i, w in enumerate(_ORD_UNITS)}
_ORDINAL_WORDS.update({"tenth": 10, "eleventh": 11, "twelfth": 12, "thirteenth": 13,
                       "fourteenth": 14, "fifteenth": 15, "sixteenth": 16,
                       "seventeenth": 17, "eighteenth": 18, "nineteenth": 19,
                       "twentieth": 20, "thirtieth": 30})
_NUM_WORDS = {"a": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
              "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12,
              "fourteen": 14, "thirty": 30, "few": 3, "a few": 3, "couple": 2,
              "a couple": 2, "couple of": 2, "a couple of": 2}

_WD_FULL = r"(?:mon|tues|wednes|thurs|fri|satur|sun)day"
_WD_ABBR = r"(?:tues?|weds?|thu(?:rs?)?|fri|mon|sat|sun)"
_WD = rf"(?:{_WD_FULL}s?|{_WD_ABBR}\.?)"  # as a full token, use with (?![\w]) after
_MON = (r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?"
        r"|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)(?![a-z])")
_ORDW = (r"(?:(?:twenty|thirty)[\s-]?(?:first|second|third|fourth|fifth|sixth|seventh|eighth"
         r"|ninth)|tenth|eleventh|twelfth|thirteenth|fourteenth|fifteenth|sixteenth"
         r"|seventeenth|eighteenth|nineteenth|twentieth|thirtieth|first|second|third|fourth"
         r"|fifth|sixth|seventh|eighth|ninth)")
_DAYNUM = r"(?:0?[1-9]|[12]\d|3[01])(?!\d)"
_SEP_RANGE = r"(?:-|–|—|to|till|til|until|thru|through|and|&)"


def _day(n: str) -> str:
    """A day of month: digits with optional ordinal suffix, or an ordinal word."""
    return (rf"(?:(?P<{n}n>{_DAYNUM})(?P<{n}s>st|nd|rd|th)?(?![a-z])"
            rf"|(?P<{n}w>{_ORDW})(?![a-z]))")


def _year4(n: str) -> str:
    return rf"(?:(?:\s*,\s*|\s+)(?P<{n}>(?:19|20)\d\d)(?!\d))"


_FLAGS = re.I
# words that make a following bare number a quantity, not a day of month
_UNIT_WORDS = frozenset("""
h hr hrs hour hours min mins minute minutes sec secs seconds day days week weeks month months
year years yr yrs cup cups tsp tbsp inch inches ft feet foot kg g gr lb lbs oz ml cl l litre
litres liter liters mile miles km cm mm pack packs pcs pc pieces piece people persons person
guests guest tickets ticket bottles bottle x times stars star points pts percent eur euro
euros usd dollars rsd din off items units size sizes pairs pair boxes box of per
""".split())
_I_FORMS = frozenset(["i", "i'm", "i’m", "i'll", "i’ll", "i've", "i’ve", "i'd", "i’d"])
_TITLE_CONNECTORS = frozenset(["in", "of", "the", "a", "an", "and", "on", "at", "to", "for",
                               "with", "&", "n", "'n'", "my", "your", "me", "you", "love"])
_NONCOUNT = frozenset("""
this next last coming upcoming night nights nite evening evenings morning mornings afternoon
afternoons noon midnight eve weekend weekends am pm ok okay on every each until till by from
for at in and or
monday tuesday wednesday thursday friday saturday sunday mondays tuesdays wednesdays
thursdays fridays saturdays sundays mon tue tues wed thu thur thurs fri sat sun
january february march april may june july august september october november december
jan feb mar apr jun jul aug sep sept oct nov dec today tonight tomorrow
""".split()) | _I_FORMS
_HOLIDAY_PREFIX = frozenset("""
black good cyber easter palm maundy holy ash whit white mothering trinity clean lazarus super
bowl freaky manic blue bloody fat shrove giving branch covenant orthodox ruby stormy casual
""".split())
_COMMON_CORES = frozenset(["weekend", "weekends", "week-end", "week-ends", "tonight", "today",
                           "tomorrow", "yesterday", "tonite"])

# a time word followed by one of these names a product, not a date ("weekend bag", "Sunday
# Morning vinyl", "saturday night live poster"); event words (party, show, brunch) stay out
_PRODUCT_NOUNS = frozenset("""
bag bags holdall holdalls duffel duffle duffels backpack backpacks rucksack tote totes case cases
suitcase luggage dress dresses shirt shirts t-shirt t-shirts tshirt tee tees top tops hoodie hoodies
sweater sweaters jumper jacket jackets coat coats hat hats cap caps beanie scarf mug mugs poster
posters print prints vinyl vinyls record records lp lps album albums cd cds dvd dvds blu-ray bluray
boxset box soundtrack song songs track tracks playlist remix book books novel magazine newspaper
crossword candle candles perfume fragrance scent kit pack bundle sneakers shoes boots sandals
outfit palette lipstick serum cream lotion puzzle merch merchandise sticker stickers badge keyring
edition lamp watch blanket pyjamas pajamas
""".split())
# a plural weekday ("on Sundays", "weekends", "every friday") in a question about a habit of the
# business is not a date: "do you deliver on Sundays?", "are you open on weekends?"
_R_HABIT = compile_on_use(
    r"\b(?:(?:do|does|don['’]?t|doesn['’]?t|do\s+not|does\s+not|can|could)\s+(?:you|u|ya|they|we|it"
    r"|the|your|y['’]all)\b|deliver\w*|ship|ships|shipping|shipped|dispatch\w*|post|posted|courier"
    r"|open|opens|opening|close|closes|closed|closing|work|works|working|operate\w*|staffed"
    r"|answer\w*|reply|replies|respond\w*|hours|usually|normally|generally|always|ever"
    r"|regularly|typically)\b", re.I)
_TITLE_STOP = frozenset("for in at on with and or to from near by of is are any what which".split())
_NIGHT_START = time(18, 0)  # "<day> night" / "tomorrow night" begin in the evening

_R_QUOTED = compile_on_use(r"\"[^\"]*\"|“[^”]*”|„[^“”]*[“”]|«[^»]*»|‹[^›]*›|‘.*?’(?!\w)"
                           r"|(?<![\w])'(?=\S).*?(?<=\S)'(?![\w])")
_R_NEXT_WORD = compile_on_use(r"[ \t]+([^\W_][\w'’&]*)")
_R_PREV_WORD = compile_on_use(r"([^\W_][\w'’&]*)[ \t]+$")


# --------------------------------------------------------------------------------------
# Context: "now", zone, event-day arithmetic
# --------------------------------------------------------------------------------------

def _coerce_cutoff(cutoff) -> time:
    if cutoff is None or cutoff == "":
        return _DEFAULT_CUTOFF
    if isinstance(cutoff, time):
        return cutoff.replace(tzinfo=None)
    if isinstance(cutoff, timedelta):
        secs = int(cutoff.total_seconds()) % 86400
        return time(secs // 3600, (secs // 60) % 60)
    if isinstance(cutoff, (int, float)):
        return time(int(cutoff) % 24, 0)
    if isinstance(cutoff, str):
        m = re.fullmatch(r"\s*(\d{1,2})(?::(\d{2}))?(?::(\d{2}))?\s*", cutoff)
        if m and int(m.group(1)) < 24 and int(m.group(2) or 0) < 60:
            return time(int(m.group(1)), int(m.group(2) or 0))
    return _DEFAULT_CUTOFF


def _zone(tz) -> ZoneInfo:
    if isinstance(tz, ZoneInfo):
        return tz
    try:
        return ZoneInfo(tz or "UTC")
    except (ZoneInfoNotFoundError, ValueError):  # unknown zone name: degrade to UTC rather than break the chat
        return ZoneInfo("UTC")


def _add_months(y: int, m: int, k: int) -> tuple[int, int]:
    t = y * 12 + (m - 1) + k
    return t // 12, t % 12 + 1


def _valid(y: int, m: int, d: int) -> Optional[date]:
    try:
        return date(y, m, d)
    except ValueError:
        return None


def _year2(s: str) -> int:
    y = int(s)
    if len(s) == 2:
        y += 2000 if y < 70 else 1900
    return y


class _Ctx:
    __slots__ = ("q", "zone", "cutoff", "fri", "now", "now_l", "ed", "_quotes", "_allcaps")

    def __init__(self, q: str, now: datetime, tz, cutoff, fri: bool):
        self.q = q
        self.zone = _zone(tz)
        self.cutoff = _coerce_cutoff(cutoff)
        self.fri = bool(fri)
        if now.tzinfo is None:
            now = now.replace(tzinfo=UTC)
        self.now = now.astimezone(UTC)
        self.now_l = self.now.astimezone(self.zone)
        shift = timedelta(hours=self.cutoff.hour, minutes=self.cutoff.minute,
                          seconds=self.cutoff.second)
        self.ed: date = (self.now_l.replace(tzinfo=None) - shift).date()
        self._quotes = None
        self._allcaps = None

    # -- boundaries (all returned in UTC) --
    def at(self, d: date, t: Optional[time] = None) -> datetime:
        return datetime.combine(d, t or self.cutoff, tzinfo=self.zone).astimezone(UTC)

    def day(self, d: date) -> tuple[datetime, datetime]:
        return self.at(d), self.at(d + timedelta(days=1))

    def days(self, d1: date, d2_inclusive: date) -> tuple[datetime, datetime]:
        return self.at(d1), self.at(d2_inclusive + timedelta(days=1))

    def monday(self) -> date:
        return self.ed - timedelta(days=self.ed.weekday())

    def weekend(self, saturday: date) -> tuple[datetime, datetime]:
        start = (self.at(saturday - timedelta(days=1), _FRIDAY_WEEKEND_START) if self.fri
                 else self.at(saturday))
        return start, self.at(saturday + timedelta(days=2))

    def month(self, y: int, m: int) -> tuple[datetime, datetime]:
        ny, nm = _add_months(y, m, 1)
        return self.at(date(y, m, 1)), self.at(date(ny, nm, 1))

    def next_occurrence(self, m: int, d: int) -> Optional[date]:
        for y in range(self.ed.year, self.ed.year + 9):
            dd = _valid(y, m, d)
            if dd is not None and dd >= self.ed:
                return dd
        return None

    # -- text helpers --
    def in_quotes(self, s: int, e: int) -> bool:
        if self._quotes is None:
            q = self.q
            if any(c in q for c in "\"“„«‹‘'"):
                self._quotes = [m.span() for m in _R_QUOTED.finditer(q)]
            else:
                self._quotes = []
        return any(a <= s and e <= b for a, b in self._quotes)

    def sentence_start(self, s: int) -> bool:
        prefix = self.q[:s].rstrip(" \t\"'“‘„«([{*•-–—")
        return not prefix or prefix[-1] in ".!?:;\n\r"

    def is_title(self, s: int, e: int) -> bool:
        """Is the capitalised time word at q[s:e] part of a Capitalised title/name?"""
        q = self.q
        word = q[s:e]
        if not word or not word[0].isupper():
            return False
        if self._allcaps is None:
            self._allcaps = not any(c.islower() for c in q)
        if self._allcaps:
            return False
        if q[e:e + 2] in ("'s", "’s"):
            e += 2
        core_low = word.lower()
        # left neighbour (separated by blanks only)
        m = _R_PREV_WORD.search(q, max(0, s - 40), s)
        if m:
            left = m.group(1)
            ll = left.lower()
            if left[0].isupper() and ll not in _NONCOUNT and not (len(left) > 1 and left.isupper()):
                if not self.sentence_start(m.start(1)):
                    return True
                # "The Weekend" at the start of a query: "Weekend" itself is capitalised
                # although it is not at sentence start -> a name
                if ll == "the" and core_low in _COMMON_CORES:
                    return True
        # right neighbours
        pos, seen_i = e, False
        for _ in range(5):
            m = _R_NEXT_WORD.match(q, pos)
            if not m:
                break
            w = m.group(1)
            lw = w.lower()
            pos = m.end()
            if w[0].isupper():
                if lw in _I_FORMS:
                    seen_i = True
                    continue
                if lw in _NONCOUNT or (len(w) > 1 and w.isupper()):
                    continue
                return True
            if seen_i and lw in _TITLE_CONNECTORS:
                continue
            break
        return False

    def names_product(self, e: int) -> bool:
        """One of the next two words (before a preposition or punctuation) is a product noun:
        the time word is part of a product's, show's or song's name."""
        pos = e
        for _ in range(2):
            m = _R_NEXT_WORD.match(self.q, pos)
            if not m:
                return False
            w = m.group(1).lower().rstrip("'’s") if m.group(1).lower().endswith(("'s", "’s")) \
                else m.group(1).lower()
            if w in _PRODUCT_NOUNS:
                return True
            if w in _TITLE_STOP:
                return False
            pos = m.end()
        return False

    def repeated(self, s: int, e: int) -> bool:
        """A time word said twice in a row is a title ("Tonight Tonight", "Monday Monday")."""
        word = self.q[s:e].lower()
        return self.next_word(e) == word or self.prev_word(s) == word

    def habitual(self) -> bool:
        return bool(_R_HABIT.search(self.q))

    def night(self, d: date) -> tuple[datetime, datetime]:
        """The night of event day ``d``: 18:00 to the cut-off that ends the day."""
        start = self.at(d, _NIGHT_START)
        end = self.at(d + timedelta(days=1))
        return (start if start < end else self.at(d)), end

    def prev_word(self, s: int) -> str:
        m = _R_PREV_WORD.search(self.q, max(0, s - 40), s)
        return m.group(1).lower() if m else ""

    def next_word(self, e: int) -> str:
        m = _R_NEXT_WORD.match(self.q, e)
        return m.group(1).lower() if m else ""


@dataclass
class _Cand:
    start: int
    end: int
    kind: str
    s: datetime
    e: datetime
    past: bool = False
    rank: int = 2  # 3 explicit dates, 2 relative days/weeks, 1 month names
    weak: bool = False
    dateish: bool = False  # explicit date: may absorb an adjacent weekday name
    weekdayish: bool = False
    wd: Optional[int] = None  # weekday of a weekday-name match
    md: Optional[tuple] = None  # (year|None, month|None, day) of an explicit date


def _mk(m: re.Match, kind: str, se: tuple[datetime, datetime], past: bool = False,
        rank: int = 2, **kw) -> Optional[_Cand]:
    s, e = se
    if e <= s:
        return None
    return _Cand(m.start(), m.end(), kind, s, e, past, rank, **kw)


def _clip(ctx: _Ctx, se: tuple[datetime, datetime]) -> tuple[tuple[datetime, datetime], bool]:
    """Clip a range that is under way to start now; flag it past when it is over."""
    s, e = se
    if e <= ctx.now:
        return (s, e), True
    if s < ctx.now:
        s = ctx.now
    return (s, e), False


# --------------------------------------------------------------------------------------
# Rules
# --------------------------------------------------------------------------------------

_R_TODAY = compile_on_use(
    r"\b(?:(?P<earlier>earlier\s+today)"
    r"|(?:late\s+)?(?P<core>tonight|tonite|2nite|today)(?:['’]s)?"
    r"(?:\s+(?:evening|night|afternoon|morning))?"
    r"|this\s+(?P<part>evening|eve|afternoon|morning|night))(?![\w])", _FLAGS)


def _h_today(ctx: _Ctx, m: re.Match) -> Optional[_Cand]:
    if m.group("earlier"):
        return _mk(m, "past", (ctx.at(ctx.ed), ctx.now), past=True)
    if m.group("core"):
        if ctx.is_title(*m.span("core")) or ctx.repeated(*m.span("core")) or ctx.names_product(m.end()):
            return None
        core = m.group("core").lower()
        tail = m.group(0).lower()
        kind = "tonight" if (core != "today" or "evening" in tail or "night" in tail) else "today"
    else:
        part = m.group("part").lower()
        kind = "tonight" if part in ("evening", "eve", "night") else "today"
    return _mk(m, kind, (ctx.now, ctx.at(ctx.ed + timedelta(days=1))))


_R_NOW = compile_on_use(r"\b(?:(?:right\s+)?now|at\s+(?:the|this)\s+(?P<moment>moment))\b", _FLAGS)
_NOW_WINDOW = timedelta(minutes=1)  # "now": the events under way at this instant
_R_NOW_BAD_BEFORE = compile_on_use(
    r"(?:\b(?:for|by|until|till|til|up\s+to|just|from|since|than|buy|order|shop|book|call"
    r"|subscribe|join|sign\s+up|register|apply|download|act|play|watch|listen|install|donate"
    r"|reserve|start|try|get\s+it|available|in\s+stock)|\d)\s+$", _FLAGS)
_R_NOW_BAD_AFTER = compile_on_use(
    r"\s*(?:,|that\b|on\b|and\s+then|and\s+again|or\s+never|available|only|open\b|in\s+stock"
    r"|playing|showing|\d)", _FLAGS)


def _h_now(ctx: _Ctx, m: re.Match) -> Optional[_Cand]:
    q = ctx.q
    if m.group("moment"):
        if re.search(r"\b(?:not|nothing|no)\s+$", q[max(0, m.start() - 12):m.start()], re.I):
            return None
        return _mk(m, "now", (ctx.now, ctx.now + _NOW_WINDOW), weak=True)
    if _R_NOW_BAD_BEFORE.search(q, max(0, m.start() - 25), m.start()):
        return None
    if _R_NOW_BAD_AFTER.match(q, m.end()):
        return None
    if q[m.start()].isupper() and ctx.sentence_start(m.start()):
        # discourse "Now, ..." / "Now I want ..." unless the query is just "Now?"
        if q[m.end():].strip(" ?!.") != "":
            return None
    return _mk(m, "now", (ctx.now, ctx.now + _NOW_WINDOW), weak=True)


_R_TOMORROW = compile_on_use(
    r"\b(?:(?P<dat>(?:the\s+)?day\s+after\s+(?:tomorrow|tomorow|tmrw|tmr))"
    r"|(?P<core>tomorrow|tomorow|tmrw|tmr|2morrow|2moro)(?:['’]s)?"
    r"(?:\s+(?:night|evening|morning|afternoon|eve))?)(?![\w])", _FLAGS)


def _h_tomorrow(ctx: _Ctx, m: re.Match) -> Optional[_Cand]:
    if m.group("dat"):
        return _mk(m, "day_after_tomorrow", ctx.day(ctx.ed + timedelta(days=2)))
    if ctx.is_title(*m.span("core")) or ctx.names_product(m.end()):
        return None
    d = ctx.ed + timedelta(days=1)
    if _R_NIGHT_TAIL.search(m.group(0)):
        return _mk(m, "tomorrow", ctx.night(d))
    return _mk(m, "tomorrow", ctx.day(d))


_R_NIGHT_TAIL = compile_on_use(r"\b(?:night|nite|evening|eve)s?$", _FLAGS)


_R_YESTERDAY = compile_on_use(
    r"\b(?:(?P<dby>(?:the\s+)?day\s+before\s+yesterday)"
    r"|(?P<core>yesterday)(?:['’]s)?(?:\s+(?:night|evening|morning|afternoon))?"
    r"|(?P<ln>last\s+night))(?![\w])", _FLAGS)


def _h_yesterday(ctx: _Ctx, m: re.Match) -> Optional[_Cand]:
    if m.group("dby"):
        return _mk(m, "past", ctx.day(ctx.ed - timedelta(days=2)), past=True)
    core = "core" if m.group("core") else "ln"
    if ctx.is_title(*m.span(core)):
        return None
    return _mk(m, "past", ctx.day(ctx.ed - timedelta(days=1)), past=True)


_R_WEEKEND = compile_on_use(
    r"\b(?:(?P<the>the|this|these|over\s+the|on\s+the)\s+)?"
    r"(?:(?P<mod>coming|upcoming|next|following|past|last|previous)\s+)?"
    r"(?P<core>weekends?|week-ends?|wkends?|wknds?|week\s+end(?![\w-]))(?![\w-])", _FLAGS)


def _h_weekend(ctx: _Ctx, m: re.Match) -> Optional[_Cand]:
    core = m.group("core")
    if " " in core or "\t" in core:
        if not (m.group("the") or m.group("mod")):
            return None
    if ctx.is_title(*m.span("core")) or ctx.names_product(m.end()):
        return None
    if core.lower().endswith("s") and ctx.habitual():  # "are you open on weekends?"
        return None
    mod = (m.group("mod") or "").lower()
    sat = ctx.monday() + timedelta(days=5)
    if mod in ("past", "last", "previous"):
        return _mk(m, "past_weekend", ctx.weekend(sat - timedelta(days=7)), past=True)
    if mod in ("next", "following"):
        return _mk(m, "next_weekend", ctx.weekend(sat + timedelta(days=7)))
    s, e = ctx.weekend(sat)
    return _mk(m, "weekend", (max(s, ctx.now), e))


_R_WEEKDAY = compile_on_use(
    rf"\b(?:(?P<mod>this\s+coming|this\s+past|this|next|coming|upcoming|last|past|previous"
    rf"|every|each|on|until|till|by|from)\s+)?"
    rf"(?P<core>{_WD_FULL}s?|{_WD_ABBR}(?![\w])\.?)(?![\w])(?:['’]s)?"
    rf"(?P<after>\s+after\s+next)?"
    rf"(?:\s+(?:night|nite|evening|morning|afternoon|eve)s?)?(?![\w])", _FLAGS)
_AMBIG_ABBR = {"sat", "sun", "mon", "wed", "weds"}
_R_ABBR_CTX_BEFORE = compile_on_use(
    rf"(?:\b(?:on|this|next|last|every|each|until|till|til|by|from|before|after|since|coming"
    rf"|upcoming|past|previous|thru|through)\s+"
    rf"|\b(?:{_WD_FULL}|{_WD_ABBR})\.?\s*(?:[-–—/,&+]|and|or|to|thru|through|till|until)\s*)$",
    _FLAGS)
_R_ABBR_CTX_AFTER = compile_on_use(
    rf"\.?\s*(?:,\s*)?(?:(?:the\s+)?\d|{_MON}|at\b|night|nite|morning|evening|afternoon|eve\b"
    rf"|[-–—/&+]\s*(?:{_WD_FULL}|{_WD_ABBR})(?![\w])"
    rf"|(?:and|or|to|thru|through|till|until)\s+(?:{_WD_FULL}|{_WD_ABBR})(?![\w]))", _FLAGS)
_PRONOUNISH = frozenset("i we you he she they it who the a an and has have had was were been "
                        "just also never always".split())


def _weekday_of(core: str) -> int:
    return _WEEKDAY_INDEX[core.lower()[:3]]


def _abbr_ok(ctx: _Ctx, m: re.Match) -> bool:
    core = m.group("core")
    low = core.lower().rstrip(".")
    if re.fullmatch(_WD_FULL + "s?", low):
        return True
    if low not in _AMBIG_ABBR:
        return True
    s = m.start("core")
    if ctx.prev_word(s) in _PRONOUNISH:
        return False
    if m.group("mod") or _R_ABBR_CTX_BEFORE.search(ctx.q, max(0, s - 30), s):
        return True
    if core.endswith(".") and low in ("mon", "wed", "weds"):
        return True
    e = m.end("core") - (1 if core.endswith(".") else 0)
    return bool(_R_ABBR_CTX_AFTER.match(ctx.q, e))


def _weekday_core_ok(ctx: _Ctx, m: re.Match, group: str = "core") -> bool:
    s, e = m.span(group)
    if ctx.prev_word(s) in _HOLIDAY_PREFIX:
        return False
    core = m.group(group)
    e_word = e - (1 if core.endswith(".") else 0)
    return not ctx.is_title(s, e_word)


_R_COUNT_BEFORE = compile_on_use(r"\b(\d{1,2}|one|two|three|four|five|six|seven|eight|nine|ten)\s+$",
                                 _FLAGS)
_R_COUNT_AFTER = compile_on_use(r"\s+(?P<dir>from\s+now|later|ago|back|before)(?![\w])", _FLAGS)


def _h_weekday(ctx: _Ctx, m: re.Match) -> Optional[_Cand]:
    if not _abbr_ok(ctx, m) or not _weekday_core_ok(ctx, m):
        return None
    if ctx.names_product(m.end()) or ctx.repeated(*m.span("core")):
        return None  # "sunday morning vinyl", "Monday Monday"
    core_low = m.group("core").lower()
    habit = core_low.endswith("s") and len(core_low) > 4 or \
        (m.group("mod") or "").lower() in ("every", "each")
    if habit and ctx.habitual():  # "do you deliver on Sundays?"
        return None
    w = _weekday_of(m.group("core"))
    after = _R_COUNT_AFTER.match(ctx.q, m.end())
    if after and not m.group("mod"):
        # "3 fridays from now", "2 thursdays ago": the Nth occurrence, today excluded
        before = _R_COUNT_BEFORE.search(ctx.q, max(0, m.start() - 12), m.start())
        raw = before.group(1).lower() if before else "1"
        n = int(raw) if raw.isdigit() else _NUM_WORDS[raw]
        if not 1 <= n <= 52:
            return None
        ed = ctx.ed
        if after.group("dir").lower() in ("ago", "back", "before"):
            back = ((ed.weekday() - w) % 7 or 7) + 7 * (n - 1)
            c = _mk(m, "past", ctx.day(ed - timedelta(days=back)), past=True, weekdayish=True)
        else:
            ahead = ((w - ed.weekday()) % 7 or 7) + 7 * (n - 1)
            c = _mk(m, "weekday", ctx.day(ed + timedelta(days=ahead)), weekdayish=True)
        if c is not None:
            c.start = before.start(1) if before else m.start()
            c.end = after.end()
            c.wd = w
        return c
    c = _weekday_cand(ctx, m, w)
    if c is not None:
        c.wd = w
    return c


def _weekday_cand(ctx: _Ctx, m: re.Match, w: int) -> Optional[_Cand]:
    mod = re.sub(r"\s+", " ", (m.group("mod") or "").lower())
    ed = ctx.ed
    delta = (w - ed.weekday()) % 7
    # "saturday night": from 18:00 to the cut-off of that event day
    span = ctx.night if _R_NIGHT_TAIL.search(m.group(0)) else ctx.day
    if m.group("after"):
        d = ed + timedelta(days=(delta or 7) + 7)
        return _mk(m, "weekday", span(d), weekdayish=True)
    if mod in ("last", "past", "this past", "previous"):
        back = (ed.weekday() - w) % 7 or 7
        return _mk(m, "past", span(ed - timedelta(days=back)), past=True, weekdayish=True)
    if mod == "next":
        d = ctx.monday() + timedelta(days=7 + w)
        return _mk(m, "weekday", span(d), weekdayish=True)
    if mod in ("until", "till", "by"):
        # "until friday": from now to the end of that event day
        return _mk(m, "weekday", (ctx.now, ctx.at(ed + timedelta(days=delta + 1))), weekdayish=True)
    # asked on that very day ("friday" on a Friday, or at 02:00 of its night): the whole event
    # day, so an event that began earlier this evening still counts
    return _mk(m, "weekday", span(ed + timedelta(days=delta)), weekdayish=True)


_R_WEEKDAY_WEEK = compile_on_use(
    rf"\b(?:(?P<wk1>this|next|last|previous|the\s+following|the\s+coming|coming)\s+week['’]?s\s+"
    rf"(?P<core1>{_WD})(?![\w])"
    rf"|(?P<core2>{_WD})(?![\w])\s+(?:of\s+|from\s+|in\s+|on\s+)?(?:the\s+)?"
    rf"(?P<wk2>this|next|last|previous|following|coming)\s+week)(?![\w])", _FLAGS)


def _h_weekday_week(ctx: _Ctx, m: re.Match) -> Optional[_Cand]:
    g = "core1" if m.group("core1") else "core2"
    if not _weekday_core_ok(ctx, m, g):
        return None
    wk = (m.group("wk1") or m.group("wk2")).lower().split()[-1]
    w = _weekday_of(m.group(g))
    mon = ctx.monday()
    if wk in ("next", "following", "coming"):
        return _mk(m, "weekday", ctx.day(mon + timedelta(days=7 + w)), weekdayish=True)
    if wk in ("last", "previous"):
        return _mk(m, "past", ctx.day(mon + timedelta(days=w - 7)), past=True, weekdayish=True)
    d = mon + timedelta(days=w)
    if d < ctx.ed:
        return _mk(m, "past", ctx.day(d), past=True, weekdayish=True)
    return _mk(m, "weekday", ctx.day(d), weekdayish=True)


_R_NTH = compile_on_use(
    rf"\b(?:the\s+)?(?P<n>first|1st|second|2nd|third|3rd|fourth|4th|fifth|5th|last)\s+"
    rf"(?P<core>{_WD}|weekend|week-end|wkend|week\s+end|week|day)(?![\w])\s+(?:of|in)\s+"
    rf"(?:(?P<rel>this|next|the|last|previous|coming|following|current)\s+month"
    rf"|(?P<mon>{_MON})\.?{_year4('y')}?)(?![\w])", _FLAGS)
_NTH_INDEX = {"first": 0, "1st": 0, "second": 1, "2nd": 1, "third": 2, "3rd": 2,
              "fourth": 3, "4th": 3, "fifth": 4, "5th": 4, "last": -1}


def _h_nth(ctx: _Ctx, m: re.Match) -> Optional[_Cand]:
    core = re.sub(r"\s+", " ", m.group("core").lower())
    unit = ("day" if core == "day" else "week" if core == "week"
            else "weekend" if core.startswith("week") or core.startswith("wk") else "weekday")
    w = {"day": 0, "week": 0, "weekend": 5}.get(unit)
    if w is None:
        w = _weekday_of(core)
    idx = _NTH_INDEX[m.group("n").lower()]

    def resolve(y: int, mo: int) -> Optional[tuple[datetime, datetime]]:
        first = date(y, mo, 1)
        ny, nm = _add_months(y, mo, 1)
        last = date(ny, nm, 1) - timedelta(days=1)
        if unit == "day":
            days = [first + timedelta(days=i) for i in range((last - first).days + 1)]
        else:
            days = []
            d = first + timedelta(days=(w - first.weekday()) % 7)
            # a "week of <month>" is a Monday-Sunday week that lies inside the month
            while d <= (last - timedelta(days=6) if unit == "week" else last):
                days.append(d)
                d += timedelta(days=7)
        try:
            d = days[idx]
        except IndexError:
            return None
        if unit == "weekend":
            return ctx.weekend(d)
        if unit == "week":
            return ctx.days(d, d + timedelta(days=6))
        return ctx.day(d)

    kind = {"weekend": "weekend", "week": "week"}.get(unit, "date")
    if m.group("rel"):
        rel = m.group("rel").lower()
        k = {"next": 1, "coming": 1, "following": 1, "last": -1, "previous": -1}.get(rel, 0)
        y, mo = _add_months(ctx.ed.year, ctx.ed.month, k)
        se = resolve(y, mo)
        if se is None:
            return None
        return _mk(m, kind, se, past=se[1] <= ctx.now, rank=3, dateish=True)
    mo = _MONTH_INDEX[m.group("mon").lower()[:3]]
    if m.group("y"):
        se = resolve(int(m.group("y")), mo)
        if se is None:
            return None
        return _mk(m, kind, se, past=se[1] <= ctx.now, rank=3, dateish=True)
    for y in (ctx.ed.year, ctx.ed.year + 1):
        se = resolve(y, mo)
        if se is not None and se[1] > ctx.now:
            return _mk(m, kind, se, rank=3, dateish=True)
    return None


_R_PERIOD = compile_on_use(
    r"\b(?:(?:at\s+)?(?:the\s+)?(?P<edge>beginning|start|end|middle)\s+of\s+)?"
    r"(?:the\s+)?(?:(?P<mod>this\s+past|this\s+coming|this|current|next|following|coming"
    r"|upcoming|last|past|previous)\s+)?(?P<unit>week|month|year)(?![\w-])", _FLAGS)


def _h_period(ctx: _Ctx, m: re.Match) -> Optional[_Cand]:
    mod = re.sub(r"\s+", " ", (m.group("mod") or "").lower())
    edge = (m.group("edge") or "").lower()
    unit = m.group("unit").lower()
    if not mod and not edge:
        return None
    if mod in ("this past", "last", "past", "previous"):
        k, rel = -1, "past"
    elif mod in ("next", "following"):
        k, rel = 1, "next"
    elif mod in ("coming", "upcoming", "this coming") and not edge:
        # rolling window: the next 7 event days / one month from now
        if unit == "week":
            end_d = ctx.ed + timedelta(days=7)
        elif unit == "month":
            y, mo = _add_months(ctx.ed.year, ctx.ed.month, 1)
            end_d = _valid(y, mo, ctx.ed.day) or date(y, mo, 28)
        else:
            end_d = (_valid(ctx.ed.year + 1, ctx.ed.month, ctx.ed.day)
                     or ctx.ed + timedelta(days=365))
        return _mk(m, "next_days", (ctx.now, ctx.at(end_d)))
    elif mod in ("coming", "upcoming"):
        k, rel = 1, "next"
    else:
        k, rel = 0, "this"
    if unit == "week":
        mon = ctx.monday() + timedelta(days=7 * k)
        if edge in ("beginning", "start"):
            se = ctx.days(mon, mon + timedelta(days=2))
        elif edge == "middle":
            se = ctx.days(mon + timedelta(days=2), mon + timedelta(days=3))
        elif edge == "end":
            se = ctx.days(mon + timedelta(days=4), mon + timedelta(days=6))
        else:
            se = ctx.days(mon, mon + timedelta(days=6))
    elif unit == "month":
        y, mo = _add_months(ctx.ed.year, ctx.ed.month, k)
        s, e = ctx.month(y, mo)
        if edge in ("beginning", "start"):
            se = (s, ctx.at(date(y, mo, 11)))
        elif edge == "middle":
            se = (ctx.at(date(y, mo, 11)), ctx.at(date(y, mo, 21)))
        elif edge == "end":
            se = (ctx.at(date(y, mo, 21)), e)
        else:
            se = (s, e)
    else:
        y = ctx.ed.year + k
        se = (ctx.at(date(y, 1, 1)), ctx.at(date(y + 1, 1, 1)))
    kind = f"{rel}_{unit}"
    if rel == "past":
        return _mk(m, "past", se, past=True)
    if rel == "this":
        se, past = _clip(ctx, se)
        return _mk(m, kind, se, past=past)
    return _mk(m, kind, se)


_R_NDAYS = compile_on_use(
    r"\b(?:(?:in|within|over|for|during)\s+)?(?:the\s+)?"
    r"(?P<dir>next|coming|upcoming|following|last|past|previous)\s+"
    r"(?P<n>\d{1,3}|a\s+few|few|(?:a\s+)?couple(?:\s+of)?|two|three|four|five|six|seven|eight"
    r"|nine|ten|eleven|twelve|fourteen|thirty)\s+(?P<unit>days|nights|weeks|months)(?![\w])",
    _FLAGS)


def _h_ndays(ctx: _Ctx, m: re.Match) -> Optional[_Cand]:
    raw = re.sub(r"\s+", " ", m.group("n").lower())
    n = int(raw) if raw.isdigit() else _NUM_WORDS.get(raw)
    if not n or n > 400:
        return None
    unit = m.group("unit").lower()
    past = m.group("dir").lower() in ("last", "past", "previous")
    if unit == "months":
        y, mo = _add_months(ctx.ed.year, ctx.ed.month, -n if past else n)
        ny, nm = _add_months(y, mo, 1)
        d = _valid(y, mo, ctx.ed.day) or date(ny, nm, 1) - timedelta(days=1)
    else:
        days = n * (7 if unit == "weeks" else 1)
        d = ctx.ed + timedelta(days=-days if past else days)
    if past:
        return _mk(m, "past", (ctx.at(d), ctx.now), past=True)
    return _mk(m, "next_days", (ctx.now, ctx.at(d)))


# -- explicit dates ---------------------------------------------------------------------

def _day_value(m: re.Match, n: str) -> Optional[int]:
    if m.group(n + "n"):
        return int(m.group(n + "n"))
    w = m.group(n + "w")
    if not w:
        return None
    w = re.sub(r"[\s-]+", "", w.lower())
    if w.startswith("twenty") and len(w) > 6:
        v = _ORDINAL_WORDS.get(w[6:])
        return 20 + v if v and v < 10 else None
    if w.startswith("thirty") and len(w) > 6:
        v = _ORDINAL_WORDS.get(w[6:])
        return 30 + v if v == 1 else None
    return _ORDINAL_WORDS.get(w)


def _month_value(s: str) -> int:
    return _MONTH_INDEX[s.lower()[:3]]


def _is_quantity_after(ctx: _Ctx, e: int) -> bool:
    """A bare number followed by a unit/quantity word ("24 hours", "5 people")."""
    w = ctx.next_word(e)
    if w in _UNIT_WORDS:
        return True
    return ctx.q[e:e + 1] in ("%",) or ctx.q[e:e + 2] in (" %",)


_R_MAY_OK_AFTER = compile_on_use(
    r"\s*(?:$|[.,!?;:)\]/-]|(?:at|to|till|until|thru|through|and|or|from|for|night|evening"
    r"|morning|afternoon|in|on|party|parties|event|events|concert|show|please)\b|\d|['’])",
    _FLAGS)


def _may_ok_day_first(ctx: _Ctx, m: re.Match, mon_group: str, day: str,
                      year: Optional[str]) -> bool:
    """'4 may' / '4th of may': lower-case 'may' must look like a month."""
    mon = m.group(mon_group)
    if mon != "may":
        return True
    if year or m.group(day + "s") or m.group(day + "w"):
        return True
    if re.search(r"\bof\s*$", ctx.q[m.start():m.start(mon_group)], re.I):
        return True
    return bool(_R_MAY_OK_AFTER.match(ctx.q, m.end(mon_group)))


_R_MD = compile_on_use(
    rf"\b(?P<mon>{_MON})(?:\.\s*|\s+|(?=\d))(?:the\s+)?{_day('d')}{_year4('y')}?(?![\w])",
    _FLAGS)


def _h_md(ctx: _Ctx, m: re.Match) -> Optional[_Cand]:
    d = _day_value(m, "d")
    if d is None:
        return None
    mo = _month_value(m.group("mon"))
    y = m.group("y")
    if not y and m.group("dn") and not m.group("ds"):
        if _is_quantity_after(ctx, m.end()):
            return None
        if m.group("mon") == "may" and not _R_MAY_OK_AFTER.match(ctx.q, m.end()):
            return None
    return _explicit_day(ctx, m, y and int(y), mo, d)


def _explicit_day(ctx: _Ctx, m: re.Match, y: Optional[int], mo: int, d: int) -> Optional[_Cand]:
    if y:
        if not 1900 <= y <= 2100:
            return None
        dd = _valid(y, mo, d)
        if dd is None:
            return None
        se = ctx.day(dd)
        return _mk(m, "date", se, past=se[1] <= ctx.now, rank=3, dateish=True, md=(y, mo, d))
    dd = ctx.next_occurrence(mo, d)
    if dd is None:
        return None
    return _mk(m, "date", ctx.day(dd), rank=3, dateish=True, md=(None, mo, d))


_R_DM = compile_on_use(
    rf"\b(?:the\s+)?{_day('d')}(?:\s+day)?(?:\s+of\s+|\s*[-/.]?\s*)(?P<mon>{_MON})\.?"
    rf"(?:(?:\s*,\s*|\s+|[-/.])(?P<y>(?:19|20)\d\d)(?!\d)|[-/.](?P<y2>\d\d)(?!\d))?(?![\w])",
    _FLAGS)


def _h_dm(ctx: _Ctx, m: re.Match) -> Optional[_Cand]:
    d = _day_value(m, "d")
    if d is None:
        return None
    if m.group("dw") and not re.search(r"\bof\s", m.group(0), re.I):
        return None  # "first march", "second may" are not dates
    y = m.group("y") or (m.group("y2") and str(_year2(m.group("y2"))))
    if not _may_ok_day_first(ctx, m, "mon", "d", y):
        return None
    return _explicit_day(ctx, m, y and int(y), _month_value(m.group("mon")), d)


def _range_result(ctx: _Ctx, m: re.Match, m1: int, d1: int, y1: Optional[int], m2: int, d2: int,
                  y2: Optional[int]) -> Optional[_Cand]:
    if y1 or y2:
        if y2 and not y1:
            y1 = y2 if (m1, d1) <= (m2, d2) else y2 - 1
        elif y1 and not y2:
            y2 = y1 if (m1, d1) <= (m2, d2) else y1 + 1
        a, b = _valid(y1, m1, d1), _valid(y2, m2, d2)
        if a is None or b is None or b < a or (b - a).days > 366:
            return None
        se = ctx.days(a, b)
        return _mk(m, "date_range", se, past=se[1] <= ctx.now, rank=3, dateish=True)
    for y in (ctx.ed.year - 1, ctx.ed.year, ctx.ed.year + 1, ctx.ed.year + 2):
        a = _valid(y, m1, d1)
        b = _valid(y if (m1, d1) <= (m2, d2) else y + 1, m2, d2)
        if a is None or b is None:
            continue
        if b >= ctx.ed:
            if (b - a).days > 366:
                return None
            return _mk(m, "date_range", ctx.days(a, b), rank=3, dateish=True)
    return None


_R_MD_RANGE = compile_on_use(
    rf"\b(?:(?P<pre>from|between)\s+)?(?:the\s+)?(?P<mon1>{_MON})(?:\.\s*|\s+|(?=\d))"
    rf"(?:the\s+)?{_day('a')}{_year4('ya')}?\s*(?P<sep>{_SEP_RANGE})\s*"
    rf"(?:(?P<mon2>{_MON})(?:\.\s*|\s+|(?=\d)))?(?:the\s+)?{_day('b')}{_year4('yb')}?(?![\w])",
    _FLAGS)


def _h_md_range(ctx: _Ctx, m: re.Match) -> Optional[_Cand]:
    d1, d2 = _day_value(m, "a"), _day_value(m, "b")
    if d1 is None or d2 is None:
        return None
    bare_day = m.group("bn") and not m.group("bs") and not m.group("yb")
    if bare_day and _is_quantity_after(ctx, m.end()):
        return None
    m1 = _month_value(m.group("mon1"))
    m2 = _month_value(m.group("mon2")) if m.group("mon2") else m1
    if m1 == m2 and d2 < d1 and not m.group("mon2"):
        return None
    ya, yb = m.group("ya"), m.group("yb")
    return _range_result(ctx, m, m1, d1, ya and int(ya), m2, d2, yb and int(yb))


_R_DM_RANGE = compile_on_use(
    rf"\b(?:(?P<pre>from|between)\s+)?(?:the\s+)?{_day('a')}(?:(?:\s+of)?\s*(?P<mon1>{_MON})\.?)?"
    rf"\s*(?P<sep>{_SEP_RANGE})\s*(?:the\s+)?{_day('b')}(?:\s+of)?\s*(?P<mon2>{_MON})\.?"
    rf"{_year4('y')}?(?![\w])", _FLAGS)


def _h_dm_range(ctx: _Ctx, m: re.Match) -> Optional[_Cand]:
    d1, d2 = _day_value(m, "a"), _day_value(m, "b")
    if d1 is None or d2 is None:
        return None
    if m.group("mon2") == "may" and not (m.group("y") or m.group("bs") or m.group("bw")) \
            and not _R_MAY_OK_AFTER.match(ctx.q, m.end("mon2")):
        return None
    m2 = _month_value(m.group("mon2"))
    m1 = _month_value(m.group("mon1")) if m.group("mon1") else m2
    if m1 == m2 and d2 < d1:
        return None
    y = m.group("y")
    return _range_result(ctx, m, m1, d1, None, m2, d2, y and int(y))


# numeric dates
_NUM_BLACKLIST = frozenset(["24/7", "9/11", "7/11", "20/20", "50/50", "24/24", "365/24"])
_FRACTIONS = frozenset(["1/2", "1/3", "2/3", "1/4", "3/4", "1/5", "2/5", "3/5", "4/5", "1/8",
                        "3/8", "5/8", "7/8", "1/10", "1/6", "5/6", "1/12"])
_R_NUM_BAD_BEFORE = compile_on_use(
    r"(?:[$€£¥]\s*|\d\s+|\b(?:rate|rated|rating|score|scored|ratio|odds|page|pages|pp|p|no|nr"
    r"|number|v|ver|version|step|chapter|part|size|sizes|episode|ep|season|vol|volume|room|gate|row"
    r"|seat|table|track|disc|cd|level|grade|class|order|invoice|ref|reference|id|item|sku|model"
    r"|art|code|about|approx|approximately|in|a|an|over|cost|costs|price|priced|pay|paid|total"
    r"|under|than|by)\s+)$", _FLAGS)
_R_NUM_GOOD_BEFORE = compile_on_use(
    rf"(?:\b(?:on|from|until|till|til|since|before|after|for|the)\s+|\b{_WD}(?![\w])\s*,?\s*)$",
    _FLAGS)
_R_NUM_BAD_AFTER = compile_on_use(
    r"\s*(?:%|€|\$|£|(?:am|pm|a\.m|p\.m|h|hr|hrs|hours?|mins?|minutes?|uhr|eur|euro|euros|usd"
    r"|rsd|din|dinars?|kn|of|off|stars?|points?|pts|x|mg|ml|kg|g|lb|lbs|oz|inch|inches|cups?"
    r"|tsp|tbsp|miles?|km|cm|mm|m|l|cl)\b)", _FLAGS)

_NUM = (r"(?P<{n}d>\d{{1,2}})(?P<{n}s>[./]| / )(?P<{n}m>\d{{1,2}})"
        r"(?:(?P={n}s)(?P<{n}y>\d{{4}}|\d{{2}})?)?")
_R_NUMDATE = compile_on_use(
    r"(?<![\w.,/:\-])" + _NUM.format(n="a") + r"(?![.,/]?\d)(?![\w])", _FLAGS)
_R_NUM_RANGE = compile_on_use(
    r"(?<![\w.,/:\-])(?:(?P<pre>from|between)\s+)?" + _NUM.format(n="a")
    + r"\s*(?:-|–|—|to|till|until|and)\s*" + _NUM.format(n="b") + r"(?!\d|[./]\d)(?![\w])",
    _FLAGS)
_R_DASHDATE = compile_on_use(
    r"(?<![\w.,/:\-])(?P<d>\d{1,2})(?P<s>-)(?P<m>\d{1,2})-(?P<y>\d{4}|\d{2})(?!\d|[-/.]\d)(?![\w])",
    _FLAGS)
_R_ISO = compile_on_use(
    r"(?<![\w.,/:\-])(?P<y>(?:19|20)\d\d)(?P<s>[-/.])(?P<m>0?[1-9]|1[0-2])(?P=s)"
    r"(?P<d>0?[1-9]|[12]\d|3[01])(?!\d|[-/.]\d)", _FLAGS)
_R_ISO_MONTH = compile_on_use(
    r"(?<![\w.,/:\-])(?P<y>(?:19|20)\d\d)[-/](?P<m>0[1-9]|1[0-2])(?![\d\w]|[-/.]\d)", _FLAGS)


def _dm_values(d: int, mo: int) -> Optional[tuple[int, int]]:
    """European d/m; m/d only when the European reading is impossible ("2/15")."""
    if 1 <= mo <= 12 and 1 <= d <= 31:
        return d, mo
    if 1 <= d <= 12 and 13 <= mo <= 31:
        return mo, d
    return None


def _numeric_single(ctx: _Ctx, m: re.Match, n: str, standalone: bool) -> Optional[tuple]:
    d_raw, mo_raw = int(m.group(n + "d")), int(m.group(n + "m"))
    sep, ys = m.group(n + "s").strip(), m.group(n + "y")
    vals = _dm_values(d_raw, mo_raw)
    if vals is None:
        return None
    d, mo = vals
    if standalone:
        q, s = ctx.q, m.start()
        if re.search(r"[$€£¥]\s*$", q[max(0, s - 3):s]):
            return None
        if not ys:
            pair = f"{d_raw}/{mo_raw}"
            good_before = bool(_R_NUM_GOOD_BEFORE.search(q, max(0, s - 30), s))
            if sep == "/" and pair in _NUM_BLACKLIST:
                return None
            if not good_before:
                if sep == "/" and pair in _FRACTIONS:
                    return None
                if _R_NUM_BAD_BEFORE.search(q, max(0, s - 30), s):
                    return None
                if sep == "." and not m.group(0).endswith("."):
                    return None  # "24.04" is a decimal number unless "on 24.04"
            if _R_NUM_BAD_AFTER.match(q, m.end()):
                return None
    return (_year2(ys) if ys else None), mo, d


def _h_numdate(ctx: _Ctx, m: re.Match) -> Optional[_Cand]:
    r = _numeric_single(ctx, m, "a", True)
    if r is None:
        return None
    return _explicit_day(ctx, m, *r)


def _h_num_range(ctx: _Ctx, m: re.Match) -> Optional[_Cand]:
    if m.group("as") != m.group("bs"):
        return None
    a = _numeric_single(ctx, m, "a", False)
    b = _numeric_single(ctx, m, "b", False)
    if a is None or b is None:
        return None
    if _R_NUM_BAD_AFTER.match(ctx.q, m.end()):
        return None
    return _range_result(ctx, m, a[1], a[2], a[0], b[1], b[2], b[0])


def _h_dashdate(ctx: _Ctx, m: re.Match) -> Optional[_Cand]:
    vals = _dm_values(int(m.group("d")), int(m.group("m")))
    if vals is None:
        return None
    return _explicit_day(ctx, m, _year2(m.group("y")), vals[1], vals[0])


def _h_iso(ctx: _Ctx, m: re.Match) -> Optional[_Cand]:
    return _explicit_day(ctx, m, int(m.group("y")), int(m.group("m")), int(m.group("d")))


def _h_iso_month(ctx: _Ctx, m: re.Match) -> Optional[_Cand]:
    se = ctx.month(int(m.group("y")), int(m.group("m")))
    se, past = _clip(ctx, se)
    return _mk(m, "month", se, past=past, rank=1)


_R_ORD = compile_on_use(
    rf"\b(?:(?P<pre>on)\s+)?(?P<the>the\s+)?(?P<d>{_DAYNUM})(?P<sfx>st|nd|rd|th)(?![\w])"
    rf"(?:\s+(?:day\s+)?of\s+(?:the\s+)?(?P<rel>this|next|current|previous|last|coming|following)"
    rf"\s+month)?", _FLAGS)
_R_ORD_OK_AFTER = compile_on_use(
    r"\s*(?:$|[.,!?;:)\]\-–]|(?:at|from|to|till|until|or|and|please|night|evening|morning"
    r"|afternoon)\b)", _FLAGS)
_R_ORD_WEEKDAY_BEFORE = compile_on_use(rf"\b{_WD}(?![\w])\s*,?\s*$", _FLAGS)


def _h_ord(ctx: _Ctx, m: re.Match) -> Optional[_Cand]:
    d = int(m.group("d"))
    if m.group("rel"):
        rel = m.group("rel").lower()
        k = {"next": 1, "coming": 1, "following": 1, "previous": -1, "last": -1}.get(rel, 0)
        y, mo = _add_months(ctx.ed.year, ctx.ed.month, k)
        dd = _valid(y, mo, d)
        if dd is None:
            return None
        se = ctx.day(dd)
        return _mk(m, "date", se, past=se[1] <= ctx.now, rank=3, dateish=True)
    s = m.start()
    after_weekday = bool(_R_ORD_WEEKDAY_BEFORE.search(ctx.q, max(0, s - 15), s))
    if not (m.group("pre") or m.group("the") or after_weekday):
        return None
    if not _R_ORD_OK_AFTER.match(ctx.q, m.end()):
        return None
    y, mo = ctx.ed.year, ctx.ed.month
    for _ in range(13):
        dd = _valid(y, mo, d)
        if dd is not None and dd >= ctx.ed:
            return _mk(m, "date", ctx.day(dd), rank=3, dateish=True, md=(None, None, d))
        y, mo = _add_months(y, mo, 1)
    return None


_R_MONTH = compile_on_use(
    rf"\b(?:(?P<pre>in|during|for|of|this|next|last|until|till|by|since|from|throughout"
    rf"|through|coming)\s+)?(?:the\s+)?"
    rf"(?:(?P<edge>early|mid|late|(?:the\s+)?(?:end|beginning|start|middle)\s+of)[\s-]*)?"
    rf"(?P<mon>{_MON})\.?(?:\s*,?\s*(?P<y>(?:19|20)\d\d)(?!\d)|(?P<after>\s+after\s+next))?(?![\w])"
    rf"(?!\s*(?:the\s+)?\d)(?!\s+{_ORDW}(?![a-z]))", _FLAGS)
_MONTH_NAMES = frozenset(["january", "february", "march", "april", "may", "june", "july",
                          "august", "september", "october", "november", "december"])
_MONTH_WEAK_PRE = frozenset(["this", "next", "last", "for", "by", "of", "from", "coming"])


def _h_month(ctx: _Ctx, m: re.Match) -> Optional[_Cand]:
    pre = (m.group("pre") or "").lower()
    edge = re.sub(r"\s+", " ", (m.group("edge") or "").lower()).replace("the ", "")
    y = m.group("y")
    mon_text = m.group("mon")
    bare = ctx.q.strip(" \t?!.").lower() == mon_text.lower() and mon_text.lower() in _MONTH_NAMES
    if not (pre or edge or y or m.group("after") or bare):
        return None
    if mon_text == "may" and not y and not edge and pre in _MONTH_WEAK_PRE:
        return None  # "this may be", "for may"
    mo = _month_value(mon_text)

    def part(yy: int) -> tuple[datetime, datetime]:
        s, e = ctx.month(yy, mo)
        if edge in ("early", "beginning of", "start of"):
            return s, ctx.at(date(yy, mo, 11))
        if edge in ("mid", "middle of"):
            return ctx.at(date(yy, mo, 11)), ctx.at(date(yy, mo, 21))
        if edge in ("late", "end of"):
            return ctx.at(date(yy, mo, 21)), e
        return s, e

    if y:
        se, past = _clip(ctx, part(int(y)))
        return _mk(m, "month", se, past=past, rank=1)
    cur = ctx.ed.year
    if pre == "last":
        for yy in (cur, cur - 1):
            se = part(yy)
            if se[1] <= ctx.now:
                return _mk(m, "past", se, past=True, rank=1)
        return None
    if pre == "next" and mo == ctx.ed.month:
        return _mk(m, "month", part(cur + 1), rank=1)
    if m.group("after"):
        yy = cur if part(cur)[1] > ctx.now else cur + 1
        return _mk(m, "month", part(yy + 1), rank=1)
    for yy in (cur, cur + 1):
        se = part(yy)
        if se[1] > ctx.now:
            se, _ = _clip(ctx, se)
            return _mk(m, "month", se, rank=1)
    return None


_MONTH_NEEDLES = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov",
                  "dec")
_DIGIT = ("<digit>",)
# (regex, handler, needles): a rule only runs when one of its needles occurs in the lower-cased
# query (cheap substring tests keep the no-match path fast)
_RULES: list[tuple[re.Pattern, Callable[[_Ctx, re.Match], Optional[_Cand]], tuple[str, ...]]] = [
    (_R_TODAY, _h_today, ("tonight", "tonite", "2nite", "today", "this")),
    (_R_NOW, _h_now, ("now", "moment")),
    (_R_TOMORROW, _h_tomorrow, ("tom", "tmr", "2mor")),
    (_R_YESTERDAY, _h_yesterday, ("yesterday", "night")),
    (_R_WEEKEND, _h_weekend, ("week", "wk")),
    (_R_WEEKDAY, _h_weekday, ("mon", "tue", "wed", "thu", "fri", "sat", "sun")),
    (_R_WEEKDAY_WEEK, _h_weekday_week, ("week",)),
    (_R_NTH, _h_nth, ("first", "1st", "second", "2nd", "third", "3rd", "fourth", "4th", "fifth",
                      "5th", "last")),
    (_R_PERIOD, _h_period, ("week", "month", "year")),
    (_R_NDAYS, _h_ndays, ("days", "nights", "weeks", "months")),
    (_R_MD, _h_md, _MONTH_NEEDLES),
    (_R_DM, _h_dm, _MONTH_NEEDLES),
    (_R_MD_RANGE, _h_md_range, _MONTH_NEEDLES),
    (_R_DM_RANGE, _h_dm_range, _MONTH_NEEDLES),
    (_R_NUMDATE, _h_numdate, _DIGIT),
    (_R_NUM_RANGE, _h_num_range, _DIGIT),
    (_R_DASHDATE, _h_dashdate, _DIGIT),
    (_R_ISO, _h_iso, _DIGIT),
    (_R_ISO_MONTH, _h_iso_month, _DIGIT),
    (_R_ORD, _h_ord, _DIGIT),
    (_R_MONTH, _h_month, _MONTH_NEEDLES),
]


def _align_weekday(ctx: _Ctx, c: _Cand, w: int) -> None:
    """"Fri, Jul 18" / "Friday the 13th" without a year: pick the occurrence on that weekday.

    Looks at a recent past one (up to 14 days ago) and the next one or two occurrences;
    when none falls on the weekday (a typo?) the plain next occurrence is kept.
    """
    y, mo, d = c.md
    if y is not None:
        return
    ed = ctx.ed
    options: list[date] = []
    if mo is not None:
        for yy in (ed.year - 1, ed.year, ed.year + 1, ed.year + 2):
            dd = _valid(yy, mo, d)
            if dd is not None and dd >= ed - timedelta(days=14):
                options.append(dd)
        options = options[:3]
    else:
        yy, mm = _add_months(ed.year, ed.month, -1)
        for _ in range(14):
            dd = _valid(yy, mm, d)
            if dd is not None and dd >= ed - timedelta(days=14):
                options.append(dd)
            yy, mm = _add_months(yy, mm, 1)
    for dd in options:
        if dd.weekday() == w:
            c.s, c.e = ctx.day(dd)
            c.past = c.e <= ctx.now
            return


_R_GLUE = compile_on_use(r"[\s,(]*(?:(?:on|the)\s+)?[\s(]*")


def parse_temporal(query: str, now: datetime, tz: str = "UTC", cutoff: time = time(5, 0),
                   weekend_starts_friday: bool = False) -> TemporalIntent | None:
    """Find the first temporal expression in ``query`` and resolve it to a UTC range.

    ``now`` may be aware (any zone) or naive (taken as UTC); ``tz`` is an IANA zone name;
    ``cutoff`` is the night cut-off that separates event days (a ``time``, an "HH:MM"
    string or None for 05:00). Returns None when the query has no temporal intent.
    """
    if not query:
        return None
    low = query.lower()
    has_digit = any(c.isdigit() for c in query)
    active = [(rx, handler) for rx, handler, needles in _RULES
              if (has_digit if needles is _DIGIT else any(n in low for n in needles))]
    if not active:
        return None
    ctx = _Ctx(query, now, tz, cutoff, weekend_starts_friday)
    cands: list[_Cand] = []
    for rx, handler in active:
        for m in rx.finditer(query):
            c = handler(ctx, m)
            if c is None:
                continue
            # trim surrounding blanks of the phrase
            raw = query[c.start:c.end]
            c.start += len(raw) - len(raw.lstrip())
            c.end -= len(raw) - len(raw.rstrip())
            if ctx.in_quotes(c.start, c.end):
                continue
            cands.append(c)
    if not cands:
        return None
    strong = [c for c in cands if not c.weak]
    if strong:
        cands = strong
    cands.sort(key=lambda c: (c.start, -(c.end - c.start)))
    cluster = [cands[0]]
    end = cands[0].end
    for c in cands[1:]:
        if c.start < end:
            cluster.append(c)
            end = max(end, c.end)
            continue
        glued = _R_GLUE.fullmatch(query, end, c.start) is not None
        if glued and ((c.dateish and any(x.weekdayish for x in cluster))
                      or (c.weekdayish and any(x.dateish for x in cluster))):
            cluster.append(c)
            end = max(end, c.end)
            continue
        break
    best = max(cluster, key=lambda c: (c.rank, c.end - c.start, -c.start))
    if best.md is not None and best.kind == "date":
        wds = [c.wd for c in cluster if c.wd is not None]
        if wds:
            _align_weekday(ctx, best, wds[0])
    if best.weekdayish or best.dateish:
        # report the whole glued expression ("Fri, Jul 18") as the phrase
        s0 = min(c.start for c in cluster)
        e0 = max(c.end for c in cluster)
    else:
        s0, e0 = best.start, best.end
    return TemporalIntent(start=best.s, end=best.e, phrase=query[s0:e0], kind=best.kind,
                          past=best.past, span=(s0, e0))
