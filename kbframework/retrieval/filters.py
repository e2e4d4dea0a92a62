"""Query-time metadata filters (date, price, category, stock, city) read from the question and
applied before vector and keyword search: every ``kb_extract_filters`` plugin, the
organization's vocabulary, vetting, and the merge into one ``Prefilter``.

    extract_filter_parts(query, context)
      1. vocabulary     the organization's categories, tags, cities and venues (from its
                        documents; cached per organization for a minute) → context["vocabulary"]
      2. extractors     every plugin; a slow one (``fn.kb_parallel = True``, the LLM planner)
                        runs in a thread while the rule-based ones run here; a failing one is
                        logged and skipped
      3. vet            a tag/category part becomes a filter only when that label describes
                        most of the products/events whose text mentions the word (a shop that
                        tags 3 of its 30 waterproof jackets "waterproof" must not hide the
                        other 27); the rest are kept in the debug as "not applied"
    merge_parts       first part of a field wins (rule-based extractors come first), lists add up

Every part is logged with the extractor that found it.
"""
from __future__ import annotations

import contextvars
import logging
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from datetime import datetime

from sqlalchemy import text

from kbframework.hooks.manager import get_plugin_manager, trace, tracing
from kbframework.retrieval.search import FILTERED_ROLES, SERVABLE_STATUSES, Prefilter
from kbframework.types import FilterPart

log = logging.getLogger("kbframework.retrieval")

VOCAB_TTL = 60.0  # seconds
VOCAB_STALE_MAX = 600.0  # seconds a cached vocabulary past VOCAB_TTL answers while it is read again
COVERAGE_MIN = 0.8  # a label must describe (nearly) all the filtered documents that mention its word
PARALLEL_TIMEOUT = 8.0  # seconds the merge waits for a slow (LLM) extractor

_vocab_cache: dict = {}
_cover_cache: dict = {}
_cache_lock = threading.Lock()
_pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="kbf-filters")
_refresh_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kbf-vocabulary")
_refreshing: set = set()  # organizations whose vocabulary a background read is refreshing
_forgotten = 0  # how many times the cached vocabularies were forgotten


# --------------------------------------------------------------------------- vocabulary

# only the documents that give the vocabulary anything (products and events, documents with a
# city or a venue), by the partial index ``ix_documents_vocabulary`` (migration
# 0011_documents_vocabulary, the same predicate): an organization of notes reads none
_VOCAB_SQL = """
WITH d AS (
  SELECT d.tags, d.metadata, d.city, d.venue, d.document_role FROM documents d
  WHERE d.organization_id = :org AND d.status IN ('active', 'syncing', 'error')
    AND (d.document_role IN ('product', 'event') OR (d.city IS NOT NULL AND d.city <> '')
         OR (d.venue IS NOT NULL AND d.venue <> '')))
SELECT 'tag' AS kind, t AS value, count(*) FROM d, unnest(coalesce(d.tags, '{}'::text[])) t
  WHERE d.document_role IN ('product', 'event') GROUP BY 2
UNION ALL
SELECT 'category', c, count(*) FROM d, jsonb_array_elements_text(CASE WHEN jsonb_typeof(d.metadata->'categories')
  = 'array' THEN d.metadata->'categories' ELSE '[]'::jsonb END) c
  WHERE d.document_role IN ('product', 'event') GROUP BY 2
UNION ALL
SELECT 'city', d.city, count(*) FROM d WHERE d.city IS NOT NULL AND d.city <> '' GROUP BY 2
UNION ALL
SELECT 'venue', d.venue, count(*) FROM d WHERE d.venue IS NOT NULL AND d.venue <> '' GROUP BY 2
"""


def org_vocabulary(session, org_id) -> dict:
    """{"tags": [...], "categories": [...], "cities": [...], "venues": [...], "version": str}.

    Read from the organization's own documents (tags and categories of products and
    events, every document's city and venue); cached for a minute per organization. Past the
    minute the cached one still answers while a background thread reads it again
    (``_refresh_vocabulary``): a shop's vocabulary reads all its products, and the visitor whose
    question came a minute after the last read paid for it. Only one unused for
    ``VOCAB_STALE_MAX`` is read again before answering."""
    key = str(org_id)
    now = time.monotonic()
    with _cache_lock:
        hit = _vocab_cache.get(key)
        if hit and now - hit[0] < VOCAB_TTL:
            return hit[1]
        stale = hit is not None and now - hit[0] < VOCAB_STALE_MAX
        if stale and key not in _refreshing:
            _refreshing.add(key)
            _refresh_pool.submit(contextvars.copy_context().run, _refresh_vocabulary, key)
    if stale:
        return hit[1]
    return _read_vocabulary(session, key)


def _refresh_vocabulary(key: str) -> None:
    from kbframework import tenancy
    from kbframework.db import read_session_scope

    try:
        with tenancy.organization(key), read_session_scope() as s:
            _read_vocabulary(s, key)
    except Exception as exc:  # the cached vocabulary keeps answering; the next question tries again
        log.warning("vocabulary refresh for organization %s: %s", key, exc)
    finally:
        with _cache_lock:
            _refreshing.discard(key)


def _read_vocabulary(session, key: str) -> dict:
    now = time.monotonic()
    with _cache_lock:
        generation = _forgotten
    rows = session.execute(text(_VOCAB_SQL), {"org": key}).all()
    out: dict = {"tags": [], "categories": [], "cities": [], "venues": [], "counts": {}}
    plural = {"tag": "tags", "category": "categories", "city": "cities", "venue": "venues"}
    for kind, value, n in rows:
        if not isinstance(value, str) or not value.strip():
            continue
        out[plural[kind]].append(value)
        out["counts"][f"{kind}:{value.lower()}"] = n
    out["version"] = f"{key}:{now:.3f}"
    with _cache_lock:
        if generation == _forgotten:  # a read that began before a forget_vocabulary is not kept
            _vocab_cache[key] = (now, out)
    return out


def forget_vocabulary(org_id=None) -> None:
    global _forgotten
    with _cache_lock:
        _forgotten += 1
        if org_id is None:
            _vocab_cache.clear()
            _cover_cache.clear()
        else:
            _vocab_cache.pop(str(org_id), None)
            for k in [k for k in _cover_cache if k[0] == str(org_id)]:
                _cover_cache.pop(k, None)


_COVER_SQL = f"""
WITH m AS (
  SELECT DISTINCT d.id, EXISTS (SELECT 1 FROM unnest(coalesce(d.tags, '{{}}'::text[]) || ARRAY(
      SELECT jsonb_array_elements_text(CASE WHEN jsonb_typeof(d.metadata->'categories') = 'array'
      THEN d.metadata->'categories' ELSE '[]'::jsonb END))) t WHERE lower(t) = ANY(:vals)) AS labelled
  FROM chunks c JOIN documents d ON d.id = c.document_id
  WHERE c.organization_id = :org AND d.organization_id = :org
    AND d.document_role IN {tuple(FILTERED_ROLES)!r} AND d.status IN {tuple(SERVABLE_STATUSES)!r}
    AND c.tsv @@ plainto_tsquery('english', :term))
SELECT count(*) FILTER (WHERE labelled), count(*) FROM m
"""


def label_coverage(session, org_id, values: list[str], term: str) -> tuple[int, int]:
    """(labelled, mentioning): of the products/events whose text mentions ``term``, how many
    carry one of the labels ``values``. Cached for a minute per organization and term."""
    key = (str(org_id), term.lower(), tuple(sorted(v.lower() for v in values)))
    now = time.monotonic()
    with _cache_lock:
        hit = _cover_cache.get(key)
        if hit and now - hit[0] < VOCAB_TTL:
            return hit[1]
    row = session.execute(text(_COVER_SQL), {"org": str(org_id), "term": term,
                                             "vals": [v.lower() for v in values]}).one()
    res = (int(row[0]), int(row[1]))
    with _cache_lock:
        _cover_cache[key] = (now, res)
    return res


# --------------------------------------------------------------------------- extraction


def _call(impl, query, context):
    t0 = time.perf_counter()
    try:
        res = impl.function(**{k: v for k, v in {"query": query, "context": context}.items()
                               if k in impl.argnames})
    except Exception as exc:
        if tracing():
            trace("kb_extract_filters", [impl.plugin_name], (time.perf_counter() - t0) * 1000, exc)
        raise
    ms = round((time.perf_counter() - t0) * 1000, 2)
    if tracing():
        trace("kb_extract_filters", [impl.plugin_name], ms)
    return list(res or []), ms


def extract_filter_parts(query: str, context: dict) -> tuple[list[FilterPart], list[dict]]:
    """Run every ``kb_extract_filters`` implementation and vet the parts.

    Returns (parts, errors). Parts the host does not apply carry ``dropped`` (a reason);
    ``merge_parts`` skips them and ``describe_parts`` shows them."""
    session = context.get("session")
    org_id = context.get("organization_id")
    if "vocabulary" not in context:
        try:
            context["vocabulary"] = org_vocabulary(session, org_id) if session is not None and org_id else {}
        except Exception as exc:  # the vocabulary is a help, never a reason to fail the chat
            log.warning("vocabulary for %s failed: %s", org_id, exc)
            context["vocabulary"] = {}
    pm = get_plugin_manager()
    impls = list(reversed(pm.hook.kb_extract_filters.get_hookimpls()))  # registration order, built-ins last
    # merge order (the first part of a field wins): installed plugins (they override the host),
    # then the built-in rule-based extractors, then slow ones such as the LLM planner
    impls.sort(key=lambda i: (bool(getattr(i.function, "kb_parallel", False)),
                              1 if i.plugin_name.startswith("kbframework.") else 0))
    parts: list[FilterPart] = []
    errors: list[dict] = []
    timings: dict = {}
    if context.get("rules_only"):  # re-reading an earlier turn: no model call
        impls = [i for i in impls if not getattr(i.function, "kb_parallel", False)]
    # each extractor thread runs in this request's (or job's) tenant scope: a pool thread does not
    # inherit context variables
    futures = [(impl, _pool.submit(contextvars.copy_context().run, _call, impl, query, context)) for impl in impls
               if getattr(impl.function, "kb_parallel", False)]
    for impl in impls:
        if getattr(impl.function, "kb_parallel", False):
            continue
        try:
            got, ms = _call(impl, query, context)
            parts.extend(got)
            timings[impl.plugin_name] = ms
        except Exception as exc:
            log.warning("filter extractor %s failed: %s", impl.plugin_name, exc)
            errors.append({"extractor": impl.plugin_name, "error": f"{type(exc).__name__}: {exc}"})
    wait = float((context.get("settings") or {}).get("planner_timeout", PARALLEL_TIMEOUT))
    for impl, fut in futures:
        try:
            got, ms = fut.result(timeout=wait)
            parts.extend(got)
            timings[impl.plugin_name] = ms
        except FutureTimeout:
            errors.append({"extractor": impl.plugin_name, "error": f"no answer within {wait:g} s; skipped"})
        except Exception as exc:
            log.warning("filter extractor %s failed: %s", impl.plugin_name, exc)
            errors.append({"extractor": impl.plugin_name, "error": f"{type(exc).__name__}: {exc}"})
    context["extractor_timings_ms"] = timings
    _vet(parts, context)
    for p in parts:
        log.info("filter part %s=%r from %s (%r)%s", p.field, _plain(p.value), p.extractor, p.matched,
                 f" not applied: {p.dropped}" if getattr(p, "dropped", None) else "")
    return parts, errors


def _vet(parts: list[FilterPart], context: dict) -> None:
    """Mark tag/category parts whose label does not describe what the word describes."""
    session, org_id = context.get("session"), context.get("organization_id")
    vocab = context.get("vocabulary") or {}
    known = {v.lower() for k in ("tags", "categories") for v in vocab.get(k, [])}
    for p in parts:
        if p.field not in ("tag", "tags", "category", "categories"):
            continue
        vals = [v for v in (p.value if isinstance(p.value, list) else [p.value]) if isinstance(v, str)]
        if not vals or (known and not any(v.lower() in known for v in vals)):
            p.dropped = "not in the organization's tags or categories"
            continue
        term = getattr(p, "term", None) or p.matched or vals[0]
        if session is None or not org_id:
            continue
        try:
            labelled, mentioning = label_coverage(session, org_id, vals, term)
        except Exception as exc:
            log.warning("coverage of %r failed: %s", term, exc)
            continue
        p.coverage = {"labelled": labelled, "mentioning": mentioning}
        if mentioning and labelled / mentioning < COVERAGE_MIN:
            p.dropped = (f"the label covers only {labelled} of the {mentioning} products/events that "
                         f"mention '{term}'; searching the text instead")


def merge_parts(org_id, now: datetime, parts: list[FilterPart]) -> Prefilter:
    """First part of each field wins, except list fields, which accumulate. Dropped parts are skipped."""
    pf = Prefilter(organization_id=str(org_id), now=now)
    seen: set = set()
    groups: dict = {}  # one group per word of the query: labels of one word are alternatives
    for p in parts:
        if p.field in ("category", "categories", "tag", "tags") and not getattr(p, "dropped", None):
            vals = [v for v in (p.value if isinstance(p.value, list) else [p.value]) if isinstance(v, str)]
            key = (getattr(p, "term", None) or p.matched or "").lower() or f"{p.extractor}:{p.field}:{id(p)}"
            g = groups.setdefault(key, [])
            g.extend(v for v in vals if v not in g)
    pf.label_groups = [g for g in groups.values() if g]
    for p in parts:
        if getattr(p, "dropped", None):
            continue
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
        elif f in ("price_min", "price_max", "in_stock", "city", "venue", "past", "order") and f not in seen:
            setattr(pf, f, p.value)
        elif f == "roles":
            pf.roles.extend(p.value)
        elif f == "source_types":
            pf.source_types.extend(p.value)
        seen.add(f)
    if pf.price_min is not None and pf.price_max is not None and pf.price_min > pf.price_max:
        pf.price_min, pf.price_max = pf.price_max, pf.price_min
    return pf


def _plain(val):
    if isinstance(val, dict):
        return {k: (v.isoformat() if hasattr(v, "isoformat") else v) for k, v in val.items()}
    return val


def describe_parts(parts: list[FilterPart]) -> list[dict]:
    out = []
    for p in parts:
        d = {"field": p.field, "value": _plain(p.value), "extractor": p.extractor, "matched": p.matched,
             "applied": not getattr(p, "dropped", None)}
        if getattr(p, "dropped", None):
            d["why_not"] = p.dropped
        if getattr(p, "coverage", None):
            d["coverage"] = p.coverage
        out.append(d)
    return out


_ORDER_WORDS = {"price_asc": "cheapest first", "price_desc": "dearest first", "start_asc": "earliest first",
                "start_desc": "latest first"}


def explain(parts: list[FilterPart], pf: Prefilter, tz: str | None = None) -> list[str]:
    """Plain sentences for the admin debug: what restricted the search, and who found it."""
    from zoneinfo import ZoneInfo

    zone = ZoneInfo(tz) if tz else None
    lines: list[str] = []
    labels: dict = {}  # one line per word: its labels are alternatives
    for p in parts:
        who = f"({p.extractor}, from '{p.matched}')" if p.matched else f"({p.extractor})"
        if getattr(p, "dropped", None):
            lines.append(f"ignored {p.field} {_plain(p.value)!r} {who}: {p.dropped}")
            continue
        v = p.value
        if p.field == "date_range":
            a, b = v["start"], v["end"]
            if zone:
                a, b = a.astimezone(zone), b.astimezone(zone)
            lines.append(f"events overlapping {a:%a %d %b %H:%M} – {b:%a %d %b %H:%M}"
                         f"{' (past events included)' if v.get('past') else ''} {who}")
        elif p.field == "price_max" and v == 0:
            lines.append(f"free products/events only (price 0) {who}")
        elif p.field == "price_max":
            lines.append(f"products/events priced at most {v:g} {who}")
        elif p.field == "price_min":
            lines.append(f"products/events priced at least {v:g} {who}")
        elif p.field == "in_stock":
            lines.append(f"products in stock only {who}")
        elif p.field in ("tag", "tags", "category", "categories"):
            key = (getattr(p, "term", None) or p.matched or str(id(p))).lower()
            vals = [x for x in (v if isinstance(v, list) else [v])]
            if key in labels:
                labels[key][1].extend(x for x in vals if x not in labels[key][1])
            else:
                labels[key] = [len(lines), vals, who]
                lines.append("")
        elif p.field in ("city", "venue"):
            lines.append(f"events in {p.field} {v!r} {who}")
        elif p.field == "currency":
            continue
        elif p.field == "order":
            lines.append(f"listed {_ORDER_WORDS.get(v, v)} {who}")
        else:
            lines.append(f"{p.field} = {_plain(v)!r} {who}")
    for pos, vals, who in labels.values():
        lines[pos] = f"products/events labelled {' or '.join(map(repr, vals))} {who}"
    if pf.date_start is None and not pf.past:
        lines.append("no time in the question: events that have not ended yet")
    return [x for x in lines if x]


_CONSTRAINT_FIELDS = ("date_range", "price_min", "price_max", "currency", "in_stock", "order")
_CONTENT = re.compile(r"[^\W\d_]{3,}|\d+[^\W\d_]+|[A-Z]{2,}-?\d*", re.U)
_STOPWORDS = frozenset("""
what whats what's which who whom where when why how is are was were be been being am do does did
doing have has had having the and for any anything something some there their them they this that
these those with from into over under about your you our ours can could would should will shall may
might must please show tell give find get got me my mine let lets let's want wanna need looking look
on off out all just also only very really much many more most less least its it's it not no yes
going happening happens
""".split())


def _residual(query: str, parts: list[FilterPart]) -> str:
    out = query
    for p in parts:
        if p.field in _CONSTRAINT_FIELDS and p.matched and not getattr(p, "dropped", None):
            i = out.lower().find(p.matched.lower())
            if i >= 0:
                out = out[:i] + " " + out[i + len(p.matched):]
            else:  # a rewrite can split the phrase ("anything free" → "anything on Monday free")
                words = [re.compile(rf"(?<![\w-]){re.escape(w)}(?![\w-])", re.I) for w in p.matched.split()]
                if words and all(w.search(out) for w in words):
                    for w in words:
                        out = w.sub(" ", out, count=1)
    return " ".join(out.split()).strip(" ,;?!.")


# words that say what kind of answer is wanted, not what it is about: with a label or a bound
# beside them ("a gift for a music fan", "ideas for a coffee lover"), the filters say it all
_GENERIC = frozenset("event events thing things stuff item items product products option options plans "
                     "happening going fun party parties gift gifts present presents idea ideas fan fans "
                     "lover lovers enthusiast enthusiasts someone somebody recommend recommendation "
                     "recommendations suggest suggestion suggestions sell sells selling offer offers carry "
                     "carries".split())


def has_content(text_: str, generic: bool = False) -> bool:
    skip = _STOPWORDS | _GENERIC if generic else _STOPWORDS
    return any(w.lower() not in skip for w in _CONTENT.findall(text_))


def constraint_only(query: str, parts: list[FilterPart], pf: Prefilter) -> bool:
    """"what's on tonight?", "anything under €20 in stock?": the filters say it all, so the
    documents that pass them are the answer (listed by date), whatever their similarity."""
    return bool(pf.date_start or pf.price_max is not None or pf.price_min is not None or pf.in_stock
                or pf.label_groups or pf.city or pf.venue or pf.order) \
        and not has_content(_residual_labels(query, parts), generic=True)


def _residual_labels(query: str, parts: list[FilterPart]) -> str:
    out = _residual(query, parts)
    for p in parts:  # labels and places are constraints too, for this question
        if p.field in ("tag", "tags", "category", "categories", "city", "venue") and p.matched \
                and not getattr(p, "dropped", None):
            out = re.sub(re.escape(p.matched), " ", out, flags=re.I)
    return out


_PRICE_LOW = "coalesce(kb_num(d.metadata->>'price_min'), kb_num(d.metadata->>'price'))"
_PRICE_HIGH = "coalesce(kb_num(d.metadata->>'price_max'), kb_num(d.metadata->>'price'))"
_LISTING_ORDER = {"price_asc": "x.price_low ASC NULLS LAST", "price_desc": "x.price_high DESC NULLS LAST",
                  "start_asc": "x.event_start ASC NULLS LAST", "start_desc": "x.event_start DESC NULLS LAST"}


def listing_hits(session, pf: Prefilter, k: int = 20) -> list:
    """The third leg for constraint-only questions: documents passing the pre-filter (events
    when a date, city or venue was asked, else products and events), soonest event first."""
    from kbframework.retrieval.search import Hit, bind

    where, p = pf.sql()
    # a date, a city or a venue constrains events only: the products that pass them are not listed
    events_only = pf.date_start is not None or bool(pf.city) or bool(pf.venue)
    p.update(k=k, lroles=("event",) if events_only else tuple(FILTERED_ROLES))
    order = _LISTING_ORDER.get(pf.order, "x.event_start ASC NULLS LAST")
    rows = session.execute(bind(
        "SELECT * FROM (SELECT DISTINCT ON (d.id) c.id, d.id AS did, d.event_start, d.title, "
        f"{_PRICE_LOW} AS price_low, {_PRICE_HIGH} AS price_high FROM chunks c "
        "JOIN documents d ON d.id = c.document_id WHERE c.organization_id = :org AND d.document_role IN :lroles "
        f"AND {where} ORDER BY d.id, c.chunk_index) x ORDER BY {order}, x.title LIMIT :k", p),
        p).all()
    return [Hit(r[0], str(r[1]), i + 1, 0.0, "listing") for i, r in enumerate(rows)]


def nearest_price_hits(session, pf: Prefilter, k: int = 3) -> list:
    """When only the price bound left nothing ("accessories under €15"): the products and
    events that meet every other constraint, nearest to the bound first (the cheapest for a
    maximum, the dearest for a minimum)."""
    from dataclasses import replace

    from kbframework.retrieval.search import Hit, bind

    if pf.price_max is None and pf.price_min is None:
        return []
    relaxed = replace(pf, price_max=None, price_min=None)
    where, p = relaxed.sql()
    price, order = (_PRICE_LOW, "ASC") if pf.price_max is not None else (_PRICE_HIGH, "DESC")
    p.update(k=k, lroles=tuple(FILTERED_ROLES))
    rows = session.execute(bind(
        f"SELECT * FROM (SELECT DISTINCT ON (d.id) c.id, d.id AS did, {price} AS price, d.title FROM chunks c "
        "JOIN documents d ON d.id = c.document_id WHERE c.organization_id = :org AND d.document_role IN :lroles "
        f"AND {where} ORDER BY d.id, c.chunk_index) x WHERE x.price IS NOT NULL "
        f"ORDER BY x.price {order}, x.title LIMIT :k", p), p).all()
    nearest = float(rows[0][2]) if rows else None
    if nearest is None or (pf.price_max is not None and nearest <= pf.price_max) \
            or (pf.price_min is not None and nearest >= pf.price_min):
        return []  # something meets the price: it was not the price that left nothing
    return [Hit(r[0], str(r[1]), i + 1, 0.0, "nearest_price") for i, r in enumerate(rows)]


def nearest_event_hits(session, pf: Prefilter, k: int = 3) -> list:
    """When the time window left nothing ("anything on Monday?", "techno on Thursday?"): the
    events still to come that meet every other constraint, nearest to the window first (the
    Sunday before a Monday, the Saturday after a Thursday)."""
    from dataclasses import replace

    from kbframework.retrieval.search import Hit, bind, count_candidates

    if pf.date_start is None or pf.date_end is None or pf.past:
        return []
    if count_candidates(session, replace(pf, roles=["event"]), cap=1):
        return []  # an event in the window meets the rest: it was not the time that left nothing
    relaxed = replace(pf, date_start=None, date_end=None)
    where, p = relaxed.sql()
    p.update(k=k, rs=pf.date_start, re_=pf.date_end)
    rows = session.execute(bind(
        "SELECT * FROM (SELECT DISTINCT ON (d.id) c.id, d.id AS did, d.event_start, d.title "
        "FROM chunks c JOIN documents d ON d.id = c.document_id WHERE c.organization_id = :org "
        f"AND d.document_role = 'event' AND d.event_start IS NOT NULL AND {where} ORDER BY d.id, c.chunk_index) x "
        "ORDER BY least(abs(extract(epoch FROM x.event_start - :rs)), abs(extract(epoch FROM x.event_start - :re_))), "
        "x.event_start, x.title LIMIT :k", p), p).all()
    return [Hit(r[0], str(r[1]), i + 1, 0.0, "nearest_events") for i, r in enumerate(rows)]


def search_text(query: str, parts: list[FilterPart]) -> str:
    """The query the two legs search with: the applied date, price and stock phrases removed
    (the pre-filter enforces them; left in, "under €30" matches "30 days" in a return policy).
    Labels, places and everything else stay. When nothing with content is left ("what's on
    tonight?"), the query is returned whole."""
    out = _residual(query, parts)
    return out if has_content(out) else query
