"""The answerability gate through the real pipeline: its two rates on the demo knowledge (the
30 paraphrased answerable and 30 unanswerable questions in kbframework/demo/gate_questions.json),
the per-organization threshold, the zero-result row with its near misses, no model call below
the gate, and `kbf eval gate`."""
import json

import pytest

from click.testing import CliRunner
from sqlalchemy import select

from kbframework.db import session_scope
from kbframework.models import ChatLog
from kbframework.retrieval.answer import answer
from kbframework.retrieval.evaluation import load_demo, run_gate_eval
from tests.retrieval_support import NOW, SUPPORT, fake_llm, seed, set_settings  # noqa: F401


def test_gate_rates_on_the_demo_questions(kb_clean):
    org = load_demo(NOW, log=lambda m: None)
    rep = run_gate_eval(org_id=org, now=NOW, log=lambda m: None)
    assert rep["answerable"] == 30 and rep["unanswerable"] == 30
    # target: at least 9 in 10 unanswerable questions fall back
    assert rep["unanswerable_fell_back"] >= 27, [r for r in rep["rows"] if not r["answerable"] and not r["fell_back"]]
    # target ≤ 5%: `kbf eval gate --calibrate` measures 1 of 30 with the shipped weights ("do I need
    # to print my ticket?" shares no word with its answer); this bound catches a regression, the
    # README and `kbf eval gate` report the measured rate
    assert rep["answerable_fell_back"] <= 3, [r for r in rep["rows"] if r["answerable"] and r["fell_back"]]
    assert rep["answerable_expected_cited"] >= 25


def test_below_the_gate_no_model_call_and_a_zero_result_row_with_near_misses(kb_org, fake_llm):
    seed(kb_org["id"], SUPPORT + [
        {"title": f"Note {i}", "role": "support",
         "body": f"# Note {i}\n\nOur {w} guide for visitors: opening hours, parking and the cloakroom."}
        for i, w in enumerate(["first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth"])])
    set_settings(kb_org["id"], extra={"query_planner": False})
    res = answer(kb_org["id"], "do you sell gift vouchers?", now=NOW, channel="widget")
    assert res["debug"]["reason"] == "no_results_above_threshold", res["debug"]["gate"]
    assert res["cards"] == [] and res["sources"] == [] and "answer" not in fake_llm.calls
    gate = res["debug"]["gate"]
    assert gate["answerable"] is False and gate["score"] < gate["threshold"]
    with session_scope() as s:
        row = s.scalar(select(ChatLog).where(ChatLog.id == res["message_id"]))
        assert row.zero_result is True and row.retrieval_debug["near_misses"]
        assert {"document_id", "title", "score", "similarity", "overlap"} <= set(row.retrieval_debug["near_misses"][0])
    names = [st["name"] for st in res["debug"]["steps"]]
    assert "answerability" in names and "fallback" in names and "call_llm" not in names
    # the organization's own threshold: a lower one lets the same evidence through
    set_settings(kb_org["id"], extra={"answer_threshold": -1.0})
    res = answer(kb_org["id"], "do you sell gift vouchers?", now=NOW)
    assert res["debug"]["reason"] is None and res["debug"]["gate"]["threshold"] == -1.0
    assert fake_llm.calls.count("answer") == 1


def test_synonyms_count_for_the_overlap(kb_org):
    seed(kb_org["id"], [{"title": "Gift cards", "role": "support",
                         "body": "# Gift cards\n\nOur gift cards come in €25, €50 and €100 and never expire."}]
         + SUPPORT)
    set_settings(kb_org["id"], extra={"query_planner": False})
    before = answer(kb_org["id"], "do you have vouchers?", now=NOW)["debug"]["gate"]
    set_settings(kb_org["id"], extra={"synonyms": {"voucher": ["gift card"]}})
    after = answer(kb_org["id"], "do you have vouchers?", now=NOW)["debug"]["gate"]
    assert before["answerable"] is False and after["answerable"] is True, (before, after)
    assert after["synonyms"] and max(p["overlap"] for p in after["passages"]) >= \
        max((p["overlap"] for p in before.get("passages", [])), default=0.0)


def test_the_settings_api_validates_the_gate_settings(kb_admin):
    r = kb_admin.put("/api/admin/v1/settings", json={"extra": {"answer_threshold": "high"}})
    assert r.status_code == 400 and "answer_threshold" in r.get_data(as_text=True)
    r = kb_admin.put("/api/admin/v1/settings", json={"extra": {"synonyms": ["not", "a", "map"]}})
    assert r.status_code == 400 and "synonyms" in r.get_data(as_text=True)
    r = kb_admin.put("/api/admin/v1/settings", json={"extra": {"answer_threshold": 0.4, "synonyms": {"voucher": "gift card"}}})
    assert r.status_code == 200, r.get_data(as_text=True)
    page = kb_admin.get("/admin/settings").get_data(as_text=True)
    assert 'name="answer_threshold"' in page and "data-calibration" in page and "9 of 10" in page


def test_kbf_eval_gate_reports_both_rates(kb_clean, tmp_path):
    from kbframework.cli.commands import cli as main

    qs = tmp_path / "gate.json"
    qs.write_text(json.dumps({"answerable": [{"q": "how long does delivery take in Serbia?",
                                              "expect": "Shipping and delivery"}],
                              "unanswerable": ["do you sell perfume?"]}))
    r = CliRunner().invoke(main, ["eval", "gate", "--questions", str(qs)])
    assert r.exit_code == 0, r.output
    assert "answerable: 0 of 1 fall back" in r.output and "unanswerable: 1 of 1 fall back" in r.output
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    r = CliRunner().invoke(main, ["eval", "gate", "--questions", str(bad)])
    assert r.exit_code != 0 and "needs 'answerable'" in r.output


def test_question_words_that_are_not_its_subject_do_not_count(kb_clean):
    """Compounds count through their parts, clock times and contraction tails not at all, and an
    indefinite "somewhere" says nothing about the subject."""
    from kbframework.retrieval.gate import question_lexemes

    with session_scope() as s:
        assert set(question_lexemes(s, "late-night techno at 3am")) == {"late", "techno"}
        # colour words are filters, not subjects, so nothing of "black-and-white" is left
        # and "seen", a form of the neutral "see", is not a subject either
        assert set(question_lexemes(s, "I've seen an old black-and-white movie")) == {"old", "movi"}
        # the word after "how" asks for a measure of the subject: "how old…" is an age question
        assert question_lexemes(s, "how old do I have to be for the club?") == ["club"]
        assert set(question_lexemes(s, "how long has the jacket gone missing?")) == {"jacket", "miss"}
        assert question_lexemes(s, "somewhere to dance until 23:30") == ["danc"]
        # a SKU keeps its parts, so the overlap still sees them
        assert set(question_lexemes(s, "is ALT-TH2 in stock?")) == {"alt", "th2"}


def test_the_soft_match_leg_compares_content_words_and_colours(kb_clean):
    from kbframework.retrieval.soft_match import question_words

    with session_scope() as s:
        # "price" and "tonight" are neutral, a colour is kept (it is what one thermos says), and
        # the word after "how" is a frame
        assert question_words(s, "the price of a sage green thermos tonight") == [
            ("sage", "sage"), ("green", "green"), ("thermos", "thermo")]
        assert question_words(s, "how long does delivery take?") == [("delivery", "deliveri")]


def test_the_lead_of_the_best_match_over_the_rest_of_the_vector_list():
    from kbframework.retrieval.gate import lead
    from kbframework.retrieval.search import Hit

    def hits(sims):
        return [Hit(i, f"d{i}", i + 1, s, "vector") for i, s in enumerate(sims)]

    # one close document above an even field: it stands out by what lies between
    assert lead(hits([0.6] + [0.3] * 19)) == pytest.approx(0.3)
    # everything equally far: no lead, whatever the similarity
    assert lead(hits([0.45] * 20)) == pytest.approx(0.0)
    # a short list: the floor stands in for the ranks it does not reach
    assert lead(hits([0.5, 0.4]), floor=0.2) == pytest.approx(0.3)
    assert lead([]) == 0.0
    # a document's chunks count once (its best), and hits beyond the product's depth not at all
    same = [Hit(1, "d", 1, 0.6, "vector"), Hit(2, "d", 2, 0.55, "vector")] + \
        [Hit(i, f"e{i}", i + 1, 0.3, "vector") for i in range(2, 22)] + [Hit(99, "far", 30, 0.9, "vector")]
    assert lead(same, floor=0.3) == pytest.approx(0.3)


def test_tags_and_categories_count_as_what_a_document_is(kb_org):
    """A page tagged "vouchers" answers a voucher question its text never spells out that way:
    the gate's overlap reads the title, tags and categories as well as the passage, and a word
    the organization uses only there is not a word it never uses."""
    seed(kb_org["id"], [{"title": "Present cards", "role": "support", "tags": ["vouchers"],
                         "body": "# Present cards\n\nA present card comes in €25, €50 and €100 and never expires."}]
         + SUPPORT)
    set_settings(kb_org["id"], extra={"query_planner": False})
    g = answer(kb_org["id"], "do you have present card vouchers?", now=NOW)["debug"]["gate"]
    page = next(p for p in g["passages"] if "voucher" in p["matched"])
    assert {"present", "card", "voucher"} <= set(page["matched"]) and page["overlap"] == 1.0
    assert page["title_overlap"] == 1.0 and "voucher" not in g["unknown_words"] and g["unknown_share"] == 0
    assert {"similarity", "overlap", "title_overlap", "agreement", "score"} <= set(page) and "lead" in g


def test_kbf_eval_gate_calibrate_fits_on_one_half_and_checks_the_other(kb_clean, tmp_path):
    from kbframework.cli.commands import cli as main
    from tests.test_evaluation import CORPUS, QRELS, QUERIES

    (tmp_path / "corpus.jsonl").write_text("\n".join(json.dumps(d) for d in CORPUS))
    (tmp_path / "queries.jsonl").write_text("\n".join(json.dumps(q) for q in QUERIES))
    (tmp_path / "qrels.tsv").write_text("\n".join(f"{q}\t{d}\t{g}" for q, d, g in QRELS))
    r = CliRunner().invoke(main, ["eval", "gate", "--calibrate", "--dataset", str(tmp_path), "--json"])
    assert r.exit_code == 0, r.output
    rep = json.loads(r.output[r.output.index("{\n"):])
    assert rep["questions"] == 5 + 60
    assert set(rep["fitted_on_A"]["weights"]) == {"similarity", "overlap", "title", "agreement", "lead", "unknown"}
    for half in ("A", "B"):  # every question is in exactly one half
        assert sum(x["answerable"] + x["unanswerable"] for x in rep[half].values()) in (32, 33)
    assert rep["all"]["demo"]["answerable"] == 30 and rep["all"]["retrieval_dev"]["unanswerable"] == 1
    r = CliRunner().invoke(main, ["eval", "gate", "--calibrate", "--dataset", str(tmp_path)])
    assert "half B (held out)" in r.output and "to ship: gate.WEIGHTS" in r.output


def test_a_question_of_constraints_no_product_meets_falls_back_with_alternatives(kb_clean):
    """"do you have blue dresses?" on the demo: every word is a constraint and no dress is blue.
    The policy pages, which the label filters do not apply to, pass the pre-filter, and "dress"
    matches the club's dress code: that page is not the answer. The fallback is, with the
    dresses (and the blue jacket) as labelled alternatives. The same for a follow-up that
    changes the colour, while a question some product meets still lists it."""
    org = load_demo(NOW, log=lambda m: None)
    set_settings(org, preset="search")  # as `make run`'s demo: product, event and article cards

    def titles(cards):
        return [c["title"] for c in cards]

    for q in ("do you have blue dresses?", "do you have dresses under €30?"):
        res = answer(org, q, now=NOW, channel="widget")
        assert res["debug"]["reason"] == "no_results_above_threshold", (q, res["debug"]["gate"], titles(res["cards"]))
        assert res["cards"] == [] and "Club entry rules" not in res["answer"]
        assert res["debug"]["gate"]["why"] == "no product or event matches every constraint of the question"
        alts = titles(res["alternatives"]["cards"])
        assert alts and any("Dress" in t for t in alts), (q, alts)
        assert "answerability gate: no product or event matches" in " ".join(res["debug"]["explain"])
    first = answer(org, "do you have a red summer dress?", now=NOW)
    assert titles(first["cards"])[0] == "Red Summer Dress"
    hist = [{"role": "user", "content": "do you have a red summer dress?"},
            {"role": "assistant", "content": first["answer"],
             "document_ids": [c["document_id"] for c in first["cards"]]}]
    res = answer(org, "what about in blue?", now=NOW, history=hist)
    assert res["debug"]["conversation"]["kind"] == "follow_up"
    assert res["debug"]["reason"] == "no_results_above_threshold" and res["cards"] == []
    assert "Red Summer Dress" in titles(res["alternatives"]["cards"])
    # constraints a product meets: listed, as before
    res = answer(org, "do you have red dresses?", now=NOW)
    assert res["debug"]["reason"] is None and {"Red Summer Dress", "Red Linen Midi Dress"} <= set(titles(res["cards"]))


def test_a_listing_answer_leaves_out_what_the_constraint_words_found_by_chance(kb_clean):
    """"and on Saturday?" → "what's on Saturday": the Saturday's events are the answer. The
    vector leg embeds "Saturday" alone and finds the return policy at 0.215; it used to become
    the answer's second card, and "the second one" then pointed at it."""
    org = load_demo(NOW, log=lambda m: None)
    set_settings(org, preset="search")
    first = answer(org, "what's on tomorrow?", now=NOW)
    hist = [{"role": "user", "content": "what's on tomorrow?"},
            {"role": "assistant", "content": first["answer"],
             "document_ids": [c["document_id"] for c in first["cards"]]}]
    res = answer(org, "and on Saturday?", now=NOW, history=hist)
    assert res["debug"]["rewritten_query"] == "what's on Saturday"
    assert [c["type"] for c in res["cards"]] == ["event"] and res["cards"][0]["title"] == "Amelie Lens @ Warehouse"
    assert {s["document_role"] for s in res["sources"]} == {"event"}
    assert any("the listing answers a question of constraints" in e for e in res["debug"]["explain"])
    assert "Return policy" not in res["answer"]


def test_a_follow_up_about_what_was_shown_keeps_to_it(kb_clean):
    """"is the second one in stock?" is about the second card shown: the dress code page that
    "dress" found beside it is not part of the answer."""
    org = load_demo(NOW, log=lambda m: None)
    set_settings(org, preset="search")
    hist = []
    for q in ("do you have the Crimson Evening Dress?", "anything cheaper?"):
        r = answer(org, q, now=NOW, history=hist)
        hist += [{"role": "user", "content": q}, {"role": "assistant", "content": r["answer"],
                                                  "document_ids": [c["document_id"] for c in r["cards"]]}]
    second = r["cards"][1]["title"]
    res = answer(org, "is the second one in stock?", now=NOW, history=hist)
    assert [c["title"] for c in res["cards"]] == [second], [c["title"] for c in res["cards"]]
    assert res["debug"]["referents_only"]["dropped_documents"]


def test_a_follow_up_keeps_its_own_constraint_when_the_rewrite_loses_it(kb_clean):
    """"any free ones?" after the weekend's listing is rewritten "what is on this weekend free",
    where "free" alone is no price: the follow-up's own words still say price 0, and it picks
    among the events shown."""
    org = load_demo(NOW, log=lambda m: None)
    set_settings(org, preset="search")
    first = answer(org, "what is on this weekend?", now=NOW)
    assert len(first["cards"]) >= 2
    hist = [{"role": "user", "content": "what is on this weekend?"},
            {"role": "assistant", "content": first["answer"],
             "document_ids": [c["document_id"] for c in first["cards"]]}]
    res = answer(org, "any free ones?", now=NOW, history=hist)
    assert res["debug"]["filters"]["merged"]["price_max"] == 0
    assert [c["title"] for c in res["cards"]] == ["Open-Air Sunday Sessions"]
    assert any("read from the follow-up's own words: price_max" in e for e in res["debug"]["explain"])


def test_what_a_named_a_pointed_at_and_a_compared_question_keep_to(kb_clean):
    """A detail of a document the question names, "it" after a question that named one, a
    policy question about it and a comparative: each answer keeps to the documents it is
    about, not what the searches found beside them (another event, the dress code)."""
    org = load_demo(NOW, log=lambda m: None)
    set_settings(org, preset="search")

    def names(res):
        return [c["title"] for c in res["cards"]]

    res = answer(org, "tickets for Amelie Lens?", now=NOW)
    assert names(res) == ["Amelie Lens @ Warehouse"] and res["debug"]["identity_only"]["dropped_documents"]
    first = answer(org, "do you have the Crimson Evening Dress?", now=NOW)
    assert names(first)[0] == "Crimson Evening Dress" and len(first["cards"]) > 1  # a bare name: the rest too
    hist = [{"role": "user", "content": "do you have the Crimson Evening Dress?"},
            {"role": "assistant", "content": first["answer"], "document_ids": [c["document_id"] for c in first["cards"]]}]
    assert names(answer(org, "how much is it?", now=NOW, history=hist)) == ["Crimson Evening Dress"]
    res = answer(org, "can I return it?", now=NOW, history=hist)
    assert names(res)[0] == "Crimson Evening Dress" and "Return policy" in names(res)
    assert not {"Red Summer Dress", "Red Linen Midi Dress"} & set(names(res))
    res = answer(org, "anything cheaper?", now=NOW, history=hist)
    assert res["cards"] and {c["type"] for c in res["cards"]} == {"product"}, names(res)
    assert res["debug"]["comparative_only"]["dropped_documents"]  # the dress code "dress" found


def test_a_policy_question_is_answered_by_its_pages(kb_clean):
    """"what is the dress code?" is the entry rules, not the dresses that "dress" found; "is it
    18+?" about tonight's event is that event and the entry rules, quoting the age."""
    org = load_demo(NOW, log=lambda m: None)
    set_settings(org, preset="search")
    res = answer(org, "what is the dress code?", now=NOW)
    assert [c["title"] for c in res["cards"]] == ["Club entry rules"], res["cards"]
    assert res["debug"]["policy_only"]["dropped_documents"] and "no sportswear" in res["answer"]
    first = answer(org, "what is on tonight?", now=NOW)
    hist = [{"role": "user", "content": "what is on tonight?"},
            {"role": "assistant", "content": first["answer"], "document_ids": [c["document_id"] for c in first["cards"]]}]
    res = answer(org, "is it 18+?", now=NOW, history=hist)
    assert [c["title"] for c in res["cards"]] == [first["cards"][0]["title"], "Club entry rules"], res["cards"]
    assert "Entry is 18+" in res["answer"]
    # how visitors ask, in the words the page uses (built-in synonyms under the organization's own)
    res = answer(org, "is there an age limit?", now=NOW)
    assert [c["title"] for c in res["cards"]] == ["Club entry rules"] and "Entry is 18+" in res["answer"]
    res = answer(org, "what should I wear?", now=NOW)
    assert [c["title"] for c in res["cards"]] == ["Club entry rules"] and "The dress code is casual" in res["answer"]


def test_small_talk_is_answered_as_such_and_is_no_zero_result(kb_clean):
    """"hi" used to search, find nothing and land in the admin's zero results."""
    org = load_demo(NOW, log=lambda m: None)
    res = answer(org, "hi", now=NOW, channel="widget")
    assert res["cards"] == [] and res["debug"]["small_talk"] == "greeting"
    assert "own knowledge: our products" in res["answer"] and "our events" in res["answer"]
    names = [st["name"] for st in res["debug"]["steps"]]
    assert "small_talk" in names and "vector_search" not in names and "fallback" not in names
    with session_scope() as s:
        row = s.scalar(select(ChatLog).where(ChatLog.id == res["message_id"]))
        assert row.zero_result is False and row.reason is None and row.final_answer == res["answer"]
    set_settings(org, preset="search", branding_welcome="Welcome! Ask me what's on tonight.")
    assert answer(org, "Hello!", now=NOW)["answer"] == "Welcome! Ask me what's on tonight."
    assert answer(org, "thanks!", now=NOW)["answer"].startswith("You're welcome")
    # a greeting before a question is a question, and "hi" is no subject for a follow-up
    res = answer(org, "hi, do you have red dresses?", now=NOW)
    assert "small_talk" not in res["debug"] and "Red Summer Dress" in [c["title"] for c in res["cards"]]
    hist = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Hello!"}]
    res = answer(org, "what is on tomorrow?", now=NOW, history=hist)
    assert res["debug"]["conversation"]["kind"] == "standalone"
    # "ok" after an answer that asked nothing (the offline answerer asks nothing): acknowledged
    hist = [{"role": "user", "content": "what is on tomorrow?"},
            {"role": "assistant", "content": res["answer"], "document_ids": [c["document_id"] for c in res["cards"]]}]
    ok = answer(org, "ok", now=NOW, history=hist)
    assert ok["answer"] == "Good! Is there anything else I can help with?" and ok["cards"] == []
    assert ok["debug"]["small_talk"] == "ok"


def test_yes_to_searching_more_broadly_searches_the_question_again_without_filters(kb_clean):
    org = load_demo(NOW, log=lambda m: None)
    set_settings(org, preset="search")
    first = answer(org, "dresses under 10", now=NOW)
    assert first["cards"] == [] and first["answer"].endswith("Want me to search more broadly?")
    hist = [{"role": "user", "content": "dresses under 10"}, {"role": "assistant", "content": first["answer"]}]
    res = answer(org, "yes", now=NOW, history=hist)
    assert res["debug"]["broaden"] == "dresses under 10" and res["debug"]["filters"]["parts"] == []
    assert {"Red Summer Dress", "Crimson Evening Dress"} <= {c["title"] for c in res["cards"]}
    first = answer(org, "do you sell perfume?", now=NOW)
    hist = [{"role": "user", "content": "do you sell perfume?"}, {"role": "assistant", "content": first["answer"]}]
    res = answer(org, "yes please", now=NOW, history=hist)
    assert res["cards"] == [] and res["answer"].startswith("I searched more broadly and still found nothing")
