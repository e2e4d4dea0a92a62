"""Built-in rule-based metadata extractor: price bounds ("free entry" and "no cover" are price 0),
stock, and the organization's own vocabulary (its categories, tags, cities and venues, given by
the host in ``context["vocabulary"]``). No LLM; a word becomes a tag filter only when it is one of
the organization's tags ("red" is a colour filter only in a shop that tags things "red")."""
from __future__ import annotations

from kbframework.hooks.markers import hookimpl
from kbframework.retrieval.phrases import find_free, find_prices, find_stock, vocabulary_index
from kbframework.types import FilterPart

EXTRACTOR = "rules"


@hookimpl(trylast=True)
def kb_extract_filters(query, context):
    parts: list[FilterPart] = []
    prices = find_prices(query)
    if not any(f.field == "price_max" for f in prices):
        prices += find_free(query)  # "free entry", "no cover": price 0
    for f in prices + find_stock(query):
        parts.append(FilterPart(f.field, f.value, extractor=EXTRACTOR, matched=f.matched))
    vocab = context.get("vocabulary") or {}
    if vocab:
        for f in vocabulary_index(vocab).find(query):
            p = FilterPart(f.field, f.value, extractor=EXTRACTOR, matched=f.matched)
            p.term = f.extra.get("term")
            parts.append(p)
    return parts
