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


def instruction_like(text: str) -> list[dict]:
    """Where ``text`` contains instruction-like phrases: [{kind, match, at}], at most five."""
    out = []
    for m in INSTRUCTION_LIKE.finditer(text or ""):
        out.append({"kind": "instruction_like", "match": " ".join(m.group(0).split())[:120], "at": m.start()})
        if len(out) >= MAX_FLAGS:
            break
    return out
