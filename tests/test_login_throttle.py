"""Sign-in throttling per account and per address, shared by both login routes and by every
web process (two real gunicorn servers on the test Redis), with lockout feedback that does
not reveal whether an account exists; ``Secure`` cookies whenever the public URL is https."""
from __future__ import annotations

import http.client
import re
from urllib.parse import urlencode, urlsplit

import pytest

from tests.embed_support import call, web_processes

PASSWORD = "correct horse battery"


@pytest.fixture(scope="module")
def servers(kb_services):
    with web_processes(2, KB_LOGIN_MAX_FAILURES=5, KB_LOGIN_LOCKOUT_SECONDS=600,
                       KB_LOGIN_PER_ADDRESS_MINUTE=8) as urls:
        yield urls


@pytest.fixture
def users(kb_org):
    from kbframework.orgs.accounts import create_user, get_org_by_slug
    from kbframework.db import session_scope

    with session_scope() as s:
        org = get_org_by_slug(s, kb_org["slug"])
        create_user(s, "victim@test.example", PASSWORD, org, "admin")
        create_user(s, "bystander@test.example", PASSWORD, org, "admin")


def api_login(base, email, password, ip):
    return call(base + "/api/admin/v1/login", body={"email": email, "password": password}, source_ip=ip)


def form_login(base, email, password, ip):
    """The sign-in page, as a browser posts it (GET for the CSRF token and cookie, then POST)."""
    u = urlsplit(base)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30, source_address=(ip, 0))
    try:
        conn.request("GET", "/login")
        r = conn.getresponse()
        page = r.read().decode()
        cookie = r.getheader("Set-Cookie").split(";", 1)[0]
        token = re.search(r'name=csrf_token value="([^"]+)"', page).group(1)
        conn.request("POST", "/login", body=urlencode({"email": email, "password": password, "csrf_token": token}),
                     headers={"Content-Type": "application/x-www-form-urlencoded", "Cookie": cookie})
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read().decode()
    finally:
        conn.close()


def test_account_lockout_across_addresses_and_processes(servers, users):
    a, b = servers
    for i in range(5):  # five wrong passwords, each from another address, alternating servers
        status, _, body = api_login((a, b)[i % 2], "victim@test.example", "guess%d" % i, f"127.0.1.{i + 1}")
        assert status == 401 and body["error"]["code"] == "invalid_credentials"
    # the right password from a fresh address and the other route: locked
    status, headers, body = api_login(b, "victim@test.example", PASSWORD, "127.0.1.50")
    assert status == 429 and int(headers["retry-after"]) > 500
    locked_message = body["error"]["message"]
    assert "Too many sign-in attempts" in locked_message
    status, headers, page = form_login(a, "victim@test.example", PASSWORD, "127.0.1.51")
    assert status == 429 and "Too many sign-in attempts" in page and "retry-after" in headers

    # an account that does not exist locks the same way, with the same words
    for i in range(5):
        status, _, body = api_login(a, "nobody@test.example", "guess", f"127.0.2.{i + 1}")
        assert status == 401 and body["error"]["code"] == "invalid_credentials"
    status, _, body = api_login(b, "nobody@test.example", "guess", "127.0.2.50")
    assert status == 429
    assert re.sub(r"\d+", "N", body["error"]["message"]) == re.sub(r"\d+", "N", locked_message)

    # other accounts are not affected
    status, _, body = api_login(a, "bystander@test.example", PASSWORD, "127.0.1.60")
    assert status == 200, body


def test_address_limit_is_shared_by_both_routes(servers, users):
    a, b = servers
    ip = "127.0.3.7"
    for i in range(4):
        assert form_login(a, f"someone{i}@test.example", "x", ip)[0] == 401
        assert api_login(b, f"other{i}@test.example", "x", ip)[0] == 401
    status, headers, body = api_login(a, "bystander@test.example", PASSWORD, ip)  # the 9th attempt
    assert status == 429 and headers.get("retry-after")
    assert api_login(a, "bystander@test.example", PASSWORD, "127.0.3.8")[0] == 200  # another address


def test_success_clears_the_account_failures(servers, users):
    a, _ = servers
    for i in range(4):
        assert api_login(a, "victim@test.example", "nope", f"127.0.4.{i + 1}")[0] == 401
    assert api_login(a, "victim@test.example", PASSWORD, "127.0.4.20")[0] == 200
    for i in range(4):
        assert api_login(a, "victim@test.example", "nope", f"127.0.4.{i + 30}")[0] == 401
    assert api_login(a, "victim@test.example", PASSWORD, "127.0.4.40")[0] == 200


@pytest.mark.parametrize("body", [b'"admin@test.example"', b"42", b"[1, 2]", b"null",
                                  b'{"email": ["a"], "password": "x"}', b'{"email": "a", "password": 5}'])
def test_login_bodies_of_the_wrong_type_are_a_clear_400(kb_app, kb_org, body):
    r = kb_app.test_client().post("/api/admin/v1/login", data=body, content_type="application/json")
    assert r.status_code in (400, 401), r.get_data(as_text=True)
    assert r.get_json()["error"]["code"] != "internal_error"
    if body != b"null":
        assert r.status_code == 400


def test_secure_cookies_follow_the_public_url(kb_services, kb_org):
    from kbframework.orgs.accounts import create_user, get_org_by_slug
    from kbframework.db import session_scope

    with session_scope() as s:
        create_user(s, "cookie@test.example", PASSWORD, get_org_by_slug(s, kb_org["slug"]), "admin")
    with web_processes(1, KB_PUBLIC_URL="https://kb.example.com") as (url,):
        status, headers, _ = api_login(url, "cookie@test.example", PASSWORD, "127.0.5.1")
        assert status == 200 and "secure" in headers["set-cookie"].lower()
    with web_processes(1, KB_PUBLIC_URL="https://kb.example.com", KB_SECURE_COOKIES="0") as (url,):
        status, headers, _ = api_login(url, "cookie@test.example", PASSWORD, "127.0.5.2")
        assert status == 200 and "secure" not in headers["set-cookie"].lower()
