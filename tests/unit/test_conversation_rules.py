"""Pure parts of the conversation state, identity, the gate and the tracer."""
from datetime import datetime, timezone

import pytest

from kbframework.retrieval import gate, referents
from kbframework.retrieval.conversation import FOLLOW_UP, STANDALONE, TOPIC_SHIFT, TurnKind, classify
from kbframework.retrieval.identity import NameIndex, is_sku_shaped
from kbframework.retrieval.trace import Trace

H = [{"role": "user", "content": "show me red dresses under 100"}, {"role": "assistant", "content": "Two."}]


@pytest.mark.parametrize("q, kind", [
    ("what is on tonight?", TOPIC_SHIFT), ("do you sell gift vouchers?", TOPIC_SHIFT), ("show me tents", TOPIC_SHIFT),
    ("what is your return policy?", TOPIC_SHIFT), ("red dress under 50", TOPIC_SHIFT),
    ("and tonight?", FOLLOW_UP), ("anything cheaper?", FOLLOW_UP), ("the cheaper one?", FOLLOW_UP),
    ("is the second one in stock?", FOLLOW_UP), ("what's the link?", FOLLOW_UP), ("how much is it?", FOLLOW_UP),
    ("tickets for the Saturday one?", FOLLOW_UP), ("and jazz?", FOLLOW_UP), ("in red?", FOLLOW_UP),
    ("tomorrow?", FOLLOW_UP), ("is there an age limit?", FOLLOW_UP), ("what about blue?", FOLLOW_UP),
    ("can I send them back if they don't fit?", FOLLOW_UP), ("how do I get there?", FOLLOW_UP),
    ("with a logo", FOLLOW_UP), ("without sleeves?", FOLLOW_UP), ("for kids?", FOLLOW_UP),
    ("with free shipping to the whole of Europe and beyond?", TOPIC_SHIFT),  # long: a question of its own
])
def test_turn_kinds(q, kind):
    t = classify(q, H)
    assert t.kind == kind, (q, t)
    assert t.reason


def test_first_question_is_standalone_and_pointers_are_read():
    assert classify("and tonight?", []).kind == STANDALONE
    assert classify("is the second one in stock?", H).ordinal == 1
    assert classify("the last one", H).ordinal == -1
    assert classify("the cheaper one?", H).superlative == "cheapest"
    assert classify("anything cheaper?", H).comparative == "cheaper"
    assert classify("anything more expensive?", H).comparative == "pricier"
    assert classify("tickets for the Saturday one?", H).selector == "Saturday"
    assert classify("and jazz?", H).new_subject is True


def test_identity_whole_names_skus_and_the_main_product_first():
    idx = NameIndex()
    for i, (title, sku) in enumerate([("Altair Trailhead 2 Tent", "ALT-TH2"), ("Altair Trailhead 2 Footprint", "ALT-TH2-FP"),
                                      ("Altair Homestead 4 Family Tent", "ALT-HS4"),
                                      ("Altair Homestead 4 Tent Carpet", "ALT-HS4-CP"), ("Return policy", None)]):
        idx.add(f"d{i}", title, "product", sku, f"https://shop.example/p/{i}")
    assert idx.identify("ALT-TH2")[0] == ["d0"]          # not the look-alike ALT-TH2-FP
    assert idx.identify("ALT-TH2-FP")[0] == ["d1"]
    assert idx.identify("Altair Trailhead 2 Tent")[0] == ["d0"]
    assert idx.identify("Trailhead 2 footprint")[0] == ["d1"]  # without the brand word
    assert idx.identify("Altair Homestead 4")[0] == ["d2"]    # the tent, not its carpet
    assert idx.identify("Homestead 4 tent carpet")[0] == ["d3"]
    assert idx.identify("a tent for two")[0] == []
    assert [n.document_id for n in idx.find("See https://shop.example/p/3 and the Altair Trailhead 2 Tent")] == ["d3", "d0"]
    assert is_sku_shaped("is FER-EC24 in stock?") and not is_sku_shaped("a well-made tent")


def test_pick_and_comparative_bound():
    d = lambda price, day: {"title": "x", "role": "event", "price": price,  # noqa: E731
                            "event_start": datetime(2026, 3, day, 20, tzinfo=timezone.utc), "tags": []}
    info = {"a": d(40, 29), "b": d(25, 28), "c": d(10, 27)}  # Sunday, Saturday, Friday
    shown = ["a", "b", "c"]
    assert referents.pick(shown, info, TurnKind(ordinal=1))[0] == ["b"]
    assert referents.pick(shown, info, TurnKind(selector="Saturday"), "UTC")[0] == ["b"]
    assert referents.pick(shown, info, TurnKind(superlative="cheapest"))[0] == ["c"]
    assert referents.pick(shown, info, TurnKind())[0] == shown
    assert referents.comparative_bound(TurnKind(comparative="cheaper"), shown, info) == {"price_max": 39.99}
    assert referents.comparative_bound(TurnKind(comparative="later"), shown, info) == {"start_after": info["a"]["event_start"]}
    assert referents.comparative_bound(TurnKind(comparative="bigger"), shown, info) == {}


def test_gate_overlap_weights_rare_words_and_synonyms():
    w = {"opera": 8.0, "ticket": 1.0}
    assert gate.overlap(["opera", "ticket"], {"ticket"}, w) == pytest.approx(1 / 9)
    assert gate.overlap(["voucher"], {"gift", "card"}, {"voucher": 3.0}, {"voucher": {"gift"}}) == 1.0
    assert gate.decide({"passages": [{"score": 0.5}, {"score": 0.1}]}, 0.29) == (True, 0.5)
    assert gate.decide({"passages": []}, 0.29) == (False, 0.0)
    assert gate.score(0.3, 0.5, 1.0, 1.0) < gate.score(0.3, 0.5, 1.0, 0.0)


def test_trace_records_order_time_output_and_errors():
    t = Trace()
    with t.step("a") as s:
        s.output = {"n": 1}
    with pytest.raises(ValueError):
        with t.step("b"):
            raise ValueError("boom")
    out = t.as_list()
    assert [x["name"] for x in out] == ["a", "b"] and out[0]["output"] == {"n": 1}
    assert out[1]["error"] == "ValueError: boom" and all(isinstance(x["ms"], float) for x in out)
    assert list(t.timings()) == ["a", "b", "total"]
