"""The sitemap connector crawling a local site built from the shared Yoast sitemap samples
(fakes/sitemap_site.py): index → child sitemaps (one gzipped) → pages with header,
menu, cookie banner, sidebar and footer around their content."""
from __future__ import annotations

import sys
import uuid
from pathlib import Path

import pytest
from sqlalchemy import select

from kbframework.db import session_scope
from kbframework.models import Chunk, Document
from kbframework.testing import set_org_settings

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from fakes.sitemap_site import CHROME_WORDS, SitemapSite  # noqa: E402

SUMMER = "/2024/05/06/summer-opening-hours/"
HOODIE = "/2024/04/18/how-to-wash-your-hoodie/"
REPAIR = "/event/weekend-repair-cafe/"
RETURNS = "/shipping-returns/"


@pytest.fixture
def site(shared_data):
    s = SitemapSite(shared_data, delay=0.02)
    yield s
    s.close()


@pytest.fixture
def admin(kb_admin):
    set_org_settings(kb_admin.org, allow_private_network=True)  # the operator allows it
    return kb_admin


def make_source(admin, site, **config) -> dict:
    cfg = {"sitemap_urls": [site.url + "/sitemap_index.xml"],
           "exclude_patterns": ["*/product-category/*", "re:/shop/$"],
           "role_rules": [{"pattern": "*/event/*", "role": "event"}, {"pattern": "*/shipping-*", "role": "support"}]}
    cfg.update(config)
    r = admin.post("/api/admin/v1/sources", json={"type": "sitemap", "name": "Shop pages", "config": cfg})
    assert r.status_code == 201, r.get_data(as_text=True)
    return r.get_json()


def sync(source_id, kind="full"):
    from kbframework.sources.sync import run_sync

    return run_sync(source_id, kind, inline_ingest=True)


def docs(source_id, include_deleted=False) -> dict[str, Document]:
    with session_scope() as s:
        rows = s.scalars(select(Document).where(Document.source_id == uuid.UUID(source_id))).all()
        for d in rows:
            s.expunge(d)
    return {d.external_id: d for d in rows if include_deleted or d.status != "deleted"}


def chunk_ids(doc_id):
    with session_scope() as s:
        return s.scalars(select(Chunk.id).where(Chunk.document_id == doc_id).order_by(Chunk.id)).all()


def ask(admin, q):
    r = admin.post("/api/admin/v1/chat", json={"question": q})
    assert r.status_code == 200, r.get_data(as_text=True)
    return r.get_json()


def expected_urls(site) -> set[str]:
    return {u for u in site.page_urls() if "/product-category/" not in u and not u.endswith("/shop/")}


def test_crawl_extracts_main_content_politely(site, admin):
    src = make_source(admin, site)
    out = sync(src["id"])
    assert out["status"] == "ok", out
    got = docs(src["id"])
    assert set(got) == expected_urls(site) and len(got) == 22  # 29 pages; 6 categories + /shop/ excluded
    assert site.hits["/post-sitemap.xml.gz"] == 1 and "/post-sitemap.xml" not in site.hits  # gz child read
    assert 2 <= site.max_inflight <= 4  # concurrency 4 by default, and it is used
    assert all(d.status == "active" and d.chunk_count > 0 for d in got.values())

    summer = got[site.url + SUMMER]
    assert summer.title == "Summer opening hours"  # "<title>Summer opening hours – Example Shop"
    assert summer.source_url == site.url + SUMMER and summer.type == "web_page"
    assert "From June to August the shop is open every day from 8:00 to 20:00" in summer.normalized_content
    assert "- Late opening on Fridays until 22:00" in summer.normalized_content
    assert summer.primary_image_url == site.url + "/wp-content/uploads/2024/05/shopfront.jpg"  # <image:image>
    assert str(summer.source_modified_at) == "2024-05-06 09:00:00+00:00"  # <lastmod>
    for d in got.values():
        for chrome in CHROME_WORDS + ("should-not-appear", "Contact us", "Skip to content"):
            assert chrome not in d.normalized_content, (d.external_id, chrome)
    assert got[site.url + REPAIR].document_role == "event"
    assert got[site.url + RETURNS].document_role == "support"
    assert got[site.url + HOODIE].document_role == "article"

    out = ask(admin, "When is the shop open in summer?")
    assert "8:00 to 20:00" in out["answer"]
    assert out["sources"][0]["source_url"] == site.url + SUMMER
    out = ask(admin, "What is the washing temperature for the hoodie?")
    assert "30 degrees" in out["answer"]


def test_incremental_uses_lastmod_and_full_sync_reconciles(site, admin):
    src = make_source(admin, site)
    assert sync(src["id"])["status"] == "ok"
    before = {k: chunk_ids(d.id) for k, d in docs(src["id"]).items()}

    # nothing changed: no page is fetched again, nothing re-embedded
    site.hits.clear()
    inc = sync(src["id"], "incremental")
    assert inc["status"] == "ok" and inc["kind"] == "incremental", inc
    assert site.page_hits() == 0 and inc["stats"]["embedded_documents"] == 0, (site.hits, inc)
    # a full sync reads every page, but unchanged text is not embedded again either
    full = sync(src["id"], "full")
    assert full["stats"]["embedded_documents"] == 0 and full["stats"]["purged"] == 0, full
    assert {k: chunk_ids(d.id) for k, d in docs(src["id"]).items()} == before

    # one page changes (with its lastmod): only that page is fetched and re-embedded
    site.set_page(SUMMER, "Summer opening hours",
                  "<p>This summer the shop opens from 9:00 to 18:00 and is closed on Sundays.</p>")
    site.set_lastmod(SUMMER, "2024-06-01T08:00:00+00:00")
    site.hits.clear()
    inc = sync(src["id"], "incremental")
    assert inc["stats"]["changed"] == 1 and inc["stats"]["embedded_documents"] == 1, inc
    assert site.page_hits() == 1 and site.hits[SUMMER] == 1
    assert site.hits["/page-sitemap.xml"] == 0  # its <lastmod> in the index is old: not even read
    out = ask(admin, "When is the shop open in summer?")
    assert "9:00 to 18:00" in out["answer"] and "8:00 to 20:00" not in out["answer"]

    # a page leaves the sitemap, another one is gone (404): the full sync purges both
    site.remove_url(HOODIE)
    site.status[REPAIR] = 404
    full = sync(src["id"], "full")
    assert full["status"] == "ok" and full["stats"]["purged"] == 2, full
    all_docs = docs(src["id"], include_deleted=True)
    for path in (HOODIE, REPAIR):
        d = all_docs[site.url + path]
        assert d.status == "deleted" and chunk_ids(d.id) == []
    out = ask(admin, "What is the washing temperature for the hoodie?")
    assert "30 degrees" not in out["answer"]
    assert site.url + HOODIE not in {s["external_id"] for s in out["sources"]}

    # one page on its own (what a re-fetch of a single document uses)
    from kbframework.hooks import registry
    from kbframework.types import SyncContext

    conn, ctx = registry.source_type("sitemap"), SyncContext(organization_id="x", allow_private_network=True)
    cfg = conn.config_schema().load({"sitemap_urls": [site.url + "/sitemap_index.xml"]})
    rec = conn.fetch_one(cfg, site.url + SUMMER, ctx)
    assert "9:00 to 18:00" in conn.normalize(rec, cfg, ctx).normalized_content
    assert conn.fetch_one(cfg, site.url + REPAIR, ctx) is None  # 404


def test_failures_keep_documents_serving(site, admin, kb_admin):
    src = make_source(admin, site)
    assert sync(src["id"])["status"] == "ok"
    n = len(docs(src["id"]))

    # the whole site is down: the sync fails, the source says why, every document still serves
    site.down = True
    out = sync(src["id"], "full")
    assert out["status"] == "error" and "503" in out["error"], out
    info = admin.get(f"/api/admin/v1/sources/{src['id']}").get_json()
    assert info["status"] == "error" and "sitemap_index.xml" in info["last_error"]
    assert len(docs(src["id"])) == n and all(d.status == "active" for d in docs(src["id"]).values())
    assert "8:00 to 20:00" in ask(admin, "When is the shop open in summer?")["answer"]

    # one page fails (500) during a full sync: an item error, the old version keeps serving
    site.down = False
    site.status[SUMMER] = 500
    out = sync(src["id"], "full")
    assert out["status"] == "ok" and out["stats"]["errors"] == 1 and out["stats"]["purged"] == 0, out
    run = admin.get(f"/api/admin/v1/sources/{src['id']}").get_json()["sync_runs"][0]
    assert run["status"] == "partial" and SUMMER in run["error"] and "HTTP 500" in run["error"]
    assert docs(src["id"])[site.url + SUMMER].status == "active"

    # private addresses are refused unless the organization allows them
    set_org_settings(kb_admin.org, allow_private_network=False)
    out = sync(src["id"], "full")
    assert out["status"] == "error" and "private" in out["error"], out
    assert len(docs(src["id"])) == n


def test_limits_and_validation(site, admin):
    big = "<p>" + "Lorem ipsum dolor sit amet. " * 4000 + "</p>"
    site.set_page("/about-us/", "About us", big)
    site.canonical[HOODIE] = SUMMER  # a duplicate: its canonical URL is another sitemap URL
    src = make_source(admin, site, max_pages=5, max_page_bytes=60_000,
                      include_patterns=["*/20*", "*/shipping-returns/", "*/about-us/"])
    out = sync(src["id"])
    assert out["status"] == "ok", out
    got = docs(src["id"])
    # 4 posts + 2 pages match; max_pages=5 fetches the first five in sitemap order (the posts and
    # /about-us/); /about-us/ is larger than max_page_bytes: an item error, nothing stored;
    # the hoodie post names the summer post as canonical: skipped
    assert set(got) == {site.url + p for p in (SUMMER, "/2024/03/02/new-logo-collection/",
                                               "/2023/12/24/christmas-closing-days/")}, sorted(got)
    assert out["stats"]["errors"] == 1 and out["stats"]["fetched"] == 4
    assert site.page_hits() == 5 and site.hits[RETURNS] == 0

    bad = {"sitemap_urls": ["ftp://example.com/sitemap.xml"], "include_patterns": ["re:("]}
    r = admin.post("/api/admin/v1/sources", json={"type": "sitemap", "name": "x", "config": bad})
    assert r.status_code == 400
    details = r.get_json()["error"]["details"]
    assert "sitemap_urls" in details and "include_patterns" in details
    r = admin.post("/api/admin/v1/sources", json={"type": "sitemap", "name": "x", "config": {
        "sitemap_urls": [site.url + "/a.xml"], "role_rules": [{"pattern": "*", "role": "boss"}]}})
    assert r.status_code == 400 and "role_rules" in r.get_json()["error"]["details"]


def test_not_a_sitemap_is_a_clear_error(site, admin):
    src = make_source(admin, site, sitemap_urls=[site.url + SUMMER])  # an HTML page, not a sitemap
    out = sync(src["id"])
    assert out["status"] == "error" and "not a usable sitemap" in out["error"], out


def test_rank_math_sitemaps(shared_data, admin):
    site = SitemapSite(shared_data, flavor="rankmath", gzip_files=())
    site.no_charset.add(REPAIR)  # UTF-8 declared only in <meta charset>
    try:
        src = make_source(admin, site, exclude_patterns=[], include_patterns=["*/event/*", "*/20*"], role_rules=[])
        out = sync(src["id"])
        assert out["status"] == "ok", out
        got = docs(src["id"])
        assert set(got) == {u for u in site.page_urls() if "/event/" in u or "/20" in u} and len(got) == 6
        assert got[site.url + REPAIR].title == "Weekend Repair Café"
        assert "Weekend Repair Café; volunteers" in got[site.url + REPAIR].normalized_content
    finally:
        site.close()
