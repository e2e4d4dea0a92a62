"""RRF and role boosts checked by hand on a small example."""
from kbframework.retrieval.search import Hit, apply_role_boost, rrf


def hits(leg, ids):
    return [Hit(chunk_id=c, document_id=f"d{c}", rank=i + 1, score=1.0, leg=leg) for i, c in enumerate(ids)]


def test_rrf_scores_by_hand():
    fused = rrf({"vector": hits("vector", [1, 2, 3]), "keyword": hits("keyword", [3, 1, 4])})
    by_id = {f["chunk_id"]: f for f in fused}
    # chunk 1: 1/(60+1) + 1/(60+2); chunk 3: 1/(60+3) + 1/(60+1); chunk 2: 1/62; chunk 4: 1/63
    assert abs(by_id[1]["score"] - (1 / 61 + 1 / 62)) < 1e-8
    assert abs(by_id[3]["score"] - (1 / 63 + 1 / 61)) < 1e-8
    assert abs(by_id[2]["score"] - 1 / 62) < 1e-8
    assert abs(by_id[4]["score"] - 1 / 63) < 1e-8
    assert [f["chunk_id"] for f in fused] == [1, 3, 2, 4]
    assert by_id[3]["ranks"] == {"vector": 3, "keyword": 1}
    assert [f["rank"] for f in fused] == [1, 2, 3, 4]


def test_rrf_single_leg_keeps_order():
    fused = rrf({"vector": [], "keyword": hits("keyword", [9, 8, 7])})
    assert [f["chunk_id"] for f in fused] == [9, 8, 7]


def test_role_boost_reranks_but_never_filters():
    fused = rrf({"vector": hits("vector", [1, 2, 3])})
    roles = {"d1": "article", "d2": "support", "d3": "product"}
    out = apply_role_boost(fused, roles, ["product", "support", "article"])
    assert [f["chunk_id"] for f in out] == [3, 2, 1]
    assert {f["chunk_id"]: f["boost"] for f in out} == {3: 1.3, 2: 1.1, 1: 1.0}
    assert len(out) == 3
    # neutral mode: no boost, order unchanged
    assert [f["chunk_id"] for f in apply_role_boost(fused, roles, [])] == [1, 2, 3]


# --------------------------------------------------------------------------- events and venue pages

import pytest  # noqa: E402

from kbframework.retrieval import fusion  # noqa: E402


@pytest.mark.parametrize("question,expected", [
    ("upcoming concerts at Sala Farol", True), ("shows at Teatro Garrido", True),
    ("what's happening at Estufa", True), ("any events in Alvorada?", True),
    ("what happens to my ticket if the open-air show is rained off?", False),  # the visitor's own ticket
    ("can I buy tickets at the door?", False), ("is the club step-free?", False), ("address of Armazém 7", False),
    ("lantern festival paper lantern", False), ("a party dress", False),  # products named so
])
def test_asks_for_events(question, expected):
    assert fusion.asks_for_events(question) is expected


@pytest.mark.parametrize("question,expected", [
    ("address of Armazém 7", True), ("jazz club in Vale Dourado", True), ("how do I get to Sala Farol?", True),
    ("the venue in the converted power station", True), ("where is Teatro Maré?", True),
    ("upcoming concerts at Sala Farol", False),  # events held there
    ("cheaper theatre seats for students?", False),  # a price, not a place
    ("what ID do I need to get into a club night?", False),  # a rule
    ("a warm sleeping bag", False),
])
def test_asks_for_a_venue(question, expected):
    assert fusion.asks_for_a_venue(question) is expected


def test_venue_pages_are_the_non_event_documents_whose_title_names_a_venue():
    titles = {"a": "Armazém 7 — venue information", "b": "Armazém 7 Turns Nine — 12-Hour Party",
              "c": "Paying at the Venues", "d": "Armazem 70 Bar"}
    roles = {"a": "support", "b": "event", "c": "support", "d": "article"}
    assert fusion.venue_pages(titles, roles, ["Armazém 7", "Sala Farol"]) == {"a"}


def test_boost_venue_pages_reranks_and_never_filters():
    fused = apply_role_boost(rrf({"vector": hits("vector", [1, 2, 3])}), {}, [])
    out = fusion.boost_venue_pages(fused, {"d2"}, factor=1.3)
    assert [f["chunk_id"] for f in out] == [2, 1, 3] and [f["final_rank"] for f in out] == [1, 2, 3]
    assert fusion.boost_venue_pages(fused, set()) == fused
