"""HTML to chunkable text.

``html_to_text`` turns rendered WordPress / WooCommerce HTML (``content.rendered``,
product descriptions, excerpts) into plain text that keeps the structure a chunker can
use: markdown headings, ``- item`` / ``1. item`` list lines, blank lines between
paragraphs, ``cell | cell`` table rows, ``<br>`` as a line break. It drops scripts,
styles, forms, iframes, navigation/header/footer/aside, comments and WordPress
shortcodes, decodes entities and collapses whitespace. It never returns tags.

``main_content`` extracts the main text of a whole web page (sitemap crawling) with
trafilatura, falling back to ``html_to_text`` on ``<main>``/``<article>``/``<body>``.
"""
from __future__ import annotations

import copy
import html as _html
import logging
import re
from typing import Optional
from urllib.parse import urljoin, urlsplit

import lxml.etree
import lxml.html

log = logging.getLogger(__name__)

__all__ = ["html_to_text", "main_content", "strip_shortcodes"]

# ----------------------------------------------------------------------- element sets

# Removed with everything inside them. <del>/<s> are struck-out text: outdated facts, or
# WooCommerce's old price in "<del>£20</del> <ins>£18</ins>".
_DROP = frozenset(
    """script style noscript iframe frame frameset form nav header footer aside template
    svg math canvas object embed applet audio video picture source track map button select
    option optgroup textarea input datalist dialog head title meta link base del s strike""".split()
)
# Start a new paragraph (blank line before and after).
_PARAGRAPH = frozenset(
    """p div section article main blockquote address figure figcaption details summary
    center hgroup fieldset legend""".split()
)
_HEADINGS = {"h1": 1, "h2": 2, "h3": 3, "h4": 4, "h5": 5, "h6": 6}
_LINE = frozenset("dt dd caption".split())  # own line, no blank line

_WS = re.compile(r"[ \t\n\r\f\v\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+")
_INVISIBLE = re.compile(r"[\u00ad\u200b\u200c\u200d\u2060\ufeff\ufffd]")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_XML_DECL = re.compile(r"^\s*<\?xml[^>]*\?>", re.I)
_TAGLIKE = re.compile(r"</?[A-Za-z][A-Za-z0-9:-]*(?:\s[^<>]*)?/?>|<!--.*?-->", re.S)
_MARKER_ONLY = re.compile(r"^\s*(?:[-*]|\d+\.|#{1,6}|>|\|)?\s*$")

# ------------------------------------------------------------------------ shortcodes

# Shortcodes WordPress core and common plugins/page builders register. A bare ``[name]``
# is removed only for these (or when a closing ``[/name]`` exists), so that ordinary
# bracketed prose ("[sic]", "[1]", "[Read more]") survives.
_KNOWN_SHORTCODES = frozenset(
    """gallery caption wp_caption embed audio video playlist products product product_page
    product_category product_categories add_to_cart add_to_cart_url shop_messages
    recent_products featured_products sale_products best_selling_products
    top_rated_products related_products product_attribute woocommerce_cart
    woocommerce_checkout woocommerce_my_account woocommerce_order_tracking
    contact-form-7 contact-form wpforms gravityform gravityforms ninja_form ninja_forms
    formidable mc4wp_form rev_slider layerslider smartslider3 metaslider soliloquy envira-gallery
    foogallery elementor-template fl_builder_insert_layout et_pb_section tribe_events
    tribe_event_inline ecs-list-events the-events-calendar wpml_language_selector_widget
    su_button su_spacer su_divider su_row su_column su_box su_note su_spoiler su_tabs su_tab
    shortcode raw""".split()
)
# Page-builder families: every tag with one of these prefixes is a shortcode.
_SHORTCODE_PREFIXES = (
    "vc_", "et_pb_", "fusion_", "av_", "cs_", "ux_", "su_", "tm_", "mk_", "dt_", "cmsms_",
    "themify_", "tatsu_", "bt_", "ult_", "wpb_", "rev_", "tribe_", "woocommerce_", "wc_",
)
_SC_NAME = r"[A-Za-z][\w-]*"
# [name attrs] / [name attrs /] / [/name]; attrs may not contain brackets or tags.
_SHORTCODE = re.compile(
    r"\[(\[?)(/?)(" + _SC_NAME + r")((?:\s+[^\[\]<>]*?)?)\s*(/?)\](\]?)"
)
_CLOSING = re.compile(r"\[/(" + _SC_NAME + r")\]")
_ATTR_LIKE = re.compile(r"""[\w-]+\s*=\s*(?:"|'|&quot;|&#\d+;|[\u201c\u201d\u2033\u2032\u2018\u2019]|[^\s\]])""")


def _is_shortcode_name(name: str) -> bool:
    low = name.lower()
    return low in _KNOWN_SHORTCODES or low.startswith(_SHORTCODE_PREFIXES)


def strip_shortcodes(text: str) -> str:
    """Remove WordPress shortcode *tags* (``[gallery ids="1,2"]``, ``[caption ...]``,
    ``[/caption]``, ``[vc_row]``...) from ``text`` and keep what they enclose.

    A tag is treated as a shortcode when its name is a known shortcode or page-builder
    prefix, when it carries ``key=value`` attributes, when it self-closes (``[x /]``), or
    when a matching ``[/name]`` appears in the text. ``[[name]]`` (WordPress' escape)
    becomes the literal ``[name]``.
    """
    if "[" not in text:
        return text
    closed = {m.group(1).lower() for m in _CLOSING.finditer(text)}

    def repl(m: re.Match) -> str:
        open_esc, slash, name, attrs, self_close, close_esc = m.groups()
        if open_esc and close_esc:  # [[gallery]] -> literal [gallery]
            return m.group(0)[1:-1]
        low = name.lower()
        is_sc = (
            _is_shortcode_name(name)
            or low in closed
            or bool(self_close)
            or bool(attrs and _ATTR_LIKE.search(attrs))
        )
        if not is_sc:
            return m.group(0)
        return open_esc + " " + close_esc
    return _SHORTCODE.sub(repl, text)


# -------------------------------------------------------------------------- renderer


class _Out:
    """Collects text and line breaks; consecutive breaks merge to the strongest one."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.pending = 0  # 0 none, 1 newline, 2 blank line
        self.at_marker = False  # only a list/heading marker on the current line so far
        self.started = False
        self.after_br = False  # the pending break came from a <br>

    def line_break(self) -> None:
        """<br>: a new line; two in a row make a paragraph break."""
        if self.at_marker:
            return
        if self.after_br and self.pending >= 1:
            self.pending = 2
        elif self.pending < 1:
            self.pending = 1
        self.after_br = True

    def brk(self, n: int) -> None:
        if self.at_marker:
            return  # "- " followed by <p>: keep the text on the marker's line
        if n > self.pending:
            self.pending = n
        self.after_br = False

    def _flush(self) -> None:
        if self.pending and self.started:
            self.parts.append("\n" * self.pending)
        self.pending = 0

    def text(self, s: str) -> None:
        if not s:
            return
        s = _WS.sub(" ", s)
        if s == " ":
            if self.pending or not self.started:
                return
            self.parts.append(" ")
            return
        self._flush()
        self.parts.append(s)
        self.started = True
        self.at_marker = False
        self.after_br = False

    def raw(self, s: str) -> None:
        """Preformatted text: keep its line breaks."""
        lines = s.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        for i, line in enumerate(lines):
            if i:
                self.brk(1)
            line = _WS.sub(" ", line).rstrip()
            if line.strip():
                self._flush()
                self.parts.append(line)
                self.started = True
                self.at_marker = False

    def marker(self, s: str) -> None:
        self._flush()
        self.parts.append(s)
        self.started = True
        self.at_marker = True

    def result(self) -> str:
        return "".join(self.parts)


class _Renderer:
    def __init__(self) -> None:
        self.out = _Out()
        self.single_line = 0  # >0 inside a heading or a table cell: breaks become spaces
        self.max_break = 2  # 1 inside list items
        self.pre = 0

    def brk(self, n: int) -> None:
        if self.single_line:
            self.out.text(" ")
            return
        self.out.brk(min(n, self.max_break))

    def text(self, s: Optional[str]) -> None:
        if not s:
            return
        if self.pre and not self.single_line:
            self.out.raw(s)
        else:
            self.out.text(s)

    def children(self, el, depth: int, list_depth: int) -> None:
        self.text(el.text)
        for child in el:
            self.node(child, depth + 1, list_depth)
            self.text(child.tail)

    def node(self, el, depth: int, list_depth: int) -> None:
        tag = el.tag
        if not isinstance(tag, str):  # comment, processing instruction, entity
            return
        tag = tag.lower()
        if ":" in tag:
            tag = tag.rsplit(":", 1)[1]
        if tag in _DROP or el.get("hidden") is not None:
            return
        if depth > 400:  # pathological nesting: plain text only
            self.text(el.text_content())
            return
        if tag == "br":
            if self.single_line:
                self.out.text(" ")
            else:
                self.out.line_break()
            return
        if tag == "hr":
            self.brk(2)
            return
        if tag in _HEADINGS:
            self.brk(2)
            if not self.single_line and not self.out.at_marker:  # no "- ## x"
                self.out.marker("#" * _HEADINGS[tag] + " ")
            self.single_line += 1
            self.children(el, depth, list_depth)
            self.single_line -= 1
            self.out.at_marker = False
            self.brk(2)
            return
        if tag in ("ul", "ol", "menu", "dl"):
            self.brk(1 if list_depth else 2)
            if tag == "dl":
                self.children(el, depth, list_depth)
            else:
                self._list(el, tag == "ol", depth, list_depth)
            self.brk(1 if list_depth else 2)
            return
        if tag == "li":  # stray <li> outside a list
            self._item(el, "- ", depth, list_depth)
            return
        if tag == "table":
            self._table(el, depth)
            return
        if tag == "pre":
            self.brk(2)
            self.pre += 1
            self.children(el, depth, list_depth)
            self.pre -= 1
            self.brk(2)
            return
        if tag in _PARAGRAPH:
            self.brk(2)
            self.children(el, depth, list_depth)
            self.brk(2)
            return
        if tag in _LINE or tag in ("tr",):
            self.brk(1)
            self.children(el, depth, list_depth)
            self.brk(1)
            return
        if tag in ("td", "th"):
            self.children(el, depth, list_depth)
            self.text(" ")
            return
        self.children(el, depth, list_depth)  # inline element

    def _list(self, el, ordered: bool, depth: int, list_depth: int) -> None:
        try:
            n = int(el.get("start", "1"))
        except ValueError:
            n = 1
        reverse = el.get("reversed") is not None
        for child in el:
            if isinstance(child.tag, str) and child.tag.lower() == "li":
                if ordered:
                    try:
                        n = int(child.get("value", n))
                    except ValueError:
                        pass
                    self._item(child, f"{n}. ", depth + 1, list_depth)
                    n = n - 1 if reverse else n + 1
                else:
                    self._item(child, "- ", depth + 1, list_depth)
            else:
                self.node(child, depth + 1, list_depth)
            self.text(child.tail)

    def _item(self, el, bullet: str, depth: int, list_depth: int) -> None:
        if self.single_line:
            self.out.text(" ")
            self.children(el, depth, list_depth + 1)
            self.out.text(" ")
            return
        self.out.brk(1)
        self.out.marker("  " * list_depth + bullet)
        saved = self.max_break
        self.max_break = 1
        self.children(el, depth, list_depth + 1)
        self.max_break = saved
        self.out.at_marker = False
        self.out.brk(1)

    def _table(self, table, depth: int) -> None:
        rows: list[str] = []
        caption = None
        for el in table.iter():
            if not isinstance(el.tag, str):
                continue
            tag = el.tag.lower()
            if tag == "caption" and caption is None:
                caption = _inline_text(el, depth)
            elif tag == "tr":
                # only rows of this table, not of a nested one
                parent = el.getparent()
                while parent is not None and (not isinstance(parent.tag, str) or parent.tag.lower() != "table"):
                    parent = parent.getparent()
                if parent is not table:
                    continue
                cells = [
                    _inline_text(c, depth)
                    for c in el
                    if isinstance(c.tag, str) and c.tag.lower() in ("td", "th")
                ]
                if any(cells):
                    rows.append(" | ".join(cells))
        if self.single_line:  # a table inside a table cell or heading
            self.out.text(" " + " ; ".join(rows) + " ")
            return
        self.brk(2)
        if caption:
            self.out.text(caption)
            self.out.brk(1)
        for row in rows:
            self.out.text(row)
            self.out.brk(1)
        self.brk(2)


def _inline_text(el, depth: int) -> str:
    r = _Renderer()
    r.single_line = 1
    r.children(el, depth, 0)
    return _WS.sub(" ", r.out.result()).strip()


# ------------------------------------------------------------------------------ API


def _clean_input(html: str) -> str:
    if isinstance(html, bytes):
        html = html.decode("utf-8", errors="replace")
    html = _CONTROL.sub("", html)
    html = _XML_DECL.sub("", html, count=1)
    return strip_shortcodes(html)


def _parse(html: str):
    """Parse HTML leniently; None when there is nothing to parse."""
    if not html or not html.strip():
        return None
    try:
        return lxml.html.document_fromstring(html)
    except (lxml.etree.ParserError, ValueError):
        try:  # e.g. an encoding declaration somewhere odd
            return lxml.html.document_fromstring(html.encode("utf-8"))
        except (lxml.etree.LxmlError, ValueError):  # nothing lxml can read: no text from it
            return None


def _untag_line(line: str) -> str:
    """A line that still looks like markup after entity decoding (double-escaped HTML,
    ``&lt;p&gt;``): render it once more, then drop whatever still looks like a tag."""
    doc = _parse(_CONTROL.sub("", line))
    if doc is not None:
        body = doc.find("body")
        r = _Renderer()
        r.single_line = 1
        r.children(body if body is not None else doc, 0, 0)
        line = r.out.result()
    return _TAGLIKE.sub(" ", line)


def _finish(text: str) -> str:
    text = _INVISIBLE.sub("", text)
    lines = []
    for line in text.split("\n"):
        if "<" in line and _TAGLIKE.search(line):
            line = _untag_line(line)
        line = line.rstrip()
        stripped = line.lstrip()
        # keep list indentation, drop other leading whitespace
        if stripped[:2] in ("- ",) or re.match(r"\d+\. ", stripped):
            line = line[: len(line) - len(stripped)] + _WS.sub(" ", stripped)
        else:
            line = _WS.sub(" ", stripped)
        if line and _MARKER_ONLY.match(line):
            continue  # an empty list item or heading
        lines.append(line)
    text = "\n".join(lines)
    text = re.sub(r"\n{3,}", "\n\n", text)
    return text.strip()


def _render(el) -> str:
    r = _Renderer()
    if isinstance(el.tag, str) and el.tag.lower() in ("html", "body"):
        r.children(el, 0, 0)
    else:
        r.node(el, 0, 0)
    return _finish(r.out.result())


_HAS_MARKUP = re.compile(r"<[A-Za-z!/?]")


def _plain_text(text: str) -> str:
    """Input without any tags (a plain description field): newlines are meaningful."""
    text = strip_shortcodes(_CONTROL.sub("", _html.unescape(text)))
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    paragraphs = re.split(r"\n[ \t\u00a0]*\n", text)
    return _finish("\n\n".join(p.strip("\n") for p in paragraphs))


def html_to_text(html: str) -> str:
    """Clean, structured plain text from an HTML fragment or page (see module doc).

    >>> html_to_text("<h2>Care</h2><ul><li>Wash at 30&nbsp;&deg;C</li><li>Don&#8217;t iron</li></ul>")
    '## Care\\n\\n- Wash at 30 °C\\n- Don’t iron'
    """
    if not html:
        return ""
    if isinstance(html, bytes):
        html = html.decode("utf-8", errors="replace")
    if not _HAS_MARKUP.search(html):
        return _plain_text(html)
    doc = _parse(_clean_input(html))
    if doc is None:
        return ""
    body = doc.find("body")
    if body is None:
        body = doc
    return _render(body)


# ------------------------------------------------------------------- main content

_BOILERPLATE_ROLES = {"navigation", "banner", "contentinfo", "complementary", "search", "dialog", "alertdialog"}
_BOILERPLATE_TAGS = {"nav", "header", "footer", "aside", "form", "dialog", "noscript", "iframe", "script", "style", "template"}
# id/class tokens of page chrome (WordPress themes, page builders, cookie-banner plugins)
_BOILERPLATE_IDCLASS = re.compile(
    r"(?:^|[\s_-])(?:cookies?|cookie-notice|cookie-law-info|consent|gdpr|cmplz|borlabs|cky-consent|"
    r"moove_gdpr|cn-notice|sidebar|widget-area|breadcrumbs?|skip-link|site-header|site-footer|"
    r"main-navigation|navbar|menu-toggle|social-share|share-buttons|sharedaddy|jp-relatedposts|"
    r"related-posts|comments-area|comment-respond)(?:$|[\s_-])",
    re.I,
)


def _prune_boilerplate(root) -> None:
    """Remove page chrome from a parsed page (in place)."""
    for el in list(root.iter()):
        if not isinstance(el.tag, str) or el.getparent() is None:
            continue
        tag = el.tag.lower()
        if tag in ("html", "body", "main", "article"):
            continue
        role = (el.get("role") or "").lower()
        idclass = f"{el.get('id') or ''} {el.get('class') or ''}"
        if (
            role in _BOILERPLATE_ROLES
            or (tag in _BOILERPLATE_TAGS and not (tag == "header" and _inside(el, "article")))
            or _BOILERPLATE_IDCLASS.search(idclass)
        ):
            el.drop_tree()


def _inside(el, tag: str) -> bool:
    return any(isinstance(a.tag, str) and a.tag.lower() == tag for a in el.iterancestors())


def _meta(doc, *selectors: tuple[str, str]) -> Optional[str]:
    for attr, value in selectors:
        for el in doc.iter("meta"):
            if (el.get(attr) or "").strip().lower() == value:
                content = _WS.sub(" ", el.get("content") or "").strip()
                if content:
                    return content
    return None


def _title(doc) -> Optional[str]:
    t = doc.find(".//title")
    if t is not None:
        text = _WS.sub(" ", t.text_content() or "").strip()
        if text:
            return text
    og = _meta(doc, ("property", "og:title"), ("name", "og:title"), ("name", "twitter:title"))
    if og:
        return og
    for h1 in doc.iter("h1"):
        text = _WS.sub(" ", h1.text_content() or "").strip()
        if text:
            return text
    return None


def _canonical(doc, url: Optional[str]) -> Optional[str]:
    for link in doc.iter("link"):
        rels = (link.get("rel") or "").lower().split()
        href = (link.get("href") or "").strip()
        if "canonical" in rels and href:
            full = urljoin(url, href) if url else href
            if urlsplit(full).scheme in ("http", "https"):
                return full
            return None
    return None


def _fallback_text(doc) -> str:
    """``html_to_text`` of <main> / [role=main] / <article> / <body> of a pruned page."""
    body = doc.find("body")
    if body is None:
        body = doc
    for xpath in ("//main", "//*[@role='main']", "//article"):
        found = body.xpath(xpath)
        if found:
            text = "\n\n".join(t for t in (_render(f) for f in found) if t)
            if text:
                return text
    return _render(body)


# trafilatura's XML vocabulary -> the HTML tags our renderer knows
_TEI_TO_HTML = {
    "p": "p", "lb": "br", "item": "li", "row": "tr", "quote": "blockquote", "code": "pre",
    "hi": "span", "ref": "span", "del": "span", "div": "div", "main": "div", "table": "table",
    "graphic": "span",
}


def _trafilatura_text(doc, url: Optional[str]) -> str:
    """Main text via trafilatura's XML output, rendered like ``html_to_text`` (so both
    paths give the same format: ``##`` headings, list lines, ``a | b`` table rows)."""
    try:
        import trafilatura
    except ImportError:  # pragma: no cover - trafilatura is a dependency
        return ""
    try:
        xml = trafilatura.extract(
            doc,
            url=url,
            output_format="xml",
            include_comments=False,
            include_tables=True,
            include_images=False,
            include_links=False,
            include_formatting=True,
            deduplicate=False,
        )
    except Exception:  # a third-party extractor on any page of the web: the caller falls back
        log.warning("trafilatura failed on %s; the page is read without it", url or "a page", exc_info=True)
        return ""
    if not xml:
        return ""
    try:
        parser = lxml.etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=False)
        doc = lxml.etree.fromstring(xml.encode("utf-8"), parser)
    except lxml.etree.XMLSyntaxError:
        return ""
    main = doc.find("main")
    if main is None:
        return ""
    for el in main.iter():
        if not isinstance(el.tag, str):
            continue
        tag = el.tag
        if tag == "head":
            rend = (el.get("rend") or "h2").lower()
            el.tag = rend if rend in _HEADINGS else "h2"
        elif tag == "list":
            el.tag = "ol" if (el.get("rend") or "").lower() == "ol" else "ul"
        elif tag == "cell":
            el.tag = "th" if el.get("role") == "head" else "td"
        elif tag in _TEI_TO_HTML:
            el.tag = _TEI_TO_HTML[tag]
    return _render(main)


def main_content(html: str, url: Optional[str] = None) -> tuple[Optional[str], str, Optional[str]]:
    """``(title, main_text, canonical_url)`` of a full web page.

    The text is trafilatura's extraction, rendered in ``html_to_text``'s format
    (``##`` headings, ``- ``/``1. `` list lines, ``a | b`` table rows), without header,
    menus, footer, sidebar, comments or cookie banner; when trafilatura finds nothing (very short pages), ``html_to_text`` of
    ``<main>`` / ``[role=main]`` / ``<article>`` / ``<body>`` after removing obvious
    boilerplate. Title: ``<title>``, else ``og:title``, else the first ``<h1>``.
    Canonical: ``<link rel="canonical">`` resolved against ``url``; ``None`` if absent.
    """
    if not html:
        return None, "", None
    cleaned = _clean_input(html)
    doc = _parse(cleaned)
    if doc is None:
        return None, "", None
    title = _title(doc)
    canonical = _canonical(doc, url)
    _prune_boilerplate(doc)
    text = _trafilatura_text(copy.deepcopy(doc), url)
    if not text:
        text = _fallback_text(doc)
    return title, text, canonical
