"""The answer pipeline as named steps, run in order by ``answer()`` and traced one by one.

    STEPS (each ``fn(session, turn) -> output`` for the trace; ``when`` says if it runs)
      load_context      organization, settings, preset (mode), time zone, night cut-off
      budget            the hard budget stop (no model call when the month's budget is spent)
      conversation      the history (the client's, else the session's log); the turn classified
                        standalone / follow-up / topic shift; what the previous answer showed
      rewrite_query     a follow-up becomes a standalone query (LLM when configured, else rules)
      extract_filters   every extractor plugin; parts vetted and merged into one pre-filter
      inherit_filters   a follow-up keeps the previous turn's time, place, price, stock and labels
                        unless it overrides them; "cheaper"/"later" add a bound from what was shown
      prefilter         active, non-expired documents of the organization matching the filters
      place_check       events asked for in a place that has none: "I have no events in X", no cards
      expand_query      neighbours of the question's words from the offline embedder's token table,
                        that the organization's chunks use, for the keyword leg's any-term tier
      embed_query       the question's content words (no stop words), once per embedding model the
                        organization's chunks use (the keyword leg starts here, on its own connection)
      vector_search     top k by cosine similarity, beside the keyword leg
      keyword_search    top k by BM25 over the weighted full text, on its own connection, in parallel
      listing           the matching documents, when the question is all constraints
      soft_match        the legs' chunks re-scored word by word in the embedder's token table (each
                        question word's best cosine among the passage's words), a third ranked list
      rrf               Σ w/(60 + rank), equal weights (the soft-match leg ½) unless the preset or a
                        SKU-shaped query tilts a leg (the untilted order beside it in the trace)
      role_boost        the preset's role priority (×1.3, ×1.1), the roles the question asks for first
                        (policy → support, time window or events asked for → events, price →
                        products), a venue's own page ×1.3 when the venue is asked for; a re-rank
      identity          a product, SKU or title named exactly goes first
      referents         the documents a follow-up points at go first
      select_context    top N, character budget, source diversity
      answerability     the gate: does the evidence answer the question?
      fallback          below the gate: the preset's fallback text, closest matches, no LLM call
      build_prompt      preset prompt + last N messages + numbered passages
      call_llm          OpenAI-compatible, or the offline extractive answerer
      build_cards       from the selected documents' columns (never from model output)
      log               the chat_logs row with the trace
"""
from __future__ import annotations

import contextvars
import logging
import re
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, time as dtime
from typing import Callable, Optional

from sqlalchemy import select, text

from kbframework.settings.store import values_of as settings_values
from kbframework.hooks import registry
from kbframework.db import session_scope, side_read_scope
from kbframework.errors import NotFound, ValidationFailed
from kbframework.hooks.manager import call_first, get_plugin_manager
from kbframework.ingest.chunker import page_label
from kbframework.ingest.embedding import usable_vector
from kbframework.models import ChatLog, Organization, Setting
from kbframework.retrieval import (answer_scope, conversation, expansion, fusion, gate, lexicon, place_answer,
                                   policy, referents, small_talk, soft_match)
from kbframework.retrieval.filters import (constraint_only, describe_parts, explain, extract_filter_parts,
                                           listing_hits, merge_parts, nearest_price_hits, nearest_event_hits,
                                           org_vocabulary, search_text)
from kbframework.retrieval.identity import name_index
from kbframework.retrieval.prompt import build_messages, prompt_preview, render_system
from kbframework.retrieval.search import (Prefilter, apply_role_boost, count_candidates, keyword_search,
                                          org_models, rrf, vector_search)
from kbframework.retrieval.trace import Trace

log = logging.getLogger("kbframework.answer")

VECTOR_K = 20
KEYWORD_K = 20
CHAR_BUDGET = 18000
LLM_FAILURE_TEXT = ("I couldn't put an answer together just now, but these sources look relevant "
                    "to your question:")


@dataclass
class OrgContext:
    org: Organization
    settings: Setting
    preset: object
    mode: str
    tz: str
    cutoff: dtime
    brand: str
    limit: int
    floor: float
    history_window: int
    char_budget: int
    knowledge: str
    system_template: str
    fallback_text: str
    threshold: float = gate.THRESHOLD
    synonyms: dict = field(default_factory=dict)


# --------------------------------------------------------------------------- steps


def load_context(s, org_id, mode: str | None = None) -> OrgContext:
    org = s.get(Organization, org_id)
    if org is None:
        raise NotFound("Unknown organization.")
    st = s.scalar(select(Setting).where(Setting.organization_id == org.id)) or Setting(
        organization_id=org.id, preset="default", retrieval_limit=6, similarity_floor=0.2,
        history_window=6, night_cutoff="05:00")
    presets = registry.presets()
    preset = None
    if mode:
        preset = presets.get(mode) or next((p for p in presets.values() if p.mode == mode), None)
        if preset is None:
            raise ValidationFailed(f"Unknown mode '{mode}'. Available: {', '.join(sorted(presets))}.")
    preset = preset or registry.preset(st.preset)
    values = settings_values(st, org)
    hh, mm = (st.night_cutoff or "05:00").split(":")
    template = st.system_prompt if (st.system_prompt and not mode) else preset.prompt_template
    return OrgContext(org=org, settings=st, preset=preset, mode=preset.mode, tz=org.timezone,
                      cutoff=dtime(int(hh), int(mm)), brand=st.brand or org.name,
                      limit=st.retrieval_limit or preset.retrieval_limit,
                      floor=float(st.similarity_floor if st.similarity_floor is not None else 0.2),
                      history_window=st.history_window, char_budget=int(values["char_budget"] or CHAR_BUDGET),
                      knowledge=values["knowledge"] or preset.knowledge, system_template=template,
                      fallback_text=values["fallback_text"] or preset.fallback_text,
                      threshold=_threshold(values["answer_threshold"]),
                      synonyms=policy.synonyms_with_builtins(
                          values["synonyms"] if isinstance(values["synonyms"], dict) else {}))


def _threshold(v) -> float:
    """The organization's answerability threshold, else the calibrated default."""
    try:
        return float(v) if v is not None and not isinstance(v, bool) else gate.THRESHOLD
    except (TypeError, ValueError):
        return gate.THRESHOLD


def rewrite_query(question: str, history: list[dict], vocab: dict | None = None,
                  llm=None) -> tuple[str, str | None]:
    """A short referential follow-up becomes a standalone query: by the LLM when one is
    configured (``llm``), else offline (see ``conversation.rewrite_offline``)."""
    return conversation.rewrite(question, history, vocab=vocab, llm=llm)


def _vocabulary(s, org_id) -> dict:
    try:
        return org_vocabulary(s, org_id)
    except Exception as exc:  # a help for rewriting and filters, never a reason to fail
        log.warning("vocabulary: %s", exc)
        return {}


def _rewriter(org_id=None, purpose: str = "rewrite"):
    """The configured LLM, metered under ``purpose``; None when only the offline answerer is there."""
    llm = registry.llm()
    if llm.quotes_passages:
        return None
    from kbframework.orgs.budget import MeteredLLM

    return MeteredLLM(llm, org_id, purpose) if org_id else llm


def filter_context(s, ctx: OrgContext, now: datetime, history: list[dict]) -> dict:
    return {"now": now, "timezone": ctx.tz, "night_cutoff": ctx.cutoff,
            "organization_id": str(ctx.org.id), "history": history,
            "settings": settings_values(ctx.settings, ctx.org), "session": s,
            "weekend_starts_friday": bool(ctx.settings.weekend_starts_friday)}


def embed_query(s, org_id, query: str, ledger: list | None = None) -> tuple[dict, dict]:
    """Embed the query with every model the organization's chunks use (several during a
    model switch, so old vectors keep serving). Returns ({model: (dim, vec)}, debug).
    ``ledger``: a list to put the usage-ledger entries in for the caller to write (beside
    the searches) instead of writing them here."""
    out, dbg = {}, {"models": {}, "degraded": False}
    models = org_models(s, org_id) or {}
    for model in models:
        provider = registry.embedder_for_model(model)
        if provider is None:
            dbg["models"][model] = "no installed provider for this model"
            dbg["degraded"] = True
            continue
        t0 = time.perf_counter()
        try:
            vec = provider.embed_batch([query])[0]
            ms = round((time.perf_counter() - t0) * 1000, 2)
            entry = (org_id, "query_embedding", provider, provider.count_tokens(query), 0)
            _ledger(*entry) if ledger is None else ledger.append(entry)
            if not usable_vector(vec):  # NaN would fail the search in PostgreSQL, zeros match nothing
                dbg["models"][model] = "no usable vector for this query (NaN, infinite or all zeros)"
                dbg["degraded"] = True
                continue
            out[model] = (provider.dim, vec)
            dbg["models"][model] = {"ms": ms}
        except Exception as exc:  # a provider plugin's failure: the keyword leg still answers
            log.warning("embedding the query with %s failed", model, exc_info=True)
            dbg["models"][model] = f"failed: {type(exc).__name__}: {exc}"
            dbg["degraded"] = True
    if dbg["degraded"]:
        dbg["note"] = "No query vector for at least one model: the keyword leg carries retrieval."
    return out, dbg


def select_context(s, org_id, fused: list[dict], limit: int, budget: int) -> list[dict]:
    """Top chunks in fused order, one per document first (diversity), within a character budget."""
    if not fused:
        return []
    ids = [f["chunk_id"] for f in fused[: max(limit * 4, 20)]]
    rows = s.execute(text(
        "SELECT c.id, c.document_id, c.chunk_index, c.content, c.heading, c.token_count, c.metadata, "
        "d.title, d.type, d.document_role, d.source_url, d.external_id, d.event_start, d.event_end, "
        "d.venue, d.city, d.primary_image_url, d.metadata AS dmeta, d.normalized_content, s.type AS stype "
        "FROM chunks c JOIN documents d ON d.id = c.document_id AND d.organization_id = c.organization_id "
        "JOIN sources s ON s.id = d.source_id AND s.organization_id = c.organization_id "
        "WHERE c.organization_id = :org AND c.id = ANY(:ids)"), {"org": str(org_id), "ids": ids}).mappings().all()
    by_id = {r["id"]: r for r in rows}
    picked, used_docs, total = [], set(), 0
    ordered = [f for f in fused if f["chunk_id"] in by_id]
    for pass_no in (1, 2):
        for f in ordered:
            if len(picked) >= limit:
                break
            r = by_id[f["chunk_id"]]
            if any(p["chunk_id"] == r["id"] for p in picked):
                continue
            if pass_no == 1 and r["document_id"] in used_docs:
                continue
            if total + len(r["content"]) > budget and picked:
                continue
            picked.append({**dict(r), "chunk_id": r["id"], "fused": f})
            used_docs.add(r["document_id"])
            total += len(r["content"])
    picked.sort(key=lambda p: p["fused"].get("final_rank", p["fused"]["rank"]))
    for i, p in enumerate(picked):
        p["n"] = i + 1
    return picked


def passage_view(p: dict, tz: str | None = None) -> dict:
    """What the prompt and the offline answerer see of a passage: its text and its document's
    structured fields (date in the organization's zone, venue, price, stock, links)."""
    meta = p["dmeta"] or {}
    from kbframework.default_plugins.cards import format_price
    from kbframework.addresses import safe_link

    structured = p["document_role"] in ("product", "event")
    stock = meta.get("in_stock") if p["document_role"] == "product" else None
    ticket = meta.get("ticket_url") if p["document_role"] == "event" else None
    return {"n": p["n"], "title": p["title"], "content": p["content"], "role": p["document_role"],
            "date": p["event_start"].isoformat() if p["event_start"] else None,
            "when": _when(p["event_start"], p["event_end"], tz),
            "venue": ", ".join(x for x in (p["venue"], p["city"]) if x) or None,
            "price": format_price(meta) if structured else None,
            "stock": None if stock is None else ("in stock" if stock in (True, "true", 1) else "out of stock"),
            "url": safe_link(p["source_url"]), "ticket_url": safe_link(ticket),
            "pages": page_label(p["metadata"] or {})}


def _when(start, end, tz: str | None) -> str | None:
    """"Saturday 18 April, 23:00–05:00" in the organization's time zone."""
    if start is None:
        return None
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        zone = ZoneInfo(tz or "UTC")
    except (ZoneInfoNotFoundError, ValueError):  # a zone this system does not know
        zone = ZoneInfo("UTC")
    a = start.astimezone(zone)
    out = f"{a:%A} {a.day} {a:%B}, {a:%H:%M}"
    if end is not None:
        out += f"–{end.astimezone(zone):%H:%M}"
    return out


def call_llm(ctx: OrgContext, messages: list[dict], question: str, passages: list[dict],
             on_token: Optional[Callable[[str], None]] = None) -> tuple[object, dict]:
    llm = registry.llm()
    t0 = time.perf_counter()
    dbg = {"provider": llm.name, "model": llm.model}
    from kbframework.orgs.budget import BudgetExceeded, spending

    try:
        with spending(ctx.org.id):  # offline answers are metered too: a token budget counts them
            if llm.quotes_passages:
                res = llm.complete(messages, passages=passages, question=question,
                                   stream=on_token is not None, on_token=on_token)
            else:
                res = llm.complete(messages, stream=on_token is not None, on_token=on_token)
            _ledger(ctx.org.id, "completion", llm, res.tokens_in, res.tokens_out)
    except BudgetExceeded as exc:  # the month's budget: the budget message answers instead
        dbg["budget_exceeded"] = True
        dbg["error"] = f"{type(exc).__name__}: {exc}"
        dbg["ms"] = round((time.perf_counter() - t0) * 1000, 1)
        return None, dbg
    except Exception as exc:  # the provider plugin's call: the fallback answer is given instead
        log.warning("the answer model %s failed", llm.name, exc_info=True)
        dbg["error"] = f"{type(exc).__name__}: {getattr(exc, 'message', exc)}"
        dbg["ms"] = round((time.perf_counter() - t0) * 1000, 1)
        return None, dbg
    dbg.update(ms=round((time.perf_counter() - t0) * 1000, 1), used_llm=res.used_llm,
               tokens_in=res.tokens_in, tokens_out=res.tokens_out)
    if res.note:
        dbg["note"] = res.note
    return res, dbg


def strip_unknown_links(answer: str, allowed: set[str]) -> tuple[str, list[str]]:
    """Links the evidence does not contain are removed from the answer (field notes)."""
    removed = []

    def repl(m):
        url = m.group(0).rstrip(").,;]")
        tail = m.group(0)[len(url):]
        if url in allowed or url.rstrip("/") in {a.rstrip("/") for a in allowed}:
            return m.group(0)
        removed.append(url)
        return "[link removed]" + tail

    return re.sub(r"https?://[^\s<>\"')\]]+[^\s<>\"]*", repl, answer), removed


def build_cards(passages: list[dict], preset) -> list[dict]:
    pm = get_plugin_manager()
    cards, seen = [], set()
    allowed = set(preset.card_types or [])
    for p in passages:
        if p["document_id"] in seen:
            continue
        seen.add(p["document_id"])
        doc = {"id": p["document_id"], "title": p["title"], "type": p["type"],
               "document_role": p["document_role"], "source_url": p["source_url"],
               "primary_image_url": p["primary_image_url"], "event_start": p["event_start"],
               "event_end": p["event_end"], "venue": p["venue"], "city": p["city"],
               "metadata": p["dmeta"] or {}, "normalized_content": p["normalized_content"]}
        card = call_first(pm, "kb_build_card", document=doc, preset=preset)  # a raising plugin is skipped
        if card is None or (allowed and card.type not in allowed):
            continue
        if card.type == "article" and p["document_role"] not in ("article", "support") \
                and not p["source_url"]:
            continue  # a manual note without a link makes a poor card
        cards.append(card.as_dict())
    return cards


def build_sources(passages: list[dict], question: str = "") -> list[dict]:
    """The sources list. A passage that spans pages cites the page its best-matching text is
    on ("page 12"), keeps the whole range in ``page_range``, and its snippet starts at the
    sentence that answers, so a reader can check it."""
    from kbframework.ingest.chunker import best_spot
    from kbframework.providers.extractive import _terms

    terms = _terms(question)
    out = []
    for p in passages:
        meta = p["metadata"] or {}
        content = re.sub(r"(?m)^#{1,6}\s+", "", p["content"])  # no markdown heading marks
        pages = page_label(meta)
        page, start = best_spot(meta, p["content"], terms)
        if page is not None:
            pages = f"page {page}"
            content = re.sub(r"(?m)^#{1,6}\s+", "", p["content"][start:])
        snippet = " ".join(content.split())
        out.append({"n": p["n"], "document_id": str(p["document_id"]), "document_title": p["title"],
                    "chunk_id": p["chunk_id"], "source_type": p["stype"], "document_type": p["type"],
                    "document_role": p["document_role"], "source_url": p["source_url"],
                    "external_id": p["external_id"], "pages": pages, "page_range": page_label(meta),
                    "snippet": snippet[:280] + ("…" if len(snippet) > 280 else "")})
    return out


def _ledger(org_id, purpose, provider, tin, tout):
    try:
        from kbframework.orgs.usage import record_usage

        record_usage(org_id, purpose, provider.name, provider.model, tin, tout)
    except Exception as exc:
        log.warning("ledger: %s", exc)


def _relaxed_alternatives(s, ctx: OrgContext, pf: Prefilter, query: str, debug: dict) -> dict | None:
    """Alternatives that give up one constraint only, the one that left nothing: "accessories
    under €15" → the accessories nearest that price (Cap €16, Beanie €18); "anything on
    Monday?" → the events nearest to Monday. Not whatever a search without any filter finds."""
    if pf.price_max is not None or pf.price_min is not None:
        bound = f"at most {pf.price_max:g}" if pf.price_max is not None else f"at least {pf.price_min:g}"
        found = _alternatives_from(s, ctx, query, debug, nearest_price_hits(s, pf), "price",
                                   "Nothing at that price — the nearest prices",
                                   f"every constraint but the price ({bound}), nearest price first")
        if found:
            return found
    if pf.date_start is not None:
        return _alternatives_from(s, ctx, query, debug, nearest_event_hits(s, pf), "date_range",
                                  "Nothing at that time — the nearest dates",
                                  "every constraint but the time window, the events nearest to it first")
    return None


def _alternatives_from(s, ctx: OrgContext, query: str, debug: dict, hits: list, relaxed: str, label: str,
                       why: str) -> dict | None:
    if not hits:
        return None
    passages = select_context(s, ctx.org.id, rrf({relaxed: hits}), len(hits), ctx.char_budget)
    if not passages:
        return None
    debug["alternatives"] = {"without_filters": False, "relaxed": [relaxed], "count": len(passages)}
    debug["explain"].append(f"alternatives: {why}")
    return {"label": label, "relaxed": [relaxed], "cards": build_cards(passages, ctx.preset),
            "sources": build_sources(passages, query)}


def _fallback(s, ctx: OrgContext, pf: Prefilter, query: str, reason: str, debug: dict) -> dict:
    """Nothing cleared the threshold or the prefilter left nothing: no LLM call (with empty context
    it would invent an answer), the preset's fallback text, and closest matches without filters."""
    alternatives = _relaxed_alternatives(s, ctx, pf, query, debug)
    if alternatives is None and pf.has_filters:
        loose = Prefilter(organization_id=pf.organization_id, now=pf.now)
        qvecs, _ = embed_query(s, ctx.org.id, query)
        vec = []
        for model, (dim, v) in qvecs.items():
            vec.extend(vector_search(s, loose, model, dim, v, k=VECTOR_K, floor=ctx.floor)[0])
        kw, _ = keyword_search(s, loose, query, k=KEYWORD_K)
        fused = rrf({"vector": vec, "keyword": kw})
        roles = answer_scope.roles_of(s, ctx.org.id, {f["document_id"] for f in fused})
        passages = select_context(s, ctx.org.id, apply_role_boost(fused, roles,
                                                      ctx.preset.role_priority), 3, ctx.char_budget)
        if passages:
            alternatives = {"label": "No exact matches — here are some alternatives",
                            "cards": build_cards(passages, ctx.preset),
                            "sources": build_sources(passages, query)}
            debug["alternatives"] = {"without_filters": True, "count": len(passages)}
    return {"answer": ctx.fallback_text, "cards": [], "sources": [], "model": None, "tokens": (0, 0),
            "zero_result": True, "reason": reason, "alternatives": alternatives}


def _hit(h) -> dict:
    return {"chunk_id": h.chunk_id, "document_id": h.document_id, "rank": h.rank,
            "score": round(h.score, 6), **({"model": h.model} if h.model else {})}


def _jsonable(obj):
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, datetime):
        return obj.isoformat()
    if isinstance(obj, uuid.UUID):
        return str(obj)
    return obj


from concurrent.futures import Future, ThreadPoolExecutor  # noqa: E402

_POOL = ThreadPoolExecutor(max_workers=8, thread_name_prefix="kbf-keyword")


def _keyword_leg(pf, text_q, k: int = KEYWORD_K, expanded: dict | None = None, expand_for=None,
                 expanded_future: Future | None = None, done: Future | None = None):
    """The keyword leg on its own connection. With ``expand_for`` (the organization) the
    question's expansion runs first, on the same connection, and its result goes to
    ``expanded_future`` as (expansion, ms): the keyword leg is the one that needs it, so both run
    beside the pre-filter, the query embedding and the vector leg instead of before them.

    The hits go to ``done`` as soon as they are read, before the session ends: its closing
    round trip (the replica's transaction's end; the primary's side connection has none) is
    then no longer in front of the answer."""
    try:
        out = _keyword_leg_reads(pf, text_q, k, expanded, expand_for, expanded_future, done)
    except BaseException as exc:
        if done is not None and done.done():  # the hits were handed on: only the session's end failed
            log.warning("keyword leg, ending its session: %s: %s", type(exc).__name__, exc)
            return done.result()
        for f in (expanded_future, done):
            if f is not None and not f.done():
                f.set_exception(exc)
        raise
    if done is not None and not done.done():
        done.set_result(out)
    return out


def _keyword_leg_reads(pf, text_q, k, expanded, expand_for, expanded_future, done):
    """On a side connection (``side_read_scope``: not pinged on checkout), so a connection the
    server dropped is found by the first statement: the leg then runs once more, on a new one."""
    from sqlalchemy.exc import DBAPIError

    for attempt in (1, 2):
        try:
            return _keyword_leg_once(pf, text_q, k, expanded, expand_for, expanded_future, done)
        except DBAPIError as exc:
            if attempt == 2 or not exc.connection_invalidated or (done is not None and done.done()):
                raise
            log.info("keyword leg: the connection was dropped (%s); once more on a new one", exc.orig)


def _keyword_leg_once(pf, text_q, k, expanded, expand_for, expanded_future, done):
    from sqlalchemy.exc import DBAPIError

    t0 = time.perf_counter()
    with side_read_scope() as s2:
        if expand_for is not None:
            try:
                got = expansion.expand(s2, expand_for, text_q)
            except DBAPIError as exc:
                if exc.connection_invalidated:
                    raise  # the leg's connection is gone: the leg runs again
                log.warning("query expansion: %s", exc)
                got = {}
            except Exception as exc:  # a help for the keyword leg, never a reason to fail
                log.warning("query expansion: %s", exc)
                got = {}
            expanded = got.get("weights")
            if not expanded_future.done():
                expanded_future.set_result((got, round((time.perf_counter() - t0) * 1000, 2)))
            t0 = time.perf_counter()
        hits, dbg = keyword_search(s2, pf, text_q, k=k, expansion=expanded)
        out = hits, dbg, round((time.perf_counter() - t0) * 1000, 2)
        if done is not None:
            done.set_result(out)
    return out


def _budget_stop(org_id):
    """The hard budget stop: a status dict when it applies (no model call may be made)."""
    try:
        from kbframework.orgs.budget import blocked

        return blocked(org_id)
    except Exception as exc:  # a budget check that fails must not take answers down
        log.warning("budget check failed: %s", exc)
        return None


def _log_budget_stop(s, ctx, question, channel, user_id, key_id, session_id, st) -> dict:
    from kbframework.orgs.budget import EXCEEDED_TEXT

    mid = uuid.uuid4()
    debug = {"question": question, "reason": "budget_exceeded", "budget": st, "mode": ctx.mode}
    s.add(ChatLog(id=mid, organization_id=ctx.org.id, user_id=user_id, assistant_key_id=key_id,
                  session_id=session_id, channel=channel, query=question, mode=ctx.mode,
                  final_answer=EXCEEDED_TEXT, retrieval_debug=_jsonable(debug), reason="budget_exceeded"))
    return {"message_id": str(mid), "answer": EXCEEDED_TEXT, "cards": [], "sources": [], "mode": ctx.mode,
            "debug": _jsonable(debug)}


# --------------------------------------------------------------------------- the turn


@dataclass
class Turn:
    """One question on its way through the steps: the inputs, then what each step produced."""

    org_id: object
    question: str
    mode: str | None = None
    history: object = None
    channel: str = "admin"
    user_id: object = None
    assistant_key_id: object = None
    session_id: str | None = None
    now: datetime | None = None
    on_token: Optional[Callable[[str], None]] = None
    # evaluation knobs: the legs' depth, and switching rewriting or filters off
    k_vector: int = VECTOR_K
    k_keyword: int = KEYWORD_K
    use_rewrite: bool = True
    use_filters: bool = True
    retrieval_only: bool = False
    trace: Trace = field(default_factory=Trace)
    # the primary's session when the steps read from a replica: the chat log, the budget
    # stop and the session's own history (which must include the turn just written) use it
    writer: object = None
    ctx: "OrgContext | None" = None
    hist: list = field(default_factory=list)
    vocab: dict = field(default_factory=dict)
    kind: conversation.TurnKind = field(default_factory=conversation.TurnKind)
    shown: list = field(default_factory=list)
    shown_info: dict = field(default_factory=dict)
    query: str = ""
    rewrite_how: str | None = None
    parts: list = field(default_factory=list)
    pf: Prefilter | None = None
    text_q: str = ""
    candidates: int = 0
    qvecs: dict = field(default_factory=dict)
    kw_future: object = None
    expansion_future: object = None  # (expansion, ms), set by the keyword leg's thread
    usage: list = field(default_factory=list)  # usage-ledger entries the turn still has to write
    legs: dict = field(default_factory=dict)
    weights: dict = field(default_factory=dict)
    fused: list = field(default_factory=list)
    boosted: list = field(default_factory=list)
    identity: list = field(default_factory=list)
    pinned: list = field(default_factory=list)
    passages: list = field(default_factory=list)
    answerable: bool = False
    views: list = field(default_factory=list)
    messages: list = field(default_factory=list)
    llm_res: object = None
    result: dict | None = None
    debug: dict = field(default_factory=dict)
    message_id: uuid.UUID = field(default_factory=uuid.uuid4)
    done: bool = False
    place_miss: dict | None = None
    small_talk: str | None = None  # "greeting", "thanks", "farewell", "about": answered as such
    broaden: str | None = None  # "yes" to the fallback's offer: the question searched again, unfiltered
    hist_with_small_talk: list = field(default_factory=list)
    use_expansion: bool = True
    use_soft_match: bool = True
    soft_prep: dict | None = None  # the soft-match leg's look-ups made beside the keyword leg
    expansion: dict = field(default_factory=dict)


def load_context_step(s, t: Turn):
    t.ctx = load_context(s, t.org_id, t.mode)
    t.debug.update(question=t.question, mode=t.ctx.mode, preset=t.ctx.preset.name, explain=[])
    return {"organization": t.ctx.org.name, "mode": t.ctx.mode, "preset": t.ctx.preset.name,
            "timezone": t.ctx.tz, "retrieval_limit": t.ctx.limit, "history_window": t.ctx.history_window,
            "answer_threshold": t.ctx.threshold}


def budget_step(s, t: Turn):
    stop = _budget_stop(t.ctx.org.id)
    if stop is None:
        return {"blocked": False}
    t.result = _log_budget_stop(t.writer or s, t.ctx, t.question, t.channel, t.user_id, t.assistant_key_id, t.session_id, stop)
    t.done = True
    return {"blocked": True, "budget": stop}


def conversation_step(s, t: Turn):
    ctx = t.ctx
    t.hist = conversation.clean_history(t.history, ctx.history_window)
    source = "the client's history" if t.hist else None
    if not t.hist and t.session_id:  # the conversation of this chat session, from its log
        t.hist = conversation.session_history(t.writer or s, ctx.org.id, t.session_id, ctx.history_window)
        source = "the session's log" if t.hist else None
    t.hist_with_small_talk = t.hist
    t.hist = small_talk.without_small_talk(t.hist)  # "hi" is no subject for "and tomorrow?"
    source = source if t.hist else None
    t.vocab = _vocabulary(s, ctx.org.id)
    t.kind = conversation.classify(t.question, t.hist, t.vocab)
    llm = _rewriter(ctx.org.id, "classify_turn") if t.hist and t.use_rewrite else None
    if llm is not None:
        try:
            verdict = conversation.classify_llm(t.question, t.hist, llm)
            if verdict != t.kind.kind:
                t.kind.reason = f"the LLM judged it {verdict.replace('_', ' ')} (the rules said: {t.kind.reason})"
                t.kind.kind = verdict
                if verdict == conversation.TOPIC_SHIFT:
                    t.kind.refers_back = False
                    t.kind.comparative = t.kind.superlative = t.kind.selector = t.kind.ordinal = None
            t.kind.how = "llm"
        except Exception as exc:  # the rules are always there
            log.warning("LLM turn classification failed, rules instead: %s", exc)
    out = {"history_messages": len(t.hist), "history_from": source, **t.kind.as_dict()}
    if t.kind.kind == conversation.FOLLOW_UP:
        t.shown, how = referents.shown_documents(s, ctx.org.id, t.hist, t.session_id)
        t.shown_info = referents.facts(s, t.shown)
        out["previous_answer"] = {"documents": [{"id": d, "title": t.shown_info.get(d, {}).get("title")}
                                                for d in t.shown], "from": how}
    t.debug["conversation"] = out
    t.debug["explain"].append(f"turn: {t.kind.kind.replace('_', ' ')} — {t.kind.reason}")
    return out


def small_talk_step(s, t: Turn):
    """"hi", "thanks!", "what can you do?": a reply of its own, no search, not a zero result."""
    kind = small_talk.kind_of(t.question)
    if kind is None:
        return {"kind": None}
    if kind == small_talk.YES:
        # "yes" to "Want me to search more broadly?": the last question again, without filters;
        # a "yes" to anything else goes on as a message of the conversation
        t.broaden = small_talk.broaden_what(t.hist_with_small_talk, t.ctx.fallback_text)
        if t.broaden:
            t.use_filters = False
            t.debug["broaden"] = t.broaden
            t.debug["explain"].append(f"'yes' to searching more broadly: {t.broaden!r} again, without filters")
            return {"kind": kind, "broaden": t.broaden}
        if not registry.llm().quotes_passages:
            # an LLM's answer may have asked something ("shall I send the link?"): its "yes" is
            # a message of the conversation; the offline answers ask nothing but the fallback's
            return {"kind": kind, "broaden": None}
        kind = small_talk.OK
    t.small_talk = kind
    text_ = small_talk.reply(kind, t.ctx.brand, t.ctx.settings.branding_welcome,
                             small_talk.topics(s, t.ctx.org.id) if kind in (small_talk.GREETING, small_talk.ABOUT) else [])
    t.result = {"answer": text_, "cards": [], "sources": [], "model": None, "tokens": (0, 0),
                "zero_result": False, "reason": None}
    t.debug["small_talk"] = kind
    t.debug.setdefault("filters", {"parts": [], "merged": {}, "errors": []})
    t.debug["explain"].append(f"small talk ({kind}): answered as such, nothing searched")
    return {"kind": kind, "answer": text_}


def rewrite_step(s, t: Turn):
    if t.broaden:
        t.query, t.rewrite_how = t.broaden, "broaden"
    elif t.use_rewrite:
        t.query, t.rewrite_how = conversation.rewrite(t.question, t.hist, vocab=t.vocab,
                                                      llm=_rewriter(t.ctx.org.id), turn=t.kind)
    else:
        t.query, t.rewrite_how = t.question, None
    t.debug.update(rewritten_query=t.query if t.rewrite_how else None, rewrite=t.rewrite_how)
    if t.rewrite_how:
        t.debug["explain"].append(f"follow-up rewritten ({t.rewrite_how}): {t.question!r} → {t.query!r}")
    return {"query": t.query, "how": t.rewrite_how}


def extract_filters_step(s, t: Turn):
    fctx = filter_context(s, t.ctx, t.now, t.hist)
    fctx["vocabulary"] = t.vocab
    if t.use_filters:
        t.parts, errors = extract_filter_parts(t.query, fctx)
        t.parts += _constraints_the_rewrite_lost(s, t, t.parts)
    else:
        t.parts, errors = [], []
    t.pf = merge_parts(t.ctx.org.id, t.now, t.parts)
    t.text_q = search_text(t.query, t.parts)  # the legs search without the date/price/stock phrases
    t.text_q = gate.with_synonyms(t.text_q, t.ctx.synonyms)
    t.debug["filters"] = {"parts": describe_parts(t.parts), "merged": t.pf.describe(), "errors": errors,
                          "timings_ms": fctx.get("extractor_timings_ms")}
    t.debug["search_text"] = t.text_q
    t.debug["explain"].extend(explain(t.parts, t.pf, t.ctx.tz))
    return {"parts": t.debug["filters"]["parts"], "search_text": t.text_q, "errors": errors}


def _constraints_the_rewrite_lost(s, t: Turn, parts: list) -> list:
    """A rewritten follow-up can lose its own constraint's phrase: "any free ones?" after the
    weekend's listing becomes "what is on this weekend free", where "free" alone is no price.
    The follow-up's own words are read too (rules only: no second model call), and a field
    the rewrite did not find is taken from them."""
    if not t.query or t.query.strip().lower() == t.question.strip().lower():
        return []
    fctx = filter_context(s, t.ctx, t.now, [])
    fctx.update(vocabulary=t.vocab, rules_only=True)
    own, _ = extract_filter_parts(t.question, fctx)
    have = {p.field for p in parts if not getattr(p, "dropped", None)}
    lost = [p for p in own if not getattr(p, "dropped", None) and p.field not in have]
    if lost:
        t.debug["explain"].append("read from the follow-up's own words: "
                                  + ", ".join(f"{p.field} ('{p.matched}')" for p in lost))
    return lost


def inherit_filters_step(s, t: Turn):
    """A follow-up keeps what the conversation already asked for, unless it says otherwise."""
    inherited: list[dict] = []
    q = t.question.lower()
    for p in t.parts:  # constraints the offline/LLM rewrite carried over from earlier turns
        if not getattr(p, "dropped", None) and p.matched and p.field != "currency" and p.matched.lower() not in q:
            inherited.append({"field": p.field, "from": "the conversation", "matched": p.matched})
    prev_pf = None
    if t.kind.kind == conversation.FOLLOW_UP and t.hist and t.use_filters:
        prev = conversation.standalone_before(t.hist, t.vocab)
        if prev:
            fctx = filter_context(s, t.ctx, t.now, [])
            fctx.update(vocabulary=t.vocab, rules_only=True)
            prev_parts, _ = extract_filter_parts(prev, fctx)
            prev_pf = merge_parts(t.ctx.org.id, t.now, prev_parts)
    pf = t.pf
    if prev_pf is not None:
        copied = _copy_missing(prev_pf, pf, t.kind.new_subject)
        inherited += [{"field": f, "from": "the previous turn's filters", "value": v} for f, v in copied]
    bound = referents.comparative_bound(t.kind, t.shown, t.shown_info)
    for f, v in bound.items():
        if f == "price_max" and pf.price_max is not None and pf.price_max <= v:
            continue
        if f == "price_min" and pf.price_min is not None and pf.price_min >= v:
            continue
        setattr(pf, f, v)
        inherited.append({"field": f, "from": f"'{t.kind.comparative}' than what was shown", "value": v})
        t.debug["explain"].append(f"'{t.kind.comparative}': {f} {v} from the documents the previous answer showed")
    if t.kind.comparative and not bound:
        t.debug["explain"].append(f"'{t.kind.comparative}': no field of the shown documents gives a bound")
    t.debug["filters"]["merged"] = pf.describe()
    t.debug["filters"]["inherited"] = inherited
    return {"kind": t.kind.kind, "inherited": inherited, "merged": pf.describe()}


def _copy_missing(prev: Prefilter, pf: Prefilter, new_subject: bool) -> list[tuple[str, object]]:
    copied = []
    if prev.date_start is not None and pf.date_start is None and not pf.past:
        pf.date_start, pf.date_end, pf.past = prev.date_start, prev.date_end, prev.past
        copied.append(("date_range", {"start": prev.date_start, "end": prev.date_end}))
    for f in ("city", "venue", "price_min", "price_max", "in_stock"):
        if getattr(prev, f) is not None and getattr(pf, f) is None:
            setattr(pf, f, getattr(prev, f))
            copied.append((f, getattr(prev, f)))
    if prev.label_groups and not pf.label_groups and not new_subject:
        pf.label_groups = [list(g) for g in prev.label_groups]
        copied.append(("label_groups", pf.label_groups))
    return copied


def prefilter_step(s, t: Turn):
    t.candidates = count_candidates(s, t.pf)
    t.debug["prefilter"] = {"candidate_documents": t.candidates}
    t.debug["explain"].append(f"{t.candidates} documents passed the pre-filter")
    return {"candidate_documents": t.candidates, "where": t.pf.describe()}


def place_check_step(s, t: Turn):
    """Events asked for in a place that has none get an honest answer, with no cards."""
    t.place_miss = place_answer.check(s, t.pf, t.parts, t.query, t.ctx.mode)
    if t.place_miss:
        t.debug["place"] = t.place_miss
        t.debug["explain"].append(f"no events pass the pre-filter for {t.place_miss['field']} "
                                  f"{t.place_miss['place']!r}: answered so, no cards")
        t.result = place_answer.result(t.place_miss)
    return t.place_miss or {"place": None}


def expand_query_step(s, t: Turn):
    """Neighbours of the question's words from the offline embedder's token table, kept when the
    organization's chunks use them; the keyword leg adds them to its any-term tier. Only the
    keyword leg reads them, so they are looked up on its connection, right before it, while this
    thread counts the pre-filter, embeds the question and runs the vector leg: this step starts
    both, before the pre-filter (the keyword leg is the longer of the two, and needs the
    filters, not their count; when the turn then does not search, their result is dropped), and
    its trace output is filled in when the keyword step collects them (``_collect_expansion``)."""
    # the keyword leg first: its expansion asks for the stems of the question's words and their
    # neighbours, the content words and the lexemes in one round trip of its own; this thread
    # asks for the question's words (what the pre-filter's steps and the vector leg read) meanwhile,
    # instead of before the leg starts (nothing to ask once they are cached)
    _start_keyword_leg(s, t, expand=True)
    lexicon.prefetch(s, t.text_q, lexicon.question_words(t.text_q))
    return {"beside": "the pre-filter, the query embedding and the vector leg, before the keyword leg"}


def _collect_expansion(t: Turn) -> None:
    """The expansion's result, once its thread has it: on the turn, in the debug view, and as
    the expand_query step's trace output (with the time it took beside the vector leg)."""
    if t.expansion_future is None:
        return
    t.expansion, ms = t.expansion_future.result()
    t.expansion_future = None
    words = {lx: [n["word"] for n in kept] for lx, kept in (t.expansion.get("words") or {}).items()}
    t.debug["expansion"] = {"words": words, "weights": t.expansion.get("weights") or {}}
    if words:
        t.debug["explain"].append("keyword leg also looks for " + "; ".join(
            f"{lx} → {', '.join(ns)}" for lx, ns in words.items()))
    for rec in t.trace.steps:
        if rec.name == "expand_query":
            rec.output = _jsonable({**t.debug["expansion"], "ran_ms": ms,
                                    "beside": "the pre-filter, the query embedding and the vector leg"})


def _start_keyword_leg(s, t: Turn, expand: bool = False) -> None:
    """The keyword leg (with the expansion first when ``expand``) on its own connection, in the
    same tenant scope. The organization's chunk counts first: both legs read them, and a first
    question of an organization would otherwise count its chunks twice at once, once on each
    connection."""
    org_models(s, t.ctx.org.id)
    if expand:
        t.expansion_future = Future()
    t.kw_future = Future()
    _POOL.submit(contextvars.copy_context().run, _keyword_leg, t.pf, t.text_q, t.k_keyword,
                 (t.expansion or {}).get("weights"), t.ctx.org.id if expand else None,
                 t.expansion_future, t.kw_future)


VECTOR_CONTENT_ONLY = True


def content_words(s, query: str) -> str:
    """The query without its English stop words ("my rucksack gets drenched when it pours" →
    "rucksack gets drenched pours"), in their order; the query itself when nothing is left
    (looked up with the question's other words by the expansion step, else here)."""
    return lexicon.content_words(s, query)


def embed_query_step(s, t: Turn):
    # the keyword leg needs no vector: it is running already (started by the expansion step) or
    # starts now. The query embedding's ledger row waits for the turn's end (record_usage):
    # written here, beside the searches, its four round trips took 1.5-2.5 ms from them
    if t.kw_future is None:
        _start_keyword_leg(s, t)
    entries = t.usage
    # the vector leg embeds the question's content words: a static model pools every token,
    # and "my … when it …" pulls a short paraphrase toward every text that says them too
    vtext = content_words(s, t.text_q) if VECTOR_CONTENT_ONLY else t.text_q
    t.qvecs, dbg = embed_query(s, t.ctx.org.id, vtext, ledger=entries)
    if vtext != t.text_q:
        dbg["embedded_text"] = vtext
    t.debug["embedding"] = dbg
    return dbg


def vector_search_step(s, t: Turn):
    # the keyword leg, started by embed_query, runs beside this one (both wait on PostgreSQL)
    hits, plans = [], []
    for model, (dim, vec) in t.qvecs.items():
        got, plan = vector_search(s, t.pf, model, dim, vec, k=t.k_vector, floor=t.ctx.floor)
        hits.extend(got)
        plans.append(plan)
    if len(t.qvecs) > 1:  # several models during a switch: merge by similarity
        hits.sort(key=lambda h: -h.score)
        hits = hits[:t.k_vector]
        for i, h in enumerate(hits):
            h.rank = i + 1
    t.legs["vector"] = hits
    t.debug["vector"] = {"plans": plans, "hits": [_hit(h) for h in hits]}
    return {"plans": plans, "hits": len(hits), "top": [_hit(h) for h in hits[:5]]}


def keyword_search_step(s, t: Turn):
    if t.use_soft_match and t.legs.get("vector") and not t.kw_future.done():
        # while the keyword leg is still in PostgreSQL: the soft-match leg's own look-ups for
        # the question and the vector leg's chunks (its step then does only the keyword leg's)
        try:
            t.soft_prep = soft_match.prepare(s, t.ctx.org.id, t.text_q, [h.chunk_id for h in t.legs["vector"]],
                                             texts={h.chunk_id: h.text for h in t.legs["vector"]})
        except Exception as exc:  # a help for the ranking: its own step tries again
            log.warning("soft-match leg, prepared beside the keyword leg: %s", exc)
    hits, dbg, ms = t.kw_future.result()
    _collect_expansion(t)
    t.legs["keyword"] = hits
    t.debug["keyword"] = {**dbg, "hits": [_hit(h) for h in hits]}
    t.debug["legs"] = {"vector_hits_above_floor": len(t.legs.get("vector", [])), "keyword_matches": len(hits),
                       "floor": t.ctx.floor}
    return {**dbg, "ran_ms": ms, "hits": len(hits), "top": [_hit(h) for h in hits[:5]]}


def listing_step(s, t: Turn):
    t.legs["listing"] = listing_hits(s, t.pf, t.k_keyword)
    t.debug["legs"]["listing"] = len(t.legs["listing"])
    how = {"price_asc": "cheapest first", "price_desc": "dearest first", "start_desc": "latest first"}.get(
        t.pf.order, "soonest event first")
    t.debug["explain"].append("the question is all constraints: the matching documents are listed "
                              f"({how}) beside the two searches")
    return {"documents": len(t.legs["listing"])}


def soft_match_step(s, t: Turn):
    """The soft-match leg over the chunks the vector and keyword legs found."""
    cands = {h.chunk_id: h.document_id for leg in ("vector", "keyword") for h in t.legs.get(leg, [])}
    # the legs' statements returned their chunks' text: no round trip of its own for it
    texts = {h.chunk_id: h.text for leg in ("vector", "keyword") for h in t.legs.get(leg, []) if h.text}
    try:
        hits, dbg = soft_match.search(s, t.ctx.org.id, t.text_q, cands, k=max(t.k_vector, t.k_keyword),
                                      prepared=t.soft_prep, texts=texts)
    except Exception as exc:  # a help for the ranking, never a reason to fail
        log.warning("soft-match leg: %s", exc)
        hits, dbg = [], {"failed": f"{type(exc).__name__}: {exc}"}
    t.legs["soft"] = hits
    t.debug["soft"] = {**dbg, "hits": [_hit(h) for h in hits]}
    return {**dbg, "hits": len(hits), "top": [_hit(h) for h in hits[:5]]}


def rrf_step(s, t: Turn):
    t.weights, why = fusion.leg_weights(t.question, t.ctx.preset)
    t.fused = rrf(t.legs, weights=t.weights)
    out = {"weights": t.weights, "why": why, "chunks": len(t.fused)}
    if t.weights != fusion.base_weights():  # the untilted baseline, to see what the tilt changed
        base = rrf(t.legs, weights=fusion.base_weights())
        out["baseline_top"] = [f["document_id"] for f in base[:10]]
        out["tilted_top"] = [f["document_id"] for f in t.fused[:10]]
    t.debug["fusion"] = out
    return out


def role_boost_step(s, t: Turn):
    roles = answer_scope.roles_of(s, t.ctx.org.id, {f["document_id"] for f in t.fused})
    preset_priority = list(t.ctx.preset.role_priority or [])
    priority, why = fusion.role_priority(t.question, t.pf, preset_priority)
    t.boosted = apply_role_boost(t.fused, roles, priority)
    t.debug["role_priority"] = priority
    venue_pages = []
    if fusion.VENUE_PAGE_BOOST != 1.0 and fusion.asks_for_a_venue(t.question) and (t.vocab or {}).get("venues"):
        titles = answer_scope.titles_of(s, t.ctx.org.id, {f["document_id"] for f in t.boosted})
        pages = fusion.venue_pages(titles, roles, t.vocab["venues"])
        if pages:
            t.boosted = fusion.boost_venue_pages(t.boosted, pages)
            venue_pages = sorted(pages)
            t.debug["explain"].append(f"a question for a venue itself: its own page ×{fusion.VENUE_PAGE_BOOST}")
    out = {"role_priority": priority, "preset_priority": preset_priority,
           "moved": sum(1 for f in t.boosted if f.get("final_rank") != f.get("rank"))}
    if venue_pages:
        out["venue_pages"] = venue_pages
    if why:
        t.debug["explain"].append(f"{why} ({' > '.join(priority)})")
        base = apply_role_boost(t.fused, roles, preset_priority)  # what the preset alone gives
        out.update(why=why, baseline_top=[f["document_id"] for f in base[:10]],
                   tilted_top=[f["document_id"] for f in t.boosted[:10]])
    return out


def identity_step(s, t: Turn):
    ids, named = name_index(s, t.ctx.org.id).identify(t.question)
    out = {"named": [{"document_id": n.document_id, "how": n.how, "cover": round(n.cover, 2)} for n in named],
           "first": []}
    if ids:
        t.boosted, pinned = conversation.pin_documents(s, t.pf, t.boosted, ids,
                                                       why="identity: named exactly in the question")
        t.identity = pinned
        out["first"] = pinned
        if pinned:
            t.debug["explain"].append(f"identity: {len(pinned)} document(s) named exactly in the question go first")
    t.debug["identity"] = out
    return out


def referents_step(s, t: Turn):
    chosen, how = referents.pick(t.shown, t.shown_info, t.kind, t.ctx.tz)
    if how == referents.ALL_SHOWN:
        named = answer_scope.the_one_named_before(s, t, chosen)
        if named:
            chosen, how = named, "the one the previous question named"
    out = {"shown": t.shown, "picked": chosen, "how": how, "first": []}
    if chosen:
        # what the visitor points at is shown whatever this turn's filters say ("is the second
        # one in stock?" must find it out of stock, not hide it); "any free ones?" picks among
        # what was shown by its own constraint, so there the filters hold
        among = answer_scope.selects_among_shown(t, how)
        pf = t.pf if among else Prefilter(organization_id=t.pf.organization_id, now=t.pf.now, past=t.pf.past)
        t.boosted, pinned = conversation.pin_documents(s, pf, t.boosted, chosen,
                                                       why="a follow-up about what the previous answer showed")
        if among:
            out["selected_by"] = among
            t.debug["explain"].append(f"picks among what was shown by its own words ({', '.join(among)}): "
                                      f"{len(pinned)} of {len(chosen)} pass")
        t.pinned = pinned
        out["first"] = pinned
        if pinned:
            t.debug["explain"].append(f"follow-up about the previous answer ({how}): {len(pinned)} document(s) first")
    if conversation.is_link_request(t.question):  # kept for clients reading the older debug key
        t.debug["link_request"] = {"previous_documents": t.shown, "pinned_first": t.pinned}
    return out


def select_context_step(s, t: Turn):
    t.debug["fused"] = [dict(f) for f in t.boosted]
    answer_scope.keep_to_what_is_asked(s, t)
    t.passages = select_context(s, t.ctx.org.id, t.boosted, t.ctx.limit, t.ctx.char_budget)
    return {"passages": [{"n": p["n"], "chunk_id": p["chunk_id"], "title": p["title"]} for p in t.passages]}


def answerability_step(s, t: Turn):
    """The gate. Questions the filters answer, exact names and pointed-at documents pass."""
    out: dict = {"threshold": t.ctx.threshold}
    if not t.passages:
        t.answerable = False
        out.update(answerable=False, why="pre_filter_empty" if t.candidates == 0 else "no passages")
    elif "listing" in t.legs and t.legs["listing"]:
        t.answerable = True
        out.update(answerable=True, why="the filters answer the question (all constraints)")
    elif t.pinned:
        t.answerable = True
        out.update(answerable=True, why="the documents the follow-up points at")
    elif "listing" in t.legs and not t.identity:
        # "do you have blue dresses?": every word is a constraint and no product or event meets
        # them all. The pages the label filters do not apply to (policies, guides) still pass,
        # and "dress" finds the dress code: no exact match, the fallback's alternatives instead
        t.answerable = False
        out.update(answerable=False, why="no product or event matches every constraint of the question")
    else:
        places = [p.matched for p in t.parts if p.field in ("city", "venue") and p.matched]
        places += [t.question[a:b] for k, v in conversation._vocab_spans(t.question, t.vocab).items()
                   if k in ("city", "venue") for a, b in v]
        feats = gate.features(s, t.ctx.org.id, t.text_q, t.boosted, t.legs, t.ctx.synonyms, places=places,
                              floor=t.ctx.floor, named=t.identity,
                              expanded=(t.expansion or {}).get("words"))
        ok, best = gate.decide(feats, t.ctx.threshold)
        why = "the evidence clears the gate" if ok else "the evidence does not answer the question"
        # a policy question ("do I need an ID?") is answered by its policy page when that page
        # shares a word with it, whatever the similarity says
        feats["policy_page"] = _policy_page(s, t, feats)
        if not ok and feats["policy_page"]:
            ok, why = True, "a policy question, and a policy page shares its words"
        t.answerable = ok
        out.update(answerable=ok, score=best, why=why, **feats)
    t.debug["gate"] = out
    if not t.answerable and t.passages:
        t.debug["explain"].append(
            f"answerability gate: best score {out['score']:.3f} < {t.ctx.threshold:.3f}: the fallback, no model call"
            if out.get("score") is not None else f"answerability gate: {out['why']}: the fallback, no model call")
    return out


def _policy_page(s, t: Turn, feats: dict) -> bool:
    if not policy.is_policy_question(t.question):
        return False
    roles = answer_scope.roles_of(s, t.ctx.org.id, {p["document_id"] for p in feats["passages"]})
    return any(roles.get(p["document_id"]) in policy._SUPPORT_ROLES and p.get("matched") for p in feats["passages"])


def fallback_step(s, t: Turn):
    reason = "pre_filter_empty" if t.candidates == 0 else "no_results_above_threshold"
    near = [{"document_id": p["document_id"], "title": t.shown_info.get(p["document_id"], {}).get("title"),
             "score": p.get("score"), "similarity": p.get("similarity"), "overlap": p.get("overlap")}
            for p in (t.debug.get("gate") or {}).get("passages", [])]
    if near:
        titles = dict(s.execute(text("SELECT id::text, title FROM documents WHERE id::text = ANY(:ids)"),
                                {"ids": [n["document_id"] for n in near]}).all())
        for n in near:
            n["title"] = titles.get(n["document_id"])
        t.debug["near_misses"] = near
    t.result = _fallback(s, t.ctx, t.pf, t.text_q, reason, t.debug)
    if t.broaden:  # the broader search found nothing either: no second offer of the same
        t.result["answer"] = small_talk.BROADER_NOTHING
    return {"reason": reason, "near_misses": near,
            "alternatives": len((t.result.get("alternatives") or {}).get("cards") or [])}


def build_prompt_step(s, t: Turn):
    t.views = [passage_view(p, t.ctx.tz) for p in t.passages]
    system = render_system(t.ctx.system_template, t.ctx.brand, t.ctx.knowledge)
    t.messages = build_messages(system, t.views, t.hist, t.question)
    t.debug["prompt"] = prompt_preview(t.messages)
    t.debug["context"] = [{"n": v["n"], "chunk_id": p["chunk_id"], "document_id": str(p["document_id"]),
                           "title": v["title"], "content": v["content"]} for v, p in zip(t.views, t.passages)]
    return {"messages": len(t.messages), "passages": len(t.views), "characters": len(t.debug["prompt"])}


def call_llm_step(s, t: Turn):
    # the quoting answerer matches sentences by the question's words and their synonyms ("what
    # should I wear?" quotes the dress code); an LLM reads the messages and ignores this
    quoted = gate.with_synonyms(t.question, t.ctx.synonyms)
    t.llm_res, dbg = call_llm(t.ctx, t.messages, quoted, t.views, t.on_token)
    t.debug["llm"] = dbg
    return dbg


def build_cards_step(s, t: Turn):
    res, dbg = t.llm_res, t.debug["llm"]
    sources = build_sources(t.passages, t.question)
    if res is None and dbg.get("budget_exceeded"):
        from kbframework.orgs.budget import EXCEEDED_TEXT

        answer_text, tokens, model = EXCEEDED_TEXT, (0, 0), None
    elif res is None:
        answer_text = LLM_FAILURE_TEXT + "\n" + "\n".join(f"- {src['document_title']}" for src in sources)
        dbg["fallback"] = "The model failed; the visitor got the sources."
        tokens, model = (0, 0), dbg.get("model")
    else:
        allowed = {p["source_url"] for p in t.passages if p["source_url"]}
        allowed |= {str((p["dmeta"] or {}).get("ticket_url")) for p in t.passages}
        answer_text, removed = strip_unknown_links(res.text, allowed)
        if removed:
            t.debug["removed_links"] = removed
        tokens, model = (res.tokens_in, res.tokens_out), res.model
    cards = build_cards(t.passages, t.ctx.preset)
    t.debug["card_document_ids"] = [c["document_id"] for c in cards]
    t.result = {"answer": answer_text, "cards": cards, "sources": sources, "model": model,
                "tokens": tokens, "zero_result": False, "reason": None}
    return {"cards": [{"type": c["type"], "title": c["title"]} for c in cards], "sources": len(sources)}


INJECTION = re.compile(r"(ignore (all|any|the|previous|prior).{0,20}(instructions|rules)|system prompt|"
                       r"you are now|disregard .{0,30}(instructions|above)|reveal .{0,20}(prompt|instructions))",
                       re.I)


def log_step(s, t: Turn):
    r, ctx = t.result, t.ctx
    t.debug["reason"] = r.get("reason")
    flags = ["prompt_injection_pattern"] if INJECTION.search(t.question) else []
    t.chat_log = ChatLog(
        id=t.message_id, organization_id=ctx.org.id, user_id=t.user_id, assistant_key_id=t.assistant_key_id,
        session_id=t.session_id, channel=t.channel, query=t.question,
        rewritten_query=t.query if t.rewrite_how else None, filters=_jsonable(t.debug["filters"]), mode=ctx.mode,
        final_answer=r["answer"], used_document_ids=sorted({src["document_id"] for src in r["sources"]}),
        used_chunk_ids=[src["chunk_id"] for src in r["sources"]],
        scores=[{"chunk_id": f["chunk_id"], "rank": f.get("final_rank"), "rrf": f["score"],
                 "boosted": f.get("boosted_score"), "ranks": f["ranks"]} for f in t.boosted[:20]],
        retrieval_debug=None, prompt=t.debug.get("prompt"), model=r.get("model"), tokens_in=r["tokens"][0],
        tokens_out=r["tokens"][1], zero_result=r["zero_result"], reason=r.get("reason"), flags=flags)
    w = t.writer or s
    w.add(t.chat_log)
    w.flush()
    return {"chat_log_id": str(t.message_id), "zero_result": r["zero_result"], "flags": flags}


def record_usage_step(s, t: Turn):
    """The usage ledger's rows for the models the turn called without writing them then (the
    query embedding), in their own transaction, once the answer is made."""
    entries, t.usage = t.usage, []
    for e in entries:
        _ledger(*e)  # logs its own failures
    return {"rows": [{"purpose": e[1], "model": e[2].model, "tokens_in": e[3]} for e in entries]}


@dataclass(frozen=True)
class Step:
    name: str
    fn: Callable
    when: Callable = lambda t: True


def _searching(t: Turn) -> bool:
    return t.candidates > 0 and not t.place_miss and t.small_talk is None


def _open(when: Callable = lambda t: True) -> Callable:
    """A step's condition, and no small talk answered the turn."""
    return lambda t: t.small_talk is None and when(t)


STEPS: tuple[Step, ...] = (
    Step("load_context", load_context_step),
    Step("budget", budget_step, lambda t: not t.retrieval_only),
    Step("conversation", conversation_step),
    Step("small_talk", small_talk_step, lambda t: not t.retrieval_only),
    Step("rewrite_query", rewrite_step, _open()),
    Step("extract_filters", extract_filters_step, _open()),
    Step("inherit_filters", inherit_filters_step, _open(lambda t: t.kind.kind == conversation.FOLLOW_UP)),
    # before the pre-filter's count: the keyword leg it starts needs the filters, not the count,
    # and is the longer leg (a turn that then does not search drops its result)
    Step("expand_query", expand_query_step, _open(lambda t: t.use_expansion)),
    Step("prefilter", prefilter_step, _open()),
    Step("place_check", place_check_step, _open()),
    Step("embed_query", embed_query_step, _searching),
    Step("vector_search", vector_search_step, _searching),
    Step("keyword_search", keyword_search_step, _searching),
    Step("listing", listing_step, lambda t: _searching(t) and t.use_filters
         and constraint_only(t.query, t.parts, t.pf) and not fusion.asks_for_a_venue(t.question)),
    Step("soft_match", soft_match_step, lambda t: _searching(t) and t.use_soft_match),
    Step("rrf", rrf_step, _searching),
    Step("role_boost", role_boost_step, _searching),
    Step("identity", identity_step, _searching),
    Step("referents", referents_step, lambda t: _searching(t) and (t.kind.refers_back or (
        bool(t.hist) and conversation.is_link_request(t.question)))),
    Step("select_context", select_context_step, _searching),
    Step("answerability", answerability_step, _open(lambda t: not t.place_miss)),
    Step("fallback", fallback_step, _open(lambda t: not t.answerable and not t.place_miss and not t.retrieval_only)),
    Step("build_prompt", build_prompt_step, _open(lambda t: t.answerable and not t.retrieval_only)),
    Step("call_llm", call_llm_step, _open(lambda t: t.answerable and not t.retrieval_only)),
    Step("build_cards", build_cards_step, _open(lambda t: t.answerable and not t.retrieval_only)),
    Step("log", log_step, lambda t: not t.retrieval_only),
    Step("record_usage", record_usage_step, lambda t: bool(t.usage)),
)


def run_steps(s, t: Turn, steps=STEPS) -> Turn:
    """Run every step that applies, in order, each traced; stop when one says the turn is done.
    A turn that fails still writes the usage it owes (the model calls were made)."""
    try:
        for step in steps:
            if t.done:
                break
            if not step.when(t):
                continue
            with t.trace.step(step.name) as rec:
                rec.output = _jsonable(step.fn(s, t))
    except Exception:
        if t.usage:
            record_usage_step(s, t)
        raise
    return t
