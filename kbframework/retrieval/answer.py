"""Retrieval and answer, one request (DESIGN.md, spec §16):

    answer(org, question):
      1. load_context     organization, settings, preset (mode), time zone, night cut-off
      2. rewrite_query    a short referential follow-up becomes a standalone query
      3. extract_filters  every extractor plugin; parts vetted and merged into one pre-filter;
                          the legs then search the query without its date/price/stock phrases
      4. prefilter        active, non-expired documents of the organization matching filters
      5. embed_query      once per embedding model the organization's chunks use
      6. vector_search ‖ keyword_search   top 20 each, on the pre-filtered set (plus a listing of
                          the matching documents when the question is all constraints)
      7. rrf              Σ 1/(60 + rank)
      8. role_boost       preset's role priority (×1.3, ×1.1), a re-rank
      9. select_context   top N, character budget, source diversity
     10. build_prompt     preset prompt + last N messages + numbered passages
     11. call_llm         OpenAI-compatible, or the offline extractive answerer
     12. build_cards      from the selected documents' columns (never from model output)
     13. log              chat_logs row with every step's output
Zero qualifying chunks: no LLM call, the preset's fallback text, ``debug.reason``.
"""
from __future__ import annotations

import contextvars
import logging
import re
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, time as dtime, timezone
from typing import Callable, Optional

from sqlalchemy import select, text

from kbframework.hooks import registry
from kbframework.config import get_config
from kbframework.db import session_scope
from kbframework.errors import NotFound, ValidationFailed
from kbframework.hooks.manager import call_first, get_plugin_manager
from kbframework.ingest.chunker import page_label
from kbframework.models import ChatLog, Organization, Setting
from kbframework.retrieval import conversation, place_answer, policy
from kbframework.retrieval.filters import (describe_parts, explain, extract_filter_parts, merge_parts,
                                           constraint_only, listing_hits, org_vocabulary, search_text)
from kbframework.retrieval.prompt import build_messages, prompt_preview, render_system
from kbframework.retrieval.search import (Prefilter, apply_role_boost, count_candidates,
                                          keyword_search, org_models, rrf, vector_search)

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


# --------------------------------------------------------------------------- steps


def load_context(s, org_id, mode: str | None = None) -> OrgContext:
    org = s.get(Organization, org_id)
    if org is None:
        raise NotFound("Unknown organization.")
    st = s.scalar(select(Setting).where(Setting.organization_id == org.id)) or Setting(
        organization_id=org.id, preset="default", retrieval_limit=6, similarity_floor=0.2,
        history_window=6, night_cutoff="05:00", extra={})
    presets = registry.presets()
    preset = None
    if mode:
        preset = presets.get(mode) or next((p for p in presets.values() if p.mode == mode), None)
        if preset is None:
            raise ValidationFailed(f"Unknown mode '{mode}'. Available: {', '.join(sorted(presets))}.")
    preset = preset or registry.preset(st.preset)
    extra = st.extra or {}
    hh, mm = (st.night_cutoff or "05:00").split(":")
    template = st.system_prompt if (st.system_prompt and not mode) else preset.prompt_template
    return OrgContext(org=org, settings=st, preset=preset, mode=preset.mode, tz=org.timezone,
                      cutoff=dtime(int(hh), int(mm)), brand=st.brand or org.name,
                      limit=st.retrieval_limit or preset.retrieval_limit,
                      floor=float(st.similarity_floor if st.similarity_floor is not None else 0.2),
                      history_window=st.history_window, char_budget=int(extra.get("char_budget", CHAR_BUDGET)),
                      knowledge=extra.get("knowledge", preset.knowledge), system_template=template,
                      fallback_text=extra.get("fallback_text") or preset.fallback_text)


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


def _rewriter(org_id=None):
    llm = registry.llm()
    if llm.name == "extractive":
        return None
    from kbframework.orgs.budget import MeteredLLM

    return MeteredLLM(llm, org_id, "rewrite") if org_id else llm


def filter_context(s, ctx: OrgContext, now: datetime, history: list[dict]) -> dict:
    return {"now": now, "timezone": ctx.tz, "night_cutoff": ctx.cutoff,
            "organization_id": str(ctx.org.id), "history": history,
            "settings": ctx.settings.extra or {}, "session": s,
            "weekend_starts_friday": bool((ctx.settings.extra or {}).get("weekend_starts_friday"))}


def embed_query(s, org_id, query: str) -> tuple[dict, dict]:
    """Embed the query with every model the organization's chunks use (several during a
    model switch, so old vectors keep serving). Returns ({model: (dim, vec)}, debug)."""
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
            out[model] = (provider.dim, vec)
            dbg["models"][model] = {"ms": round((time.perf_counter() - t0) * 1000, 2)}
            _ledger(org_id, "query_embedding", provider, provider.count_tokens(query), 0)
        except Exception as exc:
            dbg["models"][model] = f"failed: {type(exc).__name__}: {exc}"
            dbg["degraded"] = True
    if dbg["degraded"]:
        dbg["note"] = "Embedding failed for at least one model: the keyword leg carries retrieval."
    return out, dbg


def select_context(s, fused: list[dict], limit: int, budget: int) -> list[dict]:
    """Top chunks in fused order, one per document first (diversity), within a character budget."""
    if not fused:
        return []
    ids = [f["chunk_id"] for f in fused[: max(limit * 4, 20)]]
    rows = s.execute(text(
        "SELECT c.id, c.document_id, c.chunk_index, c.content, c.heading, c.token_count, c.metadata, "
        "d.title, d.type, d.document_role, d.source_url, d.external_id, d.event_start, d.event_end, "
        "d.venue, d.city, d.primary_image_url, d.metadata AS dmeta, d.normalized_content, s.type AS stype "
        "FROM chunks c JOIN documents d ON d.id = c.document_id JOIN sources s ON s.id = d.source_id "
        "WHERE c.id = ANY(:ids)"), {"ids": ids}).mappings().all()
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
    from kbframework.net import safe_link

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
    from zoneinfo import ZoneInfo

    try:
        zone = ZoneInfo(tz or "UTC")
    except Exception:
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
    try:
        if llm.name == "extractive":
            res = llm.complete(messages, passages=passages, question=question,
                               stream=on_token is not None, on_token=on_token)
        else:
            from kbframework.orgs.budget import spending

            with spending(ctx.org.id):
                res = llm.complete(messages, stream=on_token is not None, on_token=on_token)
                _ledger(ctx.org.id, "completion", llm, res.tokens_in, res.tokens_out)
    except Exception as exc:
        from kbframework.orgs.budget import BudgetExceeded

        if isinstance(exc, BudgetExceeded):
            dbg["budget_exceeded"] = True
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


INJECTION = re.compile(r"(ignore (all|any|the|previous|prior).{0,20}(instructions|rules)|system prompt|"
                       r"you are now|disregard .{0,30}(instructions|above)|reveal .{0,20}(prompt|instructions))",
                       re.I)


# --------------------------------------------------------------------------- orchestrator


def answer(org_id, question: str, *, mode: str | None = None, history=None, channel: str = "admin",
           user_id=None, assistant_key_id=None, session_id: str | None = None,
           now: datetime | None = None, on_token: Optional[Callable[[str], None]] = None,
           max_chars: int | None = None) -> dict:
    t_start = time.perf_counter()
    question = (question or "").strip() if isinstance(question, str) else None
    max_chars = max_chars or get_config().max_question_chars
    if not question:
        raise ValidationFailed("The question is empty.", code="empty_question")
    if len(question) > max_chars:
        raise ValidationFailed(f"The question is too long ({len(question)} characters; at most {max_chars}).",
                               code="question_too_long", status=413)
    now = now or datetime.now(timezone.utc)
    timings: dict = {}

    def lap(name, t0):
        timings[name] = round((time.perf_counter() - t0) * 1000, 2)

    with session_scope() as s:
        # 1. load_context
        t0 = time.perf_counter()
        ctx = load_context(s, org_id, mode)
        hist = conversation.clean_history(history, ctx.history_window)
        if not hist and session_id:  # the conversation of this chat session, from its log
            hist = conversation.session_history(s, ctx.org.id, session_id, ctx.history_window)
        lap("load_context", t0)
        stop = _budget_stop(ctx.org.id)
        if stop is not None:
            return _log_budget_stop(s, ctx, question, channel, user_id, assistant_key_id, session_id, stop)
        # 2. rewrite_query
        t0 = time.perf_counter()
        vocab = _vocabulary(s, ctx.org.id)
        query, rewrite_how = rewrite_query(question, hist, vocab, _rewriter(ctx.org.id))
        link_docs = []
        if hist and conversation.is_link_request(question):  # "what's the link?": the previous answer first
            link_docs = conversation.previous_documents(hist) or conversation.previous_documents(
                conversation.session_history(s, ctx.org.id, session_id, 2))
        lap("rewrite_query", t0)
        # 3. extract_filters
        t0 = time.perf_counter()
        fctx = filter_context(s, ctx, now, hist)
        fctx["vocabulary"] = vocab
        parts, extractor_errors = extract_filter_parts(query, fctx)
        pf = merge_parts(ctx.org.id, now, parts)
        text_q = search_text(query, parts)  # the legs search without the date/price/stock phrases
        lap("extract_filters", t0)
        # 4. prefilter
        t0 = time.perf_counter()
        candidates = count_candidates(s, pf)
        lap("prefilter", t0)
        debug = {"question": question, "rewritten_query": query if rewrite_how else None,
                 "rewrite": rewrite_how, "mode": ctx.mode, "preset": ctx.preset.name,
                 "filters": {"parts": describe_parts(parts), "merged": pf.describe(),
                             "errors": extractor_errors, "timings_ms": fctx.get("extractor_timings_ms")},
                 "prefilter": {"candidate_documents": candidates}, "timings_ms": timings,
                 "search_text": text_q,
                 "explain": ([f"follow-up rewritten ({rewrite_how}): {question!r} → {query!r}"]
                             if rewrite_how else []) + explain(parts, pf, ctx.tz)
                 + [f"{candidates} documents passed the pre-filter"]}
        # 4b. place_check: events asked for in a place that has none get an honest answer
        place_miss = place_answer.check(s, pf, parts, query, ctx.mode)
        if place_miss:
            debug["place"] = place_miss
            debug["explain"].append(f"no events pass the pre-filter for {place_miss['field']} "
                                    f"{place_miss['place']!r}: answered so, no cards")
        vector_hits, keyword_hits, fused, boosted, passages = [], [], [], [], []
        if candidates and not place_miss:
            # 5. embed_query
            t0 = time.perf_counter()
            qvecs, emb_dbg = embed_query(s, ctx.org.id, text_q)
            lap("embed_query", t0)
            debug["embedding"] = emb_dbg
            # 6. vector_search ‖ keyword_search: the keyword leg runs in parallel on its own
            #    connection (both legs wait on PostgreSQL, not on Python)
            t0 = time.perf_counter()
            kw_future = _POOL.submit(contextvars.copy_context().run, _keyword_leg, pf, text_q)  # same tenant scope
            plans = []
            for model, (dim, vec) in qvecs.items():
                hits, plan = vector_search(s, pf, model, dim, vec, k=VECTOR_K, floor=ctx.floor)
                vector_hits.extend(hits)
                plans.append(plan)
            if len(qvecs) > 1:  # several models during a switch: merge by similarity
                vector_hits.sort(key=lambda h: -h.score)
                vector_hits = vector_hits[:VECTOR_K]
                for i, h in enumerate(vector_hits):
                    h.rank = i + 1
            lap("vector_search", t0)
            t0 = time.perf_counter()
            keyword_hits, kw_dbg, kw_ms = kw_future.result()
            lap("keyword_search_wait", t0)
            timings["keyword_search"] = kw_ms
            debug["vector"] = {"plans": plans, "hits": [_hit(h) for h in vector_hits]}
            # zero results are judged per leg: vector hits above the similarity floor, real
            # full-text matches; fused RRF scores are ranks and are never thresholded
            debug["legs"] = {"vector_hits_above_floor": len(vector_hits), "keyword_matches": len(keyword_hits),
                             "floor": ctx.floor}
            debug["keyword"] = {**kw_dbg, "hits": [_hit(h) for h in keyword_hits]}
            # 7. rrf  8. role_boost
            t0 = time.perf_counter()
            legs = {"vector": vector_hits, "keyword": keyword_hits}
            if constraint_only(query, parts, pf):  # "what's on tonight?": the filters say it all
                legs["listing"] = listing_hits(s, pf, KEYWORD_K)
                debug["legs"]["listing"] = len(legs["listing"])
                debug["explain"].append("the question is all constraints: the matching documents are listed "
                                        "(soonest event first) beside the two searches")
            fused = rrf(legs)
            roles = _roles(s, {f["document_id"] for f in fused})
            priority = policy.priority_for(question, ctx.preset.role_priority)  # policy pages first
            boosted = apply_role_boost(fused, roles, priority)
            if link_docs:
                boosted, pinned = conversation.pin_documents(s, pf, boosted, link_docs)
                debug["link_request"] = {"previous_documents": link_docs, "pinned_first": pinned}
                if pinned:
                    debug["explain"].append(f"link request: {len(pinned)} document(s) of the previous answer first")
            lap("fuse_and_boost", t0)
            debug["fused"] = [{k: v for k, v in f.items()} for f in boosted]
            debug["role_priority"] = priority
            if priority != list(ctx.preset.role_priority or []):
                debug["explain"].append(f"a policy question: support pages first ({' > '.join(priority)})")
            # 9. select_context
            t0 = time.perf_counter()
            passages = select_context(s, boosted, ctx.limit, ctx.char_budget)
            lap("select_context", t0)
        message_id = uuid.uuid4()
        if place_miss:
            result = place_answer.result(place_miss)
        elif not passages:
            reason = "pre_filter_empty" if candidates == 0 else "no_results_above_threshold"
            result = _fallback(s, ctx, pf, text_q, reason, debug)
        else:
            # 10. build_prompt
            views = [passage_view(p, ctx.tz) for p in passages]
            system = render_system(ctx.system_template, ctx.brand, ctx.knowledge)
            messages = build_messages(system, views, hist, question)
            debug["prompt"] = prompt_preview(messages)
            debug["context"] = [{"n": v["n"], "chunk_id": p["chunk_id"], "document_id": str(p["document_id"]),
                                 "title": v["title"], "content": v["content"]} for v, p in zip(views, passages)]
            # 11. call_llm
            t0 = time.perf_counter()
            res, llm_dbg = call_llm(ctx, messages, question, views, on_token)
            lap("call_llm", t0)
            debug["llm"] = llm_dbg
            sources = build_sources(passages, question)
            if res is None and llm_dbg.get("budget_exceeded"):
                from kbframework.orgs.budget import EXCEEDED_TEXT

                answer_text, tokens, model = EXCEEDED_TEXT, (0, 0), None
            elif res is None:
                answer_text = LLM_FAILURE_TEXT + "\n" + "\n".join(
                    f"- {src['document_title']}" for src in sources)
                debug["llm"]["fallback"] = "The model failed; the visitor got the sources."
                tokens = (0, 0)
                model = llm_dbg.get("model")
            else:
                allowed = {p["source_url"] for p in passages if p["source_url"]}
                allowed |= {str((p["dmeta"] or {}).get("ticket_url")) for p in passages}
                answer_text, removed = strip_unknown_links(res.text, allowed)
                if removed:
                    debug["removed_links"] = removed
                tokens = (res.tokens_in, res.tokens_out)
                model = res.model
            # 12. build_cards
            cards = build_cards(passages, ctx.preset)
            debug["card_document_ids"] = [c["document_id"] for c in cards]
            result = {"answer": answer_text, "cards": cards, "sources": sources, "model": model,
                      "tokens": tokens, "zero_result": False, "reason": None}
        debug["reason"] = result.get("reason")
        timings["total"] = round((time.perf_counter() - t_start) * 1000, 2)
        flags = ["prompt_injection_pattern"] if INJECTION.search(question) else []
        # 13. log
        s.add(ChatLog(id=message_id, organization_id=ctx.org.id, user_id=user_id,
                      assistant_key_id=assistant_key_id, session_id=session_id, channel=channel,
                      query=question, rewritten_query=query if rewrite_how else None,
                      filters=debug["filters"], mode=ctx.mode, final_answer=result["answer"],
                      used_document_ids=sorted({src["document_id"] for src in result["sources"]}),
                      used_chunk_ids=[src["chunk_id"] for src in result["sources"]],
                      scores=[{"chunk_id": f["chunk_id"], "rank": f.get("final_rank"), "rrf": f["score"],
                               "boosted": f.get("boosted_score"), "ranks": f["ranks"]} for f in boosted[:20]],
                      retrieval_debug=_jsonable(debug), prompt=debug.get("prompt"),
                      model=result.get("model"), tokens_in=result["tokens"][0],
                      tokens_out=result["tokens"][1], zero_result=result["zero_result"],
                      reason=result.get("reason"), latency_ms=timings["total"], flags=flags))
    out = {"message_id": str(message_id), "answer": result["answer"], "cards": result["cards"],
           "sources": result["sources"], "mode": ctx.mode, "debug": _jsonable(debug)}
    if result.get("alternatives") is not None:
        out["alternatives"] = result["alternatives"]
    return out


def _fallback(s, ctx: OrgContext, pf: Prefilter, query: str, reason: str, debug: dict) -> dict:
    """§20: no LLM call; the preset's fallback text; closest matches without filters."""
    alternatives = None
    if pf.has_filters:
        loose = Prefilter(organization_id=pf.organization_id, now=pf.now)
        qvecs, _ = embed_query(s, ctx.org.id, query)
        vec = []
        for model, (dim, v) in qvecs.items():
            vec.extend(vector_search(s, loose, model, dim, v, k=VECTOR_K, floor=ctx.floor)[0])
        kw, _ = keyword_search(s, loose, query, k=KEYWORD_K)
        fused = rrf({"vector": vec, "keyword": kw})
        passages = select_context(s, apply_role_boost(fused, _roles(s, {f["document_id"] for f in fused}),
                                                      ctx.preset.role_priority), 3, ctx.char_budget)
        if passages:
            alternatives = {"label": "No exact matches — here are some alternatives",
                            "cards": build_cards(passages, ctx.preset),
                            "sources": build_sources(passages, query)}
            debug["alternatives"] = {"without_filters": True, "count": len(passages)}
    return {"answer": ctx.fallback_text, "cards": [], "sources": [], "model": None, "tokens": (0, 0),
            "zero_result": True, "reason": reason, "alternatives": alternatives}


def _roles(s, doc_ids) -> dict:
    if not doc_ids:
        return {}
    rows = s.execute(text("SELECT id, document_role FROM documents WHERE id = ANY(CAST(:ids AS uuid[]))"),
                     {"ids": list(doc_ids)}).all()
    return {str(r[0]): r[1] for r in rows}


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


from concurrent.futures import ThreadPoolExecutor  # noqa: E402

_POOL = ThreadPoolExecutor(max_workers=8, thread_name_prefix="kbf-keyword")


def _keyword_leg(pf, text_q):
    t0 = time.perf_counter()
    with session_scope() as s2:
        hits, dbg = keyword_search(s2, pf, text_q, k=KEYWORD_K)
    return hits, dbg, round((time.perf_counter() - t0) * 1000, 2)


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
