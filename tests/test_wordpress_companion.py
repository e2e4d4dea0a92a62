"""The kbframework Connect WordPress plugin against a real WordPress and a live platform.

The plugin is built with ``make wp-plugin``'s script, uploaded through wp-admin's "Upload
Plugin" form and activated; the platform (the test app) is served over HTTP on 127.0.0.1
so the site can reach it, and the site's own PHP makes every request (connect, notices,
disconnect). The WordPress site runs on its own port (``KBF_WP_COMPANION_PORT``, default
``KBF_WP_TEST_PORT + 1``) so the connector tests' site is left alone. WooCommerce is not
installed: ``tests/wordpress/companion_driver.php`` fires the hooks WooCommerce fires.

The first tests (no WordPress) cover the platform's side: connect codes, the exchange's
checks, signed notices.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import shutil
import subprocess
import sys
import time
import uuid
from html import unescape
from pathlib import Path

import pytest
import requests
from sqlalchemy import select

from kbframework.db import session_scope
from kbframework.models import AssistantKey, Document, Source, WebhookEvent

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
from fakes.wordpress_site import CompanionSite, LivePlatform, install_from_zip  # noqa: E402

WP_DIR = ROOT / "tests" / "wordpress"
WP_PORT = int(os.environ.get("KBF_WP_COMPANION_PORT", int(os.environ.get("KBF_WP_TEST_PORT", "8091")) + 1))
PLUGIN = "kbframework-connect/kbframework-connect.php"


def sign(raw: bytes, secret: str) -> str:
    return "sha256=" + hmac.new(secret.encode(), raw, hashlib.sha256).hexdigest()


# --------------------------------------------------------------------------- platform side, no WordPress


def test_connect_code_is_single_use_hashed_and_expires(kb_admin, kb_services):
    from kbframework.jobs.queues import get_redis
    from kbframework.sources import connections as cp

    r = kb_admin.post("/api/admin/v1/wordpress/connect-codes")
    assert r.status_code == 201, r.get_data(as_text=True)
    out = r.get_json()
    code = out["code"]
    url, token = cp.parse_connect_code(code)
    assert url == "http://localhost" and out["ttl_seconds"] == cp.CODE_TTL_SECONDS
    keys = [k.decode() for k in get_redis().keys("kbf:connect:code:*")]
    assert keys == [f"kbf:connect:code:{hashlib.sha256(token.encode()).hexdigest()}"]  # only the hash
    assert token not in get_redis().get(keys[0]).decode()
    assert 0 < get_redis().ttl(keys[0]) <= cp.CODE_TTL_SECONDS

    record = cp.take_connect_code(code)
    assert record["org"] == kb_admin.org["id"]
    with pytest.raises(cp.ConnectCodeInvalid, match="expired or was already used"):
        cp.take_connect_code(code)
    expiring = cp.new_connect_code(kb_admin.org["id"], None, "http://localhost", ttl=1)["code"]
    time.sleep(1.3)
    with pytest.raises(cp.ConnectCodeInvalid):
        cp.take_connect_code(expiring)


def test_connect_codes_need_an_admin(kb_app, kb_org):
    from kbframework.testing import login_client

    member = login_client(kb_app, kb_org, "member@test.example", "correct horse battery", role="member")
    assert member.post("/api/admin/v1/wordpress/connect-codes").status_code == 403
    page = member.get("/admin/wordpress/connect")
    assert page.status_code == 200 and "Only admins can create connect codes" in page.get_data(as_text=True)


def test_exchange_refuses_bad_input_and_is_rate_limited(kb_app, kb_admin):
    from kbframework.sources import connections as cp

    c = kb_app.test_client()
    url = "/api/webhooks/v1/wordpress/connect"
    r = c.post(url, json={"code": "nope"})
    assert r.status_code == 400 and r.get_json()["error"]["details"]["site_url"] == ["required"]
    body = {"code": "kbfc1.aHR0cDovL2xvY2FsaG9zdA.unknown", "site_url": "http://127.0.0.1:9", "username": "a",
            "app_password": "b"}
    r = c.post(url, json=body)
    assert r.status_code == 400 and r.get_json()["error"]["code"] == "connect_code_invalid"
    for _ in range(cp.EXCHANGE_LIMIT_PER_MINUTE - 2):
        assert c.post(url, json=body).status_code == 400
    r = c.post(url, json=body)
    assert r.status_code == 429, r.get_data(as_text=True)
    assert "Too many connect attempts" in r.get_json()["error"]["message"]


def test_source_page_offers_connect_a_wordpress_site(kb_admin):
    html = kb_admin.get("/admin/sources").get_data(as_text=True)
    assert 'href="/admin/wordpress/connect"' in html and "Connect a WordPress site" in html
    page = kb_admin.get("/admin/wordpress/connect")
    assert page.status_code == 200 and "No site connected yet" in page.get_data(as_text=True)
    csrf = re.search(r'name="csrf_token" value="([^"]+)"', page.get_data(as_text=True)).group(1)
    made = kb_admin.client.post("/admin/wordpress/connect", data={"csrf_token": csrf})
    html = made.get_data(as_text=True)
    assert made.status_code == 200 and re.search(r'data-kbf="connect-code">kbfc1\.[^<]+<', html)
    assert kb_admin.client.post("/admin/wordpress/connect", data={}).status_code == 403  # no CSRF token


def _notice_source(kb_admin):
    r = kb_admin.post("/api/admin/v1/sources", json={"type": "wordpress", "name": "site", "config": {
        "base_url": "https://wp.example.com", "username": "u", "app_password": "p",
        "webhook_secret": "s3cret-signing-key"}})
    assert r.status_code == 201, r.get_data(as_text=True)
    return r.get_json()["id"]


def test_notices_are_signed_fresh_and_never_replayed(kb_app, kb_admin):
    sid = _notice_source(kb_admin)
    c = kb_app.test_client()
    url = f"/api/webhooks/v1/wordpress/{sid}"

    def notice(**kw):
        body = {"kbf_notice": 1, "post_id": 42, "post_type": "post", "event": "update",
                "modified_gmt": "2026-01-01 10:00:00", "ts": int(time.time()), "nonce": uuid.uuid4().hex, **kw}
        return json.dumps(body).encode()

    raw = notice()
    r = c.post(url, data=raw, headers={"Content-Type": "application/json", "X-KBF-Signature": sign(raw, "s3cret-signing-key")})
    assert r.status_code == 202, r.get_data(as_text=True)
    # the same bytes again: a replay
    r = c.post(url, data=raw, headers={"Content-Type": "application/json", "X-KBF-Signature": sign(raw, "s3cret-signing-key")})
    assert r.status_code == 401 and "replayed" in r.get_json()["error"]["message"]
    # forged: another secret, or a body changed after signing
    raw2 = notice()
    r = c.post(url, data=raw2, headers={"Content-Type": "application/json", "X-KBF-Signature": sign(raw2, "guess")})
    assert r.status_code == 401
    r = c.post(url, data=raw2.replace(b'"post_id": 42', b'"post_id": 43'),
               headers={"Content-Type": "application/json", "X-KBF-Signature": sign(raw2, "s3cret-signing-key")})
    assert r.status_code == 401
    # stale timestamp, no nonce, not signed at all
    old = notice(ts=int(time.time()) - 3600)
    r = c.post(url, data=old, headers={"Content-Type": "application/json", "X-KBF-Signature": sign(old, "s3cret-signing-key")})
    assert r.status_code == 401 and "clock" in r.get_json()["error"]["message"]
    r = c.post(url, data=old, headers={"Content-Type": "application/json", "X-KB-Webhook-Secret": "s3cret-signing-key"})
    assert r.status_code == 401 and "must be signed" in r.get_json()["error"]["message"]
    # a variation's notice re-reads its product
    var = notice(post_id=77, post_type="product_variation", parent_id=70, event="stock")
    r = c.post(url, data=var, headers={"Content-Type": "application/json", "X-KBF-Signature": sign(var, "s3cret-signing-key")})
    assert r.status_code == 202
    with session_scope() as s:
        rows = s.scalars(select(WebhookEvent).where(WebhookEvent.source_id == uuid.UUID(sid))
                         .order_by(WebhookEvent.id)).all()
        outcomes = [(e.outcome, e.topic, e.external_id) for e in rows]
    assert outcomes[0] == ("queued", "post.update", "42")
    assert [o[0] for o in outcomes[1:6]] == ["rejected"] * 5
    assert outcomes[-1] == ("queued", "product.stock", "70")


# --------------------------------------------------------------------------- the real WordPress


@pytest.fixture(scope="module")
def site():
    if shutil.which("php") is None:
        pytest.skip("php is not installed (scripts/test-deps.sh installs php-cli and wordpress)")
    state_file = f"/tmp/kbf-wp-state-companion-{WP_PORT}.json"
    env = {**os.environ, "WP_STATE_FILE": state_file}
    stale = Path(f"/var/lib/kbf-wp/{WP_PORT}/wp-content/plugins/kbframework-connect")
    shutil.rmtree(stale, ignore_errors=True)  # a previous run's upload
    r = subprocess.run(["bash", str(WP_DIR / "setup_wp.sh"), str(WP_PORT)], env=env, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, f"setup_wp.sh {WP_PORT} failed:\n{r.stderr[-3000:]}"
    with open(state_file) as f:
        wp = CompanionSite(json.load(f), state_file)
    wp.login()
    install_from_zip(wp)
    yield wp
    subprocess.run(["bash", str(WP_DIR / "stop_wp.sh"), str(WP_PORT), "--purge"], env=env, capture_output=True,
                   timeout=120)


@pytest.fixture
def platform(kb_app, allow_private, monkeypatch):
    live = LivePlatform(kb_app)
    monkeypatch.setenv("KB_PUBLIC_URL", live.url)  # the connect code carries the URL the site can reach
    yield live
    live.stop()


@pytest.fixture
def allow_private(kb_admin):
    r = kb_admin.put("/api/admin/v1/settings", json={"extra": {"allow_private_network": True}})
    assert r.status_code == 200, r.get_data(as_text=True)
    return kb_admin


def connect(wp: CompanionSite, admin, kb_drain) -> dict:
    """A fresh connection (the platform's tables are emptied between tests): code from the
    admin API, pasted into the plugin's settings form. Returns the stored connection."""
    wp.driver("forget-connection")
    code = admin.post("/api/admin/v1/wordpress/connect-codes").get_json()["code"]
    r = wp.submit("kbfc-connect-form", {"kbfc_code": code})
    assert r.status_code == 200 and "Connected. The assistant is reading the site now" in r.text, \
        re.findall(r'id="kbfc-message"><p>(.*?)</p>', r.text) or r.text[-1500:]
    conn = wp.driver("get-connection")
    assert conn["signing_secret"] not in r.text and conn["assistant_key"] not in r.text  # masked
    assert conn["signing_secret"][-4:] in r.text
    kb_drain()  # the first full sync the exchange queued
    return conn


def docs(source_id) -> dict[str, Document]:
    with session_scope() as s:
        rows = s.scalars(select(Document).where(Document.source_id == uuid.UUID(source_id))).all()
        for d in rows:
            s.expunge(d)
    return {d.external_id: d for d in rows}


def what_happened(source_id) -> str:
    """The platform's side of a wait that timed out: the notices it received and what became of
    each, its documents, and the jobs that failed (a flake once seen under load left nothing
    else to read)."""
    from rq.registry import FailedJobRegistry, ScheduledJobRegistry, StartedJobRegistry

    from kbframework.jobs.queues import get_redis, queue

    with session_scope() as s:
        events = [(e.topic, e.external_id, e.outcome, e.detail) for e in s.scalars(
            select(WebhookEvent).where(WebhookEvent.source_id == uuid.UUID(source_id)).order_by(WebhookEvent.id))]
    documents = {k: d.status for k, d in docs(source_id).items()}
    failed, waiting = [], []
    for name in ("webhook", "ingest", "sync"):
        q = queue(name)
        for job_id in FailedJobRegistry(queue=q).get_job_ids():
            job = q.fetch_job(job_id)
            failed.append((name, job_id, ((job.exc_info or "") if job else "")[-600:]))
        # a job that failed and waits for its retry is in none of the above
        where = {"queue": set(q.get_job_ids()), "scheduled": set(ScheduledJobRegistry(queue=q).get_job_ids()),
                 "started": set(StartedJobRegistry(queue=q).get_job_ids())}
        for job_id in sorted(set().union(*where.values())):
            job = q.fetch_job(job_id)
            waiting.append((name, job_id, [k for k, ids in where.items() if job_id in ids],
                            job.get_status() if job else "gone", getattr(job, "retries_left", None),
                            ((job.exc_info or "") if job else "")[-600:]))
    marks = {k.decode(): (get_redis().get(k) or b"").decode() for k in get_redis().scan_iter(f"kbf:wh:{source_id}:*")}
    return f"notices {events}; documents {documents}; failed jobs {failed}; other jobs {waiting}; marks {marks}"


def wait_for(kb_drain, pred, timeout=30.0, what="condition", source_id=None):
    end = time.monotonic() + timeout
    while True:
        kb_drain()
        got = pred()
        if got:
            return got
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}"
                                 + (f": {what_happened(source_id)}" if source_id else ""))
        time.sleep(0.2)


def ask(admin, question) -> set[str]:
    r = admin.post("/api/admin/v1/chat", json={"question": question})
    assert r.status_code == 200, r.get_data(as_text=True)
    return {s["external_id"] for s in r.get_json()["sources"]}


@pytest.mark.wordpress
def test_connect_publish_edit_trash_restore_reach_the_platform(site, platform, allow_private, kb_drain):
    admin = allow_private
    conn = connect(site, admin, kb_drain)
    sid = conn["source_id"]
    assert conn["post_types"] == ["post", "page", "event"] and conn["platform_url"] == platform.url
    with session_scope() as s:
        src = s.get(Source, uuid.UUID(sid))
        assert src.type == "wordpress" and src.status == "active"
        assert src.config["companion"]["site_url"] == site.url and src.config["username"] == "admin"
        key = s.get(AssistantKey, uuid.UUID(src.config["companion"]["key_id"]))
        assert key.key == conn["assistant_key"] and key.allowed_origins == [site.url]
    apps = site.driver("app-passwords", 1)
    assert conn["app_password_uuid"] in {a["uuid"] for a in apps}
    seeded = docs(sid)
    assert {str(e["id"]) for e in site.state["events"]} <= set(seeded)  # the first sync ran

    # publish: the document appears within seconds, with no sync run
    t0 = time.monotonic()
    ev = site.create("event", title="Zephyrine quartet at Club Nova",
                     content="<p>The Zephyrine quartet plays modal jazz on the rooftop.</p>")
    pid = str(ev["id"])
    doc = wait_for(kb_drain, lambda: docs(sid).get(pid), what="the published event's document", source_id=sid)
    print(f"\npublish → document in {time.monotonic() - t0:.2f} s")
    assert doc.status == "active" and "modal jazz" in doc.normalized_content
    assert pid in ask(admin, "Who plays modal jazz on the rooftop? Zephyrine quartet")

    # edit
    site.update(pid, "event", content="<p>The Zephyrine quartet now plays bossa nova in the garden.</p>")
    wait_for(kb_drain, lambda: "bossa nova" in (docs(sid)[pid].normalized_content or ""), what="the edit", source_id=sid)

    # trash: gone from answers
    site.call("DELETE", f"event/{pid}")
    wait_for(kb_drain, lambda: docs(sid)[pid].status == "deleted", what="the trashed event's purge", source_id=sid)
    assert pid not in ask(admin, "Who plays bossa nova in the garden? Zephyrine quartet")

    # restore (to its previous status, published): back
    assert site.driver("untrash", pid)["restored"]
    wait_for(kb_drain, lambda: docs(sid)[pid].status == "active", what="the restored event", source_id=sid)
    assert pid in ask(admin, "Who plays bossa nova in the garden? Zephyrine quartet")

    # unpublish, then delete for good
    site.update(pid, "event", status="draft")
    wait_for(kb_drain, lambda: docs(sid)[pid].status == "deleted", what="the unpublished event's purge", source_id=sid)
    site.update(pid, "event", status="publish")
    wait_for(kb_drain, lambda: docs(sid)[pid].status == "active", what="the republished event", source_id=sid)
    site.call("DELETE", f"event/{pid}", params={"force": "true"})
    wait_for(kb_drain, lambda: docs(sid)[pid].status == "deleted", what="the deleted event's purge", source_id=sid)

    with session_scope() as s:
        topics = [e.topic for e in s.scalars(select(WebhookEvent).where(WebhookEvent.source_id == uuid.UUID(sid))
                                               .order_by(WebhookEvent.id))]
        last_notice = s.get(Source, uuid.UUID(sid)).last_webhook_at
    assert topics == ["event.publish", "event.update", "event.trash", "event.untrash", "event.unpublish",
                      "event.publish", "event.delete"], topics
    assert last_notice is not None
    # the source's health and the connect page show the last notice; the plugin shows the delivery
    detail = admin.get(f"/admin/sources/{sid}").get_data(as_text=True)
    assert "Last webhook" in detail
    page = admin.get("/admin/wordpress/connect").get_data(as_text=True)
    assert 'data-kbf="connected-site"' in page and site.url in page
    html = site.settings()
    m = re.search(r'id="kbfc-last-delivery" data-ok="1">(.*?)</td>', html, re.S)
    assert m and "event #" + pid in m.group(1) and "delete" in m.group(1) and "delivered" in m.group(1), html[-3000:]


@pytest.mark.wordpress
def test_woocommerce_hooks_send_product_notices(site, platform, allow_private, kb_drain):
    admin = allow_private
    conn = connect(site, admin, kb_drain)
    sid = conn["source_id"]
    # product and variation rows as WooCommerce stores them (post types need not be registered)
    ids = json.loads(subprocess.run(["php", "-r", """
        require '%s/_bootstrap.php';
        $p = wp_insert_post(['post_type' => 'product', 'post_status' => 'publish', 'post_title' => 'Jazz tee']);
        $v = wp_insert_post(['post_type' => 'product_variation', 'post_status' => 'publish', 'post_parent' => $p, 'post_title' => 'Jazz tee - L']);
        echo json_encode([$p, $v]);""" % WP_DIR], capture_output=True, text=True, check=True,
        env={**os.environ, "KBF_WP_URL": site.url, "WP_STATE_FILE": site.state_file, "KBFC_NO_KICK": "1"}).stdout)
    p_id, v_id = ids
    site.driver("run-queue", "--all")
    for hook, target in (("woocommerce_update_product", p_id), ("woocommerce_product_set_stock", p_id),
                         ("woocommerce_variation_set_stock", v_id)):
        out = site.driver("woo", hook, target, env={"KBFC_NO_KICK": "1"})
        assert out["pending"] == 1, (hook, out)  # queued, not sent during the hook
        ran = site.driver("run-queue")
        assert ran["ran"] == 1 and ran["last"]["ok"], ran
    with session_scope() as s:
        rows = [(e.topic, e.external_id) for e in s.scalars(
            select(WebhookEvent).where(WebhookEvent.source_id == uuid.UUID(sid), WebhookEvent.topic.like("product.%"))
            .order_by(WebhookEvent.id))]
    assert rows[-3:] == [("product.product_save", str(p_id)), ("product.stock", str(p_id)),
                         ("product.stock", str(p_id))], rows  # the variation's stock re-reads its product
    # with Action Scheduler present (WooCommerce ships it) the plugin queues there instead of WP-Cron
    out = site.driver("fake-action-scheduler", p_id, env={"KBFC_NO_KICK": "1"})
    assert out["wp_cron_added"] == 0
    assert out["calls"][0][:2] == ["as_enqueue_async_action", "kbfc_deliver_notice"]
    assert out["calls"][0][3] == "kbframework-connect" and out["calls"][0][2][0]["post_id"] == p_id
    assert out["calls"][1][0] == "as_schedule_single_action" and out["calls"][1][4] == 60


@pytest.mark.wordpress
def test_platform_down_for_a_minute_loses_no_change(site, platform, allow_private, kb_drain):
    admin = allow_private
    conn = connect(site, admin, kb_drain)
    sid = conn["source_id"]
    post = site.create("posts", title="Opening hours", content="<p>We open at 9 on Sundays.</p>")
    pid = str(post["id"])
    wait_for(kb_drain, lambda: docs(sid).get(pid), what="the new post")

    platform.stop()
    t0 = time.monotonic()
    site.update(pid, "posts", content="<p>We open at 11 on Sundays from now on.</p>")
    # the save's own runner tries once and fails: the notice is queued again with backoff
    pending = wait_for(lambda: None, lambda: [p for p in site.driver("pending") if p["job"]["attempt"] == 1],
                       timeout=20, what="the retry")
    assert len(pending) == 1 and 5 <= pending[0]["in"] <= 15, pending
    html = site.settings()
    assert 'data-ok="0"' in html and "next try" in html
    # still down when the retry comes (run it now, as if 15 s had passed): the next waits 60 s
    site.driver("run-queue", "--all", env={"KBFC_NO_KICK": "1"})
    pending = site.driver("pending")
    assert len(pending) == 1 and pending[0]["job"]["attempt"] == 2 and 45 <= pending[0]["in"] <= 60, pending
    assert "open at 9" in docs(sid)[pid].normalized_content

    platform.start()  # back after about a minute: the retry delivers
    ran = site.driver("run-queue", "--all", env={"KBFC_NO_KICK": "1"})
    assert ran["ran"] == 1 and ran["last"]["ok"] and ran["last"]["attempt"] == 3, ran
    wait_for(kb_drain, lambda: "open at 11" in docs(sid)[pid].normalized_content, what="the late update")
    assert site.driver("pending") == []
    print(f"\nchange delivered after an outage of {time.monotonic() - t0:.1f} s (3rd attempt)")


@pytest.mark.wordpress
def test_widget_toggle_placeholder_and_shortcode(site, platform, allow_private, kb_drain):
    admin = allow_private
    conn = connect(site, admin, kb_drain)

    def home() -> str:
        r = requests.get(site.url + "/", timeout=60)
        assert r.status_code == 200
        return r.text

    def set_widget(enabled: bool, placeholder: bool):
        fields = {}
        if enabled:
            fields["kbfc_widget[enabled]"] = "1"
        if placeholder:
            fields["kbfc_widget[placeholder]"] = "1"
        r = site.submit("kbfc-widget-form", fields)
        assert r.status_code == 200 and "Settings saved" in r.text, r.text[-1000:]

    set_widget(False, False)
    off = home()
    assert "widget.js" not in off and "kbfc-launch" not in off

    set_widget(True, False)
    page = home()
    tag = re.search(r"<script[^>]*src=[\"'][^\"']*/widget\.js\?key=[^\"']*[\"'][^>]*>", page)
    assert tag, [line for line in page.splitlines() if "widget" in line or "kbf" in line]
    assert " defer" in tag.group(0) and conn["assistant_key"] in tag.group(0)
    assert unescape(re.search(r"src=[\"']([^\"']+)", tag.group(0)).group(1)).startswith(platform.url + "/widget.js")
    assert f'data-color="{conn["color"]}"' in tag.group(0)
    assert page.index(tag.group(0)) > page.index("</footer>") if "</footer>" in page else True
    r = requests.get(unescape(re.search(r"src=[\"']([^\"']+)", tag.group(0)).group(1)), timeout=30)
    assert r.status_code == 200 and "KBFWidget" in r.text

    set_widget(True, True)
    lazy = home()
    assert not re.search(r"<script[^>]*src=[\"'][^\"']*widget\.js", lazy)  # nothing loads before the click
    assert 'id="kbfc-launch"' in lazy and "widget.js?key=" in lazy  # …only the button knows where

    # the shortcode (and the block) render the full-page chat's iframe
    pg = site.create("pages", title="Ask us", content="<!-- wp:shortcode -->[kbframework_chat height=\"700px\"]<!-- /wp:shortcode -->"
                     "<!-- wp:kbframework/chat {\"height\":\"500px\"} /-->")
    html = requests.get(pg["link"], timeout=60).text
    frames = re.findall(r'<iframe class="kbfc-chat" src="([^"]+)"[^>]*height:(\d+px)', html)
    assert [(unescape(u), h) for u, h in frames] == [(f"{platform.url}/embed/{conn['assistant_key']}", "700px"),
                                                     (f"{platform.url}/embed/{conn['assistant_key']}", "500px")], html[-3000:]
    embed = requests.get(f"{platform.url}/embed/{conn['assistant_key']}", timeout=30)
    assert embed.status_code == 200 and site.url in embed.headers["Content-Security-Policy"]  # may be framed by the site
    set_widget(False, True)


CHROMIUM = "/usr/bin/chromium"
SHOTS = os.environ.get("KB_ADMIN_SCREENSHOT_DIR")  # e.g. docs/screenshots: the README's walkthrough


@pytest.mark.wordpress
@pytest.mark.browser
def test_walkthrough_in_a_browser_and_click_to_load_widget(site, platform, allow_private, kb_drain, tmp_path):
    """The README's walkthrough in Chromium: the platform's connect page with a code, the
    plugin's settings page once connected, and the click-to-load chat button opening the chat."""
    if not os.path.exists(CHROMIUM):
        pytest.skip("Debian's chromium is not installed")
    from playwright.sync_api import expect, sync_playwright

    admin = allow_private
    conn = connect(site, admin, kb_drain)
    shots = Path(SHOTS) if SHOTS else tmp_path
    shots.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu", "--no-first-run"])
        try:
            ctx = b.new_context(viewport={"width": 1280, "height": 900})
            page = ctx.new_page()
            page.goto(f"{platform.url}/admin/wordpress/connect")
            page.fill("#email", admin.email)
            page.fill("#password", "correct horse battery")
            page.click("button[type=submit]")
            page.wait_for_url(f"{platform.url}/admin/wordpress/connect")
            page.click("text=Create a connect code")
            expect(page.locator('[data-kbf="connect-code"]')).to_contain_text("kbfc1.")
            expect(page.locator('[data-kbf="connected-site"]')).to_contain_text(site.url)
            page.screenshot(path=str(shots / "wordpress-admin-connect.png"), full_page=True)

            wpp = ctx.new_page()
            wpp.goto(f"{site.url}/wp-login.php")
            wpp.fill("#user_login", site.state["user"])
            wpp.fill("#user_pass", site.state["admin_password"])
            wpp.click("#wp-submit")
            wpp.wait_for_url(re.compile(r".*/wp-admin/.*"))
            wpp.goto(f"{site.url}/wp-admin/options-general.php?page=kbframework-connect")
            expect(wpp.locator("#kbfc-connection")).to_contain_text(conn["source_id"])
            wpp.check('input[name="kbfc_widget[enabled]"]')
            wpp.check('input[name="kbfc_widget[placeholder]"]')
            wpp.click("#kbfc-widget-form input[type=submit]")
            expect(wpp.locator("#setting-error-settings_updated")).to_be_visible()
            wpp.screenshot(path=str(shots / "wordpress-plugin-settings.png"), full_page=True)

            visitor = b.new_page(viewport={"width": 1100, "height": 800})
            loaded = []
            visitor.on("request", lambda r: loaded.append(r.url) if "/widget.js" in r.url else None)
            visitor.goto(site.url + "/")
            visitor.wait_for_load_state("networkidle")
            assert loaded == []  # the page paid nothing for the chat yet
            visitor.click("#kbfc-launch")
            expect(visitor.locator('[data-kbf="root"], #kbfc-launch').first).to_be_attached()
            visitor.wait_for_function("window.KBFWidget !== undefined")
            assert len(loaded) == 1 and conn["assistant_key"] in loaded[0]
            expect(visitor.locator("#kbfc-launch")).to_have_count(0)
            visitor.wait_for_timeout(500)
            visitor.screenshot(path=str(shots / "wordpress-widget-open.png"))
        finally:
            b.close()
    site.submit("kbfc-widget-form", {"kbfc_widget[placeholder]": "1"})  # widget off again


@pytest.mark.wordpress
def test_disconnect_revokes_both_sides_and_uninstall_leaves_nothing(site, platform, allow_private, kb_drain):
    admin = allow_private
    conn = connect(site, admin, kb_drain)
    sid = conn["source_id"]
    r = site.submit("kbfc-disconnect-form", {})
    assert "Disconnected: the platform revoked its key" in r.text, re.findall(r'id="kbfc-message"><p>(.*?)</p>', r.text)
    assert conn["app_password_uuid"] not in {a["uuid"] for a in site.driver("app-passwords", 1)}
    with session_scope() as s:
        src = s.get(Source, uuid.UUID(sid))
        key = s.get(AssistantKey, uuid.UUID(src.config["companion"]["key_id"]))
        assert src.status == "disabled" and key.status == "revoked"
        from kbframework.security import decrypt_json

        assert "app_password" not in decrypt_json(src.secrets)
    assert requests.get(f"{platform.url}/embed/{conn['assistant_key']}", timeout=30).status_code == 401
    # the old signing secret no longer signs anything
    raw = json.dumps({"kbf_notice": 1, "post_id": 1, "event": "update", "ts": int(time.time()),
                      "nonce": uuid.uuid4().hex}).encode()
    r = requests.post(f"{platform.url}/api/webhooks/v1/wordpress/{sid}", data=raw, timeout=30,
                      headers={"Content-Type": "application/json", "X-KBF-Signature": sign(raw, conn["signing_secret"])})
    assert r.status_code == 401

    # connected again, then uninstalled: no option, no queued notice, no application password left
    conn = connect(site, admin, kb_drain)
    site.driver("woo", "woocommerce_update_product", site.state["posts"]["welcome"], env={"KBFC_NO_KICK": "1"})
    assert site.driver("options")
    out = site.driver("uninstall")
    assert out["deleted"], out
    assert site.driver("options") == []
    assert conn["app_password_uuid"] not in {a["uuid"] for a in site.driver("app-passwords", 1)}
    cron = subprocess.run(["php", "-r", f"require '{WP_DIR}/_bootstrap.php'; echo json_encode(array_keys(array_merge(...array_values(array_map('array_values', array_map(function($h){{return array_combine(array_keys($h), array_keys($h));}}, _get_cron_array()))))));"],
                          capture_output=True, text=True, env={**os.environ, "KBF_WP_URL": site.url,
                                                                "WP_STATE_FILE": site.state_file})
    assert "kbfc_" not in cron.stdout, cron.stdout + cron.stderr  # no trigger or delivery left in WP-Cron
    with session_scope() as s:
        assert s.get(Source, uuid.UUID(conn["source_id"])).status == "disabled"  # uninstall told the platform
    install_from_zip(site)  # for whoever runs after
