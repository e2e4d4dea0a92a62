"""Retrieval intelligence through the real pipeline (PostgreSQL + pgvector, the offline embedder):
filters in SQL before both searches, conversation follow-ups, link requests, cards that an LLM
cannot touch, every honest fallback, the context budget. Only the hosted LLM is faked, at the
HTTP level, with the real ``openai`` client."""
import json

import pytest
from click.testing import CliRunner
from sqlalchemy import select

from kbframework.db import session_scope
from kbframework.models import ChatLog
from kbframework.retrieval.answer import answer, strip_unknown_links
from tests.retrieval_support import (EVENTS, NOW, PRODUCTS, SUPPORT, event, fake_llm, local, seed,  # noqa: F401
                                     set_settings, titles)


@pytest.fixture
def shop(kb_org):
    ids = seed(kb_org["id"], EVENTS + PRODUCTS + SUPPORT)
    return {**kb_org, "ids": ids}


def ask(org, q, **kw):
    kw.setdefault("now", NOW)
    return answer(org["id"], q, **kw)


def part(res, field):
    return [p for p in res["debug"]["filters"]["parts"] if p["field"] == field]


# --------------------------------------------------------------------------- filters


def test_kbf_filters_shows_every_extractor_and_iso_range(shop):
    from kbframework.cli.commands import cli as main

    r = CliRunner().invoke(main, ["filters", "--org", "test-org", "--now", NOW.isoformat(), "--json",
                                  "techno this weekend under €30"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    got = {(p["extractor"], p["field"]) for p in out["parts"]}
    assert {("temporal", "date_range"), ("rules", "price_max"), ("rules", "tag")} <= got
    # Saturday 05:00 CET → Monday 05:00 CEST: the daylight-saving change is honoured
    assert out["merged"]["date_start"] == "2026-03-28T04:00:00+00:00"
    assert out["merged"]["date_end"] == "2026-03-30T03:00:00+00:00"
    assert out["merged"]["price_max"] == 30 and out["merged"]["label_groups"] == [["techno"]]
    # the organization's setting reaches the parser: the weekend starts on Friday 18:00
    set_settings(shop["id"], weekend_starts_friday=True)
    r = CliRunner().invoke(main, ["filters", "--org", "test-org", "--now", NOW.isoformat(), "--json", "this weekend"])
    assert json.loads(r.output)["merged"]["date_start"] == "2026-03-27T17:00:00+00:00"
    # the night cut-off is a setting too: with 07:00 "tonight" ends at 07:00 local
    set_settings(shop["id"], night_cutoff="07:00")
    r = CliRunner().invoke(main, ["filters", "--org", "test-org", "--now", NOW.isoformat(), "--json", "tonight"])
    assert json.loads(r.output)["merged"]["date_end"] == "2026-03-26T06:00:00+00:00"
    r = CliRunner().invoke(main, ["filters", "--org", "test-org", "--now", NOW.isoformat(), "24 pack of socks"])
    assert r.exit_code == 0 and "no filters found" in r.output


def test_event_outside_the_range_or_over_the_price_never_reaches_the_prompt(shop):
    res = ask(shop, "techno this weekend under €30", mode="events")
    assert titles(res["cards"]) == ["Techno Bunker Saturday"]
    prompt = res["debug"]["prompt"]
    assert "Techno Bunker Saturday" in prompt
    for other in ("Techno Marathon Sunday",  # over the price
                  "Sunrise Techno Monday",  # Monday 05:30 CEST: after the DST-aware end of the weekend
                  "Techno Tomorrow Club", "Jazz Evening Tomorrow", "Techno Last Week", "Cheap Techno Next Week"):
        assert other not in prompt, other
    assert res["debug"]["search_text"] == "techno"  # the legs search the topic, SQL enforces the rest
    assert any("priced at most 30" in line for line in res["debug"]["explain"])


def test_events_under_way_count_and_no_time_means_future(shop):
    res = ask(shop, "techno tonight", mode="events")
    assert titles(res["cards"]) == ["Techno Under Way"]  # started at 14:00, still running at 15:00
    res = ask(shop, "techno nights", mode="events")
    got = set(titles(res["cards"]))
    assert "Techno Last Week" not in got and "Techno Last Week" not in res["debug"]["prompt"]
    assert "Cheap Techno Next Week" in got
    assert any("not ended yet" in line for line in res["debug"]["explain"])


def test_metadata_filters_price_stock_category_tag(shop):
    res = ask(shop, "red dress under 50 in stock", mode="shopping")
    assert titles(res["cards"]) == ["Red Summer Dress"]
    assert "Crimson Evening Dress" not in res["debug"]["prompt"]  # €89
    assert "Red Linen Midi Dress" not in res["debug"]["prompt"]  # out of stock
    merged = res["debug"]["filters"]["merged"]
    assert merged["price_max"] == 50 and merged["in_stock"] is True
    assert sorted(map(sorted, merged["label_groups"])) == [["Dresses", "dresses"], ["red"]]
    assert {p["extractor"] for p in res["debug"]["filters"]["parts"]} == {"rules"}
    res = ask(shop, "dresses between 40 and 100", mode="shopping")
    assert set(titles(res["cards"])) == {"Crimson Evening Dress", "Red Linen Midi Dress"}
    # a colour that is not one of the shop's tags is no filter
    res = ask(shop, "green dress", mode="shopping")
    assert not [p for p in part(res, "tag") if "green" in json.dumps(p["value"])]
    assert {"Red Summer Dress", "Crimson Evening Dress", "Red Linen Midi Dress"} <= set(titles(res["cards"]))


def test_a_label_that_does_not_describe_its_word_is_not_a_filter(kb_org):
    docs = [{"title": f"Rain jacket {i}", "role": "product", "tags": ["waterproof"] if i == 0 else [],
             "metadata": {"price": 100 + i, "in_stock": True},
             "body": f"# Rain jacket {i}\n\nA waterproof rain jacket, model {i}, with taped seams."} for i in range(3)]
    seed(kb_org["id"], docs)
    res = answer(kb_org["id"], "waterproof jacket", mode="shopping", now=NOW)
    tag = part(res, "tag")[0]
    assert tag["applied"] is False and "covers only 1 of the 3" in tag["why_not"]
    assert len(res["cards"]) == 3
    assert any(line.startswith("ignored tag") for line in res["debug"]["explain"])


# --------------------------------------------------------------------------- conversation


def test_three_turn_conversation_with_follow_ups(shop):
    q1 = "techno this weekend under €30"
    r1 = ask(shop, q1, mode="events", session_id="conv-1")
    assert titles(r1["cards"]) == ["Techno Bunker Saturday"]
    hist = [{"role": "user", "content": q1}, {"role": "assistant", "content": r1["answer"]}]
    r2 = ask(shop, "and tomorrow?", mode="events", history=hist, session_id="conv-1")
    rw = r2["debug"]["rewritten_query"]
    assert r2["debug"]["rewrite"] == "offline"
    assert "techno" in rw and "€30" in rw and "tomorrow" in rw and "weekend" not in rw
    assert titles(r2["cards"]) == ["Techno Tomorrow Club"]  # the genre is kept: not the jazz
    assert q1 in r2["debug"]["prompt"]  # the prompt carries the recent messages
    hist += [{"role": "user", "content": "and tomorrow?"}, {"role": "assistant", "content": r2["answer"]}]
    r3 = ask(shop, "the cheaper one?", mode="events", history=hist, session_id="conv-1")
    rw3 = r3["debug"]["rewritten_query"]
    assert "techno" in rw3 and "tomorrow" in rw3 and "€30" in rw3
    assert titles(r3["cards"]) == ["Techno Tomorrow Club"]
    with session_scope() as s:
        rows = s.scalars(select(ChatLog).where(ChatLog.session_id == "conv-1").order_by(ChatLog.created_at)).all()
        assert [(r.query, bool(r.rewritten_query)) for r in rows] == [
            (q1, False), ("and tomorrow?", True), ("the cheaper one?", True)]
        assert rows[1].rewritten_query == rw


def test_history_window_limits_the_prompt(shop):
    set_settings(shop["id"], history_window=2)
    hist = [{"role": "user", "content": f"old question {i}"} if i % 2 == 0 else
            {"role": "assistant", "content": f"old answer {i}"} for i in range(6)]
    res = ask(shop, "what is your return policy?", history=hist)
    assert "old answer 5" in res["debug"]["prompt"] and "old question 4" in res["debug"]["prompt"]
    assert "old question 2" not in res["debug"]["prompt"]


def test_link_request_puts_the_previous_answer_first(shop):
    # the client sends the previous answer's cards as document_ids
    ids = shop["ids"]
    hist = [{"role": "user", "content": "what's on tomorrow?"},
            {"role": "assistant", "content": "Two nights.",
             "document_ids": [ids["Techno Tomorrow Club"], ids["Jazz Evening Tomorrow"]]}]
    res = ask(shop, "what's the link?", mode="events", history=hist)
    assert titles(res["cards"])[:2] == ["Techno Tomorrow Club", "Jazz Evening Tomorrow"]
    assert res["cards"][0]["url"] == "https://nights.example/events/techno-tomorrow-club"
    assert res["debug"]["link_request"]["pinned_first"] == [ids["Techno Tomorrow Club"], ids["Jazz Evening Tomorrow"]]
    # ...or only a session id: the conversation and the last answer's cards come from chat_logs
    r1 = ask(shop, "dresses under 50", mode="shopping", session_id="sess-9")
    assert set(titles(r1["cards"])) == {"Red Summer Dress", "Red Linen Midi Dress"}
    r2 = ask(shop, "send me the link", mode="shopping", session_id="sess-9")
    assert r2["debug"]["rewrite"] == "offline" and "dresses" in r2["debug"]["rewritten_query"]
    assert titles(r2["cards"]) == titles(r1["cards"])
    assert r2["debug"]["link_request"]["pinned_first"] == [c["document_id"] for c in r1["cards"]]


# --------------------------------------------------------------------------- LLM paths


def test_cards_come_from_metadata_even_when_the_llm_talks_nonsense(shop, fake_llm):
    fake_llm.planner = json.dumps({"price_max": 1000, "categories": ["Spaceships"]})
    res = ask(shop, "red dress under 50 in stock", mode="shopping")
    assert res["debug"]["llm"]["used_llm"] is True and res["debug"]["llm"]["provider"] == "openai"
    assert fake_llm.calls.count("answer") == 1
    card = res["cards"][0]
    assert titles(res["cards"]) == ["Red Summer Dress"]
    assert card["price"] == "€39.99" and card["in_stock"] is True
    assert card["url"] == "https://demo-shop.example/product/red-summer-dress"
    assert "Golden Unicorn" not in json.dumps(res["cards"])
    # links the evidence does not hold are removed; the product's own link stays
    assert "https://evil.example/buy" not in res["answer"] and "[link removed]" in res["answer"]
    assert "https://demo-shop.example/product/red-summer-dress" in res["answer"]
    assert res["debug"]["removed_links"] == ["https://evil.example/buy"]
    # the planner ran beside the rules; its unknown category is dropped and the rules' price wins
    planner = [p for p in res["debug"]["filters"]["parts"] if p["extractor"] == "llm_planner"]
    assert [p["field"] for p in planner] == ["price_max"]
    assert res["debug"]["filters"]["merged"]["price_max"] == 50


def test_llm_planner_fills_what_the_rules_miss_and_is_validated(shop, fake_llm):
    fake_llm.planner = json.dumps({"price_max": 50, "categories": ["Dresses", "Spaceships"], "tags": ["Unicorn"],
                                   "city": "Atlantis", "in_stock": True})
    res = ask(shop, "a dress for fifty euros at most that I can get now", mode="shopping")
    planner = {p["field"]: p["value"] for p in res["debug"]["filters"]["parts"] if p["extractor"] == "llm_planner"}
    assert planner == {"price_max": 50.0, "in_stock": True, "category": ["Dresses"]}
    assert titles(res["cards"]) == ["Red Summer Dress"]
    fake_llm.planner = "this is not JSON at all"
    res = ask(shop, "a dress for fifty euros at most", mode="shopping")
    errs = res["debug"]["filters"]["errors"]
    assert errs and errs[0]["extractor"] == "kbframework.default_plugins.planner" and "JSON" in errs[0]["error"]
    assert res["cards"]  # the chat goes on without the planner


def test_llm_rewrites_follow_ups_and_falls_back_offline(shop, fake_llm):
    hist = [{"role": "user", "content": "techno this weekend under €30"}, {"role": "assistant", "content": "One."}]
    fake_llm.rewrite = "techno parties tomorrow under €30"
    res = ask(shop, "and tomorrow?", mode="events", history=hist)
    assert res["debug"]["rewrite"] == "llm" and res["debug"]["rewritten_query"] == "techno parties tomorrow under €30"
    assert titles(res["cards"]) == ["Techno Tomorrow Club"]
    fake_llm.rewrite = 500
    res = ask(shop, "and tomorrow?", mode="events", history=hist)
    assert res["debug"]["rewrite"] == "offline" and "techno" in res["debug"]["rewritten_query"]


# --------------------------------------------------------------------------- fallbacks


def test_pre_filter_empty_no_llm_call_and_labelled_alternatives(kb_org, fake_llm):
    seed(kb_org["id"], [e for e in EVENTS if e["title"] != "Techno Last Week"])
    set_settings(kb_org["id"], query_planner=False)
    res = answer(kb_org["id"], "techno next month under €5", mode="events", now=NOW)
    assert res["debug"]["reason"] == "pre_filter_empty"
    assert res["answer"].startswith("I couldn't find any events matching that")  # the events preset's text
    assert res["cards"] == [] and res["sources"] == []
    assert "answer" not in fake_llm.calls  # no LLM call with an empty context
    alt = res["alternatives"]
    # only the price left nothing: next month's techno at the nearest price
    assert alt["label"] == "Nothing at that price — the nearest prices"
    assert [c["title"] for c in alt["cards"]] == ["Cheap Techno Next Week"]
    # only the time left nothing: the jazz nearest that weekend, at any price under the bound
    res = answer(kb_org["id"], "jazz this weekend under €20", mode="events", now=NOW)
    assert res["debug"]["reason"] == "pre_filter_empty"
    alt = res["alternatives"]
    assert alt["label"] == "Nothing at that time — the nearest dates" and alt["relaxed"] == ["date_range"]
    assert [c["title"] for c in alt["cards"]] == ["Jazz Evening Tomorrow"]
    # neither alone: a search without the filters
    res = answer(kb_org["id"], "jazz next week under €5", mode="events", now=NOW)
    assert res["debug"]["reason"] == "pre_filter_empty"
    alt = res["alternatives"]
    assert alt["label"] == "No exact matches — here are some alternatives" and "relaxed" not in alt
    assert "Jazz Evening Tomorrow" in [c["title"] for c in alt["cards"]]
    with session_scope() as s:
        row = s.scalar(select(ChatLog).where(ChatLog.id == res["message_id"]))
        assert row.zero_result is True and row.reason == "pre_filter_empty"


def test_nothing_above_the_floor_is_judged_per_leg(kb_org, fake_llm):
    seed(kb_org["id"], SUPPORT + [{"title": "Zephyrine care guide", "role": "support",
                                   "body": "# Zephyrine care guide\n\nWash the Zephyrine cover cold."}])
    set_settings(kb_org["id"], similarity_floor=0.99, query_planner=False)
    res = answer(kb_org["id"], "xylophone quantum chromodynamics", now=NOW)
    assert res["debug"]["reason"] == "no_results_above_threshold"
    assert res["debug"]["legs"] == {"vector_hits_above_floor": 0, "keyword_matches": 0, "floor": 0.99}
    assert res["answer"].startswith("I don't have that information")  # the support preset's text
    assert "alternatives" not in res  # no filters: nothing to relax
    assert "answer" not in fake_llm.calls
    # a real full-text match answers although no vector hit clears the floor: the fused RRF
    # score (a rank, ~0.016) is never compared with the similarity floor
    res = answer(kb_org["id"], "Zephyrine", now=NOW)
    assert res["debug"]["reason"] is None and res["debug"]["legs"]["vector_hits_above_floor"] == 0
    assert res["sources"][0]["document_title"] == "Zephyrine care guide"
    assert fake_llm.calls.count("answer") == 1
    with session_scope() as s:
        flags = [r.zero_result for r in s.scalars(select(ChatLog).where(
            ChatLog.organization_id == kb_org["id"]).order_by(ChatLog.created_at))]
    assert flags == [True, False]


def test_a_night_that_ran_into_the_asked_day_is_its_nearest_date_not_a_match(kb_org):
    seed(kb_org["id"], [e for e in EVENTS if e["title"] != "Sunrise Techno Monday"])
    set_settings(kb_org["id"], query_planner=False)
    res = answer(kb_org["id"], "techno on Monday", mode="events", now=NOW)
    assert res["cards"] == [] and res["debug"]["reason"] is not None
    alt = res["alternatives"]  # Sunday's marathon ran to 06:00 on Monday: the nearest, not "on Monday"
    assert alt["relaxed"] == ["date_range"] and alt["cards"][0]["title"] == "Techno Marathon Sunday", alt


def test_filters_that_leave_nothing_similar_offer_closest_matches(shop):
    set_settings(shop["id"], similarity_floor=0.9)
    res = ask(shop, "jazz this weekend", mode="events")
    assert res["debug"]["reason"] == "no_results_above_threshold" and res["cards"] == []
    # no jazz this weekend: the jazz nearest it, the weekend's time window given up
    assert "Jazz Evening Tomorrow" in titles(res["alternatives"]["cards"])
    assert res["debug"]["alternatives"]["relaxed"] == ["date_range"]
    # jazz tomorrow exists, only not similar enough: the time is not what to give up
    res = ask(shop, "saxophone jazz tomorrow", mode="events")
    assert res["debug"]["reason"] == "no_results_above_threshold"
    assert res["debug"]["alternatives"]["without_filters"] is True
    assert "Jazz Evening Tomorrow" in titles(res["alternatives"]["cards"])


# --------------------------------------------------------------------------- context


def test_context_budget_diversity_and_general_knowledge(kb_org):
    para = ("The lantern festival guide explains routes, lanterns, safety and timing for visitors. " * 12).strip()
    long_body = lambda name: f"# {name}\n\n" + "\n\n".join(f"## Part {i}\n\n{para}" for i in range(6))  # noqa: E731
    ids = seed(kb_org["id"], [{"title": "Lantern guide A", "role": "support", "body": long_body("Lantern guide A")},
                        {"title": "Lantern guide B", "role": "support", "body": long_body("Lantern guide B")},
                        {"title": "Lantern FAQ", "role": "support",
                         "body": "# Lantern FAQ\n\nThe lantern festival starts at dusk."}])
    res = answer(kb_org["id"], "lantern festival guide", now=NOW)
    ctx = res["debug"]["context"]
    docs = [c["document_id"] for c in ctx]
    assert set(docs) == set(ids.values())  # every source gets a passage before any gets a second
    assert len(docs) > 3
    assert "You may add stable general background knowledge" not in res["debug"]["prompt"]
    set_settings(kb_org["id"], char_budget=4000, knowledge="general")
    res = answer(kb_org["id"], "lantern festival guide", now=NOW)
    ctx = res["debug"]["context"]
    assert sum(len(c["content"]) for c in ctx) <= 4000 or len(ctx) == 1
    assert len({c["document_id"] for c in ctx}) == len(ctx)  # the budget goes to different sources first
    assert "You may add stable general background knowledge" in res["debug"]["prompt"]


def test_strip_unknown_links():
    text, removed = strip_unknown_links("See https://a.example/x, and https://b.example/y/.",
                                        {"https://a.example/x/"})
    assert "https://a.example/x" in text and "https://b.example/y" not in text and removed == ["https://b.example/y/"]


def test_admin_debug_explains_filters(kb_admin):
    seed(kb_admin.org["id"], PRODUCTS)
    r = kb_admin.post("/api/admin/v1/chat", json={"question": "red dress under 50 in stock", "mode": "shopping"})
    assert r.status_code == 200, r.get_data(as_text=True)
    out = r.get_json()
    assert titles(out["cards"]) == ["Red Summer Dress"]
    explain = out["debug"]["explain"]
    assert any("priced at most 50" in x for x in explain) and any("in stock" in x for x in explain)
    assert any("'red'" in x for x in explain)
    r = kb_admin.post("/api/admin/v1/chat", json={"question": "red dress", "mode": "nonsense"})
    assert r.status_code == 400 and "Unknown mode" in r.get_json()["error"]["message"]
