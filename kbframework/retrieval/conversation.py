"""Conversation memory for retrieval: a short sliding window, and follow-ups rewritten
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
from dataclasses import dataclass
from datetime import datetime, timezone

from kbframework.retrieval.patterns import compile_on_use

log = logging.getLogger("kbframework.conversation")

_LEAD = compile_on_use(r"^\s*(?:(?:and|or|but|also|so|ok(?:ay)?|well|then|hmm+)\b[\s,]*)*"
                       r"(?:what\s+about|how\s+about|what\s+if|and\s+for|same\s+for|same\s+but)?\b[\s,]*", re.I)
_REFERENT = compile_on_use(
    r"\b(?:it|its|it's|they|them|their|theirs|those|these|that\s+one|this\s+one|the\s+one|one|ones|"
    r"that|this|same|another|other|others|else|cheaper|pricier|bigger|smaller|larger|longer|shorter|"
    r"lighter|heavier|warmer|better|first|second|third|last|former|latter|link|url)\b", re.I)
_THERE = compile_on_use(r"(?<!\bis )(?<!\bare )(?<!\bwas )(?<!\bwere )\bthere\b", re.I)
_LINK = compile_on_use(r"\b(?:link|links|url|web\s?site|web\s?page|ticket\s+link)\b|"
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
_COLOUR_RE = compile_on_use(r"\b(?:" + "|".join(sorted(COLOURS, key=len, reverse=True)) + r")\b", re.I)
_PREP_BEFORE = compile_on_use(r"\b(?:on|at|in|for|this|next|during|from|by)\s*$", re.I)


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
        log.warning("temporal parse failed while rewriting %r", q, exc_info=True)
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


# --------------------------------------------------------------------------- the turn's kind

STANDALONE, FOLLOW_UP, TOPIC_SHIFT = "standalone", "follow_up", "topic_shift"

_CONNECTOR = compile_on_use(r"^\s*(?:and|or|but|also|plus|then|so)\b|^\s*(?:what|how)\s+about\b|"
                            r"^\s*(?:same|ditto)\b|^\s*what\s+if\b", re.I)
_REFINE = compile_on_use(r"^\s*(?:with|without|w/o?|for|made\s+(?:of|from|with)|in\s+(?:size|a\s+size|colou?r))\b", re.I)
_PRONOUN = compile_on_use(r"\b(?:it|its|it's|they|them|their|those|these|that\s+one|this\s+one|the\s+one|"
                          r"ones|one\s+of\s+them|same|another|other|others|either|both|there)\b", re.I)
_IS_THERE = compile_on_use(r"\b(?:is|are|was|were)\s+there\b", re.I)
COMPARATIVES = {
    "cheaper": "cheaper", "less expensive": "cheaper", "lower price": "cheaper", "more affordable": "cheaper",
    "more expensive": "pricier", "pricier": "pricier", "dearer": "pricier", "higher end": "pricier",
    "later": "later", "afterwards": "later", "earlier": "earlier", "sooner": "earlier",
    "bigger": "bigger", "larger": "bigger", "smaller": "smaller", "lighter": "lighter",
}
_COMPARATIVE = compile_on_use(r"\b(?:" + "|".join(re.escape(k).replace(r"\ ", r"\s+")
                                                  for k in sorted(COMPARATIVES, key=len, reverse=True)) + r")\b", re.I)
_SUPERLATIVE = compile_on_use(r"\b(?:the\s+)?(cheapest|most\s+expensive|priciest|earliest|latest|soonest)\b", re.I)
ORDINALS = {"first": 0, "1st": 0, "second": 1, "2nd": 1, "third": 2, "3rd": 2, "fourth": 3, "4th": 3,
            "fifth": 4, "5th": 4, "last": -1, "former": 0, "latter": -1}
_ORDINAL = compile_on_use(r"\b(?:the\s+)?(first|1st|second|2nd|third|3rd|fourth|4th|fifth|5th|last|former|latter)"
                          r"(?:\s+(?:one|ones|item|product|event|option|link|show|night|gig|concert))?\b", re.I)
_SELECTOR_ONE = compile_on_use(r"\bthe\s+([\w'’-]+(?:\s+[\w'’-]+)?)\s+one\b", re.I)
# nouns that ask about an attribute of something already shown, not a new subject
ATTRIBUTE_NOUNS = frozenset("""
price prices cost costs much link links url urls website page ticket tickets booking stock availability
available size sizes colour colours color colors date dates time times start starts doors hour hours
age limit limits restriction parking address venue location directions way map subtitles subtitle language
fuel weight warranty guarantee delivery shipping return returns refund refunds discount version versions
lid lids spare spares fit fits capacity dimension dimensions material materials detail details info
information code accessible accessibility wheelchair lineup line-up duration long entry cover free
rating review reviews battery model models option options variant variants one ones more else
""".split())
# what a shown document itself holds: a question about only these is about the shown document
SHOWN_FACTS = frozenset("""
price prices cost costs much link links url website page stock available availability ticket tickets booking
date dates time times when start starts doors
""".split())
_WORDS = compile_on_use(r"[\w'’-]+", re.U)
_FRAME = compile_on_use(r"^\s*(?:what(?:'s|’s|\s+is|\s+are)?\s+(?:on|happening|going\s+on|playing|showing)|"
                        r"what\s+(?:events|shows|gigs|concerts|parties)|any(?:thing)?\s+(?:on|happening)|"
                        r"(?:do|does|can)\s+(?:you|i|we)\b|show\s+me|i(?:'m|’m|\s+am)\s+(?:looking|after)|"
                        r"i\s+(?:need|want|would\s+like|'d\s+like)|tell\s+me\s+about|where\s+(?:can|do)\s+i|"
                        r"how\s+(?:do|can)\s+i|looking\s+for|recommend|suggest|where(?:'s|’s|\s+is|\s+are))\b", re.I)


@dataclass
class TurnKind:
    """How a question relates to the conversation before it, and why."""

    kind: str = STANDALONE
    reason: str = "the first question of the conversation"
    how: str = "rules"
    refers_back: bool = False          # about the documents the previous answer showed
    comparative: str | None = None     # "cheaper", "pricier", "later", "earlier", …
    superlative: str | None = None     # "the cheapest one": a pick among the shown documents
    ordinal: int | None = None         # "the second one" → 1, "the last one" → -1
    selector: str | None = None        # "the Saturday one" → "Saturday"
    new_subject: bool = False          # a follow-up that swaps the subject ("and jazz?")

    def as_dict(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if v not in (None, False)}


_PICK = {"cheaper": "cheapest", "pricier": "most_expensive", "later": "latest", "earlier": "earliest"}


def content_words(question: str, vocab: dict | None = None) -> list[str]:
    """The question's own subject words: no fillers, no constraint phrases (time, price, stock,
    colour, the organization's places), no attribute nouns."""
    q = _core(question)
    spans = [sp for v in _constraint_spans(q).values() for sp in v]
    spans += [sp for k, v in _vocab_spans(q, vocab).items() if k in ("city", "venue") for sp in v]
    rest = _remove(q, spans) if spans else q
    rest = _COMPARATIVE.sub(" ", _ORDINAL.sub(" ", rest))
    out = []
    for w in _WORDS.findall(rest.lower()):
        w = w.strip("'’-")
        if len(w) < 2 or w in _FILLER or w in _LINK_FILLER or w in ATTRIBUTE_NOUNS:
            continue
        if w in _GENERAL_STOP or w.isdigit():
            continue
        out.append(w)
    return out


_GENERAL_STOP = frozenset("""
am be been being was were will shall should may might must need want like would get got go going come
coming here there when where who whom why also just only very really more most less least much many
tonight today tomorrow weekend week night evening morning afternoon on in at for from into near by
and or but not no yes so if than too else still again ever your yours our my mine his her we us
happening playing showing available sell selling offer offering stock book order buy recommend suggest
tell know let see look looking find show give send share after best good nice great cool thanks thank
back don't doesn't didn't can't won't isn't aren't fit fits
""".split())


def classify(question: str, history: list[dict], vocab: dict | None = None) -> TurnKind:
    """Standalone, follow-up or topic shift, by rules.

    Follow-up signals: a leading "and"/"what about", a pronoun ("it", "those", "there"), a
    comparative ("cheaper", "later"), an ordinal ("the second one"), "the Saturday one", a link
    request without its own subject, an attribute question without a subject ("is there an
    age limit?"), or an ellipsis (a fragment of constraints: "in red?", "tomorrow?").
    Topic-shift signals: a complete question with its own subject, or a question frame ("what's
    on", "do you have") with its own time or place and nothing pointing back."""
    if not any(m.get("role") == "user" for m in history or []):
        return TurnKind()
    t = TurnKind()
    m = _SUPERLATIVE.search(question)
    if m and re.search(r"\b(?:one|ones|of\s+(?:them|those|these))\b", question, re.I):
        t.superlative = m.group(1).lower().replace(" ", "_")
    c = _COMPARATIVE.search(question)
    if c and not re.search(r"\b(?:cheaper|pricier)\s+than\s+\d", question, re.I):
        t.comparative = COMPARATIVES[" ".join(c.group(0).lower().split())]
    o = _ORDINAL.search(question)
    if o and (o.group(0).lower().split()[-1] in ("one", "ones", "item", "product", "event", "option", "link",
                                                   "show", "night", "gig", "concert")
              or re.search(r"\bthe\s+" + re.escape(o.group(1)), question, re.I)):
        if not re.search(r"\b(?:first|last)\s+(?:time|week|weekend|day|month|night\s+of)\b", question, re.I):
            t.ordinal = ORDINALS[o.group(1).lower()]
    sel = _SELECTOR_ONE.search(question)
    if sel and t.ordinal is None and sel.group(1).lower() not in ("first", "last", "same", "other", "next"):
        word = " ".join(sel.group(1).lower().split())
        if word in COMPARATIVES:  # "the cheaper one": a pick among what was shown, not a new bound
            t.superlative, t.comparative = _PICK.get(COMPARATIVES[word]), None
        else:
            t.selector = sel.group(1)
    words = question.split()
    subject = content_words(question, vocab)
    own_constraints = [sp for v in _constraint_spans(_core(question)).values() for sp in v]
    own_places = _vocab_spans(question, vocab)
    connector = bool(_CONNECTOR.match(question))
    pronoun = bool(_PRONOUN.search(_IS_THERE.sub(" ", question)))
    link = is_link_request(question)
    frame = bool(_FRAME.match(question))
    if t.superlative or t.ordinal is not None or t.selector:
        t.refers_back = True
        t.kind = FOLLOW_UP
    if t.superlative or t.ordinal is not None or t.selector:
        t.kind, t.reason = FOLLOW_UP, "points at one of the documents already shown " + (
            f"('{t.superlative or t.selector or o.group(0)}')")
    elif t.comparative:
        t.kind, t.reason = FOLLOW_UP, f"a comparative ('{c.group(0)}') refines the previous answer"
    elif connector and len(words) <= 10:
        t.kind, t.reason = FOLLOW_UP, f"starts with '{_CONNECTOR.match(question).group(0).strip()}'"
        t.new_subject = bool(subject)
    elif pronoun and len(words) <= 14 and not (frame and subject and len(subject) >= 2 and not link):
        t.kind, t.reason = FOLLOW_UP, "a pronoun refers back ('" + _PRONOUN.search(
            _IS_THERE.sub(" ", question)).group(0) + "')"
        # about the shown document ("does it have subtitles?", "how do I get there?"), unless it
        # asks for another one that goes with it ("what fuel does it need?", "a women's version?")
        t.refers_back = link or not _ANOTHER.search(question)
    elif link and not subject:
        t.kind, t.reason = FOLLOW_UP, "asks for the link of what was shown"
        t.refers_back = True
    elif not subject and not frame and (own_constraints or own_places) and len(words) <= 6:
        t.kind, t.reason = FOLLOW_UP, "an ellipsis: only constraints, the subject comes from before"
    elif not subject and len(words) <= 8 and _asks_attribute(question) and not _nothing_shown(history):
        t.kind, t.reason = FOLLOW_UP, "asks about a detail of what was shown, without its own subject"
        t.refers_back = _asks_shown_fact(question, subject)
    elif not subject and len(words) <= 3 and not (frame and (own_constraints or own_places)):
        # "what's on tonight?" is three words too, but a new question with its own time
        t.kind, t.reason = FOLLOW_UP, "a short fragment without its own subject"
    elif subject and len(words) <= 6 and _REFINE.match(question):
        # "with a logo", "without sugar", "for kids": a fragment that narrows what was asked
        t.kind, t.reason = FOLLOW_UP, f"a refinement ('{_REFINE.match(question).group(0).strip()} …') of the question before"
    elif subject:
        t.kind, t.reason = TOPIC_SHIFT, "a complete question with its own subject ('" + " ".join(subject[:4]) + "')"
    elif frame and (own_constraints or own_places):
        t.kind, t.reason = TOPIC_SHIFT, "a new question ('" + _FRAME.match(question).group(0).strip() + \
            "…') with its own time or place"
    else:
        t.kind, t.reason = TOPIC_SHIFT, "nothing points back to the previous turn"
    return t


_ANOTHER = compile_on_use(r"\b(?:versions?|another|other|others|alternatives?|instead|fits?|compatible|needs?|"
                          r"goes\s+with|go\s+with|spares?|refills?)\b", re.I)


def _asks_shown_fact(question: str, subject: list[str]) -> bool:
    """"How much is it?", "is it in stock?", "when does it start?": a fact the shown document
    itself holds (so it goes first), unlike "what fuel does it need?" or "is there a women's
    version?", which ask for another document."""
    asked = {w.strip("?.!,'’").lower() for w in question.split()} & ATTRIBUTE_NOUNS
    return not subject and bool(asked & SHOWN_FACTS) and not (asked - SHOWN_FACTS - {"one", "ones", "more"})


def _nothing_shown(history: list[dict]) -> bool:
    """The previous answer showed no document (a fallback): "is there anything free?" then
    asks about nothing shown, so it is a question of its own. Plain history without document
    ids says nothing either way."""
    last = next((m for m in reversed(history or []) if m.get("role") == "assistant"), None)
    return last is not None and "document_ids" in last and not last["document_ids"]


def _asks_attribute(question: str) -> bool:
    return any(w.strip("?.!,").lower() in ATTRIBUTE_NOUNS for w in question.split())


CLASSIFY_PROMPT = ("Decide how the visitor's last message relates to the conversation. Reply with one word: "
                   "FOLLOW_UP (it refines or refers back to what was discussed: 'and tomorrow?', 'cheaper?', "
                   "'the second one', 'how much is it?') or NEW (a new, complete question on another subject, "
                   "even if it names its own time or place).")


def ask_about_conversation(llm, instruction: str, question: str, history: list[dict], max_tokens: int,
                           chars_per_message: int = 600) -> str:
    """One small LLM call about the conversation (the turn's kind, the rewrite): the
    instruction as the system message, the last four messages and the visitor's last message
    as the user message. History shapes retrieval; it is never quoted as evidence."""
    turns = "\n".join(f"{m['role']}: {m['content'][:chars_per_message]}" for m in history[-4:])
    res = llm.complete([{"role": "system", "content": instruction},
                        {"role": "user", "content": f"Conversation:\n{turns}\n\nLast message: {question}"}],
                       max_tokens=max_tokens, temperature=0.0)
    return res.text or ""


def classify_llm(question: str, history: list[dict], llm) -> str:
    reply = ask_about_conversation(llm, CLASSIFY_PROMPT, question, history, max_tokens=5, chars_per_message=400)
    word = reply.strip().upper()
    if word.startswith("FOLLOW"):
        return FOLLOW_UP
    if word.startswith("NEW"):
        return TOPIC_SHIFT
    raise ValueError(f"unexpected answer {reply!r}")


def is_follow_up(question: str, history: list[dict], vocab: dict | None = None) -> bool:
    """A follow-up by the rules of ``classify`` (refines or refers back to the previous turn)."""
    return classify(question, history, vocab).kind == FOLLOW_UP


def _constraints_only(prev: str, vocab: dict | None) -> str:
    """The previous question's constraint phrases (time, price, stock, colour, place) without its
    subject: what a follow-up that swaps the subject ("and jazz?") keeps."""
    spans = [sp for v in _constraint_spans(prev).values() for sp in v]
    spans += [sp for k, v in _vocab_spans(prev, vocab).items() if k in ("city", "venue") for sp in v]
    keep = []
    for a, b in sorted(set(spans)):
        m = _PREP_BEFORE.search(prev[:a])
        keep.append(prev[m.start():b] if m else prev[a:b])
    return _tidy(" ".join(keep))


_POINTERS = compile_on_use(_COMPARATIVE.pattern + "|" + _SUPERLATIVE.pattern + "|" + _ORDINAL.pattern, re.I)


def _rewrite_pair(prev: str, question: str, vocab: dict | None = None, turn: "TurnKind | None" = None) -> str:
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
    if turn is not None and turn.new_subject:  # "and jazz?": jazz replaces techno, time and place stay
        base = _constraints_only(base, vocab)
    core = _POINTERS.sub(" ", core)  # "cheaper", "the second one" are bounds and picks, not search words
    if is_link_request(core):
        extra = _LINK.sub(" ", core)
        words = [w for w in re.findall(r"[\w'’€$£.-]+", extra)
                 if w.lower() not in _FILLER and w.lower() not in _LINK_FILLER]
        return _tidy(f"{base} {' '.join(words)}")
    words = [w for w in re.findall(r"[\w'’€$£.,-]+", core) if w.lower() not in _FILLER]
    return _tidy(f"{base} {' '.join(words)}")


def standalone_before(history: list[dict], vocab: dict | None = None) -> str:
    """The conversation's standalone question as of its last user turn: the user turns folded
    left to right, each follow-up building on the one before, a topic shift starting over."""
    standalone = ""
    seen: list[dict] = []
    for m in history:
        if m.get("role") == "user":
            t = classify(m["content"], seen, vocab)
            if standalone and t.kind == FOLLOW_UP:
                standalone = _rewrite_pair(standalone, m["content"], vocab, t)
            else:
                standalone = _tidy(m["content"])
        seen.append(m)
    return standalone


def rewrite_offline(question: str, history: list[dict], vocab: dict | None = None,
                    turn: "TurnKind | None" = None) -> str:
    """Carry the conversation's subject and constraints into a short follow-up.

    The user turns are folded left to right, so a third turn builds on the rewritten second
    ("techno this weekend under €30" → "and tomorrow?" → "the cheaper one?" keeps techno,
    tomorrow and the price)."""
    turn = turn or classify(question, history, vocab)
    return _rewrite_pair(standalone_before(history, vocab), question, vocab, turn)


REWRITE_PROMPT = ("Rewrite the visitor's last message as ONE standalone search query, using the conversation "
                  "for what it refers to. Keep the earlier topic and constraints (place, price, stock, colour) "
                  "unless the last message changes them; a new date or price replaces the old one. "
                  "Reply with the query only, no quotes, no explanation.")


def rewrite_llm(question: str, history: list[dict], llm) -> str:
    reply = ask_about_conversation(llm, REWRITE_PROMPT, question, history, max_tokens=80)
    out = " ".join(reply.strip().strip("\"'“”").split())
    if not out or len(out) > 400:
        raise ValueError("the rewrite came back empty or too long")
    return out


def rewrite(question: str, history: list[dict], vocab: dict | None = None, llm=None,
            turn: "TurnKind | None" = None) -> tuple[str, str | None]:
    """(query, how): how is None (not a follow-up), "llm" or "offline"."""
    turn = turn or classify(question, history, vocab)
    if turn.kind != FOLLOW_UP:
        return question, None
    if llm is not None:
        try:
            return rewrite_llm(question, history, llm), "llm"
        except Exception as exc:  # the offline rewrite is always there
            log.warning("LLM rewrite failed, offline instead: %s", exc)
    return rewrite_offline(question, history, vocab, turn), "offline"


# --------------------------------------------------------------------------- link requests


def previous_documents(history: list[dict]) -> list[str]:
    """Document ids the last assistant message showed (cards first), if the client sent them."""
    for m in reversed(history or []):
        if m.get("role") == "assistant":
            return list(m.get("document_ids") or [])
    return []


def pin_documents(s, pf, fused: list[dict], doc_ids: list[str],
                  why: str = "link request: shown in the previous answer") -> tuple[list[dict], list[str]]:
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
        f["pinned"] = why
        pinned.append(f)
    out = pinned + rest
    for i, f in enumerate(out):
        f["final_rank"] = i + 1
    return out, order
