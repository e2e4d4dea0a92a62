"""The ``sitemap`` source type: the pages listed in sitemaps the admin chose.

Sync:

1. read every configured sitemap (an index is followed to its child sitemaps, at most
   ``max_sitemaps`` files, nested at most 3 deep); any sitemap that cannot be read fails
   the sync (``SourceUnavailable``): the documents keep serving, the source shows the
   reason, and nothing is purged on the basis of a half-read sitemap;
2. de-duplicate the ``<loc>`` URLs, apply ``include_patterns`` / ``exclude_patterns``;
3. incremental sync: only URLs whose ``<lastmod>`` is newer than the watermark (or that
   have none); a child sitemap whose own ``<lastmod>`` is not newer is not even read;
4. fetch at most ``max_pages`` pages, ``concurrency`` at a time (default 4), each with a
   timeout and at most ``max_page_bytes``; extract the main content (no header, menu,
   footer, sidebar, cookie banner) with ``kbframework.text.html.main_content``.

Per page: 404/410 → not returned (a full sync then purges it); a non-HTML response or a
page whose canonical URL is another URL of the same sitemaps (a duplicate) → skipped;
a timeout, 5xx or too-large page → an item error that keeps the existing document (it
counts as "seen", so it is not purged). ``external_id`` = the sitemap ``<loc>``;
``source_url`` = the canonical URL; ``source_modified_at`` = ``<lastmod>``.
"""
from __future__ import annotations

import re
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from html import unescape
from typing import Iterator, Optional

import requests

from kbframework import KBError, SourceUnavailable
from kbframework import BlockedAddress, PerThreadSessions, ResponseTooLarge, SafeSession
from kbframework import main_content
from kbframework import DocumentDraft, RawRecord, SourceConnector, SyncContext
from kbframework_sitemap.schema import SitemapConfig
from kbframework_sitemap.sitemap import SitemapEntry, SitemapError, match_url, parse_lastmod, parse_sitemap

MAX_SITEMAP_BYTES = 60_000_000
MAX_DEPTH = 3
_OG_IMAGE = re.compile(
    r"<meta\s+[^>]*(?:property|name)\s*=\s*[\"'](?:og:image|og:image:url|twitter:image)[\"'][^>]*>", re.I)
_CONTENT_ATTR = re.compile(r"content\s*=\s*[\"']([^\"']+)[\"']", re.I)


class PageFailed(KBError):
    status = 502
    code = "page_failed"


class Crawler:
    """One sync's HTTP work: thread-local guarded sessions, sitemap reading, page fetching."""

    def __init__(self, config: dict, ctx: SyncContext):
        self.config = config
        self.ctx = ctx
        t = float(config.get("timeout_seconds") or 15)
        self.timeout = (min(5.0, t), t)
        self.max_page_bytes = int(config.get("max_page_bytes") or 3_000_000)
        self._sessions = PerThreadSessions(self._new_session)
        self.stats = {"sitemaps": 0, "pages": 0, "skipped": 0, "failed": 0}

    def _new_session(self) -> SafeSession:
        s = SafeSession(allow_private=self.ctx.allow_private_network, max_bytes=self.max_page_bytes,
                        timeout=self.timeout, total_timeout=self.timeout[1] * 2)
        s.headers["Accept"] = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.5"
        return s

    def session(self) -> SafeSession:
        return self._sessions.get()

    def close(self) -> None:
        self._sessions.close()

    # ------------------------------------------------------------------ sitemaps

    def read_sitemap(self, url: str):
        try:
            r = self.session().get(url, max_bytes=MAX_SITEMAP_BYTES)
        except BlockedAddress as exc:
            raise KBError(f"{exc.message} — private network addresses are not allowed here (the operator's "
                          "KB_ALLOW_PRIVATE_NETWORK, and the organization's allow_private_network when "
                          "delegated).", code=exc.code, status=400) from None
        except ResponseTooLarge:
            raise SourceUnavailable(f"The sitemap {url} is larger than {MAX_SITEMAP_BYTES} bytes.") from None
        except requests.Timeout:
            raise SourceUnavailable(f"The sitemap {url} did not load within {self.timeout[1]:.0f} s.") from None
        except requests.RequestException as exc:
            raise SourceUnavailable(f"The sitemap {url} could not be loaded: {_short(exc)}") from None
        if r.status_code != 200:
            raise SourceUnavailable(f"The sitemap {url} answered HTTP {r.status_code}.")
        try:
            return parse_sitemap(r.content, base_url=r.url or url)
        except SitemapError as exc:
            raise SourceUnavailable(f"{url} is not a usable sitemap: {exc}") from None

    def entries(self, since: Optional[datetime]) -> list[SitemapEntry]:
        """Every page URL of the configured sitemaps (deduplicated, in sitemap order)."""
        max_files = int(self.config.get("max_sitemaps") or 200)
        queue = deque((u, 0) for u in self.config["sitemap_urls"])
        seen_maps: set[str] = set()
        pages: dict[str, SitemapEntry] = {}
        while queue:
            url, depth = queue.popleft()
            if url in seen_maps:
                continue
            if len(seen_maps) >= max_files:
                self.ctx.log(f"stopped after {max_files} sitemap files (max_sitemaps)")
                break
            seen_maps.add(url)
            doc = self.read_sitemap(url)
            self.stats["sitemaps"] += 1
            if doc.kind == "index":
                if depth >= MAX_DEPTH:
                    continue
                for child in doc.entries:
                    if since is not None and child.lastmod is not None and child.lastmod <= since:
                        continue  # nothing in it changed since the last sync
                    queue.append((child.loc, depth + 1))
                continue
            for e in doc.entries:
                old = pages.get(e.loc)
                if old is None:
                    pages[e.loc] = SitemapEntry(e.loc, e.lastmod, list(e.images))
                elif e.lastmod and (old.lastmod is None or e.lastmod > old.lastmod):
                    old.lastmod = e.lastmod
        return list(pages.values())

    # --------------------------------------------------------------------- pages

    def fetch_page(self, entry: SitemapEntry) -> Optional[dict]:
        """The fetched page (``html`` still to ``extract``); None to skip it; ``{"error"}`` on
        failure. Runs in the fetching threads: network only."""
        base = {"loc": entry.loc, "lastmod": entry.lastmod.isoformat() if entry.lastmod else None,
                "images": entry.images}
        try:
            r = self.session().get(entry.loc)
        except BlockedAddress as exc:
            return {**base, "error": exc.message}
        except ResponseTooLarge:
            self.stats["failed"] += 1
            return {**base, "error": f"the page is larger than {self.max_page_bytes} bytes (max_page_bytes)"}
        except requests.Timeout:
            self.stats["failed"] += 1
            return {**base, "error": f"no answer within {self.timeout[1]:.0f} s"}
        except requests.RequestException as exc:
            self.stats["failed"] += 1
            return {**base, "error": f"could not be loaded: {_short(exc)}"}
        if r.status_code in (404, 410):
            self.stats["skipped"] += 1
            self.ctx.log(f"{entry.loc}: HTTP {r.status_code}, dropped")
            return None
        if r.status_code != 200:
            self.stats["failed"] += 1
            return {**base, "error": f"HTTP {r.status_code}"}
        ctype = (r.headers.get("Content-Type") or "").lower()
        if ctype and "html" not in ctype:
            self.stats["skipped"] += 1
            self.ctx.log(f"{entry.loc}: {ctype.split(';')[0]} is not a web page, skipped")
            return None
        return {**base, "url": r.url or entry.loc, "html": _decode(r)}

    def extract(self, payload: dict, known: frozenset) -> Optional[dict]:
        """Main content of a fetched page (CPU work: done by the consuming thread, so the
        fetching threads only wait on the network and the GIL is not fought over)."""
        html = payload.pop("html", None)
        if html is None:
            return payload
        loc = payload["loc"]
        title, text, canonical = main_content(html, payload["url"])
        if canonical and canonical != loc and canonical in known:
            self.stats["skipped"] += 1
            self.ctx.log(f"{loc}: duplicate of {canonical}, skipped")
            return None
        self.stats["pages"] += 1
        return {**payload, "title": title, "text": text, "canonical": canonical,
                "og_image": _og_image(html, payload["url"])}

    def crawl(self, entries: list[SitemapEntry], known: frozenset) -> Iterator[RawRecord]:
        conc = int(self.config.get("concurrency") or 4)
        todo = iter(entries)
        with ThreadPoolExecutor(max_workers=conc, thread_name_prefix="kbf-sitemap") as pool:
            window: deque = deque()
            for e in todo:
                window.append((e, pool.submit(self.fetch_page, e)))
                if len(window) >= conc * 2:
                    break
            while window:
                entry, fut = window.popleft()
                nxt = next(todo, None)
                if nxt is not None:
                    window.append((nxt, pool.submit(self.fetch_page, nxt)))
                payload = fut.result()
                if payload is not None:
                    payload = self.extract(payload, known)
                if payload is None:
                    continue
                yield RawRecord(external_id=entry.loc, payload=payload, kind="page",
                                source_modified_at=entry.lastmod, url=entry.loc)


class SitemapConnector(SourceConnector):
    name = "sitemap"
    label = "Sitemap (web pages)"
    config_schema = SitemapConfig
    supports_sync = True

    def _run(self, config: dict, ctx: SyncContext, since: Optional[datetime]) -> Iterator[RawRecord]:
        crawler = Crawler(config, ctx)
        try:
            entries = crawler.entries(since)
            known = frozenset(e.loc for e in entries)
            inc, exc = config.get("include_patterns") or [], config.get("exclude_patterns") or []
            entries = [e for e in entries if match_url(e.loc, inc, exc)]
            if since is not None:
                entries = [e for e in entries if e.lastmod is None or e.lastmod > since]
            limit = int(config.get("max_pages") or 2000)
            if len(entries) > limit:
                ctx.log(f"{len(entries)} pages match; fetching the first {limit} (max_pages)")
                entries = entries[:limit]
            ctx.log(f"{crawler.stats['sitemaps']} sitemap files, {len(entries)} pages to fetch")
            yield from crawler.crawl(entries, known)
            ctx.log(f"pages: {crawler.stats}")
        finally:
            crawler.close()

    def fetch_all(self, config: dict, ctx: SyncContext) -> Iterator[RawRecord]:
        return self._run(config, ctx, None)

    def fetch_changed(self, config: dict, since: datetime, ctx: SyncContext) -> Iterator[RawRecord]:
        if since is not None and since.tzinfo is None:
            since = since.replace(tzinfo=timezone.utc)
        return self._run(config, ctx, since)

    def fetch_one(self, config: dict, external_id: str, ctx: SyncContext) -> Optional[RawRecord]:
        """Re-read one page (no sitemap): 404/410 → None (the host purges it)."""
        crawler = Crawler(config, ctx)
        try:
            entry = SitemapEntry(loc=str(external_id))
            payload = crawler.fetch_page(entry)
            if payload is not None:
                payload = crawler.extract(payload, frozenset())
            if payload is None:
                return None
            if payload.get("error"):
                raise SourceUnavailable(f"{external_id}: {payload['error']}")
            return RawRecord(external_id=entry.loc, payload=payload, kind="page", url=entry.loc)
        finally:
            crawler.close()

    def normalize(self, record: RawRecord, config: dict, ctx: SyncContext) -> DocumentDraft:
        p = record.payload
        if p.get("error"):
            raise PageFailed(f"{p['loc']}: {p['error']} (the previous version keeps serving)")
        loc = p["loc"]
        text = (p.get("text") or "").strip()
        title = _clean_title(p.get("title"), text) or _title_from_text(text) or loc
        role = config.get("role") or "article"
        for rule in config.get("role_rules") or []:
            if match_url(loc, [rule["pattern"]], ()):
                role = rule["role"]
                break
        image = next(iter(p.get("images") or []), None) or p.get("og_image")
        lastmod = parse_lastmod(p.get("lastmod")) if p.get("lastmod") else record.source_modified_at
        meta = {"sitemap_loc": loc}
        if p.get("url") and p["url"] != loc:
            meta["fetched_url"] = p["url"]
        return DocumentDraft(
            title=title[:500], normalized_content=text, type=config.get("doc_type") or "web_page",
            document_role=role, external_id=loc, raw_content=None,
            source_url=p.get("canonical") or p.get("url") or loc, source_modified_at=lastmod,
            primary_image_url=image if isinstance(image, str) and image.startswith(("http://", "https://"))
            else None,
            metadata=meta, published=bool(text))


def _clean_title(title: Optional[str], text: str = "") -> Optional[str]:
    """The page title without the " – Site name" most themes append, when the page itself
    starts with the shorter title (its <h1>)."""
    if not title:
        return None
    t = " ".join(unescape(title).split())
    for sep in (" – ", " — ", " | ", " - ", " · ", " » ", " :: "):
        if sep in t:
            head = t.rsplit(sep, 1)[0].strip()
            if len(head) >= 3 and head.lower() in text[:600].lower():
                return head
    return t or None


def _title_from_text(text: str) -> Optional[str]:
    for line in text.splitlines():
        line = line.lstrip("#").strip()
        if line:
            return line[:200]
    return None


_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_\-:.]+)""", re.I)


def _decode(r: requests.Response) -> str:
    """The page as text: the charset of the Content-Type header, else of a <meta> tag, else
    UTF-8 (requests would assume ISO-8859-1 for text/html without a charset)."""
    ctype = r.headers.get("Content-Type") or ""
    charset = None
    if "charset=" in ctype.lower():
        charset = ctype.lower().split("charset=", 1)[1].split(";")[0].strip(" \"'")
    if not charset:
        m = _META_CHARSET.search(r.content[:4096])
        charset = m.group(1).decode("ascii", "ignore") if m else "utf-8"
    try:
        return r.content.decode(charset, errors="replace")
    except LookupError:
        return r.content.decode("utf-8", errors="replace")


def _og_image(html: str, url: str) -> Optional[str]:
    head = html[:200_000]
    for m in _OG_IMAGE.finditer(head):
        c = _CONTENT_ATTR.search(m.group(0))
        if c:
            from urllib.parse import urljoin

            v = urljoin(url, unescape(c.group(1).strip()))
            if v.startswith(("http://", "https://")):
                return v
    return None


def _short(exc: Exception) -> str:
    s = str(exc)
    if "Connection refused" in s:
        return "connection refused"
    if "Name or service not known" in s or "cannot resolve" in s:
        return "the host name does not resolve"
    return s[:200]
