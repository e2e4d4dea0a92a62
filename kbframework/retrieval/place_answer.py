"""The honest answer for a place without events: "I have no events in Porto Calmo."

When the question asks for events in a city or at a venue (a place filter was found, known or
not) and no event of the organization passes the pre-filter with that place, the visitor is
told so plainly, with no cards: the events of other cities would otherwise fill the answer as
if they were the ones asked for. The turn is logged as a zero result (reason
``no_events_in_place``), so the admin sees which places visitors ask for.
"""
from __future__ import annotations

from dataclasses import replace

from kbframework.retrieval.places import event_intent, no_events_text, support_intent
from kbframework.retrieval.search import Prefilter, count_candidates

REASON = "no_events_in_place"


def check(s, pf: Prefilter, parts: list, query: str, mode: str) -> dict | None:
    """{"place", "field", "unknown", "text"} when the asked place has no events, else None."""
    place = next((p for p in parts if p.field in ("city", "venue") and not getattr(p, "dropped", None)), None)
    if place is None or not isinstance(place.value, str):
        return None
    if not (event_intent(query) or pf.date_start is not None or mode == "events"):
        return None
    if support_intent(query):  # "I left my jacket at Armazém 7 last night": lost property, not events
        return None
    if count_candidates(s, replace(pf, roles=["event"])):
        return None
    return {"place": place.value, "field": place.field, "unknown": bool(getattr(place, "unknown_place", False)),
            "extractor": place.extractor,
            "text": no_events_text(place.value, place.field, _event_cities(s, pf))}


def _event_cities(s, pf: Prefilter) -> list[str]:
    from sqlalchemy import text

    rows = s.execute(text("SELECT DISTINCT city FROM documents WHERE organization_id = :org AND "
                          "document_role = 'event' AND city IS NOT NULL AND status IN ('active', 'syncing') "
                          "AND coalesce(event_end, event_start) >= :now"), {"org": str(pf.organization_id), "now": pf.now}).all()
    return [r[0] for r in rows if r[0]]


def result(miss: dict) -> dict:
    return {"answer": miss["text"], "cards": [], "sources": [], "model": None, "tokens": (0, 0),
            "zero_result": True, "reason": REASON}
