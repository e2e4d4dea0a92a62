"""Built-in rule-based metadata extractor: price bounds ("free entry" and "no cover" are price 0),
stock, an order ("the cheapest", "the earliest"), and the organization's own vocabulary (its categories, tags, cities and venues, given by
the host in ``context["vocabulary"]``). No LLM; a word becomes a tag filter only when it is one of
the organization's tags ("red" is a colour filter only in a shop that tags things "red")."""
from __future__ import annotations

import logging

from kbframework.hooks.markers import hookimpl

log = logging.getLogger(__name__)

EXTRACTOR = "rules"


@hookimpl(trylast=True)
def kb_extract_filters(query, context):
    from kbframework.retrieval.phrases import find_free, find_order, find_prices, find_stock, vocabulary_index
    from kbframework.types import FilterPart

    parts: list[FilterPart] = []
    vocab = context.get("vocabulary") or {}
    labels = vocabulary_index(vocab).find(query) if vocab else []

    # a shop's own category or tag in the question ("hoodies over 100") says it is about priced
    # things, so a bare "over 100" is a price too
    prices = find_prices(query, priced=any(f.field in ("category", "tag") for f in labels))
    if not any(f.field == "price_max" for f in prices):
        prices += find_free(query)  # "free entry", "no cover": price 0
    for f in prices + find_stock(query) + find_order(query):
        parts.append(FilterPart(f.field, f.value, extractor=EXTRACTOR, matched=f.matched))
    known: list[tuple[int, int]] = []
    for f in labels:
        p = FilterPart(f.field, f.value, extractor=EXTRACTOR, matched=f.matched)
        p.term = f.extra.get("term")
        parts.append(p)
        if f.field in ("city", "venue"):
            known.append((f.start, f.end))
    parts.extend(place_parts(query, context, vocab, known))
    return parts


def place_parts(query: str, context: dict, vocab: dict, known: list[tuple[int, int]]) -> list[FilterPart]:
    """Places the vocabulary did not match: part of a known venue or city ("at Bitef" → "Bitef
    Art Cafe") becomes that filter; a name the organization's knowledge never mentions
    ("in Porto Calmo") becomes a filter that no event passes, marked ``unknown_place``; a name
    its texts do mention is left to the searches."""
    from kbframework.retrieval.places import find_places
    from kbframework.types import FilterPart

    out: list[FilterPart] = []
    settings = context.get("settings") or {}
    for pl in find_places(query, settings.get("place_names") or ()):
        if any(not (pl.end <= a or pl.start >= b) for a, b in known):
            continue
        value = _known_place(pl.name, vocab)
        if value is not None:
            p = FilterPart(value[0], value[1], extractor="places", matched=pl.matched)
        elif _mentioned(context, pl.name):
            continue
        else:
            p = FilterPart(pl.field, pl.name, extractor="places", matched=pl.matched)
            p.unknown_place = True
        out.append(p)
    return out


def _known_place(name: str, vocab: dict):
    from kbframework.retrieval.phrases import tokens

    want = [t for t, _, _ in tokens(name)]
    if not want:
        return None
    for field, key in (("venue", "venues"), ("city", "cities")):
        for value in vocab.get(key) or []:
            have = [t for t, _, _ in tokens(value)] if isinstance(value, str) else []
            if any(have[i:i + len(want)] == want for i in range(len(have) - len(want) + 1)):
                return field, value
    return None


def _mentioned(context: dict, name: str) -> bool:
    """Does any of the organization's documents mention the name (title, text, venue, city)?"""
    session, org = context.get("session"), context.get("organization_id")
    if session is None or not org:
        return False
    from sqlalchemy import text
    from sqlalchemy.exc import SQLAlchemyError

    try:
        return bool(session.execute(text(
            "SELECT EXISTS (SELECT 1 FROM chunks c WHERE c.organization_id = :org "
            "AND c.tsv @@ plainto_tsquery('english', :name)) OR EXISTS (SELECT 1 FROM documents d "
            "WHERE d.organization_id = :org AND (d.title ILIKE :like OR d.venue ILIKE :like "
            "OR d.city ILIKE :like))"), {"org": str(org), "name": name, "like": f"%{name}%"}).scalar())
    except SQLAlchemyError:  # a help, never a reason to fail the chat
        log.warning("could not look up whether %r is mentioned; no place filter from it", name, exc_info=True)
        return True
