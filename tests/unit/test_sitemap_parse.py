"""Sitemap parsing and URL filtering (plugins/sitemap/kbframework_sitemap/sitemap.py)."""
from __future__ import annotations

import gzip
import json
import sys
from datetime import datetime, timezone
from pathlib import Path
from urllib.parse import unquote
from xml.sax.saxutils import unescape as xml_unescape

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "plugins" / "sitemap"))

from kbframework_sitemap.sitemap import (  # noqa: E402
    SitemapDoc,
    SitemapError,
    compile_patterns,
    match_url,
    parse_lastmod,
    parse_sitemap,
)

DATA = ROOT.parent / "shared" / "data" / "sitemaps"
VECTORS = DATA / "yoast_loc_encoding_test_vectors.json"
NS = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" xmlns:image="http://www.google.com/schemas/sitemap-image/1.1"'

needs_data = pytest.mark.skipif(not DATA.is_dir(), reason="shared sitemap fixtures not present")


def urlset(*locs: str, image: str | None = None) -> bytes:
    items = "".join(
        f"<url><loc>{loc}</loc>"
        + (f"<image:image><image:loc>{image}</image:loc></image:image>" if image else "")
        + "</url>"
        for loc in locs
    )
    return f'<?xml version="1.0" encoding="UTF-8"?><urlset {NS}>{items}</urlset>'.encode()


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=timezone.utc)


# ------------------------------------------------------------------ real fixtures


@needs_data
@pytest.mark.parametrize("plugin", ["yoast", "rankmath"])
def test_index_of_each_plugin(plugin):
    doc = parse_sitemap((DATA / plugin / "sitemap_index.xml").read_bytes())
    assert isinstance(doc, SitemapDoc)
    assert doc.kind == "index"
    locs = [e.loc for e in doc.entries]
    assert "https://example.com/post-sitemap.xml" in locs
    assert "https://example.com/tribe_events-sitemap.xml" in locs
    assert all(e.images == [] for e in doc.entries)
    first = doc.entries[0]
    assert first.lastmod == utc(2024, 5, 6, 9, 0, 0)
    assert first.lastmod.tzinfo is not None and first.lastmod.utcoffset().total_seconds() == 0
    # every sitemap the index names exists as a fixture and parses as a url set
    for entry in doc.entries:
        name = entry.loc.rsplit("/", 1)[1]
        sub = parse_sitemap((DATA / plugin / name).read_bytes())
        assert sub.kind == "urlset" and sub.entries


@needs_data
@pytest.mark.parametrize("plugin", ["yoast", "rankmath"])
def test_product_sitemap_images_and_lastmod(plugin):
    doc = parse_sitemap((DATA / plugin / "product-sitemap.xml").read_bytes())
    assert doc.kind == "urlset"
    by_loc = {e.loc: e for e in doc.entries}
    assert len(by_loc) == 11
    vneck = by_loc["https://example.com/product/v-neck-t-shirt/"]
    assert vneck.images == [
        "https://example.com/wp-content/uploads/2017/12/vneck-tee-2.jpg",
        "https://example.com/wp-content/uploads/2017/12/vnech-tee-green-1.jpg",
        "https://example.com/wp-content/uploads/2017/12/vnech-tee-blue-1.jpg",
    ]
    assert vneck.lastmod == utc(2024, 5, 2, 10, 15, 0)
    assert by_loc["https://example.com/shop/"].images == []
    # an image loc is never mistaken for the page's loc
    assert not any("wp-content" in e.loc for e in doc.entries)


@needs_data
def test_yoast_and_rankmath_agree():
    for name in ("post-sitemap.xml", "page-sitemap.xml", "product-sitemap.xml", "tribe_events-sitemap.xml"):
        y = parse_sitemap((DATA / "yoast" / name).read_bytes())
        r = parse_sitemap((DATA / "rankmath" / name).read_bytes())
        assert {e.loc for e in y.entries} <= {e.loc for e in r.entries}, name


@needs_data
def test_gzip_detected_by_magic_bytes_not_name():
    raw = (DATA / "yoast" / "tribe_events-sitemap.xml").read_bytes()
    plain = parse_sitemap(raw)
    zipped = parse_sitemap(gzip.compress(raw))
    assert zipped == plain
    assert [e.loc for e in zipped.entries] == [
        "https://example.com/events/",
        "https://example.com/event/friday-night-tasting/2024-05-17/",
        "https://example.com/event/weekend-repair-cafe/",
    ]
    assert zipped.entries[2].images == ["https://example.com/wp-content/uploads/2024/05/repair-cafe.jpg"]


# ------------------------------------------------------------ Yoast's loc escaping


def _vectors():
    if not VECTORS.is_file():
        return []
    v = json.loads(VECTORS.read_text())
    cases = [(c["name"], c["loc"], c["expected"]) for c in v["cases"]]
    cases += [(f"image: {c['src']}", c["src"], c["expected"]) for c in v["image_loc_cases_from_test_get_sitemap"]]
    return cases


VECTOR_CASES = _vectors()


def _xml_text(s: str) -> str:
    """What an XML parser makes of character data (XML's five entities + &#NNN;)."""
    import re

    s = re.sub(r"&#(\d+);", lambda m: chr(int(m.group(1))), s)
    return xml_unescape(s, {"&apos;": "'", "&quot;": '"'})


@needs_data
def test_there_are_15_vectors():
    assert len(VECTOR_CASES) == 15


@needs_data
@pytest.mark.parametrize("name,loc,expected", VECTOR_CASES, ids=[c[0] for c in VECTOR_CASES])
def test_yoast_rendered_loc_parses_to_the_url(name, loc, expected):
    """What Yoast writes inside <loc> parses back to the URL it encodes: XML escaping is
    undone exactly once, percent-encoding is left alone."""
    want = _xml_text(expected)
    assert "&amp;" not in want and "&apos;" not in want
    if name.startswith("image: "):
        doc = parse_sitemap(urlset("https://example.com/page/", image=expected))
        assert doc.entries[0].images == [want]
    else:
        doc = parse_sitemap(urlset(expected))
        assert doc.entries[0].loc == want


@needs_data
@pytest.mark.parametrize("name,loc,expected", VECTOR_CASES, ids=[c[0] for c in VECTOR_CASES])
def test_unescaped_input_from_a_sloppy_generator(name, loc, expected):
    """The *unrendered* values (bare &, no scheme, spaces) as a careless generator would
    write them: the XML is repaired and the URL comes out equivalent to Yoast's."""
    got = parse_sitemap(urlset(loc)).entries[0].loc
    want = _xml_text(expected)
    assert " " not in got and '"' not in got and got.startswith("http://example.com")
    assert unquote(got) == unquote(want)
    # only characters that are invalid in a URL get encoded; valid ones stay as written
    if "my=page" in loc:
        assert got.startswith("http://example.com/my%20category/my=page*without%22enco@ding/")
    else:
        assert got == want


# ------------------------------------------------------------------ robustness


def test_stylesheet_pi_trailing_comment_and_leading_blank_lines():
    data = (
        b"\n\n  "  # blank lines before the declaration (a classic theme bug)
        + b'<?xml version="1.0" encoding="UTF-8"?><?xml-stylesheet type="text/xsl" href="//x/main-sitemap.xsl"?>\n'
        + f"<urlset {NS}><url><loc>https://x.test/a/</loc><lastmod>2024-01-02</lastmod></url></urlset>\n".encode()
        + b"<!-- XML Sitemap generated by Yoast SEO -->\n<!-- another -->"
    )
    doc = parse_sitemap(data)
    assert doc.kind == "urlset"
    assert doc.entries[0].loc == "https://x.test/a/"
    assert doc.entries[0].lastmod == utc(2024, 1, 2)


def test_bom_is_accepted():
    assert parse_sitemap(b"\xef\xbb\xbf" + urlset("https://x.test/")).entries[0].loc == "https://x.test/"


def test_no_namespace_and_odd_prefixes():
    data = b"<urlset><url><loc> https://x.test/a/ \n</loc></url><url><loc/></url><url><lastmod>2024</lastmod></url></urlset>"
    doc = parse_sitemap(data)
    assert [e.loc for e in doc.entries] == ["https://x.test/a/"]
    data = b'<sm:sitemapindex xmlns:sm="http://www.sitemaps.org/schemas/sitemap/0.9"><sm:sitemap><sm:loc>https://x.test/s1.xml</sm:loc></sm:sitemap></sm:sitemapindex>'
    doc = parse_sitemap(data)
    assert doc.kind == "index" and doc.entries[0].loc == "https://x.test/s1.xml"


def test_relative_loc_resolved_against_base_url():
    doc = parse_sitemap(urlset("/about/", "//cdn.x.test/a.pdf"), base_url="https://x.test/sitemap.xml")
    assert [e.loc for e in doc.entries] == ["https://x.test/about/", "https://cdn.x.test/a.pdf"]
    # without a base, a path-only loc cannot be made absolute and is skipped
    assert parse_sitemap(urlset("/about/")).entries == []


def test_non_http_loc_is_skipped():
    assert parse_sitemap(urlset("javascript:alert(1)", "ftp://x.test/f", "https://x.test/ok")).entries[0].loc == "https://x.test/ok"
    assert len(parse_sitemap(urlset("javascript:alert(1)", "ftp://x.test/f", "https://x.test/ok")).entries) == 1


def test_non_ascii_path_is_percent_encoded_and_host_kept():
    loc = parse_sitemap(urlset("https://bücher.example/straße/café/")).entries[0].loc
    assert loc == "https://bücher.example/stra%C3%9Fe/caf%C3%A9/"


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"   ",
        b"not xml at all",
        b"<html><body><h1>Not found</h1></body></html>",
        b"<urlset><url><loc>https://x.test/</loc></url>",  # truncated
        b'{"urls": []}',
        b"\x1f\x8b\x08\x00garbage",  # gzip magic, broken stream
        gzip.compress(b"<rss><channel/></rss>"),
    ],
)
def test_garbage_raises_sitemap_error(data):
    with pytest.raises(SitemapError):
        parse_sitemap(data)


def test_entity_expansion_is_refused():
    bomb = b"""<?xml version="1.0"?>
<!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
<!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">]>
<urlset><url><loc>https://x.test/&lol3;</loc></url></urlset>"""
    with pytest.raises(SitemapError, match="entit"):
        parse_sitemap(bomb)


def test_external_entity_is_refused(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET")
    xxe = f"""<?xml version="1.0"?>
<!DOCTYPE urlset [<!ENTITY xxe SYSTEM "file://{secret}">]>
<urlset><url><loc>https://x.test/&xxe;</loc></url></urlset>""".encode()
    with pytest.raises(SitemapError):
        parse_sitemap(xxe)


def test_gzip_bomb_is_refused():
    big = gzip.compress(b"<urlset>" + b" " * 5_000_000 + b"</urlset>")
    with pytest.raises(SitemapError, match="larger"):
        parse_sitemap(big, max_bytes=1_000_000)


def test_concatenated_gzip_members():
    data = urlset("https://x.test/a")
    doc = parse_sitemap(gzip.compress(data[:40]) + gzip.compress(data[40:]))
    assert doc.entries[0].loc == "https://x.test/a"


# ------------------------------------------------------------------------ lastmod


@pytest.mark.parametrize(
    "text,expected",
    [
        ("2024-05-06T09:00:00+00:00", utc(2024, 5, 6, 9, 0, 0)),
        ("2024-05-06T11:00:00+02:00", utc(2024, 5, 6, 9, 0, 0)),
        ("2024-05-06T09:00:00Z", utc(2024, 5, 6, 9, 0, 0)),
        ("2024-05-06T09:00Z", utc(2024, 5, 6, 9, 0, 0)),
        ("2024-05-06T09:00:00.1234567-05:00", utc(2024, 5, 6, 14, 0, 0, 123456)),
        ("2024-05-06", utc(2024, 5, 6)),
        ("2024-05", utc(2024, 5, 1)),
        ("2024", utc(2024, 1, 1)),
        ("2024-05-06 09:00:00", utc(2024, 5, 6, 9, 0, 0)),
        (" 2024-05-06T09:00:00+00:00 \n", utc(2024, 5, 6, 9, 0, 0)),
        ("yesterday", None),
        ("2024-13-45", None),
        ("", None),
        (None, None),
    ],
)
def test_parse_lastmod(text, expected):
    got = parse_lastmod(text)
    assert got == expected
    if got is not None:
        assert got.tzinfo is timezone.utc


def test_bad_lastmod_does_not_lose_the_entry():
    data = f"<urlset {NS}><url><loc>https://x.test/</loc><lastmod>soon</lastmod></url></urlset>".encode()
    entry = parse_sitemap(data).entries[0]
    assert entry.loc == "https://x.test/" and entry.lastmod is None


# ----------------------------------------------------------------------- matching

EVENT = "https://example.com/event/friday-night-tasting/2024-05-17/"
PRODUCT = "https://example.com/product/hoodie/"
EVENTS_ARCHIVE = "https://example.com/events/"


def test_empty_include_means_all():
    assert match_url(PRODUCT, [], [])
    assert match_url(PRODUCT, ["", "  "], [])


def test_glob_matches_whole_url():
    assert match_url(EVENT, ["*/event/*"], [])
    assert not match_url(PRODUCT, ["*/event/*"], [])
    assert not match_url(EVENTS_ARCHIVE, ["*/event/*"], [])  # /events/ is not /event/
    assert match_url("https://example.com/shop/", ["https://example.com/shop/"], [])
    assert not match_url("https://example.com/shop/page/2/", ["https://example.com/shop/"], [])
    assert match_url("https://example.com/shop/page/2/", ["https://example.com/shop/*"], [])
    # globs are case-sensitive and anchored: no substring matching
    assert not match_url(EVENT, ["/event/"], [])
    assert not match_url(EVENT, ["*/EVENT/*"], [])


def test_regex_prefix():
    pat = r"re:^https://example\.com/event/[^/]+/\d{4}-\d{2}-\d{2}/$"
    assert match_url(EVENT, [pat], [])
    assert not match_url("https://example.com/event/weekend-repair-cafe/", [pat], [])
    # re: patterns are searched, not anchored, unless anchored explicitly
    assert match_url(PRODUCT, ["re:/product/"], [])
    assert not match_url(PRODUCT, [r"re:^/product/"], [])


def test_exclude_wins():
    assert not match_url(EVENT, ["*/event/*"], ["*2024-05-17*"])
    assert not match_url(PRODUCT, [], ["re:/product/"])
    assert match_url(EVENT, ["*/event/*"], ["re:/product/"])


def test_bad_regex_is_a_clear_error():
    with pytest.raises(SitemapError, match="regular expression"):
        compile_patterns(["re:(unclosed"])
    with pytest.raises(SitemapError):
        match_url(PRODUCT, ["re:[z-a]"], [])
    assert len(compile_patterns(["*/event/*", "re:^https://", ""])) == 2
