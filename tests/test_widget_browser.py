"""The widget and the full-page embed in a real browser: Debian's Chromium driven by Playwright.

The app runs in a real gunicorn process; the "customer's site" is a second local HTTP server on
another port (another origin) that serves widget/test-page.html (a hostile stylesheet) with the
one-line embed. The language model is an OpenAI-compatible fake that streams its answer slowly,
so the test can watch tokens arrive before the answer is complete.
"""
from __future__ import annotations

import json
import os
import re
import struct
import threading
import time
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from sqlalchemy import select

from tests.embed_support import XSS_TITLE, make_key, seed_catalog, web_processes

pytestmark = pytest.mark.browser

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run"]
ROOT = Path(__file__).resolve().parent.parent
TEST_PAGE = (ROOT / "widget" / "test-page.html").read_text()
SCREENSHOTS = os.environ.get("KB_SCREENSHOT_DIR")  # unset: screenshots go to the test's tmp_path

ANSWER = ("Yes! The **Red Dress Deluxe** costs €39.99 and is in stock [1]. "
          "You can return it within 30 days of delivery [2].")
TOKEN_DELAY = 0.05


def png(w: int, h: int, rgb: tuple[int, int, int]) -> bytes:
    raw = b"".join(b"\x00" + bytes(rgb) * w for _ in range(h))

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


DRESS_PNG = png(96, 96, (200, 40, 60))


class Server:
    def __init__(self, handler_cls):
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler_cls)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


class FakeLLM(BaseHTTPRequestHandler):
    """``POST /v1/chat/completions`` of the OpenAI protocol; streams ANSWER word by word."""

    def do_POST(self):
        req = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        words = re.findall(r"\S+\s*", ANSWER)
        if not req.get("stream"):
            body = json.dumps({"id": "c1", "object": "chat.completion", "created": 0, "model": "fake",
                               "choices": [{"index": 0, "message": {"role": "assistant", "content": ANSWER},
                                            "finish_reason": "stop"}],
                               "usage": {"prompt_tokens": 50, "completion_tokens": len(words), "total_tokens": 60}})
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body.encode())
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()

        def send(obj):
            self.wfile.write(f"data: {json.dumps(obj)}\n\n".encode())
            self.wfile.flush()

        base = {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "fake"}
        for w in words:
            send({**base, "choices": [{"index": 0, "delta": {"content": w}, "finish_reason": None}]})
            time.sleep(TOKEN_DELAY)
        send({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        send({**base, "choices": [], "usage": {"prompt_tokens": 50, "completion_tokens": len(words),
                                               "total_tokens": 50 + len(words)}})
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()

    def log_message(self, *a):
        pass


def host_handler(app_url: str):
    class Host(BaseHTTPRequestHandler):
        """A customer's website: /page?key=K[&position=..] embeds the widget, /frame?key=K the iframe."""

        def do_GET(self):
            u = urlsplit(self.path)
            q = {k: v[0] for k, v in parse_qs(u.query).items()}
            if u.path == "/img/red-dress.png":
                return self._send(200, "image/png", DRESS_PNG)
            key = q.get("key", "")
            if u.path == "/page":
                attrs = "".join(f' data-{k}="{v}"' for k, v in q.items() if k != "key")
                tag = f'<script src="{app_url}/widget.js?key={key}"{attrs}></script>'
                html = re.sub(r'<script src="/widget\.js[^"]*"[^>]*></script>', tag, TEST_PAGE)
                assert tag in html
                return self._send(200, "text/html; charset=utf-8", html.encode())
            if u.path == "/frame":
                html = (f'<!doctype html><meta charset=utf-8><title>iframe host</title><h1>Our shop</h1>'
                        f'<iframe id=chat src="{app_url}/embed/{key}" title="Chat" '
                        f'style="width:400px;height:600px;border:0"></iframe>')
                return self._send(200, "text/html; charset=utf-8", html.encode())
            self._send(404, "text/plain", b"not found")

        def _send(self, status, ctype, body):
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    return Host


@pytest.fixture(scope="module")
def world(kb_services):
    if not os.path.exists(CHROMIUM):
        pytest.skip("Debian's chromium is not installed (apt-get install -y chromium)")
    from playwright.sync_api import sync_playwright

    llm = Server(FakeLLM)
    with web_processes(1, threads=8, KB_LLM_BASE_URL=llm.url + "/v1", KB_LLM_MODEL="fake-chat",
                       KB_LLM_PROVIDER="auto") as (app_url,):
        shop, evil = Server(host_handler(app_url)), Server(host_handler(app_url))
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
            try:
                yield {"app": app_url, "shop": shop.url, "evil": evil.url, "browser": browser}
            finally:
                browser.close()
        shop.close()
        evil.close()
    llm.close()


@pytest.fixture
def site(world, kb_org):
    seed_catalog(kb_org["id"], image_base=world["shop"])
    key = make_key(kb_org["id"], [world["shop"]], rate_per_ip_minute=100)
    return {**world, "key": key["key"], "org": kb_org}


def shot(page, name: str, tmp_path: Path) -> Path:
    path = (Path(SCREENSHOTS) if SCREENSHOTS else tmp_path) / f"widget-{name}.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(path))
    return path


WATCH_STREAM = """() => {
  const root = window.KBFWidget.root, seen = [];
  new MutationObserver(() => {
    const m = [...root.querySelectorAll('[data-kbf=msg-bot][aria-busy=true] [data-kbf=answer]')].pop();
    if (m && m.textContent && seen[seen.length - 1] !== m.textContent) seen.push(m.textContent);
  }).observe(root, {subtree: true, childList: true, characterData: true, attributes: true});
  window.__kbf_partials = seen;
}"""


def test_widget_on_an_allowed_site(site, tmp_path):
    from kbframework.db import session_scope
    from kbframework.models import ChatFeedback

    ctx = site["browser"].new_context(viewport={"width": 1280, "height": 800})
    page = ctx.new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(f"{site['shop']}/page?key={site['key']}")
    page.wait_for_selector("[data-kbf=root].rdy", state="attached")
    bubble = page.locator("[data-kbf=bubble]")
    assert bubble.get_attribute("aria-expanded") == "false" and bubble.get_attribute("aria-label")
    assert page.locator("[data-kbf=panel]").is_hidden()
    # keyboard: Tab to the bubble, Enter opens the panel and moves focus to the input
    bubble.focus()
    page.keyboard.press("Enter")
    page.wait_for_selector("[data-kbf=panel]", state="visible")
    assert bubble.get_attribute("aria-expanded") == "true"
    # the widget moves focus once the panel is drawn (a timer): wait for it, not for a guess
    page.wait_for_function("(window.KBFWidget.root.activeElement || {dataset: {}}).dataset.kbf === 'input'",
                           timeout=5000)
    assert page.locator("[data-kbf=log]").get_attribute("role") == "log"
    assert page.locator("[data-kbf=welcome]").inner_text().startswith("Hi! Ask me anything about Test Org")
    # the hostile host stylesheet does not reach into the shadow root
    assert page.locator("[data-kbf=send]").evaluate("e => getComputedStyle(e).backgroundColor") != "rgb(255, 0, 0)"

    page.evaluate(WATCH_STREAM)
    page.keyboard.type("Do you have a red dress?")
    with page.expect_response(lambda r: r.url.endswith("/chat")) as resp:
        page.keyboard.press("Enter")
    assert resp.value.headers["content-type"].startswith("text/event-stream")
    assert resp.value.headers["access-control-allow-origin"] == site["shop"]
    bot = page.locator("[data-kbf=msg-bot][data-message-id]")
    bot.wait_for(timeout=20000)
    final = page.locator("[data-kbf=answer]").inner_text()
    assert "Red Dress Deluxe" in final and "€39.99" in final and "**" not in final
    assert page.locator("[data-kbf=answer] strong").inner_text() == "Red Dress Deluxe"
    # streamed: the text grew in several steps while the turn was still busy
    partials = page.evaluate("window.__kbf_partials")
    flat = " ".join(final.split())
    assert len(partials) >= 3, partials
    assert all(flat.startswith(" ".join(p.replace("**", "").split())) and len(p) < len(ANSWER) for p in partials)

    # a product card with its image, the hostile title shown as text
    card = page.locator("[data-kbf=card][data-type=product]").first
    assert card.locator("[data-kbf=card-title]").inner_text() == XSS_TITLE
    assert card.locator("[data-kbf=card-price]").inner_text() == "€39.99"
    img = card.locator("[data-kbf=card-image]")
    img.wait_for()
    page.wait_for_function("() => { const i = window.KBFWidget.root.querySelector('[data-kbf=card-image]');"
                           " return i && i.complete && i.naturalWidth > 0; }")
    assert img.get_attribute("src") == f"{site['shop']}/img/red-dress.png"
    assert card.locator("[data-kbf=cta]").get_attribute("href") == "https://shop.example/product/red-dress"
    assert page.evaluate("window.__kbf_xss") is None
    assert page.evaluate("window.KBFWidget.root.querySelectorAll('img[src=x], [onerror]').length") == 0
    # the concise sources list
    sources = page.locator("[data-kbf=source]").all_inner_texts()
    assert any("Shipping and returns" in s for s in sources) and any(XSS_TITLE in s for s in sources)
    shot(page, "desktop", tmp_path)

    # 👎 with a comment lands in chat_feedback
    mid = bot.get_attribute("data-message-id")
    page.locator("[data-kbf=thumb-down]").click()
    page.locator("[data-kbf=comment]").fill("The dress is not available in my size")
    page.locator("[data-kbf=comment-send]").click()
    page.locator("[data-kbf=thanks]").wait_for()
    with session_scope() as s:
        rows = s.scalars(select(ChatFeedback)).all()
        assert [(str(r.chat_log_id), r.rating, r.comment) for r in rows] == \
               [(mid, "down", "The dress is not available in my size")]
        assert rows[0].user_session_id  # the visitor's session id from sessionStorage

    # Escape closes the panel and gives focus back to the bubble
    page.locator("[data-kbf=input]").focus()
    page.keyboard.press("Escape")
    assert page.locator("[data-kbf=panel]").is_hidden()
    assert page.evaluate("window.KBFWidget.root.activeElement.dataset.kbf") == "bubble"
    assert not errors, errors
    ctx.close()


def test_a_site_not_on_the_allowlist_gets_nothing(site, tmp_path):
    ctx = site["browser"].new_context()
    page = ctx.new_page()
    page.goto(f"{site['evil']}/page?key={site['key']}")
    page.wait_for_load_state("load")
    page.wait_for_timeout(300)
    assert page.locator("kbf-widget").count() == 0
    assert page.evaluate("typeof window.KBFWidget") == "undefined"
    # calling the API directly from that page is refused (403 without CORS → the browser blocks it)
    outcome = page.evaluate("""async (url) => {
        try { const r = await fetch(url, {method: 'POST', headers: {'Content-Type': 'application/json'},
                                          body: JSON.stringify({message: 'hi'})});
              return 'status ' + r.status; }
        catch (e) { return 'blocked'; } }""", f"{site['app']}/api/embed/v1/{site['key']}/chat")
    assert outcome == "blocked"
    # and the full-page embed cannot be framed there (frame-ancestors), but can on the allowed site
    page.goto(f"{site['evil']}/frame?key={site['key']}")
    page.wait_for_timeout(500)
    frame = page.frame_locator("#chat")
    assert frame.locator("kbf-widget").count() == 0
    page.goto(f"{site['shop']}/frame?key={site['key']}")
    frame = page.frame_locator("#chat")
    frame.locator("[data-kbf=root][data-mode=page].rdy").wait_for(state="attached")
    frame.locator("[data-kbf=input]").fill("red dress?")
    frame.locator("[data-kbf=send]").click()
    frame.locator("[data-kbf=msg-bot][data-message-id]").wait_for(timeout=20000)
    assert frame.locator("[data-kbf=title]").inner_text() == "Test Org"
    assert frame.locator("[data-kbf=card]").count() >= 1
    shot(page, "embed-iframe", tmp_path)
    ctx.close()


@pytest.mark.parametrize("width,height", [(320, 640), (375, 740)])
def test_phone_sized_viewport(site, tmp_path, width, height):
    ctx = site["browser"].new_context(viewport={"width": width, "height": height}, is_mobile=True,
                                      has_touch=True, device_scale_factor=2)
    page = ctx.new_page()
    page.goto(f"{site['shop']}/page?key={site['key']}&position=bottom-left")
    page.wait_for_selector("[data-kbf=root].rdy", state="attached")
    b = page.locator("[data-kbf=bubble]").bounding_box()
    assert b["x"] < width / 2 and b["x"] >= 0 and b["y"] + b["height"] <= height  # bottom-left, on screen
    page.locator("[data-kbf=bubble]").tap()
    panel = page.locator("[data-kbf=panel]")
    panel.wait_for(state="visible")
    panel.evaluate("e => Promise.all(e.getAnimations().map(a => a.finished))")  # the opening animation
    box = panel.bounding_box()
    assert (box["x"], box["y"], box["width"], box["height"]) == (0, 0, width, height)  # full screen
    assert page.locator("[data-kbf=close]").is_visible()
    page.locator("[data-kbf=input]").fill("Do you have a red dress?")
    page.locator("[data-kbf=send]").tap()
    page.locator("[data-kbf=msg-bot][data-message-id]").wait_for(timeout=20000)
    page.wait_for_function("() => { const i = window.KBFWidget.root.querySelector('[data-kbf=card-image]');"
                           " return i && i.complete && i.naturalWidth > 0; }")
    for sel in ("[data-kbf=card]", "[data-kbf=send]", "[data-kbf=input]", "[data-kbf=thumb-down]",
                "[data-kbf=answer]", "[data-kbf=sources]"):
        bb = page.locator(sel).first.bounding_box()
        assert bb and bb["x"] >= 0 and bb["x"] + bb["width"] <= width + 0.5, (sel, bb)
    log_overflow = page.evaluate("(() => { const l = window.KBFWidget.root.querySelector('[data-kbf=log]');"
                                 " return l.scrollWidth - l.clientWidth; })()")
    assert log_overflow <= 0
    send = page.locator("[data-kbf=send]").bounding_box()
    assert send["width"] >= 40 and send["height"] >= 40  # a usable touch target
    path = shot(page, f"phone-{width}", tmp_path)
    assert path.stat().st_size > 5000
    ctx.close()
