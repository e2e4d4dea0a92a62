"""The demo organization in a real browser (Debian's Chromium driven by Playwright): what a
newcomer sees after ``make run``. The app runs in a real gunicorn process with no language model
configured (the offline answerer), the demo is seeded with event dates relative to today, and a
local page on another origin embeds the widget with the demo's key."""
from __future__ import annotations

import os
from datetime import datetime, timezone

import pytest

from tests.embed_support import make_key, web_processes
from tests.test_widget_browser import ARGS, CHROMIUM, Server, host_handler, shot

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def demo_site(kb_services):
    if not os.path.exists(CHROMIUM):
        pytest.skip("Debian's chromium is not installed (apt-get install -y chromium)")
    from playwright.sync_api import sync_playwright

    with web_processes(1, threads=8, KB_LLM_PROVIDER="extractive", OPENAI_API_KEY="", KB_LLM_API_KEY="") as (app,):
        host = Server(host_handler(app))
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
            try:
                yield {"app": app, "host": host.url, "browser": browser}
            finally:
                browser.close()
        host.close()


@pytest.fixture
def demo(demo_site, kb_clean):
    from kbframework.demo import seed_demo

    info = seed_demo("admin@demo.local", "demo-password-123")
    key = make_key(info["organization_id"], [demo_site["host"]], rate_per_ip_minute=100)
    return {**demo_site, **info, "site_key": key["key"]}


def open_widget(demo, ctx, errors):
    """A new visitor (a new tab: a new conversation) on the demo site with the widget open."""
    page = ctx.new_page()
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(f"{demo['host']}/page?key={demo['site_key']}")
    page.wait_for_selector("[data-kbf=root].rdy", state="attached")
    page.locator("[data-kbf=bubble]").click()
    page.wait_for_selector("[data-kbf=panel]", state="visible")
    return page


def ask(page, question: str):
    page.locator("[data-kbf=input]").fill(question)
    page.locator("[data-kbf=send]").click()
    bot = page.locator("[data-kbf=msg-bot][data-message-id]").first
    bot.wait_for(timeout=30000)
    return bot


def test_demo_widget_shows_product_and_event_cards(demo, tmp_path):
    ctx = demo["browser"].new_context(viewport={"width": 1280, "height": 900})
    errors = []
    page = open_widget(demo, ctx, errors)
    bot = ask(page, "Do you have a red summer dress?")
    card = bot.locator("[data-kbf=card][data-type=product]").first
    card.wait_for()
    assert card.locator("[data-kbf=card-title]").inner_text() == "Red Summer Dress"
    assert card.locator("[data-kbf=card-price]").inner_text() == "€39.99"
    assert "€39.99" in bot.locator("[data-kbf=answer]").inner_text()  # the offline answer says the price
    shot(page, "demo-product", tmp_path)

    page = open_widget(demo, ctx, errors)
    bot = ask(page, "Any techno this weekend?")
    event = bot.locator("[data-kbf=card][data-type=event]").first
    event.wait_for()
    titles = bot.locator("[data-kbf=card][data-type=event] [data-kbf=card-title]").all_inner_texts()
    assert set(titles) <= {"Amelie Lens @ Warehouse", "Techno Marathon", "Open-Air Sunday Sessions",
                           "Techno Warm-up Tonight"} and titles, titles
    assert event.locator("[data-kbf=card-date]").inner_text().strip()
    assert event.locator("[data-kbf=cta]").get_attribute("href").startswith("https://tickets.example/")
    shot(page, "demo-event", tmp_path)

    # the event dates of the demo are upcoming: seeded relative to today
    from kbframework.db import session_scope
    from kbframework.models import Document
    from sqlalchemy import select

    with session_scope() as s:
        ends = s.scalars(select(Document.event_end).where(Document.document_role == "event")).all()
    assert ends and all(e > datetime.now(timezone.utc) for e in ends)
    assert not errors, errors
    ctx.close()


def test_demo_widget_shows_the_nearest_prices_when_a_price_leaves_nothing(demo, tmp_path):
    """"dresses under 10": nothing that cheap; the widget shows the answer's alternatives under
    their label, the nearest prices first."""
    ctx = demo["browser"].new_context(viewport={"width": 1280, "height": 900})
    errors = []
    page = open_widget(demo, ctx, errors)
    bot = ask(page, "dresses under 10")
    alt = bot.locator("[data-kbf=alternatives]")
    alt.wait_for()
    assert alt.locator("[data-kbf=alternatives-label]").inner_text().strip().lower() == \
        "nothing at that price — the nearest prices"
    titles = alt.locator("[data-kbf=card-title]").all_inner_texts()
    assert titles[0] == "Red Summer Dress" and "Crimson Evening Dress" in titles, titles  # €39.99 first, €89 after
    assert bot.locator("[data-kbf=cards]").count() == 0  # no answer cards: nothing met the question
    shot(page, "demo-alternatives", tmp_path)
    assert not errors, errors
    ctx.close()


def admin_ask(page, question: str):
    answers = page.locator(".msg-bot[data-message-id]")
    before = answers.count()
    page.fill("[data-chat-q]", question)
    page.press("[data-chat-q]", "Enter")
    answers.nth(before).wait_for(timeout=30000)
    return answers.nth(before)


def test_admin_test_chat_on_the_demo_shows_the_three_card_types(demo, tmp_path):
    ctx = demo["browser"].new_context(viewport={"width": 1280, "height": 900})
    page = ctx.new_page()
    page.goto(f"{demo['app']}/admin/")
    page.fill("#email", "admin@demo.local")
    page.fill("#password", "demo-password-123")
    page.click("button[type=submit]")
    page.wait_for_url(f"{demo['app']}/admin/")
    first = {}
    for question, kind in (("red summer dress", "product"), ("any techno this weekend?", "event"),
                           ("what is your return policy?", "article")):
        page.goto(f"{demo['app']}/admin/chat")  # a new conversation for each question
        bot = admin_ask(page, question)
        cards = [(c.locator(".kcard-type").inner_text().lower(), c.locator(".kcard-title").inner_text())
                 for c in bot.locator(".kcard").all()]
        first[kind] = next((t for k, t in cards if k == kind), None)
    assert first["product"] == "Red Summer Dress", first
    assert first["event"] in {"Amelie Lens @ Warehouse", "Techno Marathon"}, first
    assert first["article"] == "Return policy", first
    shot(page, "demo-admin-chat", tmp_path)
    ctx.close()
