"""What a new admin does in the first hour, in a real browser (Debian's Chromium, Playwright):
find last week's conversation in two clicks and filter the log; set a budget on the usage page
and see the public chat stop at it; add every source type from its form untouched and with
each JSON field emptied; edit a note from a feedback item and come back to it; read the debug
panel at 1280 px and at 390 px without a horizontal scroll."""
from __future__ import annotations

import re
from datetime import timedelta

import pytest
from playwright.sync_api import expect
from sqlalchemy import select, update

from kbframework.db import session_scope
from kbframework.models import ChatLog
from tests.test_admin_browser import ask, browser, live, login, make_admin  # noqa: F401  (fixtures)

pytestmark = pytest.mark.browser
ORIGIN = "https://shop.example"


def note(kb_app, admin_email, title, body):
    """A manual note through the API, as the logged-in admin would save it."""
    client = kb_app.test_client()
    r = client.post("/api/admin/v1/login", json={"email": admin_email, "password": "correct horse battery"})
    csrf = r.get_json()["csrf_token"]
    r = client.post("/api/admin/v1/documents/manual?wait=1", json={"title": title, "body": body},
                    headers={"X-CSRF-Token": csrf})
    assert r.status_code == 201, r.get_data(as_text=True)
    return client, csrf, r.get_json()


def public_key(org_id, name="Main website"):
    from kbframework.orgs.keys import create_key

    with session_scope() as s:
        return create_key(s, org_id, [ORIGIN], name).key


def public_chat(client, key, message, sid):
    r = client.post(f"/api/embed/v1/{key}/chat", json={"message": message, "session_id": sid},
                    headers={"Origin": ORIGIN})
    assert r.status_code == 200, r.get_data(as_text=True)
    return r.get_json()


def new_page(browser, width=1366, height=900):  # noqa: F811
    ctx = browser.new_context(viewport={"width": width, "height": height})
    page = ctx.new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    return page, errors


def test_conversations_page_and_its_filters(browser, live, kb_app, kb_org):  # noqa: F811
    make_admin("test-org", "admin@test.example")
    client, csrf, _ = note(kb_app, "admin@test.example", "Return policy",
                           "You can return items within 30 days for a full refund.")
    key = public_key(kb_org["id"])
    first = public_chat(client, key, "what is your return policy?", "visitor-last-week")
    public_chat(client, key, "and for sale items?", "visitor-last-week")
    client.post(f"/api/embed/v1/{key}/feedback", json={"message_id": first["message_id"], "rating": "down",
                                                       "comment": "say the days", "session_id": "visitor-last-week"},
                headers={"Origin": ORIGIN})
    public_chat(client, key, "do you repair zebra saddles?", "visitor-today")
    with session_scope() as s:
        s.execute(update(ChatLog).where(ChatLog.session_id == "visitor-last-week").values(
            created_at=ChatLog.created_at - timedelta(days=5)))
    page, errors = new_page(browser)
    login(page, live, "admin@test.example")

    # two clicks: the nav item, then the conversation
    page.click("nav.nav >> text=Conversations")
    rows = page.locator("tbody tr[data-conversation]")
    expect(rows).to_have_count(2)
    assert rows.nth(0).get_attribute("data-conversation") == "visitor-today"  # newest first
    rows.nth(1).locator("td.q-col").click()
    page.wait_for_selector("section.turn")
    turns = page.locator("section.turn")
    expect(turns).to_have_count(2)
    assert "what is your return policy?" in turns.nth(0).inner_text() and "say the days" in turns.nth(0).inner_text()
    turns.nth(0).locator("details.turn-trace > summary").click()
    expect(turns.nth(0).locator(".trace")).to_be_visible()
    assert "Return policy" in turns.nth(0).locator(".trace").inner_text()

    # the filters
    page.click("nav.nav >> text=Conversations")
    page.check("input[name=thumbs_down]")
    page.click("button:text('Filter')")
    expect(page.locator("tbody tr[data-conversation]")).to_have_count(1)
    assert page.locator("tbody tr[data-conversation]").get_attribute("data-conversation") == "visitor-last-week"
    assert "thumbs_down=1" in page.url
    page.click("text=Clear")
    page.check("input[name=zero_result]")
    page.click("button:text('Filter')")
    page.wait_for_url(re.compile(r"zero_result=1"))
    shown = [r.get_attribute("data-conversation") for r in page.locator("tbody tr[data-conversation]").all()]
    assert "visitor-today" in shown  # the zebra question found nothing
    with session_scope() as s:
        zero = {x.session_id for x in s.scalars(select(ChatLog).where(ChatLog.zero_result.is_(True)))}
    assert set(shown) == zero
    page.click("text=Clear")
    page.fill("#q", "sale items")
    page.select_option("#channel", "public")
    page.click("button:text('Filter')")
    expect(page.locator("tbody tr[data-conversation]")).to_have_count(1)
    page.click("text=Clear")
    page.select_option("#channel", "admin")
    page.click("button:text('Filter')")
    expect(page.locator("tbody tr[data-conversation]")).to_have_count(0)
    assert "Nothing matches these filters." in page.inner_text("main")
    # the export link carries the filters
    href = page.locator("a:text('Export CSV')").get_attribute("href")
    assert href.endswith("/admin/conversations/export.csv?channel=admin"), href

    # a visitor asks to be forgotten
    page.click("text=Clear")
    page.locator("tbody tr[data-conversation='visitor-last-week'] td.q-col").click()
    page.once("dialog", lambda d: d.accept())
    page.click("button:text('Erase this conversation')")
    page.wait_for_selector(".flash-ok")
    assert "2 turns" in page.inner_text(".flash-ok")
    expect(page.locator("tbody tr[data-conversation]")).to_have_count(1)
    assert errors == []


def test_budget_fields_and_the_chat_stopping_at_the_budget(browser, live, kb_app, kb_org):  # noqa: F811
    from kbframework.orgs.budget import EXCEEDED_TEXT

    make_admin("test-org", "admin@test.example")
    client, csrf, _ = note(kb_app, "admin@test.example", "Hours", "We are open every day from 9 to 18.")
    key = public_key(kb_org["id"])
    assert public_chat(client, key, "when are you open?", "v1")["answer"] != EXCEEDED_TEXT
    page, errors = new_page(browser)
    login(page, live, "admin@test.example")
    page.click("nav.nav >> text=Usage")
    assert "none set" in page.inner_text("[data-budget-progress]")
    form = page.locator("form.budget-form")
    form.locator("#budget_unit").select_option("tokens")
    form.locator("#budget_limit").fill("1")
    form.locator("#budget_soft_pct").fill("75")
    form.locator("button:text('Save budget')").click()
    page.wait_for_selector(".flash-ok")
    progress = page.inner_text("[data-budget-progress]")
    assert "of the monthly budget" in progress and "of 1 tokens" in progress and "stopped" in progress
    # the public chat stops at it, with the fixed message
    assert public_chat(client, key, "when are you open?", "v2")["answer"] == EXCEEDED_TEXT
    # a money budget from the settings page
    page.click("nav.nav >> text=Settings")
    sec = page.locator("#settings-budget")
    sec.locator("#budget_unit").select_option("cost")
    sec.locator("#budget_limit").fill("5")
    page.click("button:text('Save settings')")
    page.wait_for_selector(".flash-ok")
    assert page.locator("#settings-budget #budget_unit").input_value() == "cost"
    assert public_chat(client, key, "when are you open?", "v3")["answer"] != EXCEEDED_TEXT  # offline: $0
    # a bad value is refused with its message, nothing saved
    page.click("nav.nav >> text=Usage")
    page.locator("form.budget-form #budget_soft_pct").fill("250")
    page.locator("form.budget-form button:text('Save budget')").click()
    page.wait_for_selector(".flash-error")
    assert "between 1–100" in page.inner_text(".flash-error")
    assert errors == []


REQUIRED = {"store_url": "https://shop.example.com", "consumer_key": "ck_test", "consumer_secret": "cs_test",
            "base_url": "https://blog.example.com", "sitemap_urls": "https://site.example.com/sitemap.xml",
            "url": "https://feed.example.com/feed"}


def form_types():
    from kbframework.hooks import registry
    from kbframework.admin.views.sources import describe_fields

    out = []
    for name, c in sorted(registry.source_types().items()):
        if not getattr(c, "config_schema", None) or name == "manual":
            continue
        fields = describe_fields(c)
        if not fields:
            continue  # nothing to configure (an upload form)
        out.append((name, [f["name"] for f in fields if f["widget"] == "json"],
                    [f["name"] for f in fields if f["required"]]))
    return out


def test_every_source_form_saves_untouched_and_with_json_fields_emptied(browser, live, kb_app, kb_org):  # noqa: F811
    make_admin("test-org", "admin@test.example")
    with kb_app.test_request_context():
        types = form_types()
    assert {t for t, _, _ in types} >= {"sitemap"} and any(js for _, js, _ in types)
    page, errors = new_page(browser)
    login(page, live, "admin@test.example")
    for type_, json_fields, required in types:
        for emptied in (False, True):
            page.goto(f"{live}/admin/sources/new/{type_}")
            page.fill("#name", f"{type_} {'emptied' if emptied else 'untouched'}")
            for name in required:
                assert name in REQUIRED, f"add a test value for {type_}.{name}"
                page.fill(f"#cfg_{name}", REQUIRED[name])
            if emptied:
                for name in json_fields:
                    page.fill(f"#cfg_{name}", "")
            page.click("button[type=submit]:has-text('Add')")
            page.wait_for_selector(".flash", timeout=10000)
            assert page.locator(".flash-ok").count() == 1, (type_, emptied, page.inner_text(".flashes"))
            # its configuration page saves the same way, untouched and then emptied
            page.click("button[type=submit]:has-text('Save')")
            page.wait_for_selector(".flash-ok:has-text('Configuration saved')")
            for name in json_fields:
                page.fill(f"#cfg_{name}", "")
            page.click("button[type=submit]:has-text('Save')")
            page.wait_for_selector(".flash-ok:has-text('Configuration saved')")
    assert errors == []


def test_feedback_edit_and_back_with_mark_addressed(browser, live, kb_app, kb_org):  # noqa: F811
    make_admin("test-org", "admin@test.example")
    client, csrf, doc = note(kb_app, "admin@test.example", "Opening hours",
                             "We are open from 9 to 17 on weekdays.")
    key = public_key(kb_org["id"])
    ans = public_chat(client, key, "what are your opening hours?", "v-hours")
    r = client.post(f"/api/embed/v1/{key}/feedback", json={"message_id": ans["message_id"], "rating": "down",
                                                           "comment": "we open at 8 now", "session_id": "v-hours"},
                    headers={"Origin": ORIGIN})
    assert r.status_code in (200, 201)
    page, errors = new_page(browser)
    login(page, live, "admin@test.example")
    page.click("nav.nav >> text=Feedback")
    page.locator("tbody tr", has_text="we open at 8 now").locator("td.q-col").click()
    page.wait_for_selector("h1:text('disliked')")
    feedback_url = page.url
    page.locator(".list-item", has_text="Opening hours").locator("a:text('Edit')").click()
    page.wait_for_selector("[data-back-to-feedback]")
    assert page.is_checked("input[name=mark_addressed]")
    page.fill("#body", "We are open from 8 to 17 on weekdays.")
    page.click("button:text('Save changes')")
    page.wait_for_url(feedback_url)
    assert "The feedback is marked addressed." in page.inner_text(".flash-ok")
    assert "addressed" in page.inner_text(".subtitle")
    # the back link without saving
    page.locator(".list-item", has_text="Opening hours").locator("a:text('Edit')").click()
    page.click("[data-back-to-feedback]")
    page.wait_for_url(feedback_url)
    assert errors == []


@pytest.mark.parametrize("width,height", [(1280, 800), (390, 844)])
def test_debug_panel_fits_and_filter_values_read_well(browser, live, kb_app, kb_org, width, height):  # noqa: F811
    make_admin("test-org", "admin@test.example")
    note(kb_app, "admin@test.example", "Friday party",
         "A party with DJ Nova on Friday night at the club, tickets 15 euro, doors at 23:00.")
    page, errors = new_page(browser, width, height)
    login(page, live, "admin@test.example")
    page.goto(f"{live}/admin/chat")
    ask(page, "what is on this weekend at the club?")
    trace = page.locator(".debug-body .trace")
    trace.locator("details.step").evaluate_all("els => els.forEach(e => { e.open = true; })")
    overflow = page.evaluate("""() => {
        const out = [];
        const t = document.querySelector('.debug-body .trace');
        if (t.scrollWidth > t.clientWidth + 1) out.push('trace ' + t.scrollWidth + '>' + t.clientWidth);
        for (const w of t.querySelectorAll('.table-wrap')) {
          const tb = w.querySelector('table');
          if (tb && tb.scrollWidth > w.clientWidth + 1) {
            const step = w.closest('details.step');
            const title = step ? step.querySelector('summary').textContent.trim().slice(0, 30) : '';
            out.push(title + ': ' + tb.scrollWidth + '>' + w.clientWidth);
          }
        }
        if (document.documentElement.scrollWidth > window.innerWidth + 1) out.push('page');
        return out;
    }""")
    assert overflow == [], overflow
    values = trace.locator("td.filter-value").all_inner_texts()
    assert values, "the question's time phrase is a filter"
    for v in values:
        assert "{" not in v and '"' not in v, v
        assert re.search(r"\d{2} \w{3} \d{4}, \d{2}:\d{2} → ", v), v
    cell = trace.locator("td.filter-value").first.bounding_box()
    assert cell["width"] > 80  # not a sliver of letters
    assert errors == []
