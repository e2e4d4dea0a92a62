"""Greetings, thanks and "what can you do?" answered as such, not as a search that found nothing.

"hi" used to search the knowledge, find nothing and answer "I couldn't find anything about
that" -- and count as a zero result in the admin's list of what the knowledge lacks. A message
that is only small talk is recognised by its whole text (a greeting with a question after it is
a question: "hi, do you have red dresses?" is searched as usual), answered with the
organization's own welcome or a line on what it can answer, and logged as an answer. Pure
functions but ``topics``, which reads which kinds of documents the organization has.
"""
from __future__ import annotations

import re

GREETING, THANKS, FAREWELL, ABOUT, YES = "greeting", "thanks", "farewell", "about", "yes"
OK = "ok"  # a "yes"/"ok" with nothing asked: acknowledged
OK_TEXT = "Good! Is there anything else I can help with?"

_PATTERNS = {
    GREETING: r"(?:hi|hello|hey|hiya|howdy|hallo|good\s+(?:morning|afternoon|evening|day)|greetings)"
              r"(?:\s+(?:there|all|everyone|team))?",
    THANKS: r"(?:(?:ok(?:ay)?|great|perfect|awesome|cool|nice|super|brilliant)\s*,?\s*)?"
            r"(?:thanks?(?:\s+you)?(?:\s+(?:so|very)\s+much|\s+a\s+lot|\s+a\s+bunch)?|thx|ty|cheers|much\s+appreciated)",
    FAREWELL: r"(?:bye(?:\s*bye)?|goodbye|good\s+bye|see\s+(?:you|ya)(?:\s+later)?|good\s+night|that'?s\s+all)",
    # "yes" to the fallback's "Want me to search more broadly?" (answered by the search; see steps)
    YES: r"(?:yes|yes\s+please|yeah|yep|yup|sure|ok(?:ay)?|please(?:\s+do)?|go\s+ahead|do\s+it|please\s+search"
         r"|search\s+(?:more\s+)?broadly|(?:yes|ok|sure)\s*,?\s*(?:please|go\s+ahead|search))",
    ABOUT: r"(?:who\s+are\s+you|what\s+are\s+you|are\s+you\s+(?:a\s+)?(?:bot|robot|human|real(?:\s+person)?|an?\s+ai|ai)"
           r"|what\s+can\s+you\s+do|what\s+do\s+you\s+do|how\s+can\s+you\s+help(?:\s+me)?|help|help\s+me"
           r"|what\s+can\s+i\s+ask(?:\s+you)?)",
}
_COMPILED = {k: re.compile(rf"^(?:{v})$", re.I) for k, v in _PATTERNS.items()}
_TRIM = re.compile(r"[\s!?.,:;)(\-–—~*'\"]+$|^[\s!?.,:;)(\-–—~*'\"]+")
_EMOJI = re.compile(r"[\U0001F300-\U0001FAFF\u2600-\u27BF\u200d\ufe0f]+")

_ROLE_WORDS = (("product", "our products (prices, stock, sizes and colours)"),
               ("event", "our events (what's on, where, tickets)"),
               ("support", "our policies (shipping, returns, payment, entry rules)"),
               ("article", "our articles and guides"),
               ("manual", "our notes"))


def kind_of(message: str) -> str | None:
    """The small-talk kind of a message that is nothing else, else None."""
    text = _EMOJI.sub(" ", message or "")
    text = " ".join(_TRIM.sub("", text).split())
    if not text or len(text) > 60:
        return None
    for kind, rx in _COMPILED.items():
        if rx.match(text):
            return kind
    return None


def reply(kind: str, brand: str, welcome: str | None, topics: list[str]) -> str:
    brand = brand or "this organization"
    what = _join(topics) if topics else "what it has published"
    about = f"I answer from {brand}'s own knowledge: {what}, and I show the sources I used."
    if kind == GREETING:
        return welcome.strip() if welcome and welcome.strip() else f"Hello! I'm {brand}'s assistant. {about}"
    if kind == THANKS:
        return "You're welcome! Is there anything else I can help with?"
    if kind == FAREWELL:
        return "Goodbye, and thanks for stopping by!"
    if kind == OK:
        return OK_TEXT
    return f"I'm {brand}'s assistant, a program, not a person. {about}"


BROADER_NOTHING = ("I searched more broadly and still found nothing about that, sorry. "
                   "Could you put it another way?")


def broaden_what(history: list[dict], fallback_text: str) -> str | None:
    """The question to search again without its filters, when the visitor says "yes" to the
    fallback's offer: the last question, if the last answer was that fallback."""
    last = next((i for i in range(len(history or []) - 1, -1, -1) if history[i].get("role") == "assistant"), None)
    if last is None or (history[last].get("content") or "").strip() != (fallback_text or "").strip():
        return None
    return next((m["content"] for m in reversed(history[:last]) if m.get("role") == "user"
                 and kind_of(m.get("content") or "") is None), None)


def without_small_talk(history: list[dict]) -> list[dict]:
    """The conversation without its small-talk turns (the visitor's "hi" and the reply to it)."""
    out: list[dict] = []
    skip_reply = False
    msgs = list(history or [])
    for i, m in enumerate(msgs):
        if m.get("role") == "user":
            kind = kind_of(m.get("content") or "")
            reply_ = msgs[i + 1].get("content") if i + 1 < len(msgs) else None
            # a "yes" that was searched (the broader search) stays; one only acknowledged goes
            skip_reply = kind is not None and (kind != YES or reply_ == OK_TEXT)
            if skip_reply:
                continue
        elif skip_reply:
            skip_reply = False
            continue
        out.append(m)
    return out


def topics(s, org_id) -> list[str]:
    """What the organization's knowledge holds, as words for a visitor."""
    from sqlalchemy import bindparam, text

    from kbframework.retrieval.search import SERVABLE_STATUSES

    rows = s.execute(text("SELECT DISTINCT document_role FROM documents WHERE organization_id = :org "
                          "AND status IN :st AND chunk_count > 0").bindparams(bindparam("st", expanding=True)),
                     {"org": str(org_id), "st": list(SERVABLE_STATUSES)}).all()
    have = {r[0] for r in rows}
    return [words for role, words in _ROLE_WORDS if role in have]


def _join(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]
