"""The inputs that answered 500 before the input-normalisation layer, each now a clear 4xx
with a JSON error (APIs) or a message on the page -- through the real app and database."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from tests.embed_support import make_key

SHOP = "https://shop.example"
NUL, LONE = "a\u0000b", "x\ud800y"


def _json(payload) -> bytes:
    return json.dumps(payload).encode()  # lone surrogates travel as \\ud800 escapes, as any client sends them


def _bad(r, status=400):
    assert r.status_code == status, r.get_data(as_text=True)
    err = r.get_json()["error"]
    assert err["code"] != "internal_error" and err["message"]
    return err


@pytest.mark.parametrize("value", [NUL, LONE])
def test_bad_characters_in_admin_bodies(kb_admin, value):
    post = lambda url, payload: kb_admin.post(url, data=_json(payload), content_type="application/json")  # noqa: E731
    put = lambda url, payload: kb_admin.put(url, data=_json(payload), content_type="application/json")  # noqa: E731
    err = _bad(post("/api/admin/v1/chat", {"question": value}))
    assert "'question'" in err["message"] and err["code"] == "invalid_characters"
    _bad(post("/api/admin/v1/chat", {"question": "hi", "history": [{"role": "user", "content": value}]}))
    _bad(post("/api/admin/v1/chat", {"question": "hi", "session_id": value}))
    _bad(post("/api/admin/v1/documents/manual", {"title": value, "body": "text"}))
    _bad(post("/api/admin/v1/documents/manual", {"title": "t", "body": value}))
    _bad(post("/api/admin/v1/keys", {"name": value, "allowed_origins": [SHOP]}))
    _bad(put("/api/admin/v1/settings", {"brand": value}))
    _bad(kb_admin.get("/api/admin/v1/documents?q=" + ("%00" if value == NUL else "%ed%a0%80")), 400) \
        if value == NUL else None


def test_bad_characters_in_query_strings_and_paths(kb_admin, kb_app):
    _bad(kb_admin.get("/api/admin/v1/documents?q=a%00b"))
    _bad(kb_admin.get("/api/admin/v1/documents/%00"))
    r = kb_admin.get("/admin/documents?q=a%00b")
    assert r.status_code == 400 and "NUL" in r.get_data(as_text=True)
    _bad(kb_app.test_client().get("/api/embed/v1/kb_pk_%00/config", headers={"Origin": SHOP}))


def test_login_email_with_bad_characters(kb_app, kb_org):
    c = kb_app.test_client()
    _bad(c.post("/api/admin/v1/login", data=_json({"email": NUL, "password": "x"}), content_type="application/json"))
    _bad(c.post("/api/admin/v1/login", data=_json({"email": LONE, "password": "x"}), content_type="application/json"))


def test_public_api_bad_characters_and_nesting(kb_app, kb_org):
    key = make_key(kb_org["id"], [SHOP], rate_per_ip_minute=1000)["key"]
    c = kb_app.test_client()
    url = f"/api/embed/v1/{key}/chat"
    for payload in ({"message": NUL}, {"message": LONE}, {"message": "hi", "session_id": NUL},
                    {"message": "hi", "history": [{"role": "user", "content": LONE}]}):
        r = c.post(url, data=_json(payload), headers={"Origin": SHOP, "Content-Type": "application/json"})
        _bad(r)
        assert r.headers.get("Access-Control-Allow-Origin") == SHOP  # the widget can read the error
    r = c.post(url, data=b"[" * 50000 + b"]" * 50000, headers={"Origin": SHOP, "Content-Type": "application/json"})
    assert r.status_code in (400, 413) and r.get_json()["error"]["code"] != "internal_error"


def test_deeply_nested_json_is_a_400(kb_admin):
    r = kb_admin.post("/api/admin/v1/chat", data=b'{"question": ' + b"[" * 10000 + b"]" * 10000 + b"}",
                      content_type="application/json")
    assert _bad(r)["code"] == "json_too_deep"
    nested = {"question": "x"}
    for _ in range(70):
        nested = {"a": nested}
    assert _bad(kb_admin.post("/api/admin/v1/chat", json=nested))["code"] == "json_too_deep"
    # brackets inside strings do not count
    r = kb_admin.post("/api/admin/v1/markdown/preview", json={"markdown": "[" * 500})
    assert r.status_code == 200


def test_admin_chat_session_id_longer_than_its_column(kb_admin):
    err = _bad(kb_admin.post("/api/admin/v1/chat", json={"question": "hi", "session_id": "s" * 101}))
    assert "session_id" in err["message"]
    assert kb_admin.post("/api/admin/v1/chat", json={"question": "hi", "session_id": "s" * 100}).status_code == 200
    _bad(kb_admin.post("/api/admin/v1/chat", json={"question": "hi", "mode": ["search"]}))
    _bad(kb_admin.post("/api/admin/v1/chat", json={"question": "hi", "history": ["not an entry"]}))


def test_a_form_post_with_a_nul_is_a_message_on_the_page(kb_admin):
    r = kb_admin.post("/admin/knowledge", data={"title": "a\x00b", "body": "text"})
    assert r.status_code == 400 and "NUL" in r.get_data(as_text=True)


def test_the_cli_refuses_bad_characters_with_a_clear_line(kb_services, kb_org, tmp_path):
    from kbframework.cli.commands import cli as main

    r = CliRunner().invoke(main, ["ask", "--org", kb_org["slug"], "hello \udcff"])
    assert r.exit_code == 2 and "lone surrogate" in r.output
    body = tmp_path / "note.md"
    body.write_text("text with a \x00 inside", encoding="utf-8")
    r = CliRunner().invoke(main, ["doc", "add-manual", "--org", kb_org["slug"], "--title", "t", "--body-file",
                                  str(body)])
    assert r.exit_code == 2 and "NUL" in r.output


def test_source_fields_of_the_wrong_type_are_a_400(kb_admin):
    """What the route fuzz found: a source's type, name, config, interval and webhook base URL."""
    r = kb_admin.post("/api/admin/v1/sources", json={"type": "sitemap", "name": "S", "config": {"sitemap_urls": ["https://example.com/sitemap.xml"]}})
    assert r.status_code == 201, r.get_data(as_text=True)
    sid = r.get_json()["id"]
    for body in ({"config": 1}, {"config": [1]}, {"name": {"a": 1}}, {"name": 5}, {"sync_interval_minutes": {"a": 1}},
                 {"sync_interval_minutes": "abc"}, {"status": [1]}):
        r = kb_admin.put(f"/api/admin/v1/sources/{sid}", json=body)
        assert r.status_code == 400, (body, r.get_data(as_text=True))
    for body in ({"type": {"a": 1}, "name": "x"}, {"type": "sitemap", "name": {"a": 1}}, {"type": "sitemap", "name": "n", "config": 3}):
        r = kb_admin.post("/api/admin/v1/sources", json=body)
        assert r.status_code == 400, (body, r.get_data(as_text=True))
    r = kb_admin.post(f"/api/admin/v1/sources/{sid}/register-webhooks", json={"base_url": {"a": 1}})
    assert r.status_code == 400
