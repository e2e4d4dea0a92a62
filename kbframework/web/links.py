"""Links leave the system only when they are safe http(s) links.

URLs are checked when they are stored (``knowledge``), and again here on the way out, so a
row written before that check, or by a plugin that bypassed it, still cannot put a
``javascript:`` link in an answer's cards or sources.
"""
from __future__ import annotations

from kbframework.addresses import safe_link

CARD_LINK_FIELDS = ("url", "image")


def clean_card(card):
    if not isinstance(card, dict):
        return card
    out = dict(card)
    for k in CARD_LINK_FIELDS:
        if k in out:
            out[k] = safe_link(out[k])
    for holder in (out, out.get("data") if isinstance(out.get("data"), dict) else None):
        if holder is not None and isinstance(holder.get("cta"), dict):
            url = safe_link(holder["cta"].get("url"))
            holder["cta"] = {**holder["cta"], "url": url} if url else None
    return out


def clean_source(src):
    if not isinstance(src, dict):
        return src
    return {**src, "source_url": safe_link(src.get("source_url"))} if "source_url" in src else src


def clean_answer_links(result: dict) -> dict:
    """An answer (``retrieval.answer`` output) with every card and source link checked."""
    out = dict(result)
    out["cards"] = [clean_card(c) for c in result.get("cards") or []]
    out["sources"] = [clean_source(s) for s in result.get("sources") or []]
    alt = result.get("alternatives")
    if isinstance(alt, dict):
        out["alternatives"] = {**alt, "cards": [clean_card(c) for c in alt.get("cards") or []],
                               "sources": [clean_source(s) for s in alt.get("sources") or []]}
    return out
