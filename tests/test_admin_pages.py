"""The admin pages through Flask's test client, on the real database and Redis.

Every page renders for an admin; a member reads but every write is refused with a message;
another organization's ids are 404 on every route; a POST without the CSRF token is refused;
and the pieces of the loop (write a note → it is chunked → ask → disable → feedback → fix)
work without a terminal.
"""
from __future__ import annotations

import re
import uuid
from datetime import datetime, timedelta, timezone

import pytest
from marshmallow import Schema, ValidationError, fields, validate, validates
from sqlalchemy import select

from kbframework import hookimpl
from kbframework.errors import SourceUnavailable
from kbframework.testing import login_client
from kbframework.types import DocumentDraft, RawRecord, SourceConnector

PASSWORD = "correct horse battery"


# --------------------------------------------------------------------------- helpers


def form_post(client, url, data=None, csrf=None, **kw):
    """A browser-style form POST (csrf_token field, no header)."""
    data = dict(data or {})
    if csrf is not None:
        data["csrf_token"] = csrf
    return client.client.post(url, data=data, **kw)


def text(resp) -> str:
    return resp.get_data(as_text=True)


def add_note(admin, title, body, tags=(), role="manual", expires=""):
    r = form_post(admin, "/admin/knowledge", {"title": title, "body": body, "tags": ", ".join(tags), "role": role,
                                              "expires": expires}, admin.csrf)
    assert r.status_code == 302, text(r)
    m = re.search(r"/admin/documents/([0-9a-f-]{36})", r.headers["Location"])
    assert m, r.headers["Location"]
    return m.group(1)


def ask(admin, question):
    r = admin.post("/api/admin/v1/chat", json={"question": question})
    assert r.status_code == 200, text(r)
    return r.get_json()


def doc_row(doc_id):
    from kbframework.db import session_scope
    from kbframework.models import Document

    with session_scope() as s:
        d = s.get(Document, uuid.UUID(doc_id))
        return {"status": d.status, "chunks": d.chunk_count, "title": d.title, "tags": d.tags,
                "expires_at": d.expires_at, "content": d.normalized_content}


@pytest.fixture
def admin(kb_admin):
    return kb_admin


@pytest.fixture
def member(kb_app, kb_org):
    return login_client(kb_app, kb_org, "member@test.example", PASSWORD, role="member")


@pytest.fixture
def other_org(kb_app, kb_org):
    """A second organization with one of everything, and a logged-in admin of its own."""
    from kbframework.orgs.accounts import create_org
    from kbframework.db import session_scope

    with session_scope() as s:
        org = create_org(s, "Other Org", "UTC", "other-org")
        info = {"id": str(org.id), "slug": org.slug, "timezone": org.timezone}
    other = login_client(kb_app, info, "boss@other.example", PASSWORD)
    doc_id = add_note(other, "Other secret", "# Secret\n\nThe other organization's private note about pricing.")
    answer = ask(other, "private note about pricing")
    fb = other.post(f"/api/admin/v1/chat-logs/{answer['message_id']}/feedback", json={"rating": "down"})
    assert fb.status_code == 201
    key = other.post("/api/admin/v1/keys", json={"allowed_origins": ["https://other.example"]})
    assert key.status_code == 201
    src = doc_source(doc_id)
    return {"doc": doc_id, "log": answer["message_id"], "feedback": fb.get_json()["id"],
            "key": key.get_json()["id"], "source": src, "client": other}


def doc_source(doc_id):
    from kbframework.db import session_scope
    from kbframework.models import Document

    with session_scope() as s:
        return str(s.get(Document, uuid.UUID(doc_id)).source_id)


# --------------------------------------------------------------------------- a connector with a real schema


class FakeShopConfig(Schema):
    base_url = fields.Url(required=True, metadata={"description": "The shop's address, e.g. https://shop.example.com"})
    consumer_key = fields.String(required=True)
    consumer_secret = fields.String(required=True)
    per_page = fields.Integer(load_default=50, validate=validate.Range(1, 100))
    include_drafts = fields.Boolean(load_default=False)
    language = fields.String(load_default="en", validate=validate.OneOf(["en", "sr"]))
    categories = fields.List(fields.String(), load_default=list)
    field_mapping = fields.Dict(load_default=dict)
    webhook_secret = fields.String(load_default=None, allow_none=True)

    @validates("field_mapping")
    def _sections(self, value, **_):
        unknown = set(value) - {"attributes", "meta", "acf", "columns"}
        if unknown:
            raise ValidationError(f"unknown mapping section(s): {', '.join(sorted(unknown))}")


class FakeShop(SourceConnector):
    name = "fakeshop"
    label = "Fake shop"
    config_schema = FakeShopConfig
    secret_fields = ("consumer_secret", "webhook_secret")
    supports_sync = True
    accepts_webhooks = True
    fail = False

    def fetch_all(self, config, ctx):
        if FakeShop.fail:
            raise SourceUnavailable("The shop did not answer (HTTP 503).")
        for i, name in enumerate(("Green Scarf", "Wool Hat")):
            yield RawRecord(external_id=str(100 + i), payload={"name": name, "lang": config["language"]},
                            kind="product")

    def fetch_changed(self, config, since, ctx):
        return self.fetch_all(config, ctx)

    def fetch_one(self, config, external_id, ctx):
        return None

    def normalize(self, record, config, ctx):
        return DocumentDraft(title=record.payload["name"], type="fake_product", document_role="product",
                             external_id=record.external_id,
                             normalized_content=f"# {record.payload['name']}\n\nA warm {record.payload['name'].lower()}.")

    def handle_webhook(self, headers, raw_body, secrets):
        return {"ok": False, "reason": "not in this test"}


class FakeShopPlugin:
    @hookimpl
    def kb_source_types(self):
        return [FakeShop()]


@pytest.fixture
def fakeshop():
    from kbframework.hooks import registry
    from kbframework.hooks.manager import get_plugin_manager

    pm = get_plugin_manager()
    pm.register(FakeShopPlugin(), name="test-fakeshop")
    registry.clear_caches()
    FakeShop.fail = False
    yield FakeShop
    pm.unregister(name="test-fakeshop")
    registry.clear_caches()


# --------------------------------------------------------------------------- pages render


PAGES = ["/admin/", "/admin/sources", "/admin/documents", "/admin/knowledge", "/admin/knowledge/new", "/admin/chat",
         "/admin/feedback", "/admin/zero-results", "/admin/keys", "/admin/usage", "/admin/settings"]


def test_every_page_renders_for_admin_with_security_headers(admin):
    doc = add_note(admin, "Dress code", "# Dress code\n\nSmart casual. No sportswear after 9 pm.", ["policy"])
    answer = ask(admin, "What is the dress code?")
    admin.post(f"/api/admin/v1/chat-logs/{answer['message_id']}/feedback", json={"rating": "down", "comment": "meh"})
    ask(admin, "events on 1 January 2031")
    admin.post("/api/admin/v1/keys", json={"allowed_origins": ["https://shop.example"]})
    fb = admin.get("/api/admin/v1/feedback").get_json()["items"][0]["id"]
    extra = [f"/admin/documents/{doc}", f"/admin/knowledge/{doc}/edit", f"/admin/knowledge/new?template={doc}",
             f"/admin/feedback/{fb}", f"/admin/knowledge/new?feedback={fb}", f"/admin/trace/{answer['message_id']}",
             f"/admin/sources/{doc_source(doc)}", "/admin/usage?month=2024-02"]
    for path in PAGES + extra:
        r = admin.get(path)
        assert r.status_code == 200, (path, text(r)[:500])
        assert "text/html" in r.content_type
        if "/trace/" not in path:
            assert "script-src 'self'" in r.headers["Content-Security-Policy"], path
            assert r.headers["X-Frame-Options"] == "DENY"
            assert 'name="csrf-token"' in text(r)
    css = admin.get("/admin/static/admin.css")
    js = admin.get("/admin/static/admin.js")
    assert css.status_code == 200 and js.status_code == 200
    css.close(), js.close()
    # no inline script may be needed: the CSP forbids it
    for path in PAGES:
        assert not re.search(r"<script(?![^>]*\bsrc=)(?![^>]*application/json)[^>]*>", text(admin.get(path))), path


def test_each_installed_source_type_has_its_form_and_valid_mapping_examples(admin, kb_app):
    from kbframework.hooks import registry
    from kbframework.admin.views.sources import describe_fields

    for name, connector in registry.source_types().items():
        r = admin.get(f"/admin/sources/new/{name}")
        if connector.edited_in_admin:
            assert r.status_code == 302 and r.headers["Location"].endswith("/admin/knowledge/new")
            continue
        assert r.status_code == 200, name
        page = text(r)
        if 'data-upload="' in page:  # an upload-based type (PDF): a file form posting to its upload API
            assert connector.accepts_uploads
            assert f"/api/admin/v1/sources/{name}/upload?wait=1" in page and 'type="file"' in page
            continue
        with kb_app.test_request_context():
            fields_ = describe_fields(connector)
        assert fields_, name
        for fd in fields_:
            assert f'name="cfg_{fd["name"]}"' in page, (name, fd["name"])
        assert page.count('name="sync_interval_minutes"') <= 1
    with_examples = [c for c in registry.source_types().values() if c.mapping_example]
    assert {c.name for c in with_examples} >= {"woocommerce", "wordpress"}
    for connector in with_examples:  # the "Insert example" button must insert a valid mapping
        fld = connector.config_schema().fields["field_mapping"]
        assert fld.deserialize(connector.mapping_example), connector.name


def test_pages_need_a_login(kb_app, kb_org):
    c = kb_app.test_client()
    for path in PAGES:
        r = c.get(path)
        assert r.status_code == 302 and "/login" in r.headers["Location"], path
    assert c.get("/api/admin/v1/feedback").status_code == 401
    r = c.post("/login", data={"email": "admin@test.example", "password": "x"})
    assert r.status_code == 403  # no CSRF token from the login page: refused before anything else


def test_login_form_lands_on_the_dashboard(kb_app, kb_org):
    from kbframework.orgs.accounts import create_user, get_org_by_slug
    from kbframework.db import session_scope

    with session_scope() as s:
        create_user(s, "form@test.example", PASSWORD, get_org_by_slug(s, "test-org"), "admin")
    c = kb_app.test_client()
    page = text(c.get("/login"))
    tok = re.search(r'name=csrf_token value="([^"]+)"', page).group(1)
    r = c.post("/login", data={"email": "form@test.example", "password": PASSWORD, "csrf_token": tok})
    assert r.status_code == 302 and r.headers["Location"].endswith("/admin/")
    dash = c.get("/admin/")
    assert dash.status_code == 200 and "Active documents" in text(dash)


# --------------------------------------------------------------------------- members and CSRF


def test_member_reads_everything_but_every_write_is_refused_with_a_message(admin, member):
    doc = add_note(admin, "Opening hours", "# Opening hours\n\nWe open at 10:00 every day.", ["hours"])
    key = admin.post("/api/admin/v1/keys", json={"allowed_origins": ["https://shop.example"]}).get_json()["id"]
    answer = ask(admin, "When do you open?")
    fb = admin.post(f"/api/admin/v1/chat-logs/{answer['message_id']}/feedback", json={"rating": "down"}).get_json()["id"]
    for path in PAGES + [f"/admin/documents/{doc}", f"/admin/feedback/{fb}"]:
        r = member.get(path)
        assert r.status_code == 200, path
        assert "member · read-only" in text(r)
    page = text(member.get(f"/admin/documents/{doc}"))
    assert "Re-index" not in page and "Delete" not in page  # no write buttons for members
    assert "Save and index" not in text(member.get("/admin/knowledge/new"))
    writes = [
        ("/admin/knowledge", {"title": "x", "body": "y"}),
        (f"/admin/knowledge/{doc}", {"title": "x", "body": "y"}),
        (f"/admin/documents/{doc}/status", {"status": "disabled"}),
        (f"/admin/documents/{doc}/reindex", {}),
        (f"/admin/documents/{doc}/delete", {}),
        (f"/admin/documents/{doc}/restore", {}),
        ("/admin/documents/bulk", {"ids": doc, "status": "disabled"}),
        ("/admin/settings", {"preset": "default", "timezone": "UTC"}),
        ("/admin/keys", {"allowed_origins": "https://x.example"}),
        (f"/admin/keys/{key}", {"name": "x"}),
        (f"/admin/keys/{key}/rotate", {"grace": "1h"}),
        (f"/admin/keys/{key}/revoke", {}),
        (f"/admin/feedback/{fb}/addressed", {}),
        (f"/admin/sources/{doc_source(doc)}/status", {"status": "disabled"}),
        (f"/admin/sources/{doc_source(doc)}/delete", {}),
    ]
    for url, data in writes:
        r = form_post(member, url, data, member.csrf)
        assert r.status_code == 403, url
        assert "Only admins can change this" in text(r), url
    for url, body in [("/api/admin/v1/keys", {"allowed_origins": ["https://x.example"]}),
                      (f"/api/admin/v1/feedback/{fb}/addressed", {}),
                      (f"/api/admin/v1/chat-logs/{answer['message_id']}/feedback", {"rating": "up"})]:
        r = member.post(url, json=body)
        assert r.status_code == 403 and r.get_json()["error"]["code"] == "forbidden", url
    # nothing changed
    assert doc_row(doc)["status"] == "active"
    assert admin.get("/api/admin/v1/keys").get_json()["items"][0]["status"] == "active"
    # members may still test-chat and preview markdown (reads)
    assert member.post("/api/admin/v1/chat", json={"question": "When do you open?"}).status_code == 200
    assert member.post("/api/admin/v1/markdown/preview", json={"markdown": "**hi**"}).status_code == 200


def test_a_forged_post_without_the_csrf_token_is_refused(admin):
    doc = add_note(admin, "Gift cards", "# Gift cards\n\nGift cards never expire.")
    for url, data in [("/admin/knowledge", {"title": "Forged", "body": "Forged body"}),
                      (f"/admin/documents/{doc}/status", {"status": "disabled"}),
                      (f"/admin/documents/{doc}/delete", {}),
                      ("/admin/settings", {"brand": "Evil"})]:
        for token in (None, "not-the-token"):
            r = form_post(admin, url, data, token)
            assert r.status_code == 403, (url, token)
            assert "CSRF" in text(r)
    r = admin.client.post("/api/admin/v1/markdown/preview", json={"markdown": "x"})  # JSON without the header
    assert r.status_code == 403 and r.get_json()["error"]["code"] == "csrf_failed"
    assert doc_row(doc)["status"] == "active"
    listing = admin.get("/api/admin/v1/documents?q=Forged").get_json()
    assert listing["total"] == 0


# --------------------------------------------------------------------------- organization scoping


def test_every_admin_route_with_another_organizations_id_is_404(admin, other_org):
    o = other_org
    gets = [f"/admin/documents/{o['doc']}", f"/admin/knowledge/{o['doc']}/edit",
            f"/admin/knowledge/new?template={o['doc']}", f"/admin/knowledge/new?feedback={o['feedback']}",
            f"/admin/sources/{o['source']}", f"/admin/documents?source_id={o['source']}",
            f"/admin/feedback/{o['feedback']}", f"/admin/trace/{o['log']}", "/admin/documents/not-a-uuid",
            f"/admin/sources/new/no-such-type"]
    for path in gets:
        r = admin.get(path)
        assert r.status_code == 404, path
        assert "Other secret" not in text(r)
    posts = [(f"/admin/documents/{o['doc']}/status", {"status": "disabled"}),
             (f"/admin/documents/{o['doc']}/reindex", {}), (f"/admin/documents/{o['doc']}/delete", {}),
             (f"/admin/documents/{o['doc']}/restore", {}), ("/admin/documents/bulk", {"ids": o["doc"], "status": "disabled"}),
             (f"/admin/knowledge/{o['doc']}", {"title": "Hijack", "body": "Hijacked"}),
             (f"/admin/sources/{o['source']}", {"name": "Hijack"}), (f"/admin/sources/{o['source']}/sync", {}),
             (f"/admin/sources/{o['source']}/status", {"status": "disabled"}),
             (f"/admin/sources/{o['source']}/delete", {}),
             (f"/admin/feedback/{o['feedback']}/addressed", {}), (f"/admin/keys/{o['key']}", {"name": "Hijack"}),
             (f"/admin/keys/{o['key']}/rotate", {"grace": "1h"}), (f"/admin/keys/{o['key']}/revoke", {})]
    for url, data in posts:
        r = form_post(admin, url, data, admin.csrf)
        assert r.status_code == 404, (url, text(r)[:300])
    api = [("get", f"/api/admin/v1/feedback/{o['feedback']}", None),
           ("post", f"/api/admin/v1/feedback/{o['feedback']}/addressed", {}),
           ("post", f"/api/admin/v1/chat-logs/{o['log']}/feedback", {"rating": "up"}),
           ("put", f"/api/admin/v1/keys/{o['key']}", {"name": "x"}),
           ("post", f"/api/admin/v1/keys/{o['key']}/rotate", {}),
           ("post", f"/api/admin/v1/keys/{o['key']}/revoke", {})]
    for method, url, body in api:
        r = getattr(admin, method)(url, json=body) if body is not None else admin.get(url)
        assert r.status_code == 404 and r.get_json()["error"]["code"] == "not_found", url
    # listings never show the other organization's rows
    assert admin.get("/api/admin/v1/feedback").get_json()["total"] == 0
    assert admin.get("/api/admin/v1/keys").get_json()["items"] == []
    assert "Other secret" not in text(admin.get("/admin/documents"))
    assert "private note" not in text(admin.get("/admin/zero-results?days=30"))
    # and the other organization's data is untouched
    assert doc_row(o["doc"]) ["status"] == "active" and doc_row(o["doc"])["title"] == "Other secret"
    assert o["client"].get("/api/admin/v1/keys").get_json()["items"][0]["status"] == "active"


# --------------------------------------------------------------------------- knowledge editor


def test_manual_entry_is_chunked_at_once_edited_filtered_and_duplicated(admin):
    body = ("# Parking\n\nThe garage under the club opens at 21:00 and costs €5 a night.\n\n"
            "## Bicycles\n\nBike racks are at the side entrance.")
    tomorrow = (datetime.now(timezone.utc) + timedelta(days=30)).date().isoformat()
    doc = add_note(admin, "Parking at the club", body, ["venue-info", "FAQ"], role="support", expires=tomorrow)
    row = doc_row(doc)
    assert row["status"] == "active" and row["chunks"] >= 1  # chunked and embedded before the redirect
    assert row["tags"] == ["faq", "venue-info"] and row["expires_at"] is not None
    page = text(admin.get(f"/admin/documents/{doc}"))
    assert "Saved and indexed" in page
    assert "The garage under the club opens at 21:00" in page and "tokens" in page
    assert "Edit" in page and "Duplicate as template" in page
    # the editor shows the saved text and the expiry in the organization's time zone
    edit = text(admin.get(f"/admin/knowledge/{doc}/edit"))
    assert "Bike racks are at the side entrance." in edit and f'value="{tomorrow}"' in edit
    r = form_post(admin, f"/admin/knowledge/{doc}", {"title": "Parking at the club", "tags": "venue-info",
                                                     "role": "support", "expires": "",
                                                     "body": body.replace("€5", "€7")}, admin.csrf)
    assert r.status_code == 302
    row = doc_row(doc)
    assert "€7 a night" in row["content"] and row["expires_at"] is None and row["tags"] == ["venue-info"]
    assert "€7 a night" in ask(admin, "How much is the garage under the club?")["answer"]
    # filter by tag; duplicate as a template prefills without saving
    add_note(admin, "Refunds", "# Refunds\n\nRefunds take five days.", ["policy"])
    k = text(admin.get("/admin/knowledge?tag=venue-info"))
    assert "Parking at the club" in k and "Refunds" not in k
    dup = text(admin.get(f"/admin/knowledge/new?template={doc}"))
    assert "Parking at the club (copy)" in dup and "Bike racks" in dup
    assert admin.get("/api/admin/v1/documents?type=manual").get_json()["total"] == 2


def test_editing_an_event_note_keeps_what_the_editor_does_not_show(admin):
    r = admin.post("/api/admin/v1/documents/manual?wait=1", json={
        "title": "Jazz night", "body": "# Jazz night\n\nA quartet plays standards.", "role": "event",
        "event_start": "2031-05-01T21:00:00+02:00", "event_end": "2031-05-02T01:00:00+02:00", "venue": "Bitef",
        "city": "Belgrade", "source_url": "https://nights.example/jazz", "metadata": {"ticket_url": "https://t.example/1"}})
    assert r.status_code == 201
    doc = r.get_json()["id"]
    r = form_post(admin, f"/admin/knowledge/{doc}", {"title": "Jazz night", "role": "event", "tags": "jazz",
                                                     "body": "# Jazz night\n\nA quintet plays standards."}, admin.csrf)
    assert r.status_code == 302
    d = admin.get(f"/api/admin/v1/documents/{doc}").get_json()
    assert "quintet" in d["normalized_content"] and d["venue"] == "Bitef" and d["city"] == "Belgrade"
    assert d["event_start"].startswith("2031-05-01T19:00") and d["source_url"] == "https://nights.example/jazz"
    assert d["metadata"]["ticket_url"] == "https://t.example/1" and d["tags"] == ["jazz"]


def test_editor_errors_are_shown_on_the_page_and_keep_what_was_typed(admin):
    r = form_post(admin, "/admin/knowledge", {"title": "", "body": "Some text I typed", "tags": "a"}, admin.csrf)
    assert r.status_code == 400
    page = text(r)
    assert "The note is not valid." in page and "Some text I typed" in page
    r = form_post(admin, "/admin/knowledge", {"title": "Old", "body": "x", "expires": "2001-01-01"}, admin.csrf)
    assert r.status_code == 400 and "expiry date is in the past" in text(r)
    r = form_post(admin, "/admin/knowledge", {"title": "Bad date", "body": "x", "expires": "soon"}, admin.csrf)
    assert r.status_code == 400 and "is not a date" in text(r)
    assert admin.get("/api/admin/v1/documents").get_json()["total"] == 0


def test_markdown_preview_is_rendered_and_sanitized(admin):
    r = admin.post("/api/admin/v1/markdown/preview", json={
        "markdown": "# Title\n\n**bold** <script>alert(1)</script> [x](javascript:alert(1)) <img src=x onerror=alert(1)>"
                    "\n\n| a | b |\n|---|---|\n| 1 | 2 |"})
    assert r.status_code == 200
    html = r.get_json()["html"]
    assert "<h1>Title</h1>" in html and "<strong>bold</strong>" in html and "<table>" in html
    assert "<script" not in html and 'href="javascript' not in html and "<img" not in html
    assert admin.post("/api/admin/v1/markdown/preview", json={"markdown": 5}).status_code == 400


# --------------------------------------------------------------------------- documents


def test_documents_filter_paginate_and_bulk_enable_disable(admin):
    ids = [add_note(admin, f"Note {i}", f"# Note {i}\n\nBody number {i}.", ["even" if i % 2 == 0 else "odd"],
                    role="support" if i < 2 else "manual") for i in range(5)]
    page = text(admin.get("/admin/documents?tag=even"))
    assert "Note 0" in page and "Note 2" in page and "Note 4" in page and "Note 1" not in page
    page = text(admin.get("/admin/documents?role=support&q=note"))
    assert "Note 0" in page and "Note 1" in page and "Note 3" not in page
    page = text(admin.get("/admin/documents?per_page=2&page=2"))
    assert "Page 2 of 3" in page
    r = form_post(admin, "/admin/documents/bulk", {"ids": ids[:2], "status": "disabled",
                                                   "next": "/admin/documents?tag=even"}, admin.csrf)
    assert r.status_code == 302 and r.headers["Location"] == "/admin/documents?tag=even"
    assert [doc_row(i)["status"] for i in ids] == ["disabled", "disabled", "active", "active", "active"]
    page = text(admin.get("/admin/documents?status=disabled"))
    assert "Note 0" in page and "Note 1" in page and "Note 2" not in page
    form_post(admin, "/admin/documents/bulk", {"ids": ids[:1], "status": "active"}, admin.csrf)
    assert doc_row(ids[0])["status"] == "active"
    r = form_post(admin, "/admin/documents/bulk", {"status": "disabled"}, admin.csrf)
    assert r.status_code == 302
    assert "Select at least one document" in text(admin.get("/admin/documents"))
    assert form_post(admin, "/admin/documents/bulk", {"ids": ids[0], "status": "bogus"}, admin.csrf).status_code == 400


def test_document_detail_actions_disable_changes_the_answer_then_restore_and_delete(admin):
    doc = add_note(admin, "Cloakroom", "# Cloakroom\n\nThe cloakroom costs 2 euro per coat.", ["venue-info"])
    assert "2 euro per coat" in ask(admin, "How much is the cloakroom?")["answer"]
    r = form_post(admin, f"/admin/documents/{doc}/status", {"status": "disabled", "next": f"/admin/documents/{doc}"},
                  admin.csrf)
    assert r.status_code == 302 and doc_row(doc)["status"] == "disabled"
    after = ask(admin, "How much is the cloakroom?")
    assert "2 euro per coat" not in after["answer"] and after["sources"] == []
    form_post(admin, f"/admin/documents/{doc}/status", {"status": "active"}, admin.csrf)
    assert doc_row(doc)["status"] == "active"
    r = form_post(admin, f"/admin/documents/{doc}/reindex", {"next": f"/admin/documents/{doc}"}, admin.csrf)
    assert r.status_code == 302 and "Re-indexed: 1 chunk." in text(admin.get(f"/admin/documents/{doc}"))
    # an expired document can be restored until a date, shown on its page
    from kbframework.db import session_scope
    from kbframework.models import Document

    with session_scope() as s:
        s.get(Document, uuid.UUID(doc)).status = "expired"
    assert "This document has expired" in text(admin.get(f"/admin/documents/{doc}"))
    until = (datetime.now(timezone.utc) + timedelta(days=60)).date()
    r = form_post(admin, f"/admin/documents/{doc}/restore", {"until": until.isoformat()}, admin.csrf)
    assert r.status_code == 302
    row = doc_row(doc)
    assert row["status"] == "active" and row["expires_at"].date() in (until, until + timedelta(days=1))
    assert form_post(admin, f"/admin/documents/{doc}/restore", {"until": "2001-01-01"}, admin.csrf).status_code == 400
    r = form_post(admin, f"/admin/documents/{doc}/delete", {"next": f"/admin/documents/{doc}"}, admin.csrf)
    assert r.status_code == 302 and r.headers["Location"].endswith("/admin/documents")
    assert admin.get(f"/admin/documents/{doc}").status_code == 404


# --------------------------------------------------------------------------- sources from the connector's schema


def test_source_form_is_generated_from_the_schema_validates_and_syncs(admin, fakeshop, kb_drain):
    page = text(admin.get("/admin/sources"))
    assert "Fake shop" in page and "/admin/sources/new/fakeshop" in page
    form = text(admin.get("/admin/sources/new/fakeshop"))
    assert 'name="cfg_base_url"' in form and 'type="url"' in form
    assert 'name="cfg_consumer_secret" autocomplete="new-password"' in form or 'type="password" id="cfg_consumer_secret"' in form
    assert 'type="number" id="cfg_per_page"' in form and 'value="50"' in form
    assert 'type="checkbox" id="cfg_include_drafts"' in form
    assert '<select id="cfg_language"' in form and '<option value="sr"' in form
    assert 'data-json' in form and 'Field mapping (JSON)' in form and "Insert example" in form
    assert "The shop&#39;s address" in form or "The shop's address" in form
    base = {"name": "My shop", "cfg_base_url": "https://shop.example", "cfg_consumer_key": "ck_1",
            "cfg_consumer_secret": "cs_secret_value", "cfg_per_page": "20", "cfg_include_drafts": ["false", "true"],
            "cfg_language": "sr", "cfg_categories": "hats\nscarves"}
    # invalid JSON in the mapping editor → a message next to the field, nothing created, input kept
    r = form_post(admin, "/admin/sources/new/fakeshop", {**base, "cfg_field_mapping": '{"attributes": {'}, admin.csrf)
    assert r.status_code == 400 and "Not valid JSON" in text(r) and "ck_1" in text(r)
    # the connector's own validation → its message next to the field
    r = form_post(admin, "/admin/sources/new/fakeshop", {**base, "cfg_field_mapping": '{"colours": {}}'}, admin.csrf)
    assert r.status_code == 400 and "unknown mapping section(s): colours" in text(r)
    r = form_post(admin, "/admin/sources/new/fakeshop", {**base, "cfg_per_page": "500"}, admin.csrf)
    assert r.status_code == 400 and "less than or equal to 100" in text(r)
    assert admin.get("/api/admin/v1/sources").get_json()["items"] == []
    mapping = '{"attributes": {"Color": "text+tags"}}'
    r = form_post(admin, "/admin/sources/new/fakeshop", {**base, "cfg_field_mapping": mapping}, admin.csrf)
    assert r.status_code == 302, text(r)
    sid = r.headers["Location"].rsplit("/", 1)[1]
    src = admin.get(f"/api/admin/v1/sources/{sid}").get_json()
    assert src["config"]["per_page"] == 20 and src["config"]["include_drafts"] is True
    assert src["config"]["categories"] == ["hats", "scarves"] and src["config"]["language"] == "sr"
    assert src["config"]["field_mapping"] == {"attributes": {"Color": "text+tags"}}
    assert "consumer_secret" not in src["config"] and src["secrets"]["consumer_secret"] != "cs_secret_value"
    detail = text(admin.get(f"/admin/sources/{sid}"))
    assert "cs_secret_value" not in detail  # the consumer secret is never shown back
    assert f"/api/webhooks/v1/fakeshop/{sid}" in detail and "Show the webhook secret" in detail
    assert "No syncs yet" in detail
    # editing keeps the stored secret when its field is left empty
    edit = {**base, "name": "My shop (renamed)", "cfg_consumer_secret": "", "cfg_field_mapping": mapping,
            "cfg_include_drafts": "false"}
    r = form_post(admin, f"/admin/sources/{sid}", edit, admin.csrf)
    assert r.status_code == 302, text(r)
    from kbframework.db import session_scope
    from kbframework.models import Source
    from kbframework.sources.sync import source_config

    with session_scope() as s:
        cfg = source_config(s.get(Source, uuid.UUID(sid)))
        assert cfg["consumer_secret"] == "cs_secret_value" and cfg["include_drafts"] is False
        assert cfg["webhook_secret"]
    r = form_post(admin, f"/admin/sources/{sid}", {**edit, "cfg_field_mapping": "[1, 2"}, admin.csrf)
    assert r.status_code == 400 and "Not valid JSON" in text(r)
    # sync now → the worker runs it → documents and a history row
    r = form_post(admin, f"/admin/sources/{sid}/sync", {"kind": "full", "next": f"/admin/sources/{sid}"}, admin.csrf)
    assert r.status_code == 302
    kb_drain()
    detail = text(admin.get(f"/admin/sources/{sid}"))
    assert "Full sync of “My shop (renamed)” queued" in detail
    assert "pill-success" in detail and "fetched 2" in detail
    docs = text(admin.get(f"/admin/documents?source_id={sid}"))
    assert "Green Scarf" in docs and "Wool Hat" in docs and "fake_product" in docs
    # a failing sync shows its error in the history, on the sources page and on the dashboard
    fakeshop.fail = True
    form_post(admin, f"/admin/sources/{sid}/sync", {"kind": "incremental"}, admin.csrf)
    kb_drain()
    detail = text(admin.get(f"/admin/sources/{sid}"))
    assert "The shop did not answer (HTTP 503)." in detail and "pill-error" in detail
    assert "failing" in text(admin.get("/admin/sources"))
    assert "The shop did not answer" in text(admin.get("/admin/"))
    # disable, then sync is refused with a message; enable again
    form_post(admin, f"/admin/sources/{sid}/status", {"status": "disabled"}, admin.csrf)
    r = form_post(admin, f"/admin/sources/{sid}/sync", {}, admin.csrf)
    assert r.status_code == 409 and "disabled" in text(r)
    form_post(admin, f"/admin/sources/{sid}/status", {"status": "active"}, admin.csrf)
    assert admin.get(f"/api/admin/v1/sources/{sid}").get_json()["status"] == "active"
    r = form_post(admin, f"/admin/sources/{sid}/delete", {}, admin.csrf)
    assert r.status_code == 302 and admin.get(f"/admin/sources/{sid}").status_code == 404


# --------------------------------------------------------------------------- feedback and zero results


def test_feedback_page_filters_trace_quick_actions_and_fix(admin):
    doc = add_note(admin, "Age policy", "# Age policy\n\nGuests must be 18 or older.", ["policy"])
    bad = ask(admin, "What is the minimum age?")
    good = ask(admin, "Do I need to be 18?")
    r1 = admin.post(f"/api/admin/v1/chat-logs/{bad['message_id']}/feedback",
                    json={"rating": "down", "comment": "It is 21 on Saturdays"})
    assert r1.status_code == 201
    admin.post(f"/api/admin/v1/chat-logs/{good['message_id']}/feedback", json={"rating": "up"})
    fb = r1.get_json()["id"]
    page = text(admin.get("/admin/feedback"))
    assert "It is 21 on Saturdays" in page and "pill-up" in page and "pill-down" in page
    assert "It is 21" not in text(admin.get("/admin/feedback?rating=up"))
    assert "It is 21" in text(admin.get("/admin/feedback?rating=down&source_type=manual"))
    assert "It is 21" not in text(admin.get("/admin/feedback?source_type=woocommerce"))
    today = datetime.now(timezone.utc).date()
    assert "It is 21" not in text(admin.get(f"/admin/feedback?from={(today + timedelta(days=2)).isoformat()}"))
    assert "It is 21" in text(admin.get(f"/admin/feedback?from={(today - timedelta(days=1)).isoformat()}"))
    assert admin.get("/admin/feedback?from=yesterday").status_code == 400
    api = admin.get("/api/admin/v1/feedback?rating=down").get_json()
    assert api["total"] == 1 and api["items"][0]["query"] == "What is the minimum age?"
    detail = text(admin.get(f"/admin/feedback/{fb}"))
    assert "Age policy" in detail and "Fused ranking" in detail and "Final prompt" in detail
    assert f"/admin/documents/{doc}/status" in detail and f"/admin/knowledge/{doc}/edit" in detail
    assert admin.get(f"/api/admin/v1/feedback/{fb}").get_json()["cited_documents"][0]["id"] == doc
    # quick action: disable the cited document from the feedback page
    r = form_post(admin, f"/admin/documents/{doc}/status", {"status": "disabled", "next": f"/admin/feedback/{fb}"},
                  admin.csrf)
    assert r.headers["Location"] == f"/admin/feedback/{fb}" and doc_row(doc)["status"] == "disabled"
    # fix: a correcting entry, prefilled from the feedback, marks it addressed on save
    editor = text(admin.get(f"/admin/knowledge/new?feedback={fb}"))
    assert "What is the minimum age?" in editor and "It is 21 on Saturdays" in editor
    assert f'name="feedback_id" value="{fb}"' in editor and 'name="mark_addressed"' in editor
    r = form_post(admin, "/admin/knowledge", {"title": "Minimum age", "role": "support", "tags": "correction",
                                              "body": "# Minimum age\n\nThe minimum age is 21 on Saturdays and 18 on other days.",
                                              "feedback_id": fb, "mark_addressed": "1"}, admin.csrf)
    assert r.status_code == 302
    assert admin.get(f"/api/admin/v1/feedback/{fb}").get_json()["addressed_at"] is not None
    assert "21 on Saturdays" in ask(admin, "What is the minimum age?")["answer"]
    assert "It is 21" not in text(admin.get("/admin/feedback?state=open"))
    form_post(admin, f"/admin/feedback/{fb}/addressed", {"addressed": "0"}, admin.csrf)
    assert admin.get(f"/api/admin/v1/feedback/{fb}").get_json()["addressed_at"] is None
    assert "It is 21" in text(admin.get("/admin/feedback?state=open"))


def test_zero_result_questions_are_grouped_with_a_teach_action(admin):
    for q in ("Is there parking?", "is there parking", "Do you sell bikes?"):
        res = ask(admin, q)
        assert res["debug"]["reason"] == "pre_filter_empty"
    data = admin.get("/api/admin/v1/zero-results?days=7").get_json()
    assert data["total"] == 3 and data["groups"] == 2
    assert data["items"][0]["count"] == 2 and data["items"][0]["query"].lower().startswith("is there parking")
    page = text(admin.get("/admin/zero-results"))
    assert "Teach the AI" in page and "/admin/knowledge/new?q=" in page and "2×" in page
    editor = text(admin.get("/admin/knowledge/new?q=Is+there+parking%3F"))
    assert "Teaching the AI" in editor and 'value="Is there parking"' in editor
    assert "Customers ask: “Is there parking?”" in editor
    assert admin.get("/api/admin/v1/zero-results?days=0").status_code == 400
    dash = text(admin.get("/admin/"))
    assert "Do you sell bikes?" in dash


# --------------------------------------------------------------------------- keys, settings, usage


def test_embed_keys_create_edit_rotate_with_grace_and_revoke(admin):
    r = form_post(admin, "/admin/keys", {"name": "Shop", "allowed_origins": "https://shop.example\nhttps://www.shop.example/",
                                         "rate_per_minute": "30", "rate_per_day": "500", "rate_per_ip_minute": "5"},
                  admin.csrf)
    assert r.status_code == 302
    keys = admin.get("/api/admin/v1/keys").get_json()["items"]
    k = keys[0]
    assert k["allowed_origins"] == ["https://shop.example", "https://www.shop.example"] and k["rate_per_minute"] == 30
    page = text(admin.get("/admin/keys"))
    assert f'&lt;script src=&#34;http://localhost/widget.js?key={k["key"]}&#34; async&gt;&lt;/script&gt;' in page
    assert f'&lt;iframe src=&#34;http://localhost/embed/{k["key"]}&#34;' in page
    assert form_post(admin, "/admin/keys", {"allowed_origins": "not a url"}, admin.csrf).status_code == 400
    r = form_post(admin, "/admin/keys", {"allowed_origins": ""}, admin.csrf)
    assert r.status_code == 400 and "Add at least one allowed website origin" in text(r)
    r = form_post(admin, f"/admin/keys/{k['id']}", {"name": "Shop", "allowed_origins": "ftp://x", "rate_per_minute": "30"},
                  admin.csrf)
    assert r.status_code == 400 and "is not a website origin" in text(r)
    r = form_post(admin, f"/admin/keys/{k['id']}", {"name": "Shop EU", "allowed_origins": "https://eu.shop.example",
                                                    "rate_per_minute": "40", "position": "bottom-left"}, admin.csrf)
    assert r.status_code == 302
    k = admin.get("/api/admin/v1/keys").get_json()["items"][0]
    assert k["name"] == "Shop EU" and k["allowed_origins"] == ["https://eu.shop.example"]
    assert k["settings"] == {"show_sources": False, "position": "bottom-left"}
    r = form_post(admin, f"/admin/keys/{k['id']}/rotate", {"grace": "7d"}, admin.csrf)
    assert r.status_code == 302 and "new=" in r.headers["Location"]
    items = {x["status"]: x for x in admin.get("/api/admin/v1/keys").get_json()["items"]}
    assert set(items) == {"active", "rotated"} and items["rotated"]["usable"] is True
    grace = datetime.fromisoformat(items["rotated"]["expires_at"]) - datetime.now(timezone.utc)
    assert timedelta(days=6, hours=23) < grace <= timedelta(days=7)
    page = text(admin.get("/admin/keys"))
    assert "Key rotated. The old key keeps working for 7 days" in page and "keeps working until" in page
    assert form_post(admin, f"/admin/keys/{items['rotated']['id']}/rotate", {"grace": "1h"}, admin.csrf).status_code == 400
    assert form_post(admin, f"/admin/keys/{items['active']['id']}/rotate", {"grace": "5y"}, admin.csrf).status_code == 400
    form_post(admin, f"/admin/keys/{items['active']['id']}/revoke", {}, admin.csrf)
    statuses = sorted(x["status"] for x in admin.get("/api/admin/v1/keys").get_json()["items"])
    assert statuses == ["revoked", "rotated"]


def test_settings_save_presets_branding_and_show_errors(admin):
    page = text(admin.get("/admin/settings"))
    assert "Neutral (built-in)" in page and "wordllama" in page and "Check they answer" in page
    data = {"preset": "default", "brand": "Club Nine", "system_prompt": "You help guests of {brand}. Be brief.",
            "fallback_text": "Sorry, no idea — call us.", "retrieval_limit": "4", "similarity_floor": "0.15",
            "history_window": "4", "timezone": "Europe/Berlin", "night_cutoff": "06:00",
            "branding_color": "#aa3355", "branding_logo": "https://club.example/logo.png", "branding_title": "Club Nine",
            "branding_welcome": "Hey! Ask about tonight."}
    r = form_post(admin, "/admin/settings", data, admin.csrf)
    assert r.status_code == 302, text(r)
    st = admin.get("/api/admin/v1/settings").get_json()
    assert st["brand"] == "Club Nine" and st["retrieval_limit"] == 4 and st["night_cutoff"] == "06:00"
    assert {k: st[f"branding_{k}"] for k in ("color", "logo", "title", "welcome")} == {
        "color": "#aa3355", "logo": "https://club.example/logo.png", "title": "Club Nine",
        "welcome": "Hey! Ask about tonight."}
    assert st["fallback_text"] == "Sorry, no idea — call us."
    from kbframework.db import session_scope
    from kbframework.models import Organization

    with session_scope() as s:
        assert s.scalar(select(Organization.timezone).where(Organization.slug == "test-org")) == "Europe/Berlin"
    assert ask(admin, "anything at all?")["answer"] == "Sorry, no idea — call us."
    add_note(admin, "Door", "# Door\n\nThe door opens at 23:00.")
    assert "You help guests of Club Nine. Be brief." in ask(admin, "When does the door open?")["debug"]["prompt"]
    # the preset's own wording, unchanged, is stored as "follow the preset"
    from kbframework.hooks import registry

    r = form_post(admin, "/admin/settings", {**data, "system_prompt": registry.preset("default").prompt_template},
                  admin.csrf)
    assert r.status_code == 302 and admin.get("/api/admin/v1/settings").get_json()["system_prompt"] is None
    # errors are shown next to their fields and nothing is saved
    bad = {**data, "brand": "Evil", "branding_color": "red", "retrieval_limit": "lots"}
    r = form_post(admin, "/admin/settings", bad, admin.csrf)
    assert r.status_code == 400
    assert "Use a colour like #2f6fed." in text(r) and "Passages per answer must be a whole number." in text(r)
    assert 'value="Evil"' in text(r)
    r = form_post(admin, "/admin/settings", {**data, "retrieval_limit": "50", "timezone": "Mars/Base"}, admin.csrf)
    assert r.status_code == 400 and "Some settings are not valid." in text(r)
    r = form_post(admin, "/admin/settings", {**data, "timezone": "Mars/Base"}, admin.csrf)
    assert r.status_code == 400 and "Unknown time zone" in text(r)
    assert admin.get("/api/admin/v1/settings").get_json()["brand"] == "Club Nine"
    check = admin.post("/api/admin/v1/providers/check", json={}).get_json()
    assert check["embedding"]["ok"] is True and check["embedding"]["dim_seen"] == check["embedding"]["dim"]
    assert check["llm"]["ok"] is True


def test_usage_page_totals_and_daily_chart(admin):
    from kbframework.db import session_scope
    from kbframework.models import UsageLedger

    org_id = uuid.UUID(admin.org["id"])
    with session_scope() as s:
        s.add_all([
            UsageLedger(organization_id=org_id, purpose="completion", provider="openai", model="gpt-4o-mini",
                        tokens_in=1000, tokens_out=200, cost_usd=0.00027, created_at=datetime(2025, 3, 2, 12, tzinfo=timezone.utc)),
            UsageLedger(organization_id=org_id, purpose="completion", provider="openai", model="gpt-4o-mini",
                        tokens_in=3000, tokens_out=600, cost_usd=0.00081, created_at=datetime(2025, 3, 9, 12, tzinfo=timezone.utc)),
            UsageLedger(organization_id=org_id, purpose="query_embedding", provider="openai",
                        model="text-embedding-3-small", tokens_in=50, tokens_out=0, cost_usd=0.000001,
                        created_at=datetime(2025, 3, 31, 22, 30, tzinfo=timezone.utc)),  # April 1st in Belgrade
            UsageLedger(organization_id=org_id, purpose="completion", provider="openai", model="gpt-4o-mini",
                        tokens_in=7, tokens_out=7, created_at=datetime(2025, 4, 2, tzinfo=timezone.utc)),
        ])
    u = admin.get("/api/admin/v1/usage?month=2025-03").get_json()
    assert u["tokens_in"] == 4000 and u["tokens_out"] == 800 and u["calls"] == 2 and len(u["days"]) == 31
    assert [d["day"] for d in u["days"] if d["calls"]] == ["2025-03-02", "2025-03-09"]
    assert abs(u["cost_usd"] - 0.00108) < 1e-9
    page = text(admin.get("/admin/usage?month=2025-03"))
    assert "March 2025" in page and "4,800" in page and "$0.0011" in page
    assert page.count('class="bar-in"') == 2 and page.count('class="bar-out"') == 2
    assert "2025-03-09: 3,000 in, 600 out, 1 calls" in page
    assert "March 2025" not in text(admin.get("/admin/usage"))
    assert admin.get("/admin/usage?month=march").status_code == 400
