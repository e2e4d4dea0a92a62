"""The project's own route fuzz: every rule of the Flask url_map (so a route added later is
covered without touching this file) gets malformed bodies, wrong types, NUL and lone
surrogate strings, deep nesting, huge values and odd paths -- as an admin, anonymously and
with a valid public key -- and no answer may be a 5xx.

Field names come from the view's own module (``data.get("x")``, ``request.form.get("x")``,
``args.get("x")``...), so each route is sent values for the fields it actually reads.
"""
from __future__ import annotations

import inspect
import json
import re
import sys
import uuid
from urllib.parse import quote

import pytest

from tests.embed_support import make_key

SHOP = "https://shop.example"
VAR = re.compile(r"<(?:(\w+)(?:\([^)]*\))?:)?(\w+)>")
FIELD = re.compile(r"""(?:\.get|\.getlist|\.pop)\(\s*["']([A-Za-z_][\w-]{0,40})["']|\[\s*["']([A-Za-z_][\w-]{0,40})["']\s*\]""")
SKIP_FIELDS = {"Content-Type", "Origin", "Accept", "X-CSRF-Token", "User-Agent", "Referer"}

ODD_SEGMENTS = [str(uuid.uuid4()), "x" * 600, "%00", "%ed%a0%80", "99999999999999999999999", "..%2f%ff"]
ODD_QUERY_VALUES = ["%00", "%ed%a0%80", "x" * 5000, "-1", "abc", "99999999999999999999", "2025-13-45",
                    "%ff"]


def _bad_values():
    """(label, JSON value) pairs: wrong types, bad characters, huge values."""
    return [("list", []), ("object", {"a": {"b": [1, {"c": None}]}}), ("bignum", 10 ** 30), ("bool", True),
            ("null", None), ("nul", "a\u0000b"), ("surrogate", "x\ud800y"), ("huge", "x" * 300_000),
            ("long", "y" * 5000), ("negative", -1), ("float", 1.5e308), ("script", "javascript:alert(1)")]


RAW_BODIES = [("truncated", b'{"a": '), ("string", b'"just a string"'), ("number", b"42"), ("null", b"null"),
              ("array", b"[1, 2, 3]"), ("true", b"true"), ("deep-array", b"[" * 20000 + b"]" * 20000),
              ("deep-object", b'{"a":' * 5000 + b"1" + b"}" * 5000), ("bad-utf8", b'{"a": "\xff\xfe"}'),
              ("nul-raw", b'{"a": "x\x00y"}'), ("surrogate-escape", b'{"question": "\\udc80", "message": "\\ud800"}'),
              ("too-big", b'{"a": "' + b"z" * (3 * 1024 * 1024) + b'"}')]


def _fields(fn, whole_module: bool = False) -> list[str]:
    """The field names the view reads (``whole_module``: any view or helper of its module)."""
    try:
        src = inspect.getsource(sys.modules[fn.__module__] if whole_module else inspect.unwrap(fn))
    except (TypeError, OSError, KeyError):
        return []
    names = {a or b for a, b in FIELD.findall(src)}
    return sorted(n for n in names if n not in SKIP_FIELDS)[:80]


@pytest.fixture
def world(kb_admin, kb_app):
    """One real object of each kind, so ids in paths reach the code behind the lookups."""
    from kbframework.db import session_scope
    from kbframework.models import ChatFeedback, ChatLog, Source

    a = kb_admin
    doc = a.post("/api/admin/v1/documents/manual?wait=1", json={"title": "Opening hours",
                                                                "body": "We are open 9 to 5 on weekdays."})
    assert doc.status_code == 201
    chat = a.post("/api/admin/v1/chat", json={"question": "opening hours?"}).get_json()
    fb = a.post(f"/api/admin/v1/chat-logs/{chat['message_id']}/feedback", json={"rating": "down"}).get_json()
    key = make_key(a.org["id"], [SHOP], rate_per_minute=1_000_000, rate_per_day=1_000_000,
                   rate_per_ip_minute=1_000_000)
    with session_scope() as s:
        src_id = str(s.query(Source).filter_by(type="manual").first().id)
        assert s.get(ChatLog, uuid.UUID(chat["message_id"])) and s.get(ChatFeedback, uuid.UUID(fb["id"]))
    return {"doc_id": doc.get_json()["id"], "source_id": src_id, "log_id": chat["message_id"],
            "feedback_id": fb["id"], "key_id": key["id"], "key": key["key"], "version": "v1",
            "filename": "admin.css", "type_": "manual"}


def _real_value(name: str, rule, world: dict) -> str:
    if name == "type_" and "webhooks" in rule.rule:
        return "woocommerce"
    if name == "filename" and rule.endpoint == "static":
        return "nope.css"
    return world.get(name, str(uuid.uuid4()))


def _paths(rule, world, odd: bool) -> list[str]:
    names = [m.group(2) for m in VAR.finditer(rule.rule)]
    base = {n: quote(_real_value(n, rule, world), safe="") for n in names}
    out = [VAR.sub(lambda m: base[m.group(2)], rule.rule)]
    if odd:
        for n in names:
            for seg in ODD_SEGMENTS:
                out.append(VAR.sub(lambda m: seg if m.group(2) == n else base[m.group(2)], rule.rule))
    return out


def _json_bodies(fields: list[str], module_fields: list[str] = ()) -> list[tuple[str, bytes]]:
    out = list(RAW_BODIES)
    bad = _bad_values()
    for label, value in bad:  # every field at once, one kind of bad value
        out.append((f"all={label}", json.dumps({f: value for f in sorted({*fields, *module_fields})},
                                               ensure_ascii=True).encode()))
    for i, f in enumerate(fields):  # each field the view reads, alone, a different kind of bad value each
        label, value = bad[i % len(bad)]
        out.append((f"{f}={label}", json.dumps({f: value}).encode()))
    return out


def _form_bodies(fields: list[str], module_fields: list[str] = ()) -> list[tuple[str, dict]]:
    vals = [("nul", "a\x00b"), ("huge", "x" * 200_000), ("long", "y" * 5000), ("empty", ""), ("neg", "-1"),
            ("junk", "%ff;<script>"), ("num", "99999999999999999999")]
    out = [(f"all={label}", {f: v for f in sorted({*fields, *module_fields})}) for label, v in vals]
    out += [(f"{f}={vals[i % len(vals)][0]}", {f: vals[i % len(vals)][1]}) for i, f in enumerate(fields)]
    out.append(("lists", {f: ["a", "b\x00"] for f in fields}))
    return out


def _destructive(rule) -> bool:
    return rule.endpoint.endswith(("logout", "api_logout")) or any(
        w in rule.rule for w in ("/delete", "/revoke", "/rotate"))


class _Raised:
    """What an exception escaping a view looks like here (the test app propagates them)."""

    def __init__(self, exc):
        self.status_code, self.exc = 599, exc

    def get_data(self):
        return f"{type(self.exc).__name__}: {self.exc}".encode()


def _send(client, *a, **kw):
    try:
        return _request(client, *a, **kw)
    except Exception as exc:  # noqa: BLE001  (the point: report it, keep going)
        return _Raised(exc)


def _request(client, method, url, *, headers=None, raw=None, form=None, csrf=None):
    h = dict(headers or {})
    if csrf:
        h["X-CSRF-Token"] = csrf
    if raw is not None:
        return client.open(url, method=method, data=raw, headers={**h, "Content-Type": "application/json"})
    if form is not None:
        return client.open(url, method=method, data=form, headers=h)
    return client.open(url, method=method, headers=h)


@pytest.mark.timeout(1200)  # about 3,000 requests: two minutes on an idle machine, far more on a loaded one
def test_no_route_answers_5xx(kb_app, kb_admin, world):
    failures: list[str] = []
    counts = {"requests": 0}
    rules = sorted(kb_app.url_map.iter_rules(), key=lambda r: (_destructive(r), r.rule))
    anon = kb_app.test_client()

    def check(who, method, url, label, resp):
        counts["requests"] += 1
        body = resp.get_data()  # runs a streamed body to its end
        if resp.status_code >= 500:
            failures.append(f"{who} {method} {url[:120]} [{label}] -> {resp.status_code} {body[:200]!r}")

    # 1. the public key on the public routes (before anything destructive runs as the admin)
    for rule in rules:
        if not rule.rule.startswith(("/api/embed/", "/embed/", "/widget.js")):
            continue
        fields = _fields(kb_app.view_functions[rule.endpoint])
        for method in sorted(rule.methods - {"HEAD"}):
            for url in _paths(rule, world, odd=True):
                check("public", method, url, "no body", _send(anon, method, url, headers={"Origin": SHOP}))
            if method in ("POST", "PUT"):
                url = _paths(rule, world, odd=False)[0]
                for label, raw in _json_bodies(fields + ["message", "history", "session_id", "stream"]):
                    check("public", method, url, label, _send(anon, method, url, raw=raw,
                                                              headers={"Origin": SHOP,
                                                                       "Accept": "text/event-stream"}))

    # 2. anonymous, every route: a few bodies and odd paths
    for rule in rules:
        if _destructive(rule) and "logout" not in rule.endpoint:
            continue
        for method in sorted(rule.methods - {"HEAD", "OPTIONS"}):
            for url in _paths(rule, world, odd=True)[:3]:
                check("anon", method, url, "no body", _send(anon, method, url))
                if method in ("POST", "PUT", "DELETE"):
                    for label, raw in RAW_BODIES[:4] + RAW_BODIES[9:11]:
                        check("anon", method, url, label, _send(anon, method, url, raw=raw))

    # 3. the admin, every route (destructive ones last)
    for rule in rules:
        fn = kb_app.view_functions[rule.endpoint]
        fields, module_fields = _fields(fn), _fields(fn, whole_module=True)
        is_page = not rule.rule.startswith("/api/")
        for method in sorted(rule.methods - {"HEAD", "OPTIONS"}):
            client, csrf = kb_admin.client, kb_admin.csrf
            for url in _paths(rule, world, odd=True):
                check("admin", method, url, "no body", _send(client, method, url, csrf=csrf))
            url = _paths(rule, world, odd=False)[0]
            if method == "GET":
                queries = ["&".join(f"{quote(f)}={v}" for f in module_fields) for v in ODD_QUERY_VALUES]
                queries += [f"{quote(f)}={ODD_QUERY_VALUES[(i + j) % len(ODD_QUERY_VALUES)]}"
                            for i, f in enumerate(fields) for j in (0, 3)]
                for q in queries:
                    check("admin", method, f"{url}?{q}", q[:30], _send(client, method, f"{url}?{q}"))
                continue
            for label, raw in (RAW_BODIES[:6] + RAW_BODIES[9:11] if is_page else _json_bodies(fields, module_fields)):
                check("admin", method, url, label, _send(client, method, url, raw=raw, csrf=csrf))
            if is_page or "upload" in rule.rule:
                for label, form in _form_bodies(fields, module_fields):
                    check("admin", method, url, label, _send(client, method, url, form=form, csrf=csrf))
    assert counts["requests"] > 1000
    assert not failures, f"{len(failures)} of {counts['requests']} requests answered 5xx:\n" + "\n".join(failures[:60])
