"""Instruction-like text inside a document: the kind of line written to steer an AI
assistant ("ignore the previous instructions", "you are now…", "reveal your system
prompt", chat-format markers). Such a document is still indexed -- the prompt quotes every
passage as data and the rules say never to follow it -- but it is flagged so an admin sees
it in the document list and can check where it came from.
"""
from __future__ import annotations

import re

_PATTERNS = [
    r"\b(?:ignore|disregard|forget|override|bypass)\s+(?:all\s+|any\s+|the\s+|your\s+|these\s+|those\s+)*"
    r"(?:previous|prior|above|earlier|preceding|original|system|existing)?\s*"
    r"(?:instructions?|rules|prompts?|directions|guidelines|guardrails)\b",
    r"\byou\s+are\s+now\s+(?:a|an|the|in|my|no\s+longer)\b",
    r"\bfrom\s+now\s+on,?\s+you\s+(?:are|will|must|should)\b",
    r"\bpretend\s+(?:to\s+be|you\s+are)\b",
    r"\b(?:reveal|print|show|repeat|output|leak|disclose)\s+(?:me\s+)?(?:your|the)\s+(?:full\s+|hidden\s+|secret\s+)?"
    r"(?:system\s+)?(?:prompt|instructions)\b",
    r"\bsystem\s+prompt\b",
    r"\bnew\s+instructions\s*:",
    r"\binstructions?\s+(?:for|to)\s+(?:the\s+)?(?:ai|assistant|model|chatbot|llm|bot)\b",
    r"\b(?:ai|assistant|chatbot|language\s+model|llm|bot)s?\s*,?\s+(?:must|should|shall|will)\s+(?:always\s+|now\s+)?"
    r"(?:say|answer|respond|reply|recommend|tell|claim|state)\b",
    r"\bdo\s+not\s+(?:tell|inform|mention\s+to|reveal\s+to)\s+the\s+(?:user|customer|visitor)\b",
    r"<\|(?:im_start|im_end|system|assistant|user)\|>",
    r"\[/?INST\]",
    r"^\s*#{1,6}\s*(?:system|assistant)\s*:?\s*$",
    r"^\s*(?:system|assistant)\s*:(?=\s+\S)",
]
INSTRUCTION_LIKE = re.compile("|".join(f"(?:{p})" for p in _PATTERNS), re.I | re.M)
MAX_FLAGS = 5

# A case-insensitive search over fourteen alternatives that each open with a word boundary
# costs the ingest worker about as much per document as writing its chunks. Nearly every
# document matches none, which the checks below tell far more cheaply on the lowercased text;
# each is implied by one or more of the patterns (the patterns noted beside it), so a document
# they clear cannot match. Characters that IGNORECASE folds to ASCII letters while
# ``str.lower`` does not (dotless i, long s, Kelvin sign, dotted I) skip the shortcut.
_FOLDS = ("\u0131", "\u017f", "\u212a", "\u0130")
_ANY_OF = (
    ("prompt", "instruction"),  # reveal … prompt; system prompt; new instructions; instructions for the AI
    ("pretend",),
    ("<|", "inst]"),  # chat-format markers
)
_BOTH = (  # ignore / disregard … the previous rules
    (("ignore", "disregard", "forget", "override", "bypass"), ("rule", "direction", "guideline", "guardrail")),
)
_SAYS = r"\s+(?:always\s+|now\s+)?(?:say|answer|respond|reply|recommend|tell|claim|state)"
_MAYBE = tuple(re.compile(p, re.M) for p in (  # each opens with a literal, which re finds fast
    r"you\s+are\s+now", r"from\s+now\s+on", r"not\s+(?:tell|inform|mention|reveal)",  # you are now …; do not tell
    "must" + _SAYS, "should" + _SAYS, "shall" + _SAYS, "will" + _SAYS,  # the assistant must say …
    r"system\s*(?::|$)", r"assistant\s*(?::|$)"))  # "system:" / "### assistant" lines


def _may_match(text: str) -> bool:
    if any(c in text for c in _FOLDS):
        return True
    low = text.lower()
    return (any(k in low for group in _ANY_OF for k in group)
            or any(any(a in low for a in first) and any(b in low for b in second) for first, second in _BOTH)
            or any(p.search(low) for p in _MAYBE))


def instruction_like(text: str) -> list[dict]:
    """Where ``text`` contains instruction-like phrases: [{kind, match, at}], at most five."""
    out = []
    if not text or not _may_match(text):
        return out
    for m in INSTRUCTION_LIKE.finditer(text):
        out.append({"kind": "instruction_like", "match": " ".join(m.group(0).split())[:120], "at": m.start()})
        if len(out) >= MAX_FLAGS:
            break
    return out
