"""Built-in LLM query planner: when an LLM is configured, one small JSON call extracts the
filters the rules may miss (price range, categories, stock, city, venue). It runs in a thread
beside the rule-based extractors (``kb_parallel``); its JSON is validated with marshmallow and
every label must be one of the organization's own; dates stay with the temporal parser."""
from __future__ import annotations

import json
import logging
import re

from kbframework.hooks.markers import hookimpl

log = logging.getLogger("kbframework.planner")
EXTRACTOR = "llm_planner"
MAX_LABELS = 150  # per list in the prompt

PROMPT = """You turn a visitor's question into search filters for a shop and events site.
Reply with ONE JSON object and nothing else. Allowed keys (leave out what the question does not state):
  "price_min": number, "price_max": number, "currency": "EUR"|"USD"|"GBP"|...,
  "categories": [names from CATEGORIES], "tags": [names from TAGS],
  "in_stock": true (only when the visitor wants items in stock / available),
  "city": a name from CITIES, "venue": a name from VENUES.
Use only names from the lists, spelled as listed. Never extract dates or times. "cheap" is not a price.
CATEGORIES: {categories}
TAGS: {tags}
CITIES: {cities}
VENUES: {venues}"""


def parse_plan(raw: str) -> dict:
    """The model's reply → a validated dict (raises ValueError with a reason)."""
    m = re.search(r"\{.*\}", raw or "", re.S)
    if not m:
        raise ValueError("the planner did not answer with a JSON object")
    try:
        data = json.loads(m.group(0))
    except json.JSONDecodeError as exc:
        raise ValueError(f"the planner's JSON does not parse: {exc}")
    if not isinstance(data, dict):
        raise ValueError("the planner's JSON is not an object")
    from marshmallow import ValidationError

    from kbframework.default_plugins.plan_schema import PlanSchema

    try:
        return PlanSchema().load(data)
    except ValidationError as exc:
        raise ValueError(f"the planner's JSON is invalid: {exc.messages}")


def plan_to_parts(plan: dict, vocab: dict) -> list[FilterPart]:
    """Keep only what the organization knows: labels, cities and venues from its vocabulary."""
    from kbframework.types import FilterPart

    def canon(values, key):
        known = {v.lower(): v for v in vocab.get(key) or []}
        return [known[v.lower()] for v in values or [] if isinstance(v, str) and v.lower() in known]

    parts = []
    for f in ("price_min", "price_max"):
        if plan.get(f) is not None:
            parts.append(FilterPart(f, float(plan[f]), extractor=EXTRACTOR))
    if plan.get("currency"):
        parts.append(FilterPart("currency", plan["currency"].upper(), extractor=EXTRACTOR))
    if plan.get("in_stock") is True:
        parts.append(FilterPart("in_stock", True, extractor=EXTRACTOR))
    for f, key in (("category", "categories"), ("tag", "tags")):
        vals = canon(plan.get(key), key)
        if vals:
            parts.append(FilterPart(f, vals, extractor=EXTRACTOR))
    for f, key in (("city", "cities"), ("venue", "venues")):
        vals = canon([plan.get(f)] if plan.get(f) else [], key)
        if vals:
            parts.append(FilterPart(f, vals[0], extractor=EXTRACTOR))
    return parts


@hookimpl(trylast=True)
def kb_extract_filters(query, context):
    from kbframework.hooks import registry

    llm = registry.llm()
    if llm.quotes_passages or (context.get("settings") or {}).get("query_planner") is False:
        return []
    vocab = context.get("vocabulary") or {}
    lists = {k: ", ".join(sorted(vocab.get(k) or [])[:MAX_LABELS]) or "(none)"
             for k in ("categories", "tags", "cities", "venues")}
    messages = [{"role": "system", "content": PROMPT.format(**lists)}, {"role": "user", "content": query}]
    from kbframework.orgs.budget import spending

    org_id = context.get("organization_id")
    with spending(org_id, "query_planner") if org_id else _nullctx():
        try:
            res = llm.complete(messages, max_tokens=200, temperature=0.0, json_mode=True)
        except TypeError:  # a provider without a JSON mode
            res = llm.complete(messages, max_tokens=200, temperature=0.0)
        try:
            from kbframework.orgs.usage import record_usage

            if org_id:
                record_usage(org_id, "query_planner", llm.name, res.model, res.tokens_in, res.tokens_out)
        except Exception as exc:  # the ledger never breaks a chat
            log.warning("ledger: %s", exc)
    return plan_to_parts(parse_plan(res.text), vocab)


def _nullctx():
    import contextlib

    return contextlib.nullcontext()


kb_extract_filters.kb_parallel = True  # the host runs it in a thread beside the rule-based extractors
