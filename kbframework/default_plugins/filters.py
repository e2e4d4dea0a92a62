"""Built-in filter extractors (rule-based, no LLM): temporal intent first."""
from __future__ import annotations

from kbframework.hooks.markers import hookimpl
from kbframework.types import FilterPart


@hookimpl(trylast=True)
def kb_extract_filters(query, context):
    try:
        from kbframework.retrieval.temporal import parse_temporal
    except ImportError:
        return []
    intent = parse_temporal(query, context["now"], context.get("timezone", "UTC"),
                            context.get("night_cutoff"))
    if intent is None:
        return []
    return [FilterPart("date_range", {"start": intent.start, "end": intent.end, "kind": intent.kind,
                                      "past": intent.past},
                       extractor="temporal", matched=intent.phrase)]
