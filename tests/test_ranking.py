"""Ranking through the real pipeline (PostgreSQL + pgvector, the offline embedder): full text
weighted title over headings over body (migration 0007 included), the BM25 keyword leg, the
fusion tilts with their baseline in the trace, and identity before similarity."""

from sqlalchemy import text

from kbframework.db import session_scope
from kbframework.retrieval.answer import answer
from kbframework.retrieval.identity import is_sku_shaped
from tests.retrieval_support import NOW, SUPPORT, event, local, seed, set_settings


def ask(org_id, q, **kw):
    kw.setdefault("now", NOW)
    kw.setdefault("mode", "search")  # neutral: no role boost of its own, so a tilt shows alone
    set_settings(org_id, extra={"query_planner": False})
    return answer(org_id, q, **kw)


def step(res, name):
    return next(s["output"] for s in res["debug"]["steps"] if s["name"] == name)


def first_source(res):
    return res["sources"][0]["document_title"] if res["sources"] else None


def weighted(org_id, title):
    """{weight: lexemes} of the chunks of one document, read from the stored tsvector."""
    with session_scope() as s:
        rows = s.execute(text(
            "SELECT u.lexeme, u.weights FROM chunks c JOIN documents d ON d.id = c.document_id, unnest(c.tsv) u "
            "WHERE c.organization_id = :org AND d.title = :t"), {"org": org_id, "t": title}).all()
    out: dict = {}
    for lexeme, weights in rows:
        for w in weights:
            out.setdefault(w, set()).add(lexeme)
    return out


LANTERN = {"title": "Kinetik Lantern", "role": "manual",
           "body": "## Charging\n\nPlug the cable into any port for two hours."}


# --------------------------------------------------------------------------- weighted full text


def test_full_text_weighs_the_title_over_the_headings_over_the_body(kb_org):
    seed(kb_org["id"], [LANTERN])
    w = weighted(kb_org["id"], "Kinetik Lantern")
    assert {"kinetik", "lantern"} <= w["A"]          # the title
    assert "charg" in w["B"] and "kinetik" not in w["B"]  # the section heading
    assert {"plug", "cabl", "port"} <= w["C"] and not w["C"] & {"kinetik", "lantern"}  # the body


def newest_revision() -> str:
    from alembic.script import ScriptDirectory

    from kbframework.migrate import alembic_config

    return ScriptDirectory.from_config(alembic_config()).get_current_head()


def test_migration_0007_recomputes_the_weights_of_existing_chunks(kb_org):
    from kbframework.migrate import current, downgrade, upgrade

    seed(kb_org["id"], [LANTERN])
    try:
        downgrade("0006_declared_settings")
        before = weighted(kb_org["id"], "Kinetik Lantern")
        # the old expression: the whole heading (title and section) A, the body B
        assert {"kinetik", "charg"} <= before["A"] and "plug" in before["B"] and "C" not in before
    finally:
        upgrade()
    assert current() == newest_revision()  # back at the head, 0007 and every later one applied
    after = weighted(kb_org["id"], "Kinetik Lantern")
    assert "kinetik" in after["A"] and "charg" in after["B"] and "plug" in after["C"]
    with session_scope() as s:  # the tenant-scoped GIN index is still there
        assert s.execute(text("SELECT indexdef FROM pg_indexes WHERE indexname = 'ix_chunks_org_tsv'")).scalar() \
            .endswith("USING gin (organization_id, tsv)")


# --------------------------------------------------------------------------- the keyword leg


def test_keyword_leg_weighs_a_rare_word_over_a_common_one(kb_org):
    """No chunk holds all three words; the one rare word ("kinetik", in one title) outweighs
    a common word said four times in each of four bodies. ts_rank_cd, which knows no rarity,
    ranked the jackets first."""
    jackets = [{"title": f"{name} Jacket", "role": "product",
                "body": f"# {name} Jacket\n\nWaterproof shell. Waterproof seams, waterproof zips and a "
                        f"waterproof hood for wet days."} for name in ("Storm", "Squall", "Gale", "Drizzle")]
    ids = seed(kb_org["id"], jackets + [{"title": "Kinetik Headlamp", "role": "product",
                                         "body": "# Kinetik Headlamp\n\nA small rechargeable headlamp."}]
               + SUPPORT)
    res = ask(kb_org["id"], "waterproof kinetik charger")
    kw = res["debug"]["keyword"]
    assert kw["hits"][0]["document_id"] == ids["Kinetik Headlamp"], kw["hits"]
    assert kw["ranking"] == "bm25" and kw["idf"]["kinetik"] > kw["idf"]["waterproof"]


def test_keyword_leg_prefers_the_word_in_a_title_to_the_same_word_in_a_body(kb_org):
    ids = seed(kb_org["id"], [
        {"title": "Camp Kitchen Notes", "role": "article",
         "body": "# Camp Kitchen Notes\n\nWhat we pack for cooking outdoors: a pot, a lighter and a spork."},
        {"title": "Titanium Spork", "role": "product", "body": "# Titanium Spork\n\nLight cutlery for camp meals."}])
    res = ask(kb_org["id"], "spork")
    assert res["debug"]["keyword"]["hits"][0]["document_id"] == ids["Titanium Spork"]


def test_keyword_leg_finds_a_paraphrase_through_the_token_tables_neighbours(kb_org):
    """"toddler" is in no chunk of the carrier; its neighbour in the embedder's token table,
    "child", is, so the keyword leg finds the carrier through its any-term tier; a chunk with
    the question's own word still ranks above one holding only a neighbour; and the step is in
    the trace."""
    ids = seed(kb_org["id"], [
        {"title": "Tarn Little Peak Carrier", "role": "product",
         "body": "# Tarn Little Peak Carrier\n\nA frame pack that carries a child on mountain trails."},
        {"title": "Camp Kettle", "role": "product", "body": "# Camp Kettle\n\nBoils a litre of water."}])
    res = ask(kb_org["id"], "something for my toddler on walks")
    exp = step(res, "expand_query")
    assert "child" in exp["words"].get("toddler", []), exp
    kw = res["debug"]["keyword"]
    assert kw["hits"] and kw["hits"][0]["document_id"] == ids["Tarn Little Peak Carrier"], kw
    assert "child" in kw["expanded"] and kw["expanded"]["child"] < kw["idf"].get("toddler", 99)

    # the word after "how" is the question's frame ("how long" is not about length)
    res = ask(kb_org["id"], "how long does the toddler carrier take to arrive?")
    assert "long" not in step(res, "expand_query")["words"] and "toddler" in step(res, "expand_query")["words"]

    ids2 = seed(kb_org["id"], [{"title": "Toddler Sun Hat", "role": "product",
                                "body": "# Toddler Sun Hat\n\nA wide brim for small heads."}])
    res = ask(kb_org["id"], "something for my toddler on walks")
    assert res["debug"]["keyword"]["hits"][0]["document_id"] == ids2["Toddler Sun Hat"]


def test_the_vector_leg_embeds_the_questions_content_words(kb_org):
    seed(kb_org["id"], [{"title": "Tarn Pack Rain Cover", "role": "product",
                         "body": "# Tarn Pack Rain Cover\n\nA waterproof cover for a rucksack in heavy rain."}])
    res = ask(kb_org["id"], "my rucksack gets drenched when it pours")
    assert step(res, "embed_query")["embedded_text"] == "rucksack gets drenched pours"
    assert res["debug"]["search_text"] == "my rucksack gets drenched when it pours"  # the keyword leg's text is whole
    res = ask(kb_org["id"], "what is it?")  # nothing but stop words: the question itself
    assert "embedded_text" not in step(res, "embed_query")


# --------------------------------------------------------------------------- fusion tilts

SHOP = [
    {"title": "Repairs", "role": "support",
     "body": "# Repairs\n\nOur workshop mends snapped poles, torn flysheets and broken zips, usually within a week."},
    {"title": "Altair Tent Pole Set", "role": "product", "metadata": {"price": 39.0, "currency": "EUR"},
     "body": "# Altair Tent Pole Set\n\nA spare tent pole set for the Altair tents: aluminium tent poles in a bag."},
    {"title": "Altair Trailhead 2 Tent", "role": "product", "metadata": {"price": 329.0, "currency": "EUR"},
     "body": "# Altair Trailhead 2 Tent\n\nA two-person tent with two doors and an aluminium tent pole."},
    {"title": "How to choose a tent", "role": "article",
     "body": "# How to choose a tent\n\nTent size, tent weight, tent poles: how to choose a tent for your trips. "
             "A tent for two, a tent for four, a tent for the mountains."},
]


def test_a_question_about_what_the_visitor_may_do_puts_support_pages_first(kb_org):
    seed(kb_org["id"], SHOP + SUPPORT)
    res = ask(kb_org["id"], "can you mend a snapped tent pole?")
    out = step(res, "role_boost")
    assert out["role_priority"][:2] == ["support", "manual"] and out["preset_priority"] == []
    assert "what the visitor may do" in out["why"]
    assert first_source(res) == "Repairs", [s["document_title"] for s in res["sources"]]
    # the trace keeps what the preset alone would have served, so the change is visible
    assert out["baseline_top"] != out["tilted_top"]
    # a question about getting something is not a question about the rules
    res = ask(kb_org["id"], "can I get a tent pole set?")
    assert step(res, "role_boost")["role_priority"] == [] and "why" not in step(res, "role_boost")


def test_a_policy_question_puts_the_policy_page_first_in_a_neutral_preset(kb_org):
    seed(kb_org["id"], SHOP + SUPPORT + [
        {"title": "Red Linen Dress", "role": "product", "metadata": {"price": 45.0, "currency": "EUR"},
         "body": "# Red Linen Dress\n\nA relaxed red linen dress with pockets."}])
    res = ask(kb_org["id"], "return a red dress")
    out = step(res, "role_boost")
    assert out["role_priority"][:2] == ["support", "manual"] and "policy question" in out["why"]
    assert first_source(res) == "Return policy"
    assert out["baseline_top"] != out["tilted_top"]  # without the tilt the dress led


def test_a_price_bound_puts_products_first(kb_org):
    seed(kb_org["id"], SHOP + SUPPORT)
    res = ask(kb_org["id"], "a tent under €400")
    out = step(res, "role_boost")
    assert out["role_priority"] == ["product", "event"] and "price" in out["why"]
    assert res["debug"]["search_text"] == "a tent"
    assert res["sources"][0]["document_role"] == "product", [s["document_title"] for s in res["sources"]]
    # the tilt moves the products up (the guide led before it, until the soft-match leg put the
    # tent itself first without it): the order the preset alone gives is not the tilted one
    assert out["baseline_top"] != out["tilted_top"]


def test_a_time_window_puts_events_first(kb_org):
    seed(kb_org["id"], [
        {"title": "A short history of jazz", "role": "article",
         "body": "# A short history of jazz\n\nJazz began in New Orleans. Jazz clubs, jazz standards, "
                 "jazz records: how jazz changed music."},
        event("Saturday Night Quartet", local(2026, 3, 28, 21), local(2026, 3, 28, 23), 15, ["jazz"],
              venue="Bitef Art Cafe", body="# Saturday Night Quartet\n\nA jazz quartet plays standards at Bitef.")])
    res = ask(kb_org["id"], "jazz this weekend")
    out = step(res, "role_boost")
    assert out["role_priority"] == ["event"] and "time window" in out["why"]
    assert first_source(res) == "Saturday Night Quartet", [s["document_title"] for s in res["sources"]]
    # without a time phrase nothing tilts: the article about jazz may lead
    res = ask(kb_org["id"], "jazz")
    assert "why" not in step(res, "role_boost")


VENUE = [
    {"title": "Dorcol Hall — venue information", "role": "support",
     "body": "# Dorcol Hall — venue information\n\nDorcol Hall is a former tram depot at Dunavska 17. "
             "Getting there: trams 2 and 5 stop outside; the night bus runs until 05:00."},
    event("Dorcol Hall Techno All Night", local(2026, 3, 28, 23), local(2026, 3, 29, 5), 25, ["techno"],
          venue="Dorcol Hall", body="# Dorcol Hall Techno All Night\n\nTechno at Dorcol Hall: Dorcol Hall's "
                                    "main room, Dorcol Hall's sound system, all night."),
    event("Dorcol Hall Jazz Concert", local(2026, 3, 27, 20), local(2026, 3, 27, 23), 15, ["jazz"],
          venue="Dorcol Hall", body="# Dorcol Hall Jazz Concert\n\nA jazz concert at Dorcol Hall, in Dorcol Hall's "
                                    "small room."),
]


def test_a_question_for_a_venue_puts_its_own_page_first_and_one_for_its_events_the_events(kb_org):
    ids = seed(kb_org["id"], VENUE + SUPPORT)
    res = ask(kb_org["id"], "how do I get to Dorcol Hall?")
    out = step(res, "role_boost")
    assert out.get("venue_pages") == [ids["Dorcol Hall — venue information"]], out
    assert first_source(res) == "Dorcol Hall — venue information", [s["document_title"] for s in res["sources"]]
    res = ask(kb_org["id"], "upcoming concerts at Dorcol Hall")
    out = step(res, "role_boost")
    assert out["role_priority"][0] == "event" and "events" in out["why"] and "venue_pages" not in out
    assert res["sources"][0]["document_role"] == "event", [s["document_title"] for s in res["sources"]]


# --------------------------------------------------------------------------- identity and SKUs

TENTS = [
    {"title": "Altair Trailhead 2 Tent", "role": "product", "metadata": {"sku": "ALT-TH2", "price": 329.0},
     "body": "# Altair Trailhead 2 Tent\n\nA freestanding two-person dome tent.\n\nSKU: ALT-TH2"},
    {"title": "Altair Trailhead 2 Footprint", "role": "product", "metadata": {"sku": "ALT-TH2-FP", "price": 39.0},
     "body": "# Altair Trailhead 2 Footprint\n\nA groundsheet cut to the Trailhead 2 tent.\n\nSKU: ALT-TH2-FP"},
    {"title": "Altair Homestead 4 Family Tent", "role": "product", "metadata": {"sku": "ALT-HS4", "price": 549.0},
     "body": "# Altair Homestead 4 Family Tent\n\nA tunnel tent for four with a big porch.\n\nSKU: ALT-HS4"},
    {"title": "Altair Homestead 4 Tent Carpet", "role": "product", "metadata": {"sku": "ALT-HS4-CP", "price": 59.0},
     "body": "# Altair Homestead 4 Tent Carpet\n\nA fleece carpet for the Homestead 4 tent's inner.\n\n"
             "SKU: ALT-HS4-CP"},
]


def test_a_sku_leans_on_the_keyword_leg_and_names_its_product_not_the_look_alike(kb_org):
    ids = seed(kb_org["id"], TENTS + SUPPORT)
    for sku, title in (("ALT-TH2", "Altair Trailhead 2 Tent"), ("ALT-TH2-FP", "Altair Trailhead 2 Footprint")):
        res = ask(kb_org["id"], sku)
        fusion = step(res, "rrf")
        assert fusion["weights"]["keyword"] == 2.0 and fusion["weights"]["vector"] == 0.5
        assert "baseline_top" in fusion and "tilted_top" in fusion  # the equal-weight order beside it
        assert step(res, "identity")["first"] == [ids[title]]
        assert first_source(res) == title


def test_an_exact_name_goes_first_and_the_accessory_does_not_outrank_the_main_product(kb_org):
    seed(kb_org["id"], TENTS + SUPPORT)
    assert first_source(ask(kb_org["id"], "Altair Homestead 4")) == "Altair Homestead 4 Family Tent"
    assert first_source(ask(kb_org["id"], "Homestead 4 tent carpet")) == "Altair Homestead 4 Tent Carpet"
    assert first_source(ask(kb_org["id"], "Trailhead 2 footprint")) == "Altair Trailhead 2 Footprint"
    res = ask(kb_org["id"], "a tent for a family of four")  # no name: similarity decides, nothing pinned
    assert step(res, "identity")["first"] == []


def test_hyphenated_words_with_numbers_are_not_skus(kb_org):
    assert is_sku_shaped("ALT-TH2") and is_sku_shaped("alt-th2") and is_sku_shaped("FH-DB-20")
    assert not any(is_sku_shaped(q) for q in ("something fun for a 5-year-old", "a 2-person tent", "24-pack",
                                              "3-season sleeping bag", "non-stick pan", "open-air concerts"))
    seed(kb_org["id"], TENTS)
    res = ask(kb_org["id"], "a 2-person tent")
    assert step(res, "rrf")["weights"] == {"vector": 1.0, "keyword": 1.0, "listing": 1.0, "soft": 0.5}
    assert "baseline_top" not in step(res, "rrf")


def test_a_looser_keyword_tier_does_not_run_once_an_earlier_one_filled_the_candidates(kb_org, monkeypatch):
    """Four chunks hold every word of the question, two only its rarest word. With room for
    four candidates the all-words tier fills it and the looser tiers are not read (in a large
    organization they re-read thousands of tsvectors for chunks that cannot reach the top);
    with room for more they run and bring the partial matches."""
    from kbframework.retrieval import search

    ids = seed(kb_org["id"], [
        {"title": f"Ember Stove {n}", "role": "product",
         "body": f"# Ember Stove {n}\n\nA titanium wood stove that folds flat for ultralight hikes."}
        for n in ("One", "Two", "Three", "Four")] + [
        {"title": f"Cook Set {n}", "role": "product", "body": f"# Cook Set {n}\n\nA titanium pot with a lid."}
        for n in ("Five", "Six")])
    monkeypatch.setattr(search, "KEYWORD_CANDIDATES", 4)
    tiers = {t["tier"]: t for t in ask(kb_org["id"], "titanium wood stove folds flat")["debug"]["keyword"]["tiers"]}
    assert tiers["all_terms"]["candidates"] == 4 and "skipped" not in tiers["all_terms"]
    assert tiers["any_term"]["candidates"] == 0 and tiers["any_term"]["skipped"]
    monkeypatch.setattr(search, "KEYWORD_CANDIDATES", 400)
    res = ask(kb_org["id"], "titanium wood stove folds flat")
    tiers = {t["tier"]: t for t in res["debug"]["keyword"]["tiers"]}
    assert "skipped" not in tiers["any_term"] and tiers["any_term"]["candidates"] >= 2
    assert {h["document_id"] for h in res["debug"]["keyword"]["hits"]} >= {ids["Cook Set Five"], ids["Cook Set Six"]}
