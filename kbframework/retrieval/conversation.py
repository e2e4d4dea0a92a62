"""Conversation memory for retrieval (§8): a short sliding window, and follow-ups rewritten
into standalone queries before retrieval. History shapes retrieval; it is never evidence.

    clean_history        the last N messages ({role, content[, document_ids]})
    session_history      the conversation of a chat session, from its chat_logs rows
    is_follow_up         short and referential: "and tomorrow?", "the cheaper one?", "in red?"
    rewrite              LLM when configured, else ``rewrite_offline``
    rewrite_offline      the previous standalone question with the follow-up's changes: a new
                         date phrase replaces the old one, a new price replaces the old price,
                         a new colour/label of the same kind replaces the old one; the subject
                         and the other constraints stay ("techno this weekend under €30" +
                         "and tomorrow?" → "techno under €30 tomorrow")
    is_link_request      "what's the link?", "send me the link"
    previous_documents   the documents (cards) of the previous answer, to put first
"""
from __future__ import annotations

import logging
import re
from datetime import datetime, timezone

log = logging.getLogger("kbframework.conversation")

_LEAD = re.compile(r"^\s*(?:(?:and|or|but|also|so|ok(?:ay)?|well|then|hmm+)\b[\s,]*)*"
                   r"(?:what\s+about|how\s+about|what\s+if|and\s+for|same\s+for|same\s+but)?\b[\s,]*", re.I)
_REFERENT = re.compile(
    r"\b(?:it|its|it's|they|them|their|theirs|those|these|that\s+one|this\s+one|the\s+one|one|ones|"
    r"that|this|same|another|other|others|else|cheaper|pricier|bigger|smaller|larger|longer|shorter|"
    r"lighter|heavier|warmer|better|first|second|third|last|former|latter|link|url)\b", re.I)
_THERE = re.compile(r"(?<!\bis )(?<!\bare )(?<!\bwas )(?<!\bwere )\bthere\b", re.I)
_LINK = re.compile(r"\b(?:link|links|url|web\s?site|web\s?page|ticket\s+link)\b|"
                   r"\bwhere\s+(?:can|do)\s+i\s+(?:buy|get|book|order)\b", re.I)
_FILLER = frozenset("""
the a an one ones it its it's that this those these them they please pls any anything something some
is are do does did you have has there what what's whats which how about can could would i me to of
for with ok okay now then
""".split())
_LINK_FILLER = frozenset("send give show share get tell find where buy book order".split())
COLOURS = frozenset("""
red blue green yellow orange purple violet pink black white grey gray brown beige cream navy teal
turquoise khaki olive sage burgundy maroon crimson gold silver charcoal ivory tan coral mint lilac
lavender rose ochre mustard sand stone moss forest sky
""".split())
_COLOUR_RE = re.compile(r"\b(?:" + "|".join(sorted(COLOURS, key=len, reverse=True)) + r")\b", re.I)
_PREP_BEFORE = re.compile(r"\b(?:on|at|in|for|this|next|during|from|by)\s*$", re.I)


def clean_history(history, max_messages: int = 6) -> list[dict]:
    out = []
    for m in history or []:
        if not isinstance(m, dict):
            continue
        role, content = m.get("role"), m.get("content")
        if role in ("user", "assistant") and isinstance(content, str) and content.strip():
            item = {"role": role, "content": content.strip()[:4000]}
            ids = m.get("document_ids")
            if role == "assistant" and isinstance(ids, list):
                item["document_ids"] = [str(i) for i in ids if isinstance(i, (str, int))][:20]
            out.append(item)
    return out[-max_messages:] if max_messages > 0 else []


def session_history(s, org_id, session_id: str | None, max_messages: int = 6) -> list[dict]:
    """The recent conversation of a chat session, rebuilt from its chat_logs rows."""
    if not isinstance(session_id, str) or not session_id.strip() or max_messages <= 0:
        return []
    from sqlalchemy import text

    rows = s.execute(text(
        "SELECT query, final_answer, retrieval_debug->'card_document_ids', used_document_ids FROM chat_logs "
        "WHERE organization_id = :org AND session_id = :sid ORDER BY created_at DESC LIMIT :n"),
        {"org": str(org_id), "sid": session_id[:100], "n": (max_messages + 1) // 2}).all()
    out: list[dict] = []
    for q, a, cards, used in reversed(rows):
        out.append({"role": "user", "content": q})
        if a:
            ids = cards if isinstance(cards, list) and cards else (used or [])
            out.append({"role": "assistant", "content": a, "document_ids": [str(i) for i in ids]})
    return clean_history(out, max_messages)


# --------------------------------------------------------------------------- follow-ups


def is_link_request(question: str) -> bool:
    return bool(_LINK.search(question or ""))


def _constraint_spans(q: str) -> dict:
    """Spans of the constraints a follow-up may change: date, price, stock, colour."""
    from kbframework.retrieval.phrases import find_prices, find_stock
    from kbframework.retrieval.temporal import parse_temporal

    spans: dict = {"date": [], "price": [], "stock": [], "colour": []}
    try:
        t = parse_temporal(q, datetime.now(timezone.utc), "UTC")
    except Exception:  # the rewrite must never fail a chat
        t = None
    if t is not None:
        spans["date"].append(t.span)
    spans["price"] = [(f.start, f.end) for f in find_prices(q) if f.field != "currency"]
    spans["stock"] = [(f.start, f.end) for f in find_stock(q)]
    spans["colour"] = [m.span() for m in _COLOUR_RE.finditer(q)]
    return spans


def _vocab_spans(q: str, vocab: dict | None) -> dict:
    if not vocab:
        return {}
    from kbframework.retrieval.phrases import vocabulary_index

    out: dict = {}
    for f in vocabulary_index(vocab).find(q):
        out.setdefault(f.field, []).append((f.start, f.end))
    return out


def _remove(text_: str, spans: list[tuple[int, int]]) -> str:
    for a, b in sorted(set(spans), reverse=True):
        before = text_[:a]
        m = _PREP_BEFORE.search(before)
        if m:  # "events on Saturday" minus "Saturday" → "events", not "events on"
            before = before[:m.start()]
        text_ = before + " " + text_[b:]
    return _tidy(text_)


def _tidy(s: str) -> str:
    s = re.sub(r"\s+([,.;?!])", r"\1", s)
    s = re.sub(r"\s{2,}", " ", s)
    return s.strip(" ,;?.!")


def _core(question: str) -> str:
    """The follow-up without its leading "and"/"what about" and trailing punctuation."""
    q = _LEAD.sub("", question, count=1) if _LEAD.match(question) else question
    return _tidy(q)


def _only_constraints(question: str) -> bool:
    q = _core(question)
    spans = [sp for v in _constraint_spans(q).values() for sp in v]
    rest = _remove(q, spans) if spans else q
    words = [w for w in re.findall(r"[\w'’-]+", rest.lower()) if w not in _FILLER]
    return bool(spans) and len(words) <= 1


def is_follow_up(question: str, history: list[dict]) -> bool:
    """Short and referential, after at least one user turn."""
    if not any(m.get("role") == "user" for m in history or []):
        return False
    words = question.split()
    if not words or len(words) > 10:
        return False
    if _LEAD.match(question) and _LEAD.match(question).group(0).strip():
        return True
    return bool(_REFERENT.search(question) or _THERE.search(question) or is_link_request(question)
                or _only_constraints(question))


def _rewrite_pair(prev: str, question: str, vocab: dict | None = None) -> str:
    """One step: the previous standalone question + this follow-up."""
    core = _core(question)
    if not prev:
        return core or question
    new_c, old_c = _constraint_spans(core), _constraint_spans(prev)
    drop: list[tuple[int, int]] = []
    for kind in ("date", "price", "colour"):
        if new_c[kind] and old_c[kind]:
            drop.extend(old_c[kind])
    new_v, old_v = _vocab_spans(core, vocab), _vocab_spans(prev, vocab)
    for kind in ("city", "venue"):  # a new place replaces the old one; labels add up
        if new_v.get(kind) and old_v.get(kind):
            drop.extend(old_v[kind])
    base = _remove(prev, drop) if drop else _tidy(prev)
    if is_link_request(core):
        extra = _LINK.sub(" ", core)
        words = [w for w in re.findall(r"[\w'’€$£.-]+", extra)
                 if w.lower() not in _FILLER and w.lower() not in _LINK_FILLER]
        return _tidy(f"{base} {' '.join(words)}")
    words = [w for w in re.findall(r"[\w'’€$£.,-]+", core) if w.lower() not in _FILLER]
    return _tidy(f"{base} {' '.join(words)}")


def rewrite_offline(question: str, history: list[dict], vocab: dict | None = None) -> str:
    """Carry the conversation's subject and constraints into a short follow-up.

    The user turns are folded left to right, so a third turn builds on the rewritten second
    ("techno this weekend under €30" → "and tomorrow?" → "the cheaper one?" keeps techno,
    tomorrow and the price)."""
    standalone = ""
    seen: list[dict] = []
    for m in history:
        if m.get("role") == "user":
            if standalone and is_follow_up(m["content"], seen):
                standalone = _rewrite_pair(standalone, m["content"], vocab)
            else:
                standalone = _tidy(m["content"])
        seen.append(m)
    return _rewrite_pair(standalone, question, vocab)


REWRITE_PROMPT = ("Rewrite the visitor's last message as ONE standalone search query, using the conversation "
                  "for what it refers to. Keep the earlier topic and constraints (place, price, stock, colour) "
                  "unless the last message changes them; a new date or price replaces the old one. "
                  "Reply with the query only, no quotes, no explanation.")


def rewrite_llm(question: str, history: list[dict], llm) -> str:
    turns = "\n".join(f"{m['role']}: {m['content'][:600]}" for m in history[-4:])
    res = llm.complete([{"role": "system", "content": REWRITE_PROMPT},
                        {"role": "user", "content": f"Conversation:\n{turns}\n\nLast message: {question}"}],
                       max_tokens=80, temperature=0.0)
    out = " ".join((res.text or "").strip().strip("\"'“”").split())
    if not out or len(out) > 400:
        raise ValueError("the rewrite came back empty or too long")
    return out


def rewrite(question: str, history: list[dict], vocab: dict | None = None, llm=None) -> tuple[str, str | None]:
    """(query, how): how is None (not a follow-up), "llm" or "offline"."""
    if not is_follow_up(question, history):
        return question, None
    if llm is not None and llm.name != "extractive":
        try:
            return rewrite_llm(question, history, llm), "llm"
        except Exception as exc:  # the offline rewrite is always there
            log.warning("LLM rewrite failed, offline instead: %s", exc)
    return rewrite_offline(question, history, vocab), "offline"


# --------------------------------------------------------------------------- link requests


def previous_documents(history: list[dict]) -> list[str]:
    """Document ids the last assistant message showed (cards first), if the client sent them."""
    for m in reversed(history or []):
        if m.get("role") == "assistant":
            return list(m.get("document_ids") or [])
    return []


def pin_documents(s, pf, fused: list[dict], doc_ids: list[str]) -> tuple[list[dict], list[str]]:
    """Put the previous answer's documents first (those the current pre-filter still allows),
    keeping the rest in order. Returns (new fused list, pinned document ids)."""
    if not doc_ids:
        return fused, []
    from kbframework.retrieval.search import bind

    where, p = pf.sql()
    p["ids"] = [str(d) for d in doc_ids]
    rows = s.execute(bind(
        f"SELECT DISTINCT ON (d.id) d.id::text, c.id FROM documents d JOIN chunks c ON c.document_id = d.id "
        f"WHERE d.id::text = ANY(:ids) AND {where} ORDER BY d.id, c.chunk_index", p), p).all()
    allowed = {r[0]: r[1] for r in rows}
    order = [d for d in p["ids"] if d in allowed]
    if not order:
        return fused, []
    pinned, rest = [], []
    best: dict = {}
    for f in fused:
        if f["document_id"] in allowed and f["document_id"] not in best:
            best[f["document_id"]] = f
        else:
            rest.append(f)
    for d in order:
        f = dict(best.get(d) or {"chunk_id": allowed[d], "document_id": d, "score": 0.0, "ranks": {},
                                 "leg_scores": {}, "rank": None, "boost": 1.0, "boosted_score": 0.0})
        f["pinned"] = "link request: shown in the previous answer"
        pinned.append(f)
    out = pinned + rest
    for i, f in enumerate(out):
        f["final_rank"] = i + 1
    return out, order
