"""Built-in temporal filter extractor (rule-based, no LLM): the first time phrase of the
query as a range in the organization's time zone, with its night cut-off and, when the
organization says so (``settings.extra["weekend_starts_friday"]``), a weekend from Friday 18:00."""
from __future__ import annotations

from kbframework.hooks.markers import hookimpl


@hookimpl(trylast=True)
def kb_extract_filters(query, context):
    from kbframework.retrieval.temporal import parse_temporal
    from kbframework.types import FilterPart

    settings = context.get("settings") or {}
    friday = context.get("weekend_starts_friday")
    if friday is None:
        friday = settings.get("weekend_starts_friday")
    intent = parse_temporal(query, context["now"], context.get("timezone") or "UTC",
                            context.get("night_cutoff"), weekend_starts_friday=bool(friday))
    if intent is None:
        return []
    return [FilterPart("date_range", {"start": intent.start, "end": intent.end, "kind": intent.kind,
                                      "past": intent.past},
                       extractor="temporal", matched=intent.phrase)]
