"""Whole conversations through the real pipeline (PostgreSQL + pgvector, the offline embedder):
each turn classified standalone / follow-up / topic shift, filters inherited or dropped,
comparatives bounded by what was shown, referents found from plain ``{role, content}`` history
and from ``session_id``, and follow-ups after a fallback. Every conversation in ``CONVERSATIONS``
runs against one seeded organization; a failure names the conversation and the turn."""
import pytest

from kbframework.retrieval.answer import answer
from tests.retrieval_support import EVENTS, NOW, PRODUCTS, SUPPORT, event, fake_llm, local, seed  # noqa: F401

MORE = [
    event("Novi Sad Techno Weekender", local(2026, 3, 28, 22), local(2026, 3, 29, 4), 18, ["techno"],
          venue="Fabrika", city="Novi Sad",
          body="# Novi Sad Techno Weekender\n\nA techno night by the Danube with two visiting DJs."),
    event("Jazz Saturday Novi Sad", local(2026, 3, 28, 20), local(2026, 3, 28, 23), 12, ["jazz"],
          venue="Fabrika", city="Novi Sad", body="# Jazz Saturday Novi Sad\n\nA jazz quartet plays standards."),
]


@pytest.fixture
def org(kb_org):
    ids = seed(kb_org["id"], EVENTS + PRODUCTS + SUPPORT + MORE)
    return {**kb_org, "ids": ids}


def titles(res):
    return [c["title"] for c in res["cards"]]


def kind(res):
    return res["debug"]["conversation"].get("kind", "standalone")


def merged(res):
    return res["debug"]["filters"]["merged"]


# A conversation: (name, mode, turns). A turn: (question, check), where check(res, prev) raises
# AssertionError; ``prev`` is the previous turn's result. "assistant:" turns are written
# replies (plain history, no document ids) instead of questions.

def first(title):
    def check(res, prev):
        assert titles(res) and titles(res)[0] == title, titles(res)
    return check


def has(*names, kind_=None):
    def check(res, prev):
        got = titles(res)
        assert set(names) <= set(got), got
        if kind_:
            assert kind(res) == kind_, res["debug"]["conversation"]
    return check


def lacks(*names):
    def check(res, prev):
        assert not set(names) & set(titles(res)), titles(res)
    return check


def all_of(*checks):
    def check(res, prev):
        for c in checks:
            c(res, prev)
    return check


def is_kind(k):
    def check(res, prev):
        assert kind(res) == k, res["debug"]["conversation"]
    return check


def filt(**want):
    def check(res, prev):
        m = merged(res)
        for k, v in want.items():
            if v is None:
                assert k not in m, (k, m)
            else:
                assert m.get(k) == v, (k, m)
    return check


def zero(flag=True):
    def check(res, prev):
        assert (res["debug"]["reason"] is not None) is flag, res["debug"].get("gate")
    return check


def _only(res, title):
    assert titles(res) == [title], titles(res)


def only_events():
    def check(res, prev):
        assert res["cards"] and all(c["type"] == "event" for c in res["cards"]), titles(res)
    return check


def no_events():
    def check(res, prev):
        assert all(c["type"] != "event" for c in res["cards"]), titles(res)
    return check


def prices_below(limit):
    def check(res, prev):
        assert res["cards"], "nothing cheaper found"
        assert all(float(c["price"].strip("€")) < limit for c in res["cards"] if c.get("price")), titles(res)
    return check


TOMORROW = "Tomorrow there are two nights: Techno Tomorrow Club at Warehouse and Jazz Evening Tomorrow at Bitef Art Cafe."
WEEKEND = "This weekend: Techno Marathon Sunday (€40) and Techno Bunker Saturday (€25)."
DRESSES = "We have the Red Summer Dress (€39.99) and the Red Linen Midi Dress (€45)."

CONVERSATIONS = [
    # --- topic shifts after a filtered answer
    ("shift: dress then tonight", "search", [
        ("red dress under 50 in stock", first("Red Summer Dress")),
        ("what is on tonight?", all_of(is_kind("topic_shift"), has("Techno Under Way"), lacks("Red Summer Dress"),
                                       filt(price_max=None, in_stock=None)))]),
    ("shift: weekend techno then jackets", "search", [
        ("techno this weekend under €30", has("Techno Bunker Saturday")),
        ("do you have blue jackets?", all_of(is_kind("topic_shift"), first("Blue Denim Jacket"), no_events(),
                                              filt(date_start=None, price_max=None)))]),
    ("shift: dresses then returns", "search", [
        ("dresses under 50", has("Red Summer Dress")),
        ("what is your return policy?", all_of(is_kind("topic_shift"), filt(price_max=None)))]),
    ("shift: jazz tomorrow then red dresses", "search", [
        ("jazz tomorrow", has("Jazz Evening Tomorrow")),
        ("show me red dresses", all_of(is_kind("topic_shift"), filt(date_start=None), no_events()))]),
    ("shift: tonight then dresses", "search", [
        ("what's on tonight?", has("Techno Under Way")),
        ("red dress under 50", all_of(is_kind("topic_shift"), has("Red Summer Dress", "Red Linen Midi Dress"),
                                      no_events(), filt(date_start=None)))]),
    ("shift: Novi Sad techno then jacket", "search", [
        ("techno in Novi Sad this weekend", first("Novi Sad Techno Weekender")),
        ("blue denim jacket", all_of(is_kind("topic_shift"), first("Blue Denim Jacket"), filt(city=None)))]),
    ("shift: dresses then techno next week", "search", [
        ("dresses under 50", has("Red Summer Dress")),
        ("techno next week", all_of(is_kind("topic_shift"), first("Cheap Techno Next Week"), filt(price_max=None)))]),
    ("shift: jacket then Bitef tomorrow", "search", [
        ("blue denim jacket", first("Blue Denim Jacket")),
        ("what's on at Bitef Art Cafe tomorrow?", all_of(is_kind("topic_shift"), first("Jazz Evening Tomorrow")))]),
    # --- refinements that inherit time, place, price, stock
    ("refine: weekend techno, and in Novi Sad", "events", [
        ("techno this weekend under €30", has("Techno Bunker Saturday")),
        ("and in Novi Sad?", all_of(is_kind("follow_up"), first("Novi Sad Techno Weekender"),
                                    filt(city="Novi Sad", price_max=30), lacks("Techno Bunker Saturday")))]),
    ("refine: tomorrow in Belgrade, and jazz", "events", [
        ("what's on tomorrow in Belgrade?", has("Techno Tomorrow Club")),
        ("and jazz?", all_of(is_kind("follow_up"), first("Jazz Evening Tomorrow"), filt(city="Belgrade"),
                             lacks("Jazz Saturday Novi Sad")))]),
    ("refine: dresses under 50, in red", "shopping", [
        ("dresses under 50", has("Red Summer Dress")),
        ("in red?", all_of(is_kind("follow_up"), filt(price_max=50), lacks("Crimson Evening Dress")))]),
    ("refine: weekend techno, and under 30", "events", [
        ("techno this weekend", has("Techno Marathon Sunday")),
        ("and under €30?", all_of(is_kind("follow_up"), has("Techno Bunker Saturday"), lacks("Techno Marathon Sunday"),
                                  filt(price_max=30)))]),
    ("refine: weekend techno under 30, and tomorrow", "events", [
        ("techno this weekend under €30", has("Techno Bunker Saturday")),
        ("and tomorrow?", all_of(is_kind("follow_up"), first("Techno Tomorrow Club"), filt(price_max=30),
                                 lacks("Jazz Evening Tomorrow")))]),
    ("refine: dresses in stock, under 50", "shopping", [
        ("dresses in stock", has("Red Summer Dress")),
        ("under 50?", all_of(is_kind("follow_up"), filt(in_stock=True, price_max=50), lacks("Red Linen Midi Dress")))]),
    ("refine: events in Novi Sad, this weekend", "events", [
        ("events in Novi Sad", has("Novi Sad Techno Weekender")),
        ("this weekend?", all_of(is_kind("follow_up"), filt(city="Novi Sad"), only_events(),
                                 lacks("Techno Bunker Saturday", "Techno Marathon Sunday")))]),
    ("refine: jazz tomorrow, and on Saturday", "events", [
        ("jazz tomorrow", first("Jazz Evening Tomorrow")),
        ("and on Saturday?", all_of(is_kind("follow_up"), first("Jazz Saturday Novi Sad"),
                                    lacks("Jazz Evening Tomorrow")))]),
    ("refine: red dresses, in stock under 40", "shopping", [
        ("red dresses", has("Red Summer Dress")),
        ("anything in stock under 40?", all_of(is_kind("follow_up"), first("Red Summer Dress"),
                                               filt(in_stock=True, price_max=40)))]),
    ("refine: techno tonight, what about tomorrow", "events", [
        ("techno tonight", first("Techno Under Way")),
        ("what about tomorrow?", all_of(is_kind("follow_up"), first("Techno Tomorrow Club")))]),
    # --- comparatives bounded by what was shown
    ("comparative: cheaper than the evening dress", "shopping", [
        ("red dresses", has("Crimson Evening Dress")), ("assistant:The Crimson Evening Dress is €89.", None),
        ("anything cheaper?", all_of(is_kind("follow_up"), lacks("Crimson Evening Dress"), has("Red Summer Dress"),
                                     filt(price_max=88.99)))]),
    ("comparative: pricier than the summer dress", "shopping", [
        ("red dresses", has("Red Summer Dress")), ("assistant:The Red Summer Dress is €39.99.", None),
        ("anything more expensive?", all_of(is_kind("follow_up"), lacks("Red Summer Dress"), has("Crimson Evening Dress"),
                                            filt(price_min=40.0)))]),
    ("comparative: later than the Thursday club", "events", [
        ("techno nights", None), ("assistant:Techno Tomorrow Club is on Thursday night.", None),
        ("anything later?", all_of(is_kind("follow_up"), lacks("Techno Tomorrow Club", "Techno Under Way"),
                                   has("Techno Bunker Saturday"), only_events()))]),
    ("comparative: earlier than the Saturday bunker", "events", [
        ("techno nights", None), ("assistant:Techno Bunker Saturday is on Saturday night.", None),
        ("anything earlier?", all_of(is_kind("follow_up"), lacks("Techno Bunker Saturday", "Techno Marathon Sunday"),
                                     has("Techno Tomorrow Club")))]),
    ("comparative: cheaper weekend techno", "events", [
        ("techno this weekend", None), ("assistant:" + WEEKEND, None),
        ("cheaper?", all_of(is_kind("follow_up"), prices_below(40), lacks("Techno Marathon Sunday")))]),
    ("comparative: something cheaper than the jacket", "shopping", [
        ("jackets", None), ("assistant:The Blue Denim Jacket is €59.", None),
        ("something cheaper?", all_of(is_kind("follow_up"), lacks("Blue Denim Jacket"), filt(price_max=58.99)))]),
    # --- referents from plain history (written replies, no document ids)
    ("plain: a venue's events only", "search", [
        # the venue filter applies to events only: the products it lets pass are not listed
        ("what is happening at Fabrika?", all_of(only_events(), has("Novi Sad Techno Weekender", "Jazz Saturday Novi Sad")))]),
    ("plain: the cheapest this weekend", "events", [
        # a superlative orders what meets the rest: the listing, cheapest first
        ("the cheapest techno this weekend?", all_of(first("Novi Sad Techno Weekender"),
                                                     has("Techno Bunker Saturday", "Techno Marathon Sunday")))]),
    ("plain: the dearest this weekend", "events", [
        ("what is the most expensive event this weekend?", first("Techno Marathon Sunday"))]),
    ("plain: Monday is not Sunday's late night", "events", [
        # the Sunday marathon runs to 06:00 on Monday, past the 05:00 cut-off: it is Sunday's night
        ("what's on Monday?", all_of(has("Sunrise Techno Monday"), lacks("Techno Marathon Sunday")))]),
    ("plain: link of tomorrow's nights", "events", [
        ("what's on tomorrow?", None), ("assistant:" + TOMORROW, None),
        ("what's the link?", all_of(lambda r, p: titles(r)[:2] == ["Techno Tomorrow Club", "Jazz Evening Tomorrow"],
                                    lambda r, p: r["cards"][0]["url"].endswith("/techno-tomorrow-club")))]),
    ("plain: price of the second one", "events", [
        ("what's on tomorrow?", None), ("assistant:" + TOMORROW, None),
        ("how much is the second one?", all_of(is_kind("follow_up"), first("Jazz Evening Tomorrow")))]),
    ("plain: tickets for the first one", "events", [
        ("what's on tomorrow?", None), ("assistant:" + TOMORROW, None),
        ("tickets for the first one?", first("Techno Tomorrow Club"))]),
    ("plain: is the second one in stock", "shopping", [
        ("red dresses under 50", None), ("assistant:" + DRESSES, None),
        ("is the second one in stock?", all_of(first("Red Linen Midi Dress"),
                                               lambda r, p: r["cards"][0]["in_stock"] is False))]),
    ("plain: the Saturday one", "events", [
        ("techno this weekend", None), ("assistant:" + WEEKEND, None),
        ("tickets for the Saturday one?", first("Techno Bunker Saturday"))]),
    ("plain: the cheapest one", "events", [
        ("techno this weekend", None), ("assistant:" + WEEKEND, None),
        ("the cheapest one?", first("Techno Bunker Saturday"))]),
    ("plain: a SKU named in the reply", "shopping", [
        ("an evening dress", None), ("assistant:DR-CRM-02 is our evening dress.", None),
        ("how much is it?", first("Crimson Evening Dress"))]),
    ("plain: a link named in the reply", "shopping", [
        ("a jacket", None), ("assistant:See https://demo-shop.example/product/blue-denim-jacket for ours.", None),
        ("what's the link?", first("Blue Denim Jacket"))]),
    # --- referents and refinements from the session's log (only session_id)
    ("session: the link", "shopping", [
        ("red dress under 50 in stock", first("Red Summer Dress")),
        ("what's the link?", lambda r, p: titles(r)[0] == titles(p)[0])]),
    ("session: the second one", "events", [
        ("what's on tomorrow?", lambda r, p: len(r["cards"]) >= 2),
        ("tickets for the second one?", lambda r, p: titles(r)[0] == titles(p)[1])]),
    ("session: and tomorrow", "events", [
        ("techno this weekend under €30", has("Techno Bunker Saturday")),
        ("and tomorrow?", all_of(is_kind("follow_up"), first("Techno Tomorrow Club"), filt(price_max=30)))]),
    ("session: cheaper", "shopping", [
        ("Crimson Evening Dress", first("Crimson Evening Dress")),
        ("anything cheaper?", all_of(lacks("Crimson Evening Dress"), filt(price_max=88.99)))]),
    ("session: which of those", "events", [
        ("what is on this weekend?", has("Techno Bunker Saturday", "Jazz Saturday Novi Sad")),
        # picks among what was shown by its own constraint, not all that was shown
        ("any ones under €20?", all_of(is_kind("follow_up"), has("Jazz Saturday Novi Sad", "Novi Sad Techno Weekender"),
                                        lacks("Techno Bunker Saturday", "Techno Marathon Sunday"), filt(price_max=20)))]),
    ("session: is the first one", "shopping", [
        ("red dresses", first("Red Linen Midi Dress")),
        # a yes/no about the first one shown: it alone, even though its rewrite is all constraints
        ("is the first one under 50?", lambda res, prev: _only(res, "Red Linen Midi Dress"))]),
    ("session: a detail of nothing shown", "events", [
        ("techno next week under €5", zero(True)),
        # nothing was shown to ask a detail of: a question of its own, not "next week under €5 free"
        ("is there anything free?", all_of(is_kind("topic_shift"), filt(date_start=None, price_max=0)))]),
    ("session: topic shift", "search", [
        ("dresses under 50", has("Red Summer Dress")),
        ("what is on tonight?", all_of(is_kind("topic_shift"), lacks("Red Summer Dress", "Red Linen Midi Dress")))]),
    # --- follow-ups after a fallback
    ("after fallback: what about red dresses", "shopping", [
        ("do you sell gift vouchers?", zero(True)),
        ("what about red dresses?", all_of(zero(False), has("Red Summer Dress")))]),
    ("after fallback: a new price", "events", [
        ("techno next week under €5", zero(True)),
        ("and under €15?", all_of(zero(False), is_kind("follow_up"), has("Cheap Techno Next Week"), filt(price_max=15)))]),
    ("after fallback: a new topic", "search", [
        ("xylophone quantum chromodynamics", zero(True)),
        ("what is your return policy?", all_of(zero(False), is_kind("topic_shift")))]),
    ("after fallback: a link with nothing shown", "search", [
        ("do you sell gift vouchers?", zero(True)),
        ("what's the link?", zero(True))]),
]

SESSION = {name for name, _, _ in CONVERSATIONS if name.startswith("session:")}


def run_conversation(org, name, mode, turns):
    hist, prev = [], None
    session = f"s-{abs(hash(name))}" if name in SESSION else None
    for i, (q, check) in enumerate(turns):
        if q.startswith("assistant:"):
            hist.append({"role": "assistant", "content": q[len("assistant:"):]})
            continue
        res = answer(org["id"], q, mode=mode, history=None if session else list(hist), session_id=session, now=NOW)
        if check is not None:
            try:
                check(res, prev)
            except AssertionError as exc:
                raise AssertionError(f"{name!r}, turn {i + 1} {q!r}: {exc} · {res['debug'].get('explain')}") from None
        hist += [{"role": "user", "content": q}]
        if i + 1 < len(turns) and not turns[i + 1][0].startswith("assistant:"):
            hist.append({"role": "assistant", "content": res["answer"]})
        prev = res


def test_there_are_forty_conversations():
    assert len(CONVERSATIONS) >= 40


@pytest.mark.parametrize("group", ["shift:", "refine:", "comparative:", "plain:", "session:", "after fallback:"])
def test_conversations(org, group):
    failures = []
    for name, mode, turns in CONVERSATIONS:
        if name.startswith(group):
            try:
                run_conversation(org, name, mode, turns)
            except AssertionError as exc:
                failures.append(str(exc))
    assert not failures, "\n".join(failures)


def test_debug_shows_decision_reason_and_inherited_filters(org):
    q1 = "techno this weekend under €30"
    r1 = answer(org["id"], q1, mode="events", now=NOW)
    hist = [{"role": "user", "content": q1}, {"role": "assistant", "content": r1["answer"]}]
    r2 = answer(org["id"], "and in Novi Sad?", mode="events", history=hist, now=NOW)
    conv = r2["debug"]["conversation"]
    assert conv["kind"] == "follow_up" and "starts with 'and'" in conv["reason"]
    inherited = {i["field"] for i in r2["debug"]["filters"]["inherited"]}
    assert {"date_range", "price_max"} <= inherited
    steps = [s["name"] for s in r2["debug"]["steps"]]
    assert steps.index("conversation") < steps.index("rewrite_query") < steps.index("extract_filters") \
        < steps.index("inherit_filters") < steps.index("prefilter") < steps.index("rrf") < steps.index("log")
    assert next(s for s in r2["debug"]["steps"] if s["name"] == "inherit_filters")["output"]["inherited"]


def test_the_llm_classifies_the_turn_when_configured(org, fake_llm):
    hist = [{"role": "user", "content": "techno this weekend under €30"}, {"role": "assistant", "content": "One."}]
    fake_llm.rewrite = "techno tomorrow under €30"
    res = answer(org["id"], "and tomorrow?", mode="events", history=hist, now=NOW)
    assert res["debug"]["conversation"]["how"] == "llm" and res["debug"]["conversation"]["kind"] == "follow_up"
    assert "classify" in fake_llm.calls
    fake_llm.classify = "NEW"
    res = answer(org["id"], "and tomorrow?", mode="events", history=hist, now=NOW)
    assert res["debug"]["conversation"]["kind"] == "topic_shift" and "the LLM judged" in res["debug"]["conversation"]["reason"]
    assert res["debug"]["rewrite"] is None
    fake_llm.classify = 500  # a failing classifier leaves the rules' decision
    res = answer(org["id"], "and tomorrow?", mode="events", history=hist, now=NOW)
    assert res["debug"]["conversation"]["kind"] == "follow_up" and res["debug"]["conversation"]["how"] == "rules"
