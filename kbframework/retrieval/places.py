"""Places named in a question, including places the organization has no documents for.

The organization's own cities and venues are found by the vocabulary index (phrases.py). This
module adds the places it does not know: a visitor asking "what's on tonight in Porto Calmo?" at
a Belgrade events site must hear "I have no events in Porto Calmo", not see Belgrade's events as
if they were in Porto Calmo. A place is

* a capitalised name after "in", "at", "near", "around" or "close to" ("in Porto Calmo",
  "at Club Nova"), or
* a name from a place list (a built-in list of large cities, plus the organization's own
  ``place_names`` setting), in any case ("events in porto").

Pure functions: the caller decides whether the organization's knowledge mentions the name (then
it is not unknown, just not a filter we can apply) and what to answer.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from kbframework.retrieval.phrases import fold

# a small place list: big cities a visitor of a city site might name in lower case
_CITY_LIST = """
Amsterdam|Athens|Barcelona|Belgrade|Berlin|Bratislava|Brussels|Bucharest|Budapest|Copenhagen|Dublin
Edinburgh|Florence|Frankfurt|Geneva|Hamburg|Helsinki|Istanbul|Kraków|Krakow|Kyiv|Lisbon|Ljubljana
London|Lyon|Madrid|Manchester|Marseille|Milan|Munich|Naples|Oslo|Paris|Porto|Prague|Riga|Rome
Rotterdam|Sarajevo|Seville|Skopje|Sofia|Stockholm|Tallinn|Thessaloniki|Tirana|Valencia|Venice|Vienna
Vilnius|Warsaw|Zagreb|Zurich|Podgorica|Budva|Kotor|Dubrovnik|Zadar|Niš|Subotica|Kragujevac|Pančevo
Timișoara|Timisoara|Cluj|Debrecen|Szeged|Graz|Salzburg|Innsbruck|Bologna|Turin|Verona|Trieste
Cologne|Düsseldorf|Stuttgart|Leipzig|Dresden|Antwerp|Ghent|Bruges|Utrecht|Glasgow|Liverpool|Bristol
Leeds|Birmingham|Cardiff|Belfast|Galway|Bilbao|Malaga|Ibiza|Mallorca|Mykonos|Gothenburg|Malmö
Aarhus|Bergen|Tampere|Gdańsk|Gdansk|Wrocław|Wroclaw|Poznań|Poznan|Brno|Ostrava|Košice|Varna
Plovdiv|Ankara|Izmir|Tbilisi|Yerevan|Baku|Chisinau|Minsk|Odesa|Odessa|Lviv|Kharkiv|Tel Aviv|Dubai
Cairo|Marrakech|Casablanca|Tunis|Lagos|Nairobi|Johannesburg|Cape Town|New York|Chicago|Boston|Miami
Austin|Seattle|Toronto|Montreal|Vancouver|Mexico City|Los Angeles|San Francisco|Las Vegas|Tokyo
Seoul|Beijing|Shanghai|Bangkok|Singapore|Sydney|Melbourne|Auckland|Mumbai|Delhi|Novi Sad|Zemun
"""
CITIES = frozenset(fold(c.strip()) for c in _CITY_LIST.replace("\n", "|").split("|") if c.strip())

_PREP = r"(?:in|at|near|around|close\s+to|nearby)"
_NAME_WORD = r"[A-ZÀ-ÖØ-Þ][\w'’.\-]*"
_CONNECT = r"(?:de|del|della|di|da|do|dos|la|le|les|van|von|am|an|sur|upon|on\s+the)"
_R_NAMED = re.compile(
    rf"\b(?P<prep>{_PREP})\s+(?:the\s+)?(?P<name>{_NAME_WORD}(?:\s+(?:{_CONNECT}\s+)?{_NAME_WORD}){{0,3}})",
    re.I)
# capitalised words after "in"/"at" that are not places
_NOT_PLACES = frozenset(fold(w) for w in """
monday tuesday wednesday thursday friday saturday sunday mon tue tues wed thu thur thurs fri sat sun
january february march april may june july august september october november december jan feb mar apr
jun jul aug sep sept oct nov dec christmas easter xmas halloween summer winter spring autumn fall
noon midnight night nights morning evening weekend weekends today tonight tomorrow eve new year
stock store shop shops checkout cash euro euros eur usd gbp rsd paypal visa mastercard amex total
advance person order orders cart basket english serbian german french spanish italian russian
black white red blue green pink grey gray navy beige brown yellow orange purple gold silver cream
xs s m l xl xxl xxxl size sizes one all any my your our the a an this that these those it i we you
least most general full part parts time times case cases detail details stock
""".split())
_EVENT_WORDS = re.compile(
    r"\b(?:events?|part(?:y|ies)|gigs?|concerts?|clubs?|clubbing|djs?|festivals?|nightlife|raves?"
    r"|what['’]?s\s+on|whats\s+on|anything\s+on|going\s+on|happening|tickets?|live\s+music|shows?"
    r"|night\s+out|techno|jazz|house\s+music|line-?up)\b", re.I)


@dataclass
class Place:
    name: str  # as written in the question ("Porto Calmo")
    field: str  # "city" or "venue" ("at Club Nova" reads as a venue)
    start: int
    end: int
    matched: str  # the text to remove from the search query ("in Porto Calmo")


def _clean_name(words: list[str]) -> list[str]:
    while words and fold(words[-1]).rstrip(".") in _NOT_PLACES | {"de", "la", "di", "da", "van", "von"}:
        words = words[:-1]
    return words


def find_places(query: str, extra_names=()) -> list[Place]:
    """Places named in ``query``: capitalised names after a place preposition, and names from
    the place list (``CITIES`` plus ``extra_names``) in any case. Longest first, no overlaps."""
    out: list[Place] = []
    taken: list[tuple[int, int]] = []
    for m in _R_NAMED.finditer(query):
        raw = m.group("name")
        words = raw.split()
        # every word of the name must be capitalised (or a connector between two that are)
        keep = []
        for w in words:
            if w[0].isupper() or (keep and re.fullmatch(_CONNECT, w, re.I)):
                keep.append(w)
            else:
                break
        keep = _clean_name(keep)
        if not keep or all(fold(w).rstrip(".") in _NOT_PLACES for w in keep):
            continue  # "in Red", "at Christmas Eve" ("at the Blue Note" is a place)
        if len(keep) == 1 and (len(keep[0]) < 3 or keep[0].isupper() and len(keep[0]) <= 3):
            continue  # "in M", "at XL", "in EU"
        name = " ".join(keep).rstrip(".,;:!?")
        start = m.start("name")
        end = start + len(name)
        if query[start:end] != name:
            continue
        field = "venue" if m.group("prep").lower() == "at" else "city"
        out.append(Place(name, field, start, end, query[m.start():end]))
        taken.append((m.start(), end))
    names = CITIES | {fold(n) for n in extra_names if isinstance(n, str) and n.strip()}
    low = fold(query)
    if len(low) == len(query):  # offsets line up (no characters folded away)
        for n in sorted(names, key=len, reverse=True):
            if n not in low:
                continue  # a name the question lacks needs no pattern compiled (hundreds per question)
            for m in re.finditer(rf"(?<![\w]){re.escape(n)}(?![\w])", low):
                if any(not (m.end() <= a or m.start() >= b) for a, b in taken):
                    continue
                before = re.search(rf"\b({_PREP})\s+(?:the\s+)?$", low[:m.start()])
                s = before.start(1) if before else m.start()
                field = "venue" if before and before.group(1) == "at" else "city"
                out.append(Place(query[m.start():m.end()], field, m.start(), m.end(), query[s:m.end()]))
                taken.append((m.start(), m.end()))
    out.sort(key=lambda p: p.start)
    return out


def event_intent(query: str) -> bool:
    """The question asks for events ("what's on", "parties", "tickets"...)."""
    return bool(_EVENT_WORDS.search(query))


# something that went wrong or went missing at a place: a question for the support pages
# (lost property, a complaint, a refund), not for the events held there
_SUPPORT_WORDS = re.compile(
    r"\b(?:(?:i|we|my\s+\w+)\s+(?:left|lost|forgot|dropped|mislaid)\b"
    r"|lost\s+(?:and\s+found|property)|left\s+(?:it\s+)?behind|(?:was|were|got)\s+stolen"
    r"|(?:is|are|went)\s+missing|complain(?:t|ts|ed)?|refunds?|harass\w*)", re.I)


def support_intent(query: str) -> bool:
    """The question is about something that went wrong or missing ("I left my jacket at
    Armazém 7 last night", "lost property", "I want to complain"): support, not events."""
    return bool(_SUPPORT_WORDS.search(query))


def no_events_text(place: str, field: str, known_cities: list[str]) -> str:
    """The honest answer, naming where the organization's events are (from its own documents)."""
    prep = "at" if field == "venue" else "in"
    text = f"I have no events {prep} {place}."
    cities = sorted({c for c in known_cities if c and fold(c) != fold(place)})
    if cities:
        listed = ", ".join(cities[:-1]) + f" and {cities[-1]}" if len(cities) > 1 else cities[0]
        text += f" The events I know of are in {listed}."
    return text
