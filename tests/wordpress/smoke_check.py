"""Smoke check of the WordPress test site started by tests/wordpress/setup_wp.sh.

    tests/wordpress/setup_wp.sh && .venv/bin/python tests/wordpress/smoke_check.py

Standard library only. Reads the state file (WP_STATE_FILE, default /tmp/kbf-wp-state.json),
checks the REST features the WordPress connector relies on, and exercises writes through the
application password on a throwaway post (it creates, edits, unpublishes and deletes it, so the
seeded content is left as it was). Exits non-zero on the first failure.
Not named test_*.py on purpose: pytest must not collect it.
"""

from __future__ import annotations

import base64
import concurrent.futures
import datetime as dt
import json
import os
import sys
import time
import urllib.error
import urllib.request

STATE_FILE = os.environ.get("WP_STATE_FILE", "/tmp/kbf-wp-state.json")


def main() -> int:
    with open(STATE_FILE, encoding="utf-8") as fh:
        state = json.load(fh)
    base = state["base_url"].rstrip("/")
    token = base64.b64encode(f"{state['user']}:{state['app_password']}".encode()).decode()
    auth = {"Authorization": f"Basic {token}"}

    def call(method: str, path: str, body: dict | None = None, headers: dict | None = None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(base + path, data=data, method=method)
        for k, v in (headers or {}).items():
            req.add_header(k, v)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                return resp.status, dict(resp.headers), json.loads(resp.read() or b"null")
        except urllib.error.HTTPError as err:
            return err.code, dict(err.headers), json.loads(err.read() or b"null")

    def check(cond: bool, what: str) -> None:
        print(("ok   " if cond else "FAIL ") + what)
        if not cond:
            raise SystemExit(1)

    status, _, root = call("GET", "/wp-json/")
    check(status == 200 and "wp/v2" in root["namespaces"], "/wp-json/ answers with wp/v2")
    check("application-passwords" in root.get("authentication", {}), "application passwords advertised")

    status, _, types = call("GET", "/wp-json/wp/v2/types")
    check("event" in types and types["event"]["rest_base"] == "event", "/types lists event")

    status, headers, events = call("GET", "/wp-json/wp/v2/event?_embed=1&status=publish&per_page=2")
    check(status == 200 and len(events) == 2, "event list, per_page=2")
    check(int(headers["X-WP-TotalPages"]) == 3 and int(headers["X-WP-Total"]) == 5, "X-WP-Total=5, X-WP-TotalPages=3")
    first = events[0]
    check(first["acf"].get("venue_name") and first["acf"].get("event_date"), "acf object on events")
    check(set(first["meta"]) >= {"event_date", "event_end", "venue_name", "city", "ticket_url", "price", "genre"}, "meta on events")
    src = first["_embedded"]["wp:featuredmedia"][0]["source_url"]
    check(src.startswith(base + "/wp-content/uploads/"), f"featured image source_url {src}")
    with urllib.request.urlopen(src, timeout=10) as resp:
        check(resp.status == 200 and resp.headers["Content-Type"] == "image/png", "featured image is served")

    status, _, posts = call("GET", "/wp-json/wp/v2/posts?per_page=100")
    ids = {p["id"] for p in posts}
    check(state["draft_id"] not in ids and state["private_id"] not in ids, "anonymous list hides draft/private")
    status, _, posts = call("GET", "/wp-json/wp/v2/posts?per_page=100&status=draft,private", headers=auth)
    ids = {p["id"] for p in posts}
    check(status == 200 and {state["draft_id"], state["private_id"]} <= ids, "app password sees draft/private")
    status, _, me = call("GET", "/wp-json/wp/v2/users/me", headers={"Authorization": "Basic " + base64.b64encode(b"admin:wrongwrongwrongwrongwron").decode()})
    check(status == 401, "wrong application password -> 401 on /users/me")

    status, _, changed = call("GET", f"/wp-json/wp/v2/posts?modified_after={state['seeded_at']}")
    check(status == 200 and changed == [], "modified_after=seeded_at is empty before edits")

    # Writes through the application password, on a throwaway post.
    status, _, created = call("POST", "/wp-json/wp/v2/posts", {"title": "smoke", "content": "<p>x</p>", "status": "publish"}, auth)
    check(status == 201, "create post")
    pid = created["id"]
    since = (dt.datetime.now(dt.timezone.utc) - dt.timedelta(seconds=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    status, _, upd = call("POST", f"/wp-json/wp/v2/posts/{pid}", {"title": "smoke (edited)"}, auth)
    check(status == 200 and upd["title"]["raw"] == "smoke (edited)", "update title")
    status, _, changed = call("GET", f"/wp-json/wp/v2/posts?modified_after={since}")
    check(pid in {p["id"] for p in changed}, "modified_after sees the edit")
    status, _, upd = call("POST", f"/wp-json/wp/v2/posts/{pid}", {"status": "draft"}, auth)
    check(status == 200 and upd["status"] == "draft", "unpublish (status=draft)")
    status, _, _ = call("GET", f"/wp-json/wp/v2/posts/{pid}")
    check(status == 401, "unpublished post is 401 for anonymous")
    status, _, deleted = call("DELETE", f"/wp-json/wp/v2/posts/{pid}?force=true", headers=auth)
    check(status == 200 and deleted["deleted"] is True, "delete force=true")
    status, _, _ = call("GET", f"/wp-json/wp/v2/posts/{pid}")
    check(status == 404, "deleted post is 404")

    # Parallel requests (PHP_CLI_SERVER_WORKERS).
    t0 = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        codes = list(pool.map(lambda i: call("GET", f"/wp-json/wp/v2/posts?_embed=1&x={i}")[0], range(32)))
    check(codes == [200] * 32, f"32 parallel requests ok in {time.monotonic() - t0:.2f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
