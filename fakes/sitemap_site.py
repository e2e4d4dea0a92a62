"""A local website built from the shared sitemap samples (Yoast / Rank Math output).

The sitemap files in ``shared/data/sitemaps/<flavor>/`` are served with every
``https://example.com`` rewritten to this server; every page ``<loc>`` they list gets a
generated HTML page with the usual page chrome around its content (header + menu, cookie
banner, sidebar, footer), a ``<title>``, a canonical link and an ``og:image``. Tests change
the site while it runs (``set_page``, ``set_lastmod``, ``remove_url``, ``status``,
``down``) and read what was requested (``hits``, ``max_inflight``).

Used by tests/test_sitemap.py and bench/wordpress_bench.py.
"""
from __future__ import annotations

import gzip
import re
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Optional
from urllib.parse import urlsplit

from kbframework.testing import LocalHTTPServer

ORIGIN = "https://example.com"

# Hand-written content for a few pages (the assistant is asked about them); the other
# pages get generated text that names the page.
CONTENT = {
    "/2024/05/06/summer-opening-hours/": (
        "Summer opening hours",
        "<h2>Open longer in summer</h2><p>From June to August the shop is open every day from 8:00 to "
        "20:00, Sundays included.</p><ul><li>Late opening on Fridays until 22:00</li>"
        "<li>Closed on 15 August</li></ul>"),
    "/2024/04/18/how-to-wash-your-hoodie/": (
        "How to wash your hoodie",
        "<h2>Washing instructions</h2><p>Wash the hoodie inside out at 30 degrees with similar colours. "
        "Do not tumble dry; dry it flat so the print does not crack.</p>"),
    "/shipping-returns/": (
        "Shipping and returns",
        "<h2>Shipping</h2><p>Orders ship within two working days. Shipping is free above 50 EUR.</p>"
        "<h2>Returns</h2><p>You can return unworn items within 30 days for a full refund.</p>"),
    "/event/weekend-repair-cafe/": (
        "Weekend Repair Café",
        "<p>Bring broken clothes and gadgets to the Weekend Repair Café; volunteers fix them for free "
        "every Saturday from 10:00 to 14:00 in the back room of the shop.</p>"),
}

CHROME_WORDS = ("Accept all cookies", "Main menu", "Recent posts", "All rights reserved")


def page_html(url: str, title: str, body: str, image: Optional[str] = None) -> str:
    og = f'<meta property="og:image" content="{image}">' if image else ""
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{title} – Example Shop</title>
<link rel="canonical" href="{url}">{og}
<link rel="stylesheet" href="/style.css"><script>window.tracking = "should-not-appear";</script>
</head><body>
<a class="skip-link" href="#content">Skip to content</a>
<header class="site-header"><div class="logo">Example Shop</div>
<nav class="main-navigation" aria-label="Main menu"><ul><li><a href="/">Home</a></li><li><a href="/shop/">Shop</a></li>
<li><a href="/events/">Events</a></li><li><a href="/contact/">Contact us</a></li></ul></nav></header>
<div id="cookie-notice" class="cookie-banner" role="dialog"><p>We use cookies to improve your experience.
<button>Accept all cookies</button></p></div>
<main id="content"><article><h1>{title}</h1>
{body}
<p>This page belongs to the Example Shop website and was written for its customers.</p>
</article></main>
<aside class="sidebar widget-area"><h2>Recent posts</h2><ul><li><a href="/a/">New logo collection</a></li>
<li><a href="/b/">Christmas closing days</a></li></ul></aside>
<footer class="site-footer"><p>© 2024 Example Shop. All rights reserved. <a href="/privacy-policy/">Privacy policy</a></p>
</footer></body></html>"""


def _title_from_path(path: str) -> str:
    parts = [p for p in path.strip("/").split("/") if p and not p.isdigit() and not re.match(r"\d{4}-\d\d-\d\d", p)]
    if not parts:
        return "Example Shop home"
    return parts[-1].replace("-", " ").capitalize()


class SitemapSite:
    def __init__(self, data_dir: Path, flavor: str = "yoast", *, gzip_files=("post-sitemap.xml",),
                 delay: float = 0.0, extra_pages: int = 0):
        self.flavor_dir = Path(data_dir) / "sitemaps" / flavor
        self.delay = delay
        self.hits: Counter = Counter()
        self.status: dict[str, int] = {}  # path → HTTP status to answer instead
        self.canonical: dict[str, str] = {}  # path → another path its <link rel=canonical> names
        self.no_charset: set[str] = set()  # pages served as plain "text/html" (charset only in <meta>)
        self.down = False
        self._inflight = 0
        self.max_inflight = 0
        self._lock = threading.Lock()
        self.server = LocalHTTPServer(self.handle)
        self.url = self.server.url
        self.sitemaps: dict[str, str] = {}  # path → XML text (rewritten)
        self.gz = set()
        for f in sorted(self.flavor_dir.glob("*.xml")):
            self.sitemaps["/" + f.name] = f.read_text("utf-8").replace(ORIGIN, self.url)
        for name in gzip_files:  # serve these as .xml.gz and point the index there
            if "/" + name in self.sitemaps:
                self.gz.add(f"/{name}.gz")
                for p, xml in self.sitemaps.items():
                    self.sitemaps[p] = xml.replace(f"{self.url}/{name}<", f"{self.url}/{name}.gz<")
                self.sitemaps[f"/{name}.gz"] = self.sitemaps.pop("/" + name)
        if extra_pages:  # a bigger url set for benchmarks
            rows = "".join(f"<url><loc>{self.url}/bench/page-{i:05d}/</loc>"
                           f"<lastmod>2024-05-01T10:00:00+00:00</lastmod></url>" for i in range(extra_pages))
            self.sitemaps["/bench-sitemap.xml"] = (
                '<?xml version="1.0" encoding="UTF-8"?><urlset xmlns="http://www.sitemaps.org/schemas/'
                f'sitemap/0.9">{rows}</urlset>')
        self.pages: dict[str, tuple[str, str]] = {}
        self.images: dict[str, str] = {}
        for path, xml in self.sitemaps.items():
            if "<urlset" not in xml:
                continue
            for block in re.findall(r"<url>(.*?)</url>", xml, re.S):
                loc = re.search(r"<loc>\s*([^<]+?)\s*</loc>", block).group(1)
                p = urlsplit(loc).path or "/"
                title, body = CONTENT.get(p) or (
                    _title_from_path(p),
                    f"<p>{_title_from_path(p)}: details about this item of the Example Shop, page {p}.</p>"
                    "<p>Questions? Write to the shop; we answer within a day.</p>")
                self.pages[p] = (title, body)
                img = re.search(r"<image:loc>\s*([^<]+?)\s*</image:loc>", block)
                if img:
                    self.images[p] = img.group(1)

    # ------------------------------------------------------------------ changes

    def page_urls(self) -> list[str]:
        return [self.url + p for p in self.pages]

    def set_page(self, path: str, title: str, body: str) -> None:
        self.pages[path] = (title, body)

    def set_lastmod(self, path: str, stamp: str) -> None:
        """Change a page's <lastmod> (and that of its sitemap in the index)."""
        loc = re.escape(f"{self.url}{path}")
        for sp, xml in list(self.sitemaps.items()):
            new = re.sub(rf"(<loc>{loc}</loc>\s*<lastmod>)[^<]*(</lastmod>)", rf"\g<1>{stamp}\g<2>", xml)
            if new != xml:
                self.sitemaps[sp] = new
                child = re.escape(self.url + sp)
                for ip, ixml in list(self.sitemaps.items()):
                    self.sitemaps[ip] = re.sub(rf"(<loc>{child}</loc>\s*<lastmod>)[^<]*(</lastmod>)",
                                               rf"\g<1>{stamp}\g<2>", ixml)

    def remove_url(self, path: str) -> None:
        loc = re.escape(f"{self.url}{path}")
        for sp, xml in list(self.sitemaps.items()):
            self.sitemaps[sp] = re.sub(rf"\s*<url>\s*<loc>{loc}</loc>.*?</url>", "", xml, flags=re.S)

    def page_hits(self) -> int:
        return sum(n for p, n in self.hits.items() if p in self.pages)

    # ------------------------------------------------------------------ serving

    def handle(self, method, path, headers, body):
        path = urlsplit(path).path or "/"
        if path == "/__stats.json":  # for a crawler running in another process (benchmarks)
            with self._lock:
                return 200, {}, {"page_hits": self.page_hits(), "max_inflight": self.max_inflight,
                                 "hits": dict(self.hits)}
        with self._lock:
            self.hits[path] += 1
            self._inflight += 1
            self.max_inflight = max(self.max_inflight, self._inflight)
        try:
            if self.delay:
                time.sleep(self.delay)
            if self.down:
                return 503, {"Content-Type": "text/html"}, "<h1>Service unavailable</h1>"
            if path in self.status:
                return self.status[path], {"Content-Type": "text/html"}, "<h1>Error</h1>"
            if path in self.sitemaps:
                xml = self.sitemaps[path].encode("utf-8")
                if path in self.gz:
                    return 200, {"Content-Type": "application/x-gzip"}, gzip.compress(xml)
                return 200, {"Content-Type": "application/xml; charset=UTF-8"}, xml
            if path in self.pages:
                title, body_html = self.pages[path]
                canonical = self.url + self.canonical.get(path, path)
                ctype = "text/html" if path in self.no_charset else "text/html; charset=UTF-8"
                return 200, {"Content-Type": ctype}, \
                    page_html(canonical, title, body_html, self.images.get(path)).encode("utf-8")
            return 404, {"Content-Type": "text/html"}, "<h1>Not found</h1>"
        finally:
            with self._lock:
                self._inflight -= 1

    def close(self) -> None:
        self.server.close()


def serve_forever(data_dir: str, delay: float, extra_pages: int) -> None:
    """``python -m fakes.sitemap_site DATA_DIR DELAY EXTRA``: serve in this process,
    print the URL, stop when stdin closes (benchmarks run the site outside the crawler's
    process, so both do not share one GIL)."""
    import sys

    site = SitemapSite(Path(data_dir), delay=delay, extra_pages=extra_pages)
    print(site.url, flush=True)
    try:
        sys.stdin.read()
    finally:
        site.close()


if __name__ == "__main__":  # pragma: no cover
    import sys

    serve_forever(sys.argv[1], float(sys.argv[2]), int(sys.argv[3]))
