"""Issue 4 targets: the WordPress connector against the real test WordPress, and the sitemap crawler.

* a full sync of 1,000 bulk posts (+ the seeded posts, pages and events) from the real
  WordPress of tests/wordpress (Debian's WordPress on PHP's built-in server, 4 workers),
  end to end: REST pages with ``_embed``, mapping, documents, chunks, offline embeddings;
* a second full sync and an incremental sync with nothing changed: zero chunks re-embedded;
* one post edited in WordPress → an incremental sync re-embeds exactly that post;
* the sitemap crawler at concurrency 4 on a local site (fakes/sitemap_site.py: the
  Yoast samples plus generated pages): pages/s for the crawl alone (fetch + main-content
  extraction) with no network latency and with 50 ms per request, and end to end.

``run()`` expects the services to be up (``bench/run.py`` starts scratch ones); run it alone
with ``.venv/bin/python -m bench.run wordpress_bench``. The WordPress part needs root, php and
MariaDB (``scripts/test-deps.sh``); without php it reports ``skipped``.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
SHARED = Path(os.environ.get("KB_SHARED_DIR", ROOT.parent / "shared")) / "data"

N_POSTS = 1000
WP_PORT = int(os.environ.get("KBF_WP_BENCH_PORT", "8092"))
SITEMAP_PAGES = 400


def _org(name: str):
    from sqlalchemy import select

    from kbframework.orgs.accounts import create_org
    from kbframework.db import session_scope
    from kbframework.models import Setting

    stamp = uuid.uuid4().hex[:8]
    with session_scope() as s:
        org = create_org(s, f"{name} {stamp}", "Europe/Belgrade", f"{name.lower().replace(' ', '-')}-{stamp}")
        st = s.scalar(select(Setting).where(Setting.organization_id == org.id))
        st.allow_private_network = True
        return org.id


def _source(org_id, type_: str, config: dict) -> str:
    from kbframework.db import session_scope
    from kbframework.sources.config import create_source

    with session_scope() as s:
        return str(create_source(s, org_id, {"type": type_, "name": f"bench {type_}", "config": config}).id)


def _chunks(org_id) -> tuple[int, int]:
    from sqlalchemy import func, select

    from kbframework.db import session_scope
    from kbframework.models import Chunk

    with session_scope() as s:
        return (s.scalar(select(func.count()).select_from(Chunk).where(Chunk.organization_id == org_id)) or 0,
                s.scalar(select(func.max(Chunk.id)).where(Chunk.organization_id == org_id)) or 0)


def _new_chunks(org_id, after_id: int) -> int:
    from sqlalchemy import func, select

    from kbframework.db import session_scope
    from kbframework.models import Chunk

    with session_scope() as s:
        return s.scalar(select(func.count()).select_from(Chunk).where(Chunk.organization_id == org_id,
                                                                      Chunk.id > after_id)) or 0


def _timed_sync(source_id, kind):
    from kbframework.sources.sync import run_sync

    t = time.perf_counter()
    out = run_sync(source_id, kind, inline_ingest=True)
    if out.get("status") != "ok":
        raise RuntimeError(f"{kind} sync failed: {out}")
    return out, time.perf_counter() - t


# ------------------------------------------------------------------------ WordPress


def wordpress(n_posts: int = N_POSTS, port: int = WP_PORT) -> dict:
    if shutil.which("php") is None:
        return {"skipped": "php is not installed (scripts/test-deps.sh)"}
    import requests

    res: dict = {"bulk_posts": n_posts, "port": port}
    state_file = f"/tmp/kbf-wp-state-bench-{port}.json"
    env = {**os.environ, "WP_STATE_FILE": state_file, "KBF_WP_BULK": str(n_posts)}
    t = time.perf_counter()
    r = subprocess.run(["bash", str(ROOT / "tests" / "wordpress" / "setup_wp.sh"), str(port)], env=env,
                       capture_output=True, text=True, timeout=900)
    if r.returncode != 0:
        return {"error": f"setup_wp.sh failed: {r.stderr[-1500:]}"}
    res["site_setup_seconds"] = round(time.perf_counter() - t, 1)
    state = json.loads(Path(state_file).read_text())
    try:
        org_id = _org("WP bench")
        source_id = _source(org_id, "wordpress", {
            "base_url": state["base_url"], "username": state["user"], "app_password": state["app_password"],
            "post_types": ["post", "page", "event"], "concurrency": 2})

        first, secs = _timed_sync(source_id, "full")
        n_chunks, max_id = _chunks(org_id)
        st = first["stats"]
        res["first_full_sync"] = {"seconds": round(secs, 2), "items": st["fetched"],
                                  "documents_embedded": st["embedded_documents"], "chunks": n_chunks,
                                  "items_per_second": round(st["fetched"] / secs, 1)}
        print(f"  first full sync: {st['fetched']} items in {secs:.1f} s "
              f"({st['fetched'] / secs:.0f}/s), {n_chunks} chunks", flush=True)

        again, secs = _timed_sync(source_id, "full")
        res["second_full_sync_unchanged"] = {
            "seconds": round(secs, 2), "items": again["stats"]["fetched"],
            "documents_embedded": again["stats"]["embedded_documents"],
            "chunks_reembedded": _new_chunks(org_id, max_id), "purged": again["stats"]["purged"]}
        print(f"  second full sync: {secs:.1f} s, {res['second_full_sync_unchanged']['chunks_reembedded']} "
              "chunks re-embedded", flush=True)

        inc, secs = _timed_sync(source_id, "incremental")
        res["incremental_unchanged"] = {"seconds": round(secs, 2), "items": inc["stats"]["fetched"],
                                        "chunks_reembedded": _new_chunks(org_id, max_id)}

        # one edit in WordPress → one document re-embedded
        pid = state["bulk"]["first_id"]
        time.sleep(1.05)  # WordPress keeps whole seconds; a sync applies only strictly newer versions
        http = requests.Session()
        http.auth = (state["user"], state["app_password"])
        rr = http.post(f"{state['base_url']}/wp-json/wp/v2/posts/{pid}",
                       json={"content": "<p>Edited for the benchmark: doors now open at 21:00.</p>"}, timeout=30)
        rr.raise_for_status()
        inc, secs = _timed_sync(source_id, "incremental")
        res["incremental_one_edit"] = {"seconds": round(secs, 2), "items": inc["stats"]["fetched"],
                                       "documents_embedded": inc["stats"]["embedded_documents"],
                                       "chunks_reembedded": _new_chunks(org_id, max_id)}
        print(f"  incremental after one edit: {secs:.2f} s, {inc['stats']['embedded_documents']} document "
              "re-embedded", flush=True)
    finally:
        subprocess.run(["bash", str(ROOT / "tests" / "wordpress" / "stop_wp.sh"), str(port), "--purge"],
                       env=env, capture_output=True, timeout=120)
    return res


# -------------------------------------------------------------------------- sitemap


def sitemap(extra_pages: int = SITEMAP_PAGES, concurrency: int = 4) -> dict:
    from kbframework.types import SyncContext
    from kbframework_sitemap.connector import SitemapConnector
    from fakes.sitemap_site import SitemapSite

    if not (SHARED / "sitemaps").is_dir():
        return {"skipped": f"no sitemap samples at {SHARED / 'sitemaps'}"}
    res: dict = {"concurrency": concurrency, "site": "served by another process"}
    connector = SitemapConnector()
    for delay in (0.0, 0.05):
        proc = subprocess.Popen([sys.executable, "-m", "fakes.sitemap_site", str(SHARED), str(delay),
                                 str(extra_pages)], cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                text=True)
        try:
            url = proc.stdout.readline().strip()
            cfg = connector.config_schema().load({
                "sitemap_urls": [url + "/sitemap_index.xml", url + "/bench-sitemap.xml"],
                "concurrency": concurrency})
            ctx = SyncContext(organization_id="bench", allow_private_network=True)
            t = time.perf_counter()
            n = sum(1 for _ in connector.fetch_all(cfg, ctx))
            secs = time.perf_counter() - t
            import requests

            stats = requests.get(url + "/__stats.json", timeout=10).json()
            key = f"crawl_{int(delay * 1000)}ms_latency"
            res[key] = {"pages": n, "seconds": round(secs, 2), "pages_per_second": round(n / secs, 1),
                        "max_inflight": stats["max_inflight"]}
            print(f"  sitemap crawl ({int(delay * 1000)} ms/request): {n} pages in {secs:.1f} s = "
                  f"{n / secs:.0f} pages/s", flush=True)
        finally:
            proc.stdin.close()
            proc.wait(timeout=30)

    site = SitemapSite(SHARED, extra_pages=extra_pages)
    try:
        org_id = _org("Sitemap bench")
        source_id = _source(org_id, "sitemap", {"sitemap_urls": [site.url + "/sitemap_index.xml",
                                                                  site.url + "/bench-sitemap.xml"],
                                                 "concurrency": concurrency})
        out, secs = _timed_sync(source_id, "full")
        _n, max_id = _chunks(org_id)
        res["end_to_end_full_sync"] = {"pages": out["stats"]["fetched"], "seconds": round(secs, 2),
                                       "pages_per_second": round(out["stats"]["fetched"] / secs, 1)}
        site.hits.clear()
        inc, secs = _timed_sync(source_id, "incremental")
        res["incremental_unchanged"] = {"seconds": round(secs, 2), "pages_fetched": site.page_hits(),
                                        "chunks_reembedded": _new_chunks(org_id, max_id)}
    finally:
        site.close()
    return res


def run(n_posts: int = N_POSTS, sitemap_pages: int = SITEMAP_PAGES) -> dict:
    return {"wordpress": wordpress(n_posts), "sitemap": sitemap(sitemap_pages)}


if __name__ == "__main__":  # pragma: no cover
    print(json.dumps(run(), indent=2))
