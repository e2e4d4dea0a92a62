"""The four mode presets as installed plugin distributions: their boosts after fusion
(role priorities), card types, prompt templates and fallback texts; and the demo's "done" questions."""
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest
from sqlalchemy import select

from kbframework.hooks import registry
from kbframework.db import session_scope
from kbframework.errors import ValidationFailed
from kbframework.retrieval.answer import answer, load_context
from tests.retrieval_support import NOW, seed, set_settings, titles

EXPECTED = {  # name: (mode, role priority, card types)
    "shopping": ("recommendation", ["product", "support", "article", "manual"], ["product"]),
    "events": ("events", ["event", "support", "article", "manual"], ["event"]),
    "support": ("support", ["support", "manual", "article"], ["article"]),
    "search": ("search", [], ["article", "product", "event"]),
}


def test_presets_are_installed_distributions():
    from kbframework.hooks.manager import list_plugins

    presets = registry.presets()
    dists = {p["name"]: p["distribution"] for p in list_plugins()}
    for name, (mode, roles, cards) in EXPECTED.items():
        p = presets[name]
        assert (p.name, p.mode, p.role_priority, p.card_types) == (name, mode, roles, cards)
        assert "{brand}" in p.prompt_template and p.fallback_text and p.knowledge == "strict"
        assert dists[name] == f"kbframework-preset-{name}"


def test_mode_is_found_by_preset_name_or_mode(kb_org):
    with session_scope() as s:
        assert load_context(s, kb_org["id"], "recommendation").preset.name == "shopping"
        assert load_context(s, kb_org["id"], "shopping").preset.name == "shopping"
        assert load_context(s, kb_org["id"], "events").preset.name == "events"
        assert load_context(s, kb_org["id"]).preset.name == "support"  # the organization's default
        with pytest.raises(ValidationFailed) as exc:
            load_context(s, kb_org["id"], "karaoke")
        assert "events" in exc.value.message and "shopping" in exc.value.message
    set_settings(kb_org["id"], preset="events")
    with session_scope() as s:
        assert load_context(s, kb_org["id"]).mode == "events"


ROLE_DOCS = [
    {"title": "Lantern product", "role": "product", "metadata": {"price": 20, "in_stock": True},
     "body": "# Lantern product\n\nA paper lantern for the lantern festival, with a candle holder."},
    {"title": "Lantern event", "role": "event", "start": datetime(2026, 4, 4, 20, tzinfo=ZoneInfo("Europe/Belgrade")),
     "end": datetime(2026, 4, 4, 23, tzinfo=ZoneInfo("Europe/Belgrade")), "metadata": {"price": 5},
     "url": "https://nights.example/lantern", "body": "# Lantern event\n\nThe lantern festival parade by the river."},
    {"title": "Lantern support", "role": "support",
     "body": "# Lantern support\n\nLantern festival questions: how to light a paper lantern safely."},
    {"title": "Lantern article", "role": "article", "url": "https://blog.example/lantern",
     "body": "# Lantern article\n\nThe history of the lantern festival and its paper lanterns."},
    {"title": "Lantern manual", "role": "manual",
     "body": "# Lantern manual\n\nStaff notes for the lantern festival: lanterns are stored in the hall."},
]


@pytest.mark.parametrize("name", list(EXPECTED))
def test_each_preset_boosts_roles_after_fusion_and_renders_its_cards(kb_org, name):
    seed(kb_org["id"], ROLE_DOCS)
    set_settings(kb_org["id"], brand="Lantern Co")
    mode, roles, cards = EXPECTED[name]
    res = answer(kb_org["id"], "lantern festival paper lantern", mode=name, now=NOW)
    dbg = res["debug"]
    assert dbg["preset"] == name and res["mode"] == mode and dbg["role_priority"] == roles
    fused = dbg["fused"]
    by_role = {}
    with session_scope() as s:
        from kbframework.models import Document

        role_of = {str(d.id): d.document_role for d in s.scalars(select(Document))}
    for f in fused:
        by_role.setdefault(role_of[f["document_id"]], f)
    assert len(by_role) == 5  # a boost re-ranks, it never filters
    factors = {r: f["boost"] for r, f in by_role.items()}
    want = {r: 1.0 for r in by_role}
    if roles:
        want[roles[0]] = 1.3
        want[roles[1]] = 1.1
    assert factors == want
    for f in fused:
        assert abs(f["boosted_score"] - round(f["score"] * f["boost"], 8)) < 1e-9
    assert [f["final_rank"] for f in fused] == list(range(1, len(fused) + 1))
    assert all(a["boosted_score"] >= b["boosted_score"] for a, b in zip(fused, fused[1:]))
    if roles:  # every document matches both legs, so ×1.3 and ×1.1 decide the first two places
        order = [role_of[f["document_id"]] for f in fused]
        assert order[0] == roles[0] and order[1] == roles[1]
    else:  # neutral: the fused order is the RRF order
        assert [f["chunk_id"] for f in fused] == [f["chunk_id"] for f in sorted(fused, key=lambda f: f["rank"])]
    assert res["cards"] and {c["type"] for c in res["cards"]} <= set(cards)
    assert "Lantern Co" in dbg["prompt"] and "{brand}" not in dbg["prompt"]


@pytest.mark.parametrize("name", list(EXPECTED))
def test_each_preset_has_its_fallback_text(kb_org, name):
    seed(kb_org["id"], ROLE_DOCS[:1])
    set_settings(kb_org["id"], similarity_floor=0.99)
    res = answer(kb_org["id"], "quantum xylophone repair", mode=name, now=NOW)
    assert res["answer"] == registry.presets()[name].fallback_text
    assert res["debug"]["reason"] == "no_results_above_threshold"


class _Frozen(datetime):
    @classmethod
    def now(cls, tz=None):
        return NOW.astimezone(tz) if tz else NOW.replace(tzinfo=None)


def test_demo_done_criteria(kb_clean, monkeypatch):
    """On the demo data (seeded as if it were Wednesday 15:00 in Belgrade)."""
    import kbframework.demo as demo

    monkeypatch.setattr(demo, "datetime", _Frozen)
    info = demo.seed_demo("admin@demo.local", "demo-password-123")
    org = info["organization_id"]
    q1 = "techno this weekend under €30"
    r1 = answer(org, q1, mode="events", now=NOW)
    assert titles(r1["cards"]) == ["Amelie Lens @ Warehouse"]  # Saturday, €25
    card = r1["cards"][0]
    assert card["type"] == "event" and card["price"] == "€25" and card["cta"]["label"] == "Get tickets"
    assert datetime.fromisoformat(card["date"]) > NOW
    assert any("techno" in x for x in r1["debug"]["explain"])
    hist = [{"role": "user", "content": q1}, {"role": "assistant", "content": r1["answer"]}]
    r2 = answer(org, "and tomorrow?", mode="events", history=hist, now=NOW)
    assert "techno" in r2["debug"]["rewritten_query"]
    # tomorrow holds only the jazz evening: the genre is kept, so no jazz card; the honest
    # fallback offers the techno nights as clearly labelled alternatives
    assert r2["cards"] == [] and r2["debug"]["reason"] == "no_results_above_threshold"
    alts = titles(r2["alternatives"]["cards"])
    assert alts and all("Jazz" not in t for t in alts)
    assert any("tomorrow" in x for x in r2["debug"]["explain"])
    r3 = answer(org, "red dress under 50 in stock", mode="shopping", now=NOW)
    assert titles(r3["cards"]) == ["Red Summer Dress"]
    assert r3["cards"][0]["price"] == "€39.99" and r3["cards"][0]["in_stock"] is True
    assert any("in stock" in x for x in r3["debug"]["explain"])
