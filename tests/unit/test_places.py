"""Places named in a question (kbframework.retrieval.places): table tests of the pure finder."""
from __future__ import annotations

import pytest

from kbframework.retrieval.places import event_intent, find_places, no_events_text, support_intent

# (question, [(name, field, matched)])
PLACES = [
    ("what's on tonight in Porto Calmo?", [("Porto Calmo", "city", "in Porto Calmo")]),
    ("In Porto Calmo, what's on?", [("Porto Calmo", "city", "In Porto Calmo")]),
    ("events at Club Nova this weekend", [("Club Nova", "venue", "at Club Nova")]),
    ("anything near Lake Bled?", [("Lake Bled", "city", "near Lake Bled")]),
    ("techno in Belgrade on Friday", [("Belgrade", "city", "in Belgrade")]),
    ("what's happening in San Francisco tonight", [("San Francisco", "city", "in San Francisco")]),
    ("parties around Novi Sad", [("Novi Sad", "city", "around Novi Sad")]),
    ("gigs close to Ljubljana", [("Ljubljana", "city", "close to Ljubljana")]),
    ("jazz at the Blue Note", [("Blue Note", "venue", "at the Blue Note")]),
    ("events in Rio de Janeiro", [("Rio de Janeiro", "city", "in Rio de Janeiro")]),
    ("a dress in Black for a wedding in Rome", [("Rome", "city", "in Rome")]),
    # from the place list, in any case
    ("any parties in paris?", [("paris", "city", "in paris")]),
    ("any concerts in new york", [("new york", "city", "in new york")]),
    ("what's on in zagreb this weekend", [("zagreb", "city", "in zagreb")]),
    ("berlin techno tonight", [("berlin", "city", "berlin")]),
]
NOT_PLACES = [
    "do you have this in Red?", "is it in stock", "do you have it in XL", "anything on in April",
    "what's on at Christmas", "parties on Friday", "available in Black and White", "pay in EUR",
    "in Summer", "size M in Navy", "at Christmas Eve", "in New Year", "at Midnight", "events at Noon", "shipping to Germany",
    "what is it", "is it available in S", "answer in English please", "",
]


@pytest.mark.parametrize("question,expected", PLACES, ids=[q for q, _ in PLACES])
def test_places_are_found(question, expected):
    got = [(p.name, p.field, p.matched) for p in find_places(question)]
    assert got == expected
    for p in find_places(question):
        assert question[p.start:p.end] == p.name


@pytest.mark.parametrize("question", NOT_PLACES)
def test_words_that_are_not_places(question):
    assert find_places(question) == [], question


def test_the_organizations_own_place_names_are_a_place_list():
    assert [p.name for p in find_places("any gigs in villa nova?", ["Villa Nova"])] == ["villa nova"]
    assert find_places("any gigs in villa nova?") == []  # lower case and not listed: not a place


@pytest.mark.parametrize("question,expected", [
    ("what's on in Porto Calmo?", True), ("techno parties in Paris", True), ("tickets for Club Nova", True),
    ("concerts near Lake Bled", True), ("shipping to Germany", False), ("a dress in Rome", False),
])
def test_event_intent(question, expected):
    assert event_intent(question) is expected


@pytest.mark.parametrize("question,expected", [
    ("I left my jacket at Armazém 7 last night", True), ("we lost a phone at Club Nova on Saturday", True),
    ("my friend dropped her keys at the bar", True), ("is there a lost property desk?", True),
    ("I want to complain about the door staff at Club Nova", True), ("my bag was stolen at the party", True),
    ("what's on at Armazém 7 tonight?", False), ("jazz at Club Nova on Friday", False),
    ("tickets for the party at Club Nova", False), ("what is left at Club Nova this week?", False),
])
def test_support_intent(question, expected):
    assert support_intent(question) is expected


def test_no_events_text_names_where_the_events_are():
    assert no_events_text("Porto Calmo", "city", ["Belgrade", "Novi Sad"]) == (
        "I have no events in Porto Calmo. The events I know of are in Belgrade and Novi Sad.")
    assert no_events_text("Club Nova", "venue", []) == "I have no events at Club Nova."
    assert no_events_text("belgrade", "city", ["Belgrade"]) == "I have no events in belgrade."
