"""Run by ``tests/test_uninstall.py`` with the Python of an environment from which one plugin
distribution was uninstalled: the host, the admin and the other plugins must still work.

Usage: python without_plugin.py REMOVED_ENTRY_POINT ORG_SLUG EXPECTED_ENTRY_POINT...
(DATABASE_URL, REDIS_URL and KB_DATA_DIR point at the test's running services.)
Prints one JSON line of what it checked; exits non-zero on the first failure.
"""
from __future__ import annotations

import json
import subprocess
import sys
import uuid

PAGES = ["/admin/", "/admin/sources", "/admin/documents", "/admin/knowledge", "/admin/knowledge/new", "/admin/chat",
         "/admin/feedback", "/admin/zero-results", "/admin/keys", "/admin/usage", "/admin/settings"]


def main(removed: str, org_slug: str, expected: list[str]) -> dict:
    from importlib import metadata

    from sqlalchemy import select

    from kbframework.db import session_scope
    from kbframework.models import Source
    from kbframework.orgs.accounts import get_org_by_slug
    from kbframework.testing import login_client
    from kbframework.web import create_app

    installed = {ep.name for ep in metadata.entry_points(group="kbframework")}
    assert removed not in installed, f"{removed} is still installed"
    app = create_app({"TESTING": True})
    with session_scope() as s:
        org = get_org_by_slug(s, org_slug)
        org_d = {"id": str(org.id), "slug": org.slug}
        sources = [(str(x.id), x.type) for x in s.scalars(select(Source).where(Source.organization_id == org.id))]
    admin = login_client(app, org_d, f"admin-{uuid.uuid4().hex[:8]}@test.example", "correct horse battery")
    plugins = admin.get("/api/admin/v1/plugins").get_json()
    names = {p["name"] for p in plugins["plugins"]}
    assert removed not in names and set(expected) <= names, (removed, sorted(names))
    checked = []
    for path in PAGES + [f"/admin/sources/new/{t}" for t in plugins["source_types"]] + \
            [f"/admin/sources/{sid}" for sid, _ in sources]:
        r = admin.get(path)
        assert r.status_code in (200, 302), (path, r.status_code, r.get_data(as_text=True)[:300])
        checked.append(path)
    page = admin.get("/admin/sources").get_data(as_text=True)
    orphans = [t for _, t in sources if t not in plugins["source_types"]]
    if orphans:
        assert "plugin missing" in page, "a source whose plugin is gone must say so"
    r = admin.post("/api/admin/v1/chat", json={"question": "What is the return policy?"})
    assert r.status_code == 200 and r.get_json()["answer"], r.get_data(as_text=True)[:300]
    assert admin.get("/api/admin/v1/dashboard").status_code == 200
    cli = subprocess.run([sys.executable, "-m", "kbframework.cli", "plugins", "--json"], capture_output=True,
                         text=True)
    assert cli.returncode == 0, cli.stderr
    listed = {p["name"] for p in json.loads(cli.stdout)}
    assert removed not in listed and set(expected) <= listed, sorted(listed)
    return {"removed": removed, "pages": len(checked), "orphan_sources": orphans,
            "source_types": plugins["source_types"], "presets": plugins["presets"]}


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], sys.argv[2], sys.argv[3:])))
