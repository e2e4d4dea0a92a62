"""The offline answerer: with no LLM configured, answer from the evidence with citations.

It never invents text: products and events are described from their own structured fields
(name, price, stock said plainly, dates, venue, product or ticket link), and the other lines are
sentences of the retrieved passages chosen by overlap with the question; each line is followed
by its source number [n]. The host's link check still runs on the result.
"""
from __future__ import annotations

import re
from typing import Callable, Optional

from kbframework.types import LLMProvider, LLMResult

# words of three letters and more, and the short ones written in capitals or with a digit
# ("EU", "UK", "ID", "4K"), which are names, not filler
_WORD = re.compile(r"[a-zA-Z0-9À-ž]{3,}|\b(?:[A-Z]{2}|[A-Za-z]\d|\d[A-Za-z])\b|\b\d{1,2}\+")  # "18+"
_STOP = set("the and for are was were what which who whom this that these those with from your you our "
            "have has had not but can could would should about into over under than then there their "
            "they them how why when where does did doing any all some more most very just also".split())
_SENT = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])")


_FIELD_LINE = re.compile(r"^\s*([A-Z][\w’'-]*(?:\s[\w’'-]+){0,2}):\s.*$", re.M)
# where the next field starts in a line of fields: a capitalised label (its other words in lower
# case: "Return policy:") and a colon, so "Green, Red Size:" splits before "Size"
_FIELD_SPLIT = re.compile(r"\s(?=[A-Z][\w’'-]*(?:\s[a-z][\w’'-]*){0,2}:\s)")
_SPELLINGS = {"colour": "color", "colours": "color", "colors": "color", "sizes": "size", "materials": "material"}


def _field_words(text: str) -> set[str]:
    return {_SPELLINGS.get(w, w.rstrip("s") if len(w) > 3 else w) for w in _terms(text)}


def _asks_field(question_terms: set[str], label: str) -> bool:
    return bool(_field_words(" ".join(question_terms)) & _field_words(label))


def _terms(text: str) -> set[str]:
    return {w.lower() for w in _WORD.findall(text) if w.lower() not in _STOP}


_LINK = re.compile(r"\b(?:links?|url|web\s?site|web\s?page|page|where\s+(?:can|do)\s+i\s+(?:buy|get|book)"
                   r"|tickets?|buy|book|order)\b", re.I)
FACT_DOCS = 3  # products/events described from their fields


def fact_line(p: dict, with_link: bool = True) -> str | None:
    """"Red Linen Midi Dress: €45, out of stock. https://… [3]" from a product's or an event's
    own fields; None for other passages. Every figure and link is a field of that document."""
    role = p.get("role")
    if role not in ("product", "event"):
        return None
    bits = []
    if role == "event":
        bits += [x for x in (p.get("when"), p.get("venue")) if x]
    price = p.get("price")
    if price:
        bits.append("free entry" if role == "event" and re.fullmatch(r"\D*0(?:[.,]0+)?\D*", price) else price)
    if role == "product" and p.get("stock"):
        bits.append(p["stock"])
    line = p["title"] + (": " + ", ".join(bits) if bits else "") + "."
    link = (p.get("ticket_url") or p.get("url")) if with_link else None
    if link:
        line += f" {'Tickets' if role == 'event' and p.get('ticket_url') else 'Link'}: {link}"
    return f"{line} [{p['n']}]"


def asks_for_items(question: str) -> bool:
    """The question asks for events or products: a time, a price or stock bound, "what's on"."""
    from datetime import datetime, timezone

    from kbframework.retrieval.phrases import find_free, find_prices, find_stock
    from kbframework.retrieval.places import event_intent
    from kbframework.retrieval.temporal import parse_temporal

    return bool(event_intent(question) or find_prices(question) or find_free(question) or find_stock(question)
                or parse_temporal(question, datetime.now(timezone.utc)) is not None)


class ExtractiveAnswerer(LLMProvider):
    name = "extractive"
    model = "offline-extractive"
    is_offline = True
    supports_streaming = True
    quotes_passages = True

    def available(self) -> bool:
        return True

    def answer(self, question: str, passages: list[dict], max_sentences: int = 3) -> str:
        """``passages``: [{n, title, content, role?, price?, stock?, when?, venue?, url?, ticket_url?}]
        in rank order. Products and events are described from their fields (name, price, stock,
        dates, venue, link); then the sentences that share most words with the question."""
        q = _terms(question)
        facts = []
        items = asks_for_items(question)
        top_structured = bool(passages) and passages[0].get("role") in ("product", "event")
        for p in passages[:FACT_DOCS + 1]:
            if len(facts) >= FACT_DOCS:
                break
            if p.get("role") not in ("product", "event"):
                continue
            # a product or event the answer is about: the top passage, one of a listing (the
            # question asks for events or products: a time, a price, "what's on"), or one the
            # question names
            if not (p is passages[0] or top_structured or items or q & _terms(p["title"])):
                continue
            facts.append(fact_line(p))
        top_structured = top_structured or (items and bool(facts))
        scored = []
        for p in passages:
            body = re.sub(r"^#+\s.*$", "", p["content"], flags=re.M)
            if p.get("role") in ("product", "event"):
                # "Categories: Hoodies", "Color: Blue, Green": fields, not sentences to quote,
                # unless the question asks for that field ("what sizes…?" quotes "Size: …")
                for m in _FIELD_LINE.finditer(body):
                    for field in _FIELD_SPLIT.split(m.group(0).strip()):  # "Color: Blue Size: S, M"
                        label = field.split(":", 1)[0]
                        if _asks_field(q, label):
                            title_overlap = 0.5 * len(q & _terms(p.get("title", "")))
                            scored.append((2 + title_overlap, -p["n"], 1, field.strip(), p["n"], p))
                body = _FIELD_LINE.sub("", body)
            for pos, sent in enumerate(_SENT.split(body.replace("\n", " "))):
                sent = sent.strip()
                if len(sent) < 20:
                    continue
                overlap = len(q & _terms(sent)) + 0.5 * len(q & _terms(p.get("title", "")))
                scored.append((overlap, -p["n"], -pos, sent, p["n"], p))
        scored.sort(key=lambda t: t[:3], reverse=True)
        picked, seen = [], set()
        quota = max_sentences - (1 if facts else 0)
        for overlap, _, _, sent, n, p in scored:
            if overlap <= 0 and (picked or facts):
                break
            if sent in seen:
                continue
            seen.add(sent)
            picked.append(f"{sent} [{n}]")
            if len(picked) >= quota:
                break
        if not picked and not facts:
            top = passages[0]
            picked = [f"{top['content'][:300].strip()} [{top['n']}]"]
        if _LINK.search(question):  # asked for the link: the top article's too
            for p in passages[:1]:
                if p.get("role") not in ("product", "event") and p.get("url"):
                    picked.append(f"Link: {p['url']} [{p['n']}]")
        lines = facts + picked if top_structured else picked + facts
        return "Here is what I found in our knowledge:\n\n" + "\n".join(f"- {s}" for s in lines)

    def complete(self, messages: list[dict], *, max_tokens: int = 600, temperature: float = 0.2,
                 stream: bool = False, on_token: Optional[Callable[[str], None]] = None,
                 passages: list[dict] | None = None, question: str = "") -> LLMResult:
        text = self.answer(question, passages or [])
        if stream and on_token:
            for piece in re.findall(r"\S+\s*", text):
                on_token(piece)
        from kbframework.ingest.tokens import count_tokens_batch

        # what it read and wrote, so a token budget counts offline answers too
        tin, tout = count_tokens_batch([question + "\n".join(p.get("content", "") for p in passages or []), text])
        return LLMResult(text=text, model=self.model, used_llm=False, tokens_in=tin, tokens_out=tout,
                         note="No LLM is configured: this answer quotes the retrieved passages.")
