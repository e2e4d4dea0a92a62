"""The admin loop in a real browser (Debian's Chromium driven by Playwright) against the real
app served by a werkzeug server thread on 127.0.0.1:

log in → write a manual entry (toolbar + live preview) → see it chunked → ask about it in the
test chat and find it in the debug panel → disable it and see the answer change → rate the
bad answer 👎 → open it from the feedback page and fix it with a correcting entry → the next
answer is right. A forged POST without the CSRF token is refused.

``KB_ADMIN_SCREENSHOT_DIR=docs/screenshots`` also saves a screenshot of every page at desktop
and tablet width (the README's pictures).
"""
from __future__ import annotations

import os
import re
import threading
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.browser

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run"]
PASSWORD = "correct horse battery"
SHOTS = os.environ.get("KB_ADMIN_SCREENSHOT_DIR")


@pytest.fixture(scope="module")
def browser():
    if not os.path.exists(CHROMIUM):
        pytest.skip("Debian's chromium is not installed (apt-get install -y chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


@pytest.fixture
def live(kb_app):
    from werkzeug.serving import make_server

    srv = make_server("127.0.0.1", 0, kb_app, threaded=True)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_port}"
    srv.shutdown()
    srv.server_close()


def make_admin(org_slug: str, email: str):
    from kbframework.orgs.accounts import create_user, get_org_by_slug
    from kbframework.db import session_scope

    with session_scope() as s:
        create_user(s, email, PASSWORD, get_org_by_slug(s, org_slug), "admin")


def login(page, base, email):
    page.goto(f"{base}/admin/")
    assert "/login" in page.url
    page.fill("#email", email)
    page.fill("#password", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(f"{base}/admin/")


def ask(page, question):
    """Send a question in the test chat; wait for the answer and its trace in the debug panel.
    (Locator waits only: the admin's CSP forbids eval, so no wait_for_function.)"""
    answers = page.locator(".msg-bot[data-message-id]")
    before = answers.count()
    page.fill("[data-chat-q]", question)
    page.press("[data-chat-q]", "Enter")
    msg = answers.nth(before)
    msg.wait_for()
    expect(page.locator("[data-debug-label]")).to_have_text(re.compile(r"^for "))
    page.locator(f".debug-body .trace[data-trace='{msg.get_attribute('data-message-id')}']").wait_for()
    return msg


def test_the_whole_loop_without_a_terminal(browser, live, kb_org):
    make_admin("test-org", "admin@test.example")
    ctx = browser.new_context(viewport={"width": 1366, "height": 900})
    page = ctx.new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text)
            if m.type == "error" and "favicon" not in (m.location or {}).get("url", "") else None)
    login(page, live, "admin@test.example")
    assert page.locator("h1").inner_text() == "Dashboard"

    # 1. write a manual entry with the toolbar and watch the server-rendered preview
    page.click("nav.nav >> text=Knowledge")
    page.click("text=Write the first entry")
    page.fill("#title", "Parking at the club")
    page.fill("#body", "Parking\n\nThe garage on Level -1 opens at 21:00 and costs 5 euro per night. "
                       "Guests of the club park there.")
    page.evaluate("() => { const t = document.querySelector('#body'); t.focus(); t.setSelectionRange(0, 0); }")
    page.click("[data-md='h2']")
    page.wait_for_selector(".md-preview h2:text('Parking')")
    assert page.input_value("#body").startswith("## Parking\n")
    assert "words" in page.inner_text("[data-md-status]")
    page.fill("#tags", "venue-info, parking")
    page.click("button:text('Save and index')")
    page.wait_for_selector(".flash-ok")
    assert "Saved and indexed: 1 chunk." in page.inner_text(".flash-ok")
    assert page.locator("h1").inner_text() == "Parking at the club"
    assert page.locator(".chunk").count() == 1
    assert "Level -1" in page.inner_text(".chunk .chunk-text") and "tokens" in page.inner_text(".chunk-head")
    doc_url = page.url

    # 2. ask about it in the test chat; it is in the answer, its sources and the debug panel
    page.click("nav.nav >> text=Test chat")
    msg = ask(page, "Where can I park my car near the club?")
    assert "Level -1" in msg.locator(".answer-text").inner_text()
    assert "Parking at the club" in msg.locator(".sources-list").inner_text()
    trace = page.locator(".debug-body .trace")
    assert "Parking at the club" in trace.locator("details.step:has-text('Fused ranking')").inner_text()
    trace.locator("summary:has-text('Final prompt')").click()
    assert "The garage on Level -1" in trace.locator("pre.prompt").inner_text()
    trace.locator("summary:has-text('Vector ranking')").click()
    assert trace.locator("details.step:has-text('Vector ranking') tbody tr").count() >= 1

    # 3. disable it from its page; the same question no longer gets it
    msg.locator(".sources-list a:text('Parking at the club')").click()
    page.wait_for_url(doc_url)
    page.click(".page-actions button:text('Disable')")
    page.wait_for_selector(".flash-ok")
    assert page.locator(".subtitle .pill").first.inner_text() == "disabled"
    page.click("nav.nav >> text=Test chat")
    msg = ask(page, "Where can I park my car near the club?")
    answer = msg.locator(".answer-text").inner_text()
    assert "Level -1" not in answer
    assert msg.locator(".msg-meta .pill").inner_text().startswith("no answer")  # the preset's fallback text
    assert msg.locator(".sources-list").count() == 0

    # 4. that answer is bad: 👎 with a comment
    page.once("dialog", lambda d: d.accept("It should say where to park"))
    msg.locator("[data-rate='down']").click()
    page.wait_for_selector(".rate.active-down")

    # 5. open it from the feedback page and fix it with a correcting entry
    page.click("nav.nav >> text=Feedback")
    row = page.locator("tbody tr", has_text="It should say where to park")
    assert row.count() == 1 and "open" in row.inner_text()
    row.locator("td.q-col").click()  # the whole row opens the trace
    page.wait_for_selector("h1:text('disliked')")
    assert page.locator(".trace").count() == 1 and "no answer" in page.inner_text(".trace")
    page.click("text=Add a correcting entry")
    assert "Correcting an answer people disliked" in page.inner_text("main")
    assert page.input_value("#title") == "Where can I park my car near the club"
    page.fill("#body", "# Parking\n\nPark in the garage on Level -2 (the club's own floor); it costs 5 euro per night.")
    assert page.is_checked("input[name=mark_addressed]")
    page.click("button:text('Save and index')")
    page.wait_for_selector(".flash-ok")
    assert "The feedback is marked addressed." in page.inner_text(".flash-ok")

    # 6. the next answer is right
    page.goto(f"{live}/admin/chat")
    msg = ask(page, "Where can I park my car near the club?")
    assert "Level -2" in msg.locator(".answer-text").inner_text()
    page.goto(f"{live}/admin/feedback?state=open")
    assert page.locator("tbody tr", has_text="It should say where to park").count() == 0

    assert errors == []  # no script errors, no failed requests along the way

    # 7. a forged POST without the CSRF token is refused (same cookies, no token)
    status = page.evaluate("""async () => {
        const fd = new FormData(); fd.append('title', 'Forged'); fd.append('body', 'Forged entry');
        const r = await fetch('/admin/knowledge', {method: 'POST', body: fd, credentials: 'same-origin'});
        return [r.status, await r.text()];
    }""")
    assert status[0] == 403 and "CSRF" in status[1]
    r = ctx.request.post(f"{live}/admin/knowledge", form={"title": "Forged", "body": "Forged entry"})
    assert r.status == 403
    page.goto(f"{live}/admin/documents?q=Forged")
    assert "No documents match" in page.inner_text("main")
    ctx.close()


# --------------------------------------------------------------------------- README screenshots


PAGES = [("dashboard", "/admin/"), ("sources", "/admin/sources"), ("documents", "/admin/documents"),
         ("knowledge", "/admin/knowledge"), ("settings", "/admin/settings"), ("feedback", "/admin/feedback"),
         ("zero-results", "/admin/zero-results"), ("keys", "/admin/keys"), ("usage", "/admin/usage")]


@pytest.mark.skipif(not SHOTS, reason="set KB_ADMIN_SCREENSHOT_DIR to save screenshots of every page")
def test_screenshots_of_every_page(browser, live, kb_clean):
    from kbframework.db import session_scope
    from kbframework.demo import seed_demo
    from kbframework.models import ChatFeedback, Document, UsageLedger
    from kbframework.retrieval.answer import answer

    info = seed_demo("admin@demo.local", PASSWORD)
    oid = uuid.UUID(info["organization_id"])
    logs = [answer(oid, q, channel="public") for q in
            ("What is your return policy?", "How long does shipping take?", "Do you have a red dress?",
             "Is there parking at the club?", "Is there parking at the club?", "Can I bring my dog?",
             "events on 3 January 2031")]
    now = datetime.now(timezone.utc)
    with session_scope() as s:
        s.add(ChatFeedback(organization_id=oid, chat_log_id=logs[0]["message_id"], rating="down",
                           comment="Sale items can't be returned — it should say so."))
        s.add(ChatFeedback(organization_id=oid, chat_log_id=logs[1]["message_id"], rating="up"))
        s.add(ChatFeedback(organization_id=oid, chat_log_id=logs[2]["message_id"], rating="up", comment="Great!"))
        for i in range(min(now.day, 28)):
            day = now - timedelta(days=i)
            if day.month != now.month:
                break
            s.add(UsageLedger(organization_id=oid, purpose="completion", provider="openai", model="gpt-4o-mini",
                              tokens_in=1800 + 137 * ((i * 7) % 11), tokens_out=300 + 41 * ((i * 5) % 7),
                              cost_usd=0.0004 + 0.00003 * i, created_at=day))
        from kbframework.hooks import registry
        from kbframework.models import SyncRun
        from kbframework.sources.config import create_source

        extra_pages = []
        if "woocommerce" in registry.source_types():
            shop = create_source(s, oid, {"type": "woocommerce", "name": "Demo shop", "sync_interval_minutes": 60,
                                          "config": {"store_url": "https://shop.example.com", "consumer_key": "ck_demo",
                                                     "consumer_secret": "cs_demo",
                                                     "field_mapping": {"attributes": {"Color": "text+tags"}}}})
            shop.last_sync_at = now - timedelta(minutes=12)
            for i, (kind, status, stats, err) in enumerate((
                    ("incremental", "success", {"fetched": 3, "changed": 2, "cheap": 1, "seconds": 1.4}, None),
                    ("full", "partial", {"fetched": 412, "created": 410, "errors": 2, "seconds": 48.2},
                     "product 5531: image URL is not http(s)\nproduct 5540: empty description"))):
                s.add(SyncRun(organization_id=oid, source_id=shop.id, kind=kind, status=status, stats=stats, error=err,
                              started_at=now - timedelta(hours=i * 20, minutes=13),
                              finished_at=now - timedelta(hours=i * 20, minutes=12)))
            extra_pages += [("source-form", "/admin/sources/new/woocommerce"), ("source", f"/admin/sources/{shop.id}")]
        if "wordpress" in registry.source_types():
            blog = create_source(s, oid, {"type": "wordpress", "name": "Nights blog",
                                          "config": {"base_url": "https://nights.example"}})
            blog.status, blog.last_error = "error", "The site answered 401: the application password was revoked."
            s.add(SyncRun(organization_id=oid, source_id=blog.id, kind="incremental", status="error",
                          error=blog.last_error, stats={"fetched": 0}, started_at=now - timedelta(minutes=40),
                          finished_at=now - timedelta(minutes=40)))
        doc = s.query(Document).filter(Document.organization_id == oid).order_by(Document.title).first()
        doc.status = "error"
        doc.metadata_ = {**(doc.metadata_ or {}), "last_error": "EmbeddingError: the embedding service timed out"}
    out = Path(SHOTS)
    out.mkdir(parents=True, exist_ok=True)
    for label, width, height in (("desktop", 1440, 900), ("tablet", 820, 1180)):
        ctx = browser.new_context(viewport={"width": width, "height": height}, device_scale_factor=1)
        page = ctx.new_page()
        login(page, live, "admin@demo.local")
        for name, path in PAGES + extra_pages:
            page.goto(live + path)
            page.screenshot(path=str(out / f"admin-{label}-{name}.png"), full_page=True)
        page.goto(f"{live}/admin/documents?q=Return")
        page.click("td.title-col a")
        page.screenshot(path=str(out / f"admin-{label}-document.png"), full_page=True)
        page.goto(f"{live}/admin/knowledge")
        page.click("a.btn:text('Edit') >> nth=0")
        page.wait_for_selector(".md-preview h1, .md-preview h2")
        page.screenshot(path=str(out / f"admin-{label}-editor.png"), full_page=True)
        page.goto(f"{live}/admin/feedback?rating=down")
        page.click("td.q-col >> nth=0")
        page.click("summary:has-text('Vector ranking')")
        page.screenshot(path=str(out / f"admin-{label}-feedback-trace.png"), full_page=True)
        page.goto(f"{live}/admin/chat")
        ask(page, "Do you have a red dress?")
        page.screenshot(path=str(out / f"admin-{label}-test-chat.png"), full_page=True)
        ctx.close()
    assert len(list(out.glob("admin-*.png"))) >= 26
