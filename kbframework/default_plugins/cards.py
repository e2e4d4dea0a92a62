"""Cards built on the server from a retrieved document's columns and metadata, never
from model output."""
from __future__ import annotations

from kbframework.hooks.markers import hookimpl

CURRENCY_SIGNS = {"EUR": "€", "USD": "$", "GBP": "£", "RSD": "RSD "}


def format_price(meta: dict) -> str | None:
    cur = meta.get("currency") or ""
    sign = CURRENCY_SIGNS.get(cur.upper(), f"{cur} " if cur else "")
    lo, hi = meta.get("price_min"), meta.get("price_max")

    def fmt(v):
        try:
            f = float(v)
        except (TypeError, ValueError):
            return str(v)
        return f"{sign}{f:.0f}" if f == int(f) else f"{sign}{f:.2f}"

    if lo is not None and hi is not None and lo != hi:
        return f"{fmt(lo)}–{fmt(hi)}"
    price = meta.get("price")
    if price in (None, ""):
        return None
    return fmt(price)


def _safe_url(url):
    from kbframework.addresses import safe_link

    return safe_link(url)


def _excerpt(text: str | None, n: int = 180) -> str:
    text = " ".join((text or "").replace("#", " ").split())
    return text if len(text) <= n else text[: n - 1].rsplit(" ", 1)[0] + "…"


@hookimpl(trylast=True)
def kb_build_card(document, preset):
    from kbframework.types import Card

    d = document
    meta = d.get("metadata") or {}
    role = d.get("document_role")
    base = dict(document_id=str(d["id"]), title=d["title"], url=_safe_url(d.get("source_url")),
                image=_safe_url(d.get("primary_image_url")))
    if role == "product":
        in_stock = meta.get("in_stock")
        return Card(type="product", **base, data={
            "price": format_price(meta), "in_stock": in_stock, "on_sale": meta.get("on_sale"),
            "sku": meta.get("sku"),
            "cta": {"label": "View product", "url": base["url"]} if base["url"] else None})
    if role == "event":
        start = d.get("event_start")
        ticket = _safe_url(meta.get("ticket_url")) or base["url"]
        return Card(type="event", **base, data={
            "date": start.isoformat() if hasattr(start, "isoformat") else start,
            "end": d["event_end"].isoformat() if d.get("event_end") else None,
            "venue": d.get("venue"), "city": d.get("city"), "price": format_price(meta),
            "cta": {"label": "Get tickets" if meta.get("ticket_url") else "View event",
                    "url": ticket} if ticket else None})
    return Card(type="article", **base, data={"excerpt": _excerpt(d.get("normalized_content"))})
