"""Collecting filter parts from every extractor plugin and merging them into a Prefilter."""
from __future__ import annotations

import logging
from datetime import datetime

from kbframework.hooks.manager import call_per_plugin, get_plugin_manager
from kbframework.retrieval.search import Prefilter
from kbframework.types import FilterPart

log = logging.getLogger("kbframework.retrieval")


def extract_filter_parts(query: str, context: dict) -> tuple[list[FilterPart], list[dict]]:
    """Run every ``kb_extract_filters`` implementation; a failing extractor is logged, skipped."""
    pm = get_plugin_manager()
    parts: list[FilterPart] = []
    errors: list[dict] = []
    hook = pm.hook.kb_extract_filters
    for impl in reversed(hook.get_hookimpls()):
        try:
            res = impl.function(**{k: v for k, v in {"query": query, "context": context}.items()
                                   if k in impl.argnames})
            parts.extend(res or [])
        except Exception as exc:
            log.warning("filter extractor %s failed: %s", impl.plugin_name, exc)
            errors.append({"extractor": impl.plugin_name, "error": f"{type(exc).__name__}: {exc}"})
    return parts, errors


def merge_parts(org_id, now: datetime, parts: list[FilterPart]) -> Prefilter:
    """First part of each field wins, except list fields, which accumulate."""
    pf = Prefilter(organization_id=str(org_id), now=now)
    seen: set = set()
    for p in parts:
        f = p.field
        if f == "date_range":
            if "date_range" in seen:
                continue
            pf.date_start, pf.date_end = p.value["start"], p.value["end"]
            pf.past = bool(p.value.get("past"))
        elif f in ("category", "categories"):
            vals = p.value if isinstance(p.value, list) else [p.value]
            pf.categories.extend(v for v in vals if v not in pf.categories)
        elif f in ("tag", "tags"):
            vals = p.value if isinstance(p.value, list) else [p.value]
            pf.tags.extend(v for v in vals if v not in pf.tags)
        elif f in ("price_min", "price_max", "in_stock", "city", "venue", "past") and f not in seen:
            setattr(pf, f, p.value)
        elif f == "roles":
            pf.roles.extend(p.value)
        elif f == "source_types":
            pf.source_types.extend(p.value)
        seen.add(f)
    return pf


def describe_parts(parts: list[FilterPart]) -> list[dict]:
    out = []
    for p in parts:
        val = p.value
        if isinstance(val, dict):
            val = {k: (v.isoformat() if hasattr(v, "isoformat") else v) for k, v in val.items()}
        out.append({"field": p.field, "value": val, "extractor": p.extractor, "matched": p.matched})
    return out
