"""Helpers for the retrieval-intelligence tests: documents seeded through the real ingestion
pipeline (real PostgreSQL + pgvector, the offline embedder), a fixed "now" around a
daylight-saving change, and a fake OpenAI-compatible chat server for the LLM paths."""
from __future__ import annotations

import json
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

TZ = "Europe/Belgrade"
BEL = ZoneInfo(TZ)


def local(y, m, d, hh=0, mm=0) -> datetime:
    return datetime(y, m, d, hh, mm, tzinfo=BEL)


# Wednesday 25 March 2026, 15:00 in Belgrade (CET). Summer time starts on Sunday 29 March at
# 02:00, so "this weekend" runs from Saturday 05:00 CET (04:00 UTC) to Monday 05:00 CEST (03:00 UTC).
NOW = local(2026, 3, 25, 15, 0)


def event(title, start, end, price, tags, venue="Warehouse", city="Belgrade", url=None, body=None):
    return {"title": title, "role": "event", "tags": tags, "start": start, "end": end, "venue": venue,
            "city": city, "url": url or f"https://nights.example/events/{title.lower().replace(' ', '-')}",
            "metadata": {"price": price, "currency": "EUR",
                         "ticket_url": f"https://tickets.example/{title.lower().replace(' ', '-')}"},
            "body": body or f"# {title}\n\n{' '.join(tags).capitalize()} night at {venue}. Doors open an hour before."}


EVENTS = [
    event("Techno Bunker Saturday", local(2026, 3, 28, 23), local(2026, 3, 29, 5), 25, ["techno"],
          body="# Techno Bunker Saturday\n\nHard techno all night at the bunker with three resident DJs."),
    event("Techno Marathon Sunday", local(2026, 3, 29, 22), local(2026, 3, 30, 6), 40, ["techno"],
          body="# Techno Marathon Sunday\n\nEight hours of techno on the longest night of the spring."),
    event("Sunrise Techno Monday", local(2026, 3, 30, 5, 30), local(2026, 3, 30, 9), 10, ["techno"],
          body="# Sunrise Techno Monday\n\nAn early morning techno rave with coffee at sunrise."),
    event("Techno Tomorrow Club", local(2026, 3, 26, 23), local(2026, 3, 27, 4), 20, ["techno"],
          body="# Techno Tomorrow Club\n\nA Thursday techno club night with local DJs."),
    event("Jazz Evening Tomorrow", local(2026, 3, 26, 20, 30), local(2026, 3, 26, 23, 30), 15, ["jazz"],
          venue="Bitef Art Cafe", body="# Jazz Evening Tomorrow\n\nA jazz trio plays standards and bossa nova."),
    event("Techno Last Week", local(2026, 3, 21, 23), local(2026, 3, 22, 5), 20, ["techno"],
          body="# Techno Last Week\n\nA techno night that already happened last weekend."),
    event("Techno Under Way", local(2026, 3, 25, 14), local(2026, 3, 25, 20), 5, ["techno"],
          body="# Techno Under Way\n\nA techno day party in the park, running all afternoon."),
    event("Cheap Techno Next Week", local(2026, 4, 1, 23), local(2026, 4, 2, 4), 12, ["techno"],
          body="# Cheap Techno Next Week\n\nA cheap techno night with student DJs next Wednesday."),
]

PRODUCTS = [
    {"title": "Red Summer Dress", "role": "product", "tags": ["dresses", "red", "summer"],
     "url": "https://demo-shop.example/product/red-summer-dress",
     "metadata": {"price": 39.99, "currency": "EUR", "in_stock": True, "categories": ["Dresses"], "sku": "DR-RED-01"},
     "body": "# Red Summer Dress\n\nA light cotton dress in bright red with a wrap front and short sleeves."},
    {"title": "Crimson Evening Dress", "role": "product", "tags": ["dresses", "red", "evening"],
     "url": "https://demo-shop.example/product/crimson-evening-dress",
     "metadata": {"price": 89.0, "currency": "EUR", "in_stock": True, "categories": ["Dresses"], "sku": "DR-CRM-02"},
     "body": "# Crimson Evening Dress\n\nA floor-length satin evening dress in deep red with an open back."},
    {"title": "Red Linen Midi Dress", "role": "product", "tags": ["dresses", "red"],
     "url": "https://demo-shop.example/product/red-linen-midi-dress",
     "metadata": {"price": 45.0, "currency": "EUR", "in_stock": False, "categories": ["Dresses"], "sku": "DR-LIN-03"},
     "body": "# Red Linen Midi Dress\n\nA relaxed red linen midi dress with pockets."},
    {"title": "Blue Denim Jacket", "role": "product", "tags": ["jackets", "blue"],
     "url": "https://demo-shop.example/product/blue-denim-jacket",
     "metadata": {"price": 59.0, "currency": "EUR", "in_stock": True, "categories": ["Jackets"], "sku": "JK-DEN-01"},
     "body": "# Blue Denim Jacket\n\nA classic blue denim jacket with brass buttons."},
]

SUPPORT = [
    {"title": "Return policy", "role": "support", "tags": ["policy"],
     "body": "# Return policy\n\nYou can return any item within 30 days of delivery for a full refund. "
             "Items must be unused, with their original tags and packaging."},
]


def seed(org_id, docs: list[dict]) -> dict[str, str]:
    """Index documents through the real pipeline; returns {title: document id}."""
    from kbframework.ingest.queue import queue_ingest
    from kbframework.orgs.accounts import ensure_source
    from kbframework.db import session_scope
    from kbframework.sources.apply import apply_draft
    from kbframework.retrieval.filters import forget_vocabulary
    from kbframework.retrieval.search import forget_counts
    from kbframework.types import DocumentDraft

    out, ids = {}, []
    with session_scope() as s:
        src = ensure_source(s, org_id, "manual", "Test knowledge")
        for i, d in enumerate(docs):
            draft = DocumentDraft(title=d["title"], normalized_content=d["body"], raw_content=d["body"],
                                  type="manual", document_role=d.get("role", "article"),
                                  external_id=f"t-{d['title']}", tags=d.get("tags", []),
                                  source_url=d.get("url"), metadata=d.get("metadata", {}),
                                  event_start=d.get("start"), event_end=d.get("end"),
                                  venue=d.get("venue"), city=d.get("city"))
            doc, _ = apply_draft(s, src, draft, force=True)
            out[d["title"]] = str(doc.id)
            ids.append(doc.id)
    res = queue_ingest(ids, inline=True)
    assert all(r.action != "error" for r in res), [r.error for r in res]
    forget_counts(org_id)
    forget_vocabulary(org_id)
    return out


def set_settings(org_id, **values):
    """Change the organization's declared settings, as the operator (validated)."""
    from kbframework.testing import set_org_settings

    set_org_settings({"id": org_id}, **values)


def titles(cards) -> list[str]:
    return [c["title"] for c in cards]


# --------------------------------------------------------------------------- fake LLM

PLANNER_MARK = "You turn a visitor's question into search filters"
REWRITE_MARK = "Rewrite the visitor's last message"
CLASSIFY_MARK = "Decide how the visitor's last message relates"
NONSENSE = ("Buy the Golden Unicorn Gown for €1 at https://evil.example/buy right now! "
            '{"cards": [{"type": "product", "title": "Golden Unicorn Gown", "price": "€1"}]} '
            "Also see https://demo-shop.example/product/red-summer-dress.")


class FakeChat:
    """An OpenAI-compatible chat server: planner, rewrite and answer calls told apart by their
    system prompt. ``planner`` / ``rewrite`` / ``answer`` set what each returns (a string, or
    an int for an HTTP error status)."""

    def __init__(self):
        self.planner = "{}"
        self.rewrite = None
        self.classify = "FOLLOW_UP"
        self.answer = NONSENSE
        self.calls: list[str] = []

    def kind(self, body: dict) -> str:
        first = (body.get("messages") or [{}])[0].get("content") or ""
        if first.startswith(CLASSIFY_MARK):
            return "classify"
        return "planner" if first.startswith(PLANNER_MARK) else "rewrite" if first.startswith(REWRITE_MARK) else "answer"

    def __call__(self, method, path, headers, raw):
        if not path.endswith("/chat/completions"):
            return 404, {}, {"error": {"message": "not found"}}
        body = json.loads(raw or b"{}")
        kind = self.kind(body)
        self.calls.append(kind)
        out = getattr(self, kind)
        if isinstance(out, int):
            return out, {}, {"error": {"message": "boom", "type": "server_error"}}
        return 200, {}, {"id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "fake-model",
                         "choices": [{"index": 0, "finish_reason": "stop",
                                      "message": {"role": "assistant", "content": out}}],
                         "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}


@pytest.fixture
def fake_llm(kb_http_server, monkeypatch):
    """Point the real ``openai`` client at a local fake through KB_LLM_BASE_URL."""
    from kbframework.hooks import registry
    from kbframework.config import reset_config

    chat = FakeChat()
    srv = kb_http_server(chat)
    monkeypatch.setenv("KB_LLM_BASE_URL", srv.url + "/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    reset_config()
    registry.clear_caches()
    assert registry.llm().name == "openai"
    yield chat
    monkeypatch.delenv("KB_LLM_BASE_URL")
    monkeypatch.delenv("OPENAI_API_KEY")
    reset_config()
    registry.clear_caches()
