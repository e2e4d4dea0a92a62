"""What a follow-up points at: the documents the previous answer showed, and the one picked
among them ("the second one", "the Saturday one", "the cheapest one").

The previous answer's documents come from, in order: the document ids a client sent with the
assistant message, the session's logged turn (its cards) when only a ``session_id`` came, or
the names, SKUs and links the previous assistant message wrote, matched against the
organization's own documents. History shapes retrieval; it is never evidence.
"""
from __future__ import annotations

import re
from zoneinfo import ZoneInfo

from sqlalchemy import text

from kbframework.retrieval.phrases import stem, tokens

WEEKDAYS = {"monday": 0, "mon": 0, "tuesday": 1, "tue": 1, "tues": 1, "wednesday": 2, "wed": 2,
            "thursday": 3, "thu": 3, "thurs": 3, "friday": 4, "fri": 4, "saturday": 5, "sat": 5,
            "sunday": 6, "sun": 6}


def shown_documents(session, org_id, history: list[dict], session_id: str | None = None) -> tuple[list[str], str]:
    """(document ids of the previous answer in the order shown, where they came from)."""
    from kbframework.retrieval import conversation
    from kbframework.retrieval.identity import name_index

    ids = conversation.previous_documents(history)
    if ids:
        return ids, "document ids of the previous answer"
    if session_id:
        ids = conversation.previous_documents(conversation.session_history(session, org_id, session_id, 2))
        if ids:
            return ids, "the session's previous answer (chat log)"
    last = next((m["content"] for m in reversed(history or []) if m.get("role") == "assistant"), "")
    if last:
        named = name_index(session, org_id).find(last)
        if named:
            return [n.document_id for n in named][:10], "named in the previous reply (titles, SKUs, links)"
    return [], "nothing shown before"


def facts(session, doc_ids: list[str]) -> dict:
    """{id: {title, role, price, event_start, tags}} for picking and for comparative bounds."""
    if not doc_ids:
        return {}
    rows = session.execute(text(
        "SELECT id::text, title, document_role, kb_num(coalesce(metadata->>'price_min', metadata->>'price')), "
        "event_start, tags, metadata->>'sku' FROM documents WHERE id::text = ANY(:ids)"),
        {"ids": [str(d) for d in doc_ids]}).all()
    return {r[0]: {"title": r[1], "role": r[2], "price": float(r[3]) if r[3] is not None else None,
                   "event_start": r[4], "tags": list(r[5] or []), "sku": r[6]} for r in rows}


ALL_SHOWN = "everything the previous answer showed"


def pick(shown: list[str], info: dict, turn, tz: str | None = None) -> tuple[list[str], str]:
    """The shown documents a follow-up points at: one by position, weekday, word or extreme,
    else all of them in the order shown."""
    shown = [d for d in shown if d in info]
    if not shown:
        return [], "none"
    if turn.ordinal is not None:
        i = turn.ordinal
        if -len(shown) <= i < len(shown):
            return [shown[i]], f"position {i + 1 if i >= 0 else 'last'} of the previous answer"
    if turn.superlative:
        key = "price" if turn.superlative in ("cheapest", "most_expensive", "priciest") else "event_start"
        have = [d for d in shown if info[d].get(key) is not None]
        if have:
            rev = turn.superlative in ("most_expensive", "priciest", "latest")
            best = sorted(have, key=lambda d: info[d][key], reverse=rev)[0]
            return [best], f"the {turn.superlative.replace('_', ' ')} of the previous answer"
    if turn.selector:
        word = turn.selector.lower().strip()
        if word in WEEKDAYS:
            zone = ZoneInfo(tz) if tz else None
            hits = [d for d in shown if info[d].get("event_start") is not None
                    and (info[d]["event_start"].astimezone(zone) if zone else info[d]["event_start"]).weekday()
                    == WEEKDAYS[word]]
            if hits:
                return hits, f"the {turn.selector} one of the previous answer"
        else:
            stems = {t for t, _, _ in tokens(word)}
            hits = [d for d in shown if stems and stems <= ({t for t, _, _ in tokens(info[d]["title"] or "")}
                                                             | {stem(x.lower()) for x in info[d]["tags"]})]
            if hits:
                return hits, f"the '{turn.selector}' one of the previous answer"
    return shown, ALL_SHOWN


def comparative_bound(turn, shown: list[str], info: dict) -> dict:
    """A bound relative to the previous answer's first (best) document that has the field:
    "cheaper" → below its price, "more expensive" → above it, "later"/"earlier" → starting
    after / before it."""
    if not turn.comparative:
        return {}
    prices = [info[d]["price"] for d in shown if d in info and info[d].get("price") is not None]
    starts = [info[d]["event_start"] for d in shown if d in info and info[d].get("event_start") is not None]
    if turn.comparative == "cheaper" and prices:
        return {"price_max": round(prices[0] - 0.01, 2)}
    if turn.comparative == "pricier" and prices:
        return {"price_min": round(prices[0] + 0.01, 2)}
    if turn.comparative == "later" and starts:
        return {"start_after": starts[0]}
    if turn.comparative == "earlier" and starts:
        return {"start_before": starts[0]}
    return {}


