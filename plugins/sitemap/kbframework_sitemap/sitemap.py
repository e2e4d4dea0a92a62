"""Parse XML sitemaps (sitemaps.org 0.9, as Yoast SEO, Rank Math, WordPress core and
others render them) and filter their URLs.

``parse_sitemap(data)`` takes the raw bytes of a sitemap index or a url set, plain or
gzipped (recognised by the gzip magic bytes, not by the file name), with or without the
stylesheet processing instruction and the trailing comment SEO plugins add. It uses
``defusedxml``: no DTD entity expansion, no external entities, no network.

``loc`` values: the XML parser undoes XML escaping exactly once (``&amp;`` -> ``&``,
``&#038;`` -> ``&``, ``&apos;`` -> ``'``); percent-encoding is kept as written (``%20``
stays ``%20``, nothing is decoded twice). Then, for sloppy generators, a loc is made
absolute (``//host/x`` and a bare ``host.tld/x`` get ``http:`` as Yoast's renderer does,
or are resolved against ``base_url`` when one is given) and characters that may not
appear in a URL (spaces, ``"``, ``<``, ``>``, non-ASCII in path/query) are
percent-encoded. A sitemap whose ``&`` was not escaped at all (invalid XML, but common
in hand-made sitemaps) is repaired and parsed.

``match_url(url, include, exclude)``: see its docstring for the pattern rules.
"""
from __future__ import annotations

import fnmatch
import re
import zlib
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import lru_cache
from typing import Iterable, Literal, Optional
from urllib.parse import quote, urljoin, urlsplit, urlunsplit
from xml.etree.ElementTree import ParseError

from defusedxml import DefusedXmlException
from defusedxml.ElementTree import fromstring as _safe_fromstring

from kbframework import KBError

__all__ = ["SitemapEntry", "SitemapDoc", "SitemapError", "parse_sitemap", "match_url", "compile_patterns"]

MAX_UNCOMPRESSED_BYTES = 100 * 1024 * 1024  # sitemaps.org caps a sitemap at 50 MB uncompressed
GZIP_MAGIC = b"\x1f\x8b"


class SitemapError(KBError):
    """The data is not a sitemap (not XML, not gzip, not <urlset>/<sitemapindex>, too big),
    or a URL pattern does not compile. The connector and the config form word it for
    their callers; one that escapes them is still a clear 400."""

    status = 400
    code = "invalid_sitemap"


@dataclass
class SitemapEntry:
    loc: str
    lastmod: Optional[datetime] = None  # timezone-aware, UTC
    images: list[str] = field(default_factory=list)


@dataclass
class SitemapDoc:
    kind: Literal["index", "urlset"]
    entries: list[SitemapEntry] = field(default_factory=list)


# ------------------------------------------------------------------------- parsing


def _gunzip(data: bytes, limit: int) -> bytes:
    """Decompress (all members of) a gzip stream, refusing more than ``limit`` bytes."""
    out = bytearray()
    rest = data
    try:
        while rest:
            d = zlib.decompressobj(16 + zlib.MAX_WBITS)
            out += d.decompress(rest, limit + 1 - len(out))
            if len(out) > limit or d.unconsumed_tail:
                raise SitemapError(f"gzipped sitemap is larger than {limit} bytes uncompressed")
            if not d.eof:
                raise SitemapError("truncated gzip data")
            rest = d.unused_data.lstrip(b"\x00")
            if rest[:2] != GZIP_MAGIC:
                break  # trailing garbage after the last member is ignored, as gzip(1) does
    except zlib.error as exc:
        raise SitemapError(f"not a valid gzip file: {exc}") from None
    return bytes(out)


# "&" that does not start an XML entity / character reference
_BARE_AMP = re.compile(rb"&(?!#[0-9]+;|#x[0-9a-fA-F]+;|(?:amp|lt|gt|quot|apos);)")


def _parse_xml(data: bytes):
    try:
        return _safe_fromstring(data, forbid_dtd=False, forbid_entities=True, forbid_external=True)
    except DefusedXmlException as exc:
        raise SitemapError(f"refused: the sitemap declares entities or a DTD ({exc.__class__.__name__})") from None
    except ParseError as first:
        if b"&" in data:
            repaired = _BARE_AMP.sub(b"&amp;", data)
            if repaired != data:
                try:
                    return _safe_fromstring(repaired, forbid_dtd=False, forbid_entities=True, forbid_external=True)
                except (ParseError, DefusedXmlException):
                    pass
        raise SitemapError(f"not well-formed XML: {first}") from None


def _local(tag) -> str:
    if not isinstance(tag, str):
        return ""
    return tag.rsplit("}", 1)[-1].rsplit(":", 1)[-1].lower()


def parse_sitemap(data: bytes, *, base_url: Optional[str] = None,
                  max_bytes: int = MAX_UNCOMPRESSED_BYTES) -> SitemapDoc:
    """Parse a sitemap index or url set (see module doc).

    ``base_url`` (the sitemap's own URL) resolves relative locs; without it they get
    ``http:`` like Yoast renders them. Entries without a ``<loc>`` are skipped; an
    unparseable ``<lastmod>`` becomes ``None``. Raises :class:`SitemapError`.
    """
    if isinstance(data, str):
        data = data.encode("utf-8")
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise SitemapError(f"expected bytes, got {type(data).__name__}")
    data = bytes(data)
    if data[:2] == GZIP_MAGIC:
        data = _gunzip(data, max_bytes)
    elif len(data) > max_bytes:
        raise SitemapError(f"sitemap is larger than {max_bytes} bytes")
    # A BOM or blank lines before "<?xml" (a classic WordPress theme/plugin bug) make
    # the XML declaration illegal: drop them.
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    data = data.lstrip(b" \t\r\n")
    if not data:
        raise SitemapError("empty sitemap")
    if not data.startswith(b"<"):
        raise SitemapError("not a sitemap: the data is not XML")

    root = _parse_xml(data)
    kind_tag = _local(root.tag)
    if kind_tag == "sitemapindex":
        kind, item_tag = "index", "sitemap"
    elif kind_tag == "urlset":
        kind, item_tag = "urlset", "url"
    else:
        raise SitemapError(f"not a sitemap: the root element is <{kind_tag or root.tag}>, "
                           "expected <urlset> or <sitemapindex>")

    entries: list[SitemapEntry] = []
    for item in root:
        if _local(item.tag) != item_tag:
            continue
        loc = None
        lastmod = None
        images: list[str] = []
        for child in item:
            name = _local(child.tag)
            if name == "loc" and loc is None:
                loc = clean_loc(child.text, base_url)
            elif name == "lastmod":
                lastmod = parse_lastmod(child.text)
            elif name == "image":
                for sub in child:
                    if _local(sub.tag) == "loc":
                        img = clean_loc(sub.text, base_url)
                        if img and img not in images:
                            images.append(img)
        if loc:
            entries.append(SitemapEntry(loc=loc, lastmod=lastmod, images=images))
    return SitemapDoc(kind=kind, entries=entries)


# ----------------------------------------------------------------------- loc values

# Characters kept as they are when re-quoting: RFC 3986 reserved + unreserved + "%".
_SAFE_PATH = "/:@!$&'()*+,;=-._~%"
_SAFE_QUERY = _SAFE_PATH + "?/[]"
_HOSTLIKE = re.compile(r"^[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}(?::\d+)?(?:[/?#]|$)")
_BAD_PERCENT = re.compile(r"%(?![0-9A-Fa-f]{2})")


def clean_loc(text: Optional[str], base_url: Optional[str] = None) -> Optional[str]:
    """The URL a ``<loc>`` stands for (XML escaping already undone by the parser)."""
    if not text:
        return None
    loc = text.strip()
    # some generators wrap long URLs; whitespace inside a URL is never meaningful
    loc = re.sub(r"\s*[\r\n]+\s*", "", loc)
    if not loc:
        return None
    try:
        return _clean_loc(loc, base_url)
    except ValueError:  # e.g. a broken IPv6 literal
        return None


def _clean_loc(loc: str, base_url: Optional[str]) -> Optional[str]:
    parts = urlsplit(loc)
    if not parts.scheme or not parts.netloc:
        if base_url:
            loc = urljoin(base_url, loc)
        elif loc.startswith("//"):
            loc = "http:" + loc
        elif not parts.scheme and _HOSTLIKE.match(loc):
            loc = "http://" + loc
        else:
            return None  # a path without a base URL, or "mailto:", "javascript:"...
        parts = urlsplit(loc)
    if parts.scheme.lower() not in ("http", "https"):
        return None
    path = _BAD_PERCENT.sub("%25", quote(parts.path, safe=_SAFE_PATH))
    query = _BAD_PERCENT.sub("%25", quote(parts.query, safe=_SAFE_QUERY))
    fragment = _BAD_PERCENT.sub("%25", quote(parts.fragment, safe=_SAFE_QUERY))
    return urlunsplit((parts.scheme.lower(), parts.netloc, path, query, fragment))


# --------------------------------------------------------------------------- lastmod

_W3C_PARTIAL = re.compile(r"^(\d{4})(?:-(\d{2}))?$")


def parse_lastmod(text: Optional[str]) -> Optional[datetime]:
    """W3C Datetime (``2024-05-06``, ``2024-05-06T09:00:00+00:00``, ``...Z``, fractions,
    ``YYYY``/``YYYY-MM``) as an aware UTC datetime; a value without an offset is taken
    as UTC; ``None`` when unparseable."""
    if not text:
        return None
    value = text.strip()
    if not value:
        return None
    m = _W3C_PARTIAL.match(value)
    try:
        if m:
            dt = datetime(int(m.group(1)), int(m.group(2) or 1), 1)
        else:
            v = value.replace(" ", "T", 1) if re.match(r"^\d{4}-\d{2}-\d{2} \d", value) else value
            if v.endswith(("Z", "z")):
                v = v[:-1] + "+00:00"
            # fromisoformat (3.11) wants 0, 3 or 6 fraction digits; normalise to 6
            v = re.sub(r"(\.\d+)", lambda f: (f.group(1) + "000000")[:7], v, count=1)
            dt = datetime.fromisoformat(v)
    except ValueError:
        return None
    if dt.tzinfo is None:
        return dt.replace(tzinfo=timezone.utc)
    return dt.astimezone(timezone.utc)


# -------------------------------------------------------------------------- matching


@lru_cache(maxsize=1024)
def _compile(pattern: str) -> "re.Pattern[str]":
    if pattern.startswith("re:"):
        try:
            return re.compile(pattern[3:])
        except re.error as exc:
            raise SitemapError(f"invalid regular expression {pattern!r}: {exc}") from None
    return re.compile(fnmatch.translate(pattern))


def compile_patterns(patterns: Iterable[str]) -> list["re.Pattern[str]"]:
    """Validate patterns (for a source form); raises :class:`SitemapError` on a bad regex."""
    return [_compile(p.strip()) for p in patterns if p and p.strip()]


def _matches(url: str, pattern: str) -> bool:
    compiled = _compile(pattern)
    if pattern.startswith("re:"):
        return compiled.search(url) is not None
    return compiled.match(url) is not None


def match_url(url: str, include: Iterable[str] = (), exclude: Iterable[str] = ()) -> bool:
    """Whether ``url`` passes the include/exclude filters.

    Pattern rules:

    * A plain pattern is a shell-style glob matched against the **whole** URL,
      case-sensitively: ``*`` any run of characters (``/`` included), ``?`` one
      character, ``[abc]`` a set. ``*/event/*`` matches
      ``https://example.com/event/tasting/``; ``https://example.com/shop/`` matches only
      that exact URL.
    * ``re:`` followed by a Python regular expression is searched anywhere in the URL
      (``re.search``): anchor it yourself, e.g. ``re:^https://x/events/\\d+``.
    * Empty patterns are ignored. ``include`` empty means every URL is included.
      ``exclude`` wins over ``include``.
    """
    inc = [p.strip() for p in include or () if p and p.strip()]
    exc = [p.strip() for p in exclude or () if p and p.strip()]
    if any(_matches(url, p) for p in exc):
        return False
    if not inc:
        return True
    return any(_matches(url, p) for p in inc)
