"""Conversation memory for retrieval (§8): a short sliding window, and follow-ups rewritten
into standalone queries before retrieval. History shapes retrieval; it is never evidence."""
from __future__ import annotations

import re

FOLLOW_UP = re.compile(
    r"^\s*(and|or|but|what about|how about|also|same|cheaper|more|less|the (first|second|third|last|other)|"
    r"it|that|this|those|these|them|they|one|ones|any|tomorrow|tonight|what's the link|link)\b",
    re.I)
REFERENTIAL = re.compile(r"\b(it|its|that|this|those|these|them|they|one|ones|cheaper|bigger|smaller|"
                         r"first|second|third|last|other|link|same)\b", re.I)


def clean_history(history, max_messages: int = 6) -> list[dict]:
    out = []
    for m in history or []:
        if not isinstance(m, dict):
            continue
        role, content = m.get("role"), m.get("content")
        if role in ("user", "assistant") and isinstance(content, str) and content.strip():
            out.append({"role": role, "content": content.strip()[:4000]})
    return out[-max_messages:] if max_messages > 0 else []


def is_follow_up(question: str, history: list[dict]) -> bool:
    if not any(m["role"] == "user" for m in history):
        return False
    words = question.split()
    return len(words) <= 8 and bool(FOLLOW_UP.search(question) or REFERENTIAL.search(question))


def rewrite_offline(question: str, history: list[dict]) -> str:
    """Carry the previous user question (its subject and constraints) into a short follow-up."""
    prev = next((m["content"] for m in reversed(history) if m["role"] == "user"), "")
    q = re.sub(r"^\s*(and|or|but|also|what about|how about)\s+", "", question, flags=re.I).strip(" ?")
    return f"{prev.rstrip(' ?.')} {q}".strip()
