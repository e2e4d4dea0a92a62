"""HTML -> chunkable text (kbframework/text/html.py)."""
from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from kbframework.text.html import html_to_text, main_content, strip_shortcodes

DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
TAG = re.compile(r"</?[A-Za-z][^>]*>")


# ------------------------------------------------------------------- structure kept


def test_headings_become_markdown_headings():
    out = html_to_text("<h1>Title</h1><p>Intro</p><h2>Care <em>tips</em></h2><h4>Small</h4>")
    assert out == "# Title\n\nIntro\n\n## Care tips\n\n#### Small"


def test_heading_is_one_line_even_with_br():
    assert html_to_text("<h3>Opening<br>hours</h3>") == "### Opening hours"


def test_paragraphs_separated_by_a_blank_line():
    out = html_to_text("<p>First   paragraph\n spans lines.</p>\n\n<p>Second.</p><div>Third</div>")
    assert out == "First paragraph spans lines.\n\nSecond.\n\nThird"


def test_unordered_ordered_and_nested_lists():
    html = (
        "<p>Before</p><ul><li>One</li><li>Two<ul><li>Two a</li><li><p>Two b</p></li></ul></li>"
        "<li></li><li>Three</li></ul><ol start='3'><li>Wash</li><li>Dry</li></ol><p>After</p>"
    )
    assert html_to_text(html) == (
        "Before\n\n- One\n- Two\n  - Two a\n  - Two b\n- Three\n\n3. Wash\n4. Dry\n\nAfter"
    )


def test_table_rows_as_cell_pipes():
    html = (
        "<table><caption>Sizes</caption><thead><tr><th>Size</th><th>Chest</th></tr></thead>"
        "<tbody><tr><td>S</td><td>86&ndash;91 cm<br>(34&ndash;36&quot;)</td></tr>"
        "<tr><td></td><td> </td></tr><tr><td>M</td><td><p>92</p><p>cm</p></td></tr></tbody></table>"
    )
    assert html_to_text(html) == "Sizes\nSize | Chest\nS | 86–91 cm (34–36\")\nM | 92 cm"


def test_nested_table_rows_do_not_leak_into_outer_table():
    html = "<table><tr><td>a</td><td><table><tr><td>x</td><td>y</td></tr></table></td></tr></table>"
    out = html_to_text(html)
    assert out.splitlines()[0].startswith("a | ")
    assert "x | y" in out
    assert len(out.splitlines()) == 1


def test_br_is_a_line_break_and_two_br_a_paragraph():
    assert html_to_text("Line 1<br>Line 2<br/><br />Line 3") == "Line 1\nLine 2\n\nLine 3"


def test_list_item_with_paragraph_stays_on_the_bullet_line():
    assert html_to_text("<ul><li><p>Only</p></li><li><h3>Head</h3><p>Body</p></li></ul>") == "- Only\n- Head\nBody"


# ---------------------------------------------------------------------- dropped


def test_drops_scripts_styles_forms_and_page_chrome():
    html = (
        "<script>var s = '<p>evil</p>';</script><style>p{color:red}</style><noscript>Enable JS</noscript>"
        "<iframe src='https://x'>frame text</iframe><form><label>Email</label><input><button>Go</button></form>"
        "<nav>Menu</nav><header>Header</header><footer>Footer</footer><aside>Sidebar</aside>"
        "<!-- a comment --><p>Body<!-- inline comment --> text</p><template><p>tpl</p></template>"
    )
    assert html_to_text(html) == "Body text"


def test_drops_wordpress_shortcodes_but_keeps_their_content():
    html = (
        '[gallery ids="1,2"]<p>[caption id="attachment_5" align="alignnone" width="300"]'
        '<img src="a.jpg" alt="front"> Our shop front[/caption]</p>'
        "<p>[vc_row][vc_column]Column text[/vc_column][/vc_row]</p>"
        '<p>[contact-form-7 id="12" title="Contact"] [products limit="4"] [woocommerce_cart]</p>'
        "<p>[gallery ids=&#8221;7,8&#8243;]Texturized quotes</p>"
    )
    assert html_to_text(html) == "Our shop front\n\nColumn text\n\nTexturized quotes"


def test_bracketed_prose_survives():
    assert html_to_text("<p>He said [sic] and see [1], or [Read more].</p>") == "He said [sic] and see [1], or [Read more]."
    assert strip_shortcodes("[[gallery]] shows a gallery") == "[gallery] shows a gallery"


def test_struck_out_text_and_old_price_dropped():
    html = (
        '<p class="price"><del aria-hidden="true"><span class="amount"><bdi>'
        '<span class="woocommerce-Price-currencySymbol">&pound;</span>20.00</bdi></span></del> '
        '<ins><span class="amount"><bdi>&pound;18.00</bdi></span></ins></p>'
    )
    assert html_to_text(html) == "£18.00"


# ----------------------------------------------------------------- entities, spaces


def test_entities_decoded():
    out = html_to_text("<p>Tom &amp; Jerry&#8217;s&nbsp;caf&eacute; &#8211; 5&nbsp;&euro; &#x27;hi&#x27; &lt;3</p>")
    assert out == "Tom & Jerry’s café – 5 € 'hi' <3"


def test_whitespace_collapsed_and_invisible_chars_removed():
    out = html_to_text("<p>  a \t\n b\u00a0\u00a0c\u200b d\u00ad e </p><p>\u00a0</p><p></p><div>   </div><p>f</p>")
    assert out == "a b c d e\n\nf"


def test_plain_text_input_keeps_its_paragraphs():
    assert html_to_text("First line\nsecond line\n\n\nNew para &amp; more") == "First line\nsecond line\n\nNew para & more"


# ------------------------------------------------------------------- robustness


@pytest.mark.parametrize(
    "html",
    [
        "<div><p>Unclosed <b>bold<p>next <li>stray</div></span></p>",
        "<<<>>> </p> <p <p> < / >",
        "<table><td>cell<tr><td>x",
        '<?xml version="1.0" encoding="iso-8859-1"?><p>declared</p>',
        "x\x00y\x0b<p>z\x1f</p>",
        "<div>" * 3000 + "deep" + "</div>" * 3000,
        "<p>&lt;script&gt;alert(1)&lt;/script&gt; &lt;b&gt;bold&lt;/b&gt;</p>",
        "<![CDATA[ cdata ]]><p>y</p>",
        "<svg><text>svg text</text></svg><math><mi>x</mi></math><p>ok</p>",
    ],
)
def test_malformed_input_is_safe_and_never_returns_tags(html):
    out = html_to_text(html)
    assert isinstance(out, str)
    assert not TAG.search(out), out
    assert "\x00" not in out


def test_double_escaped_html_is_not_returned_as_tags():
    assert html_to_text("<p>&lt;p&gt;Hello &lt;b&gt;world&lt;/b&gt;&lt;/p&gt;</p>") == "Hello world"


@pytest.mark.parametrize("empty", ["", "   ", "<p></p>", "<!-- only a comment -->", "<script>x</script>", None])
def test_empty(empty):
    assert html_to_text(empty) == ""


def test_fast_enough():
    block = (
        '<div class="entry"><h2>Title</h2><p>Some <b>bold</b> text &amp; more, with a '
        '<a href="#">link</a>.</p><ul><li>one</li><li>two</li></ul>'
        "<table><tr><td>a</td><td>b</td></tr></table></div>"
    )
    html = block * 1000  # ~185 kB, a long page
    start = time.perf_counter()
    out = html_to_text(html)
    assert time.perf_counter() - start < 2.0
    assert out.count("## Title") == 1000


# ----------------------------------------------------------- real WordPress payloads


def _rendered_fields():
    folder = DATA / "wordpress" / "wp_v2"
    if not folder.is_dir():
        return []
    found = []

    def walk(node):
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "rendered" and isinstance(value, str) and "<" in value:
                    found.append(value)
                else:
                    walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    for path in sorted(folder.rglob("*.json")):
        try:
            walk(json.loads(path.read_text()))
        except (ValueError, UnicodeDecodeError):
            continue
    return found


RENDERED = _rendered_fields()


@pytest.mark.skipif(not RENDERED, reason="shared WordPress fixtures not present")
def test_real_rendered_wordpress_fields():
    for html in RENDERED:
        out = html_to_text(html)
        assert not TAG.search(out), out
        assert "&#8217;" not in out and "&amp;" not in out and "&nbsp;" not in out


# ------------------------------------------------------------------ main_content

PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>How to wash your hoodie &#8211; Example Shop</title>
<meta property="og:title" content="How to wash your hoodie">
<link rel="stylesheet" href="/style.css"><link rel="canonical" href="/2024/04/18/how-to-wash-your-hoodie/">
<script>var x = "<p>evil</p>";</script><style>p{color:red}</style>
</head><body class="post-template-default">
<a class="skip-link screen-reader-text" href="#content">Skip to content</a>
<header id="masthead" class="site-header"><div class="site-branding">Example Shop HEADERTEXT</div>
<nav id="site-navigation" class="main-navigation"><ul id="menu-main"><li><a href="/">Home MENUTEXT</a></li>
<li><a href="/shop/">Shop</a></li><li><a href="/events/">Events</a></li></ul></nav></header>
<div id="content" class="site-content"><div id="primary" class="content-area"><main id="main" class="site-main">
<article id="post-12" class="post-12 post type-post status-publish">
<h1 class="entry-title">How to wash your hoodie</h1>
<div class="entry-content">
<p>Our hoodies are made from 80&nbsp;% organic cotton and 20&nbsp;% recycled polyester. Here&#8217;s how to
keep them soft &amp; warm for years, wash after wash, season after season.</p>
<h2>Before washing</h2>
<ul><li>Turn the hoodie inside out.</li><li>Close the zip &amp; empty the pockets.</li></ul>
<h2>Washing</h2>
<ol><li>Wash at 30&nbsp;°C on a gentle cycle.</li><li>Use a mild detergent without bleach.</li>
<li>Do not tumble dry; lay it flat to dry.</li></ol>
<table><thead><tr><th>Fabric</th><th>Max temperature</th></tr></thead>
<tbody><tr><td>Cotton</td><td>30 °C</td></tr><tr><td>Fleece</td><td>40 °C</td></tr></tbody></table>
<p>Questions? Write to us at any time, we usually answer within one working day.<br>Your Example Shop team</p>
</div></article>
<div id="comments" class="comments-area"><h2 class="comments-title">2 thoughts</h2><p>COMMENTTEXT great tips!</p></div>
</main></div>
<aside id="secondary" class="widget-area"><section class="widget"><h2>Recent posts</h2><ul><li>SIDEBARTEXT</li></ul></section></aside></div>
<footer id="colophon" class="site-footer"><p>&copy; 2024 Example Shop FOOTERTEXT</p></footer>
<div id="cookie-notice" class="cn-notice"><p>COOKIETEXT We use cookies. Accept all?</p><button>Accept</button></div>
</body></html>"""

BOILERPLATE = ("HEADERTEXT", "MENUTEXT", "COMMENTTEXT", "SIDEBARTEXT", "FOOTERTEXT", "COOKIETEXT", "Skip to content", "evil")


def test_main_content_of_a_full_page():
    title, text, canonical = main_content(PAGE, "https://example.com/?p=12")
    assert title == "How to wash your hoodie – Example Shop"
    assert canonical == "https://example.com/2024/04/18/how-to-wash-your-hoodie/"
    for marker in BOILERPLATE:
        assert marker not in text, marker
    assert "Here’s how to keep them soft & warm" in text
    assert "## Before washing" in text
    assert "- Turn the hoodie inside out." in text
    assert "1. Wash at 30 °C on a gentle cycle." in text
    assert "Cotton | 30 °C" in text
    assert not TAG.search(text)


def test_main_content_fallback_for_a_tiny_page():
    page = (
        "<html><head><meta property='og:title' content='Opening hours'></head><body>"
        "<header>HEADERTEXT</header><nav>MENUTEXT</nav><main><h1>Hours</h1><p>Mon&ndash;Fri 9&ndash;18</p></main>"
        "<div class='cookie-banner'>COOKIETEXT</div><footer>FOOTERTEXT</footer></body></html>"
    )
    title, text, canonical = main_content(page)
    assert title == "Opening hours"  # no <title>: og:title
    assert canonical is None
    assert "Mon–Fri 9–18" in text
    for marker in BOILERPLATE:
        assert marker not in text, marker


def test_main_content_title_falls_back_to_h1_and_absolute_canonical_kept():
    page = (
        "<html><head><link rel='Canonical' href='https://example.com/a/'></head>"
        "<body><article><h1>  The   H1 </h1><p>Text</p></article></body></html>"
    )
    title, text, canonical = main_content(page, "https://other.example/x")
    assert title == "The H1"
    assert canonical == "https://example.com/a/"
    assert "Text" in text


def test_main_content_on_garbage():
    assert main_content("") == (None, "", None)
    title, text, canonical = main_content("<<<not html")
    assert title is None and canonical is None and not TAG.search(text)
