"""Private-network access is the operator's decision (``KB_ALLOW_PRIVATE_NETWORK``): a tenant
admin cannot switch it on unless the operator delegated the switch
(``KB_TENANT_PRIVATE_NETWORK=1``), an operator allowlist opens exactly what it lists, and
link-local / cloud metadata addresses stay closed even when private networks are allowed.
Through the real sitemap connector against a local site on 127.0.0.1."""
from __future__ import annotations

import pytest

from kbframework import config as kbconfig
from kbframework import net
from kbframework.testing import set_org_extra


@pytest.fixture
def operator(monkeypatch):
    """Set the operator's environment for one test (the suite default is restored after)."""

    def set_env(allow: str, delegate: bool):
        monkeypatch.setenv("KB_ALLOW_PRIVATE_NETWORK", allow)
        monkeypatch.setenv("KB_TENANT_PRIVATE_NETWORK", "1" if delegate else "0")
        kbconfig.reset_config()

    yield set_env
    monkeypatch.undo()
    kbconfig.reset_config()


@pytest.fixture
def site(kb_http_server):
    page = ("<html><head><title>Staff wiki</title></head><body><main><h1>Staff wiki</h1>"
            "<p>The intranet door code is written on the fridge in the break room.</p></main></body></html>")

    def handler(method, path, headers, body):
        if path.startswith("/sitemap.xml"):
            return 200, {"Content-Type": "application/xml"}, (
                '<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
                f"<url><loc>{srv.url}/wiki/</loc></url></urlset>")
        if path.startswith("/wiki/"):
            return 200, {"Content-Type": "text/html; charset=utf-8"}, page
        return 404, {}, "not found"

    srv = kb_http_server(handler)
    return srv


def _source(admin, url):
    r = admin.post("/api/admin/v1/sources", json={"type": "sitemap", "name": "Wiki",
                                                  "config": {"sitemap_urls": [url]}})
    assert r.status_code == 201, r.get_data(as_text=True)
    return r.get_json()["id"]


def _sync(source_id):
    from kbframework.sources.sync import run_sync

    return run_sync(source_id, "full", inline_ingest=True)


def test_tenant_admin_cannot_enable_without_delegation(kb_admin, site, operator):
    operator("1", delegate=False)
    r = kb_admin.put("/api/admin/v1/settings", json={"extra": {"allow_private_network": True}})
    assert r.status_code == 403, r.get_data(as_text=True)
    assert r.get_json()["error"]["code"] == "private_network_not_delegated"
    assert "operator" in r.get_json()["error"]["message"]
    assert kb_admin.get("/api/admin/v1/settings").get_json()["allow_private_network"] is not True
    # switching it off (narrowing) is always fine; a non-boolean is a clear 400
    assert kb_admin.put("/api/admin/v1/settings", json={"extra": {"allow_private_network": False}}).status_code == 200
    r = kb_admin.put("/api/admin/v1/settings", json={"extra": {"allow_private_network": "yes"}})
    assert r.status_code == 400

    # delegated, but the operator allows nothing: still refused
    operator("", delegate=True)
    r = kb_admin.put("/api/admin/v1/settings", json={"extra": {"allow_private_network": True}})
    assert r.status_code == 403 and r.get_json()["error"]["code"] == "private_network_not_allowed"


def test_a_flag_stored_by_a_tenant_opens_nothing_the_operator_did_not(kb_admin, site, operator):
    sid = _source(kb_admin, site.url + "/sitemap.xml")
    set_org_extra(kb_admin.org, allow_private_network=True)  # as an old release let a tenant do
    operator("", delegate=True)
    out = _sync(sid)
    assert out["status"] == "error" and "refused" in out["error"], out
    operator("0", delegate=False)
    out = _sync(sid)
    assert out["status"] == "error" and "KB_ALLOW_PRIVATE_NETWORK" in out["error"], out
    r = kb_admin.get("/api/admin/v1/documents").get_json()
    assert r["total"] == 0


def test_operator_allowlist_works_without_any_tenant_switch(kb_admin, site, operator):
    operator("127.0.0.1/32", delegate=False)
    sid = _source(kb_admin, site.url + "/sitemap.xml")
    out = _sync(sid)
    assert out["status"] == "ok", out
    titles = [d["title"] for d in kb_admin.get("/api/admin/v1/documents").get_json()["items"]]
    assert titles == ["Staff wiki"]
    # the allowlist is exact: another private range stays closed
    assert net.organization_policy({}).is_blocked("10.0.0.1")
    assert not net.organization_policy({}).is_blocked("127.0.0.1")


def test_delegated_switch_only_narrows(kb_admin, site, operator):
    operator("127.0.0.0/8", delegate=True)
    sid = _source(kb_admin, site.url + "/sitemap.xml")
    out = _sync(sid)
    assert out["status"] == "error", out  # the organization has not switched it on
    assert kb_admin.put("/api/admin/v1/settings", json={"extra": {"allow_private_network": True}}).status_code == 200
    assert _sync(sid)["status"] == "ok"


@pytest.mark.parametrize("url", [
    "http://169.254.169.254/latest/meta-data/",
    "http://[fd00:ec2::254]/latest/meta-data/",
    "http://100.100.100.200/latest/meta-data/",
    "http://metadata.google.internal/computeMetadata/v1/",
    "http://[fe80::1]/",
    "http://169.254.170.2/v2/credentials",  # ECS task credentials
])
def test_metadata_blocked_even_when_private_networks_are_allowed(kb_admin, operator, url):
    operator("1", delegate=False)
    sid = _source(kb_admin, url)
    out = _sync(sid)
    assert out["status"] == "error" and "refused" in out["error"], out
    with pytest.raises(net.BlockedAddress):
        net.check_url(url, allow_private=net.organization_policy({}))


def test_listing_a_metadata_address_explicitly_opens_only_that_one(operator):
    operator("1,169.254.169.254/32", delegate=False)
    policy = net.organization_policy({})
    assert not policy.is_blocked("169.254.169.254")
    assert policy.is_blocked("169.254.169.253")
    assert not policy.is_blocked("10.1.2.3")
    assert policy.is_blocked("fd00:ec2::254")


def test_allowlisted_host_name(operator):
    operator("wiki.intranet", delegate=False)
    policy = net.organization_policy({})
    assert policy.host_allowed("wiki.intranet") and policy.is_blocked("10.0.0.1")
    with pytest.raises(net.BlockedAddress):
        policy.resolve("metadata.google.internal", 80)


def test_a_bad_operator_value_stops_startup(operator):
    operator("10.0.0.0/8,not a host!", delegate=False)
    with pytest.raises(SystemExit):
        net.operator_policy()
