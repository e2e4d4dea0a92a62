"""Markdown to safe HTML, for the knowledge editor's preview: markdown-it-py with raw HTML
off, then bleach as the last word, so nothing typed can run in the admin."""
from __future__ import annotations

import bleach

_md = None
MD_TAGS = ["p", "br", "hr", "h1", "h2", "h3", "h4", "h5", "h6", "strong", "em", "del", "s", "code", "pre",
           "blockquote", "ul", "ol", "li", "a", "table", "thead", "tbody", "tr", "th", "td", "img"]
MD_ATTRS = {"a": ["href", "title"], "img": ["src", "alt", "title"],
            "ol": ["start"]}


def render_markdown(source: str) -> str:
    global _md
    if _md is None:
        from markdown_it import MarkdownIt

        _md = MarkdownIt("commonmark", {"html": False, "linkify": False, "breaks": True}).enable(
            ["table", "strikethrough"])
    html = _md.render(source or "")
    return bleach.clean(html, tags=MD_TAGS, attributes=MD_ATTRS, protocols=["http", "https", "mailto"],
                        strip=True)
