"""The offline answerer: with no LLM configured, quote the best passages with citations.

It never invents text: every sentence it outputs comes from the retrieved evidence, chosen
by overlap with the question, and each is followed by its source number [n].
"""
from __future__ import annotations

import re
from typing import Callable, Optional

from kbframework.types import LLMResult

_WORD = re.compile(r"[a-zA-Z0-9À-ž]{3,}")
_STOP = set("the and for are was were what which who whom this that these those with from your you our "
            "have has had not but can could would should about into over under than then there their "
            "they them how why when where does did doing any all some more most very just also".split())
_SENT = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])")


def _terms(text: str) -> set[str]:
    return {w.lower() for w in _WORD.findall(text) if w.lower() not in _STOP}


class ExtractiveAnswerer:
    name = "extractive"
    model = "offline-extractive"

    def available(self) -> bool:
        return True

    def answer(self, question: str, passages: list[dict], max_sentences: int = 3) -> str:
        """``passages``: [{n, title, content}] in rank order."""
        q = _terms(question)
        scored = []
        for p in passages:
            body = re.sub(r"^#+\s.*$", "", p["content"], flags=re.M)
            for pos, sent in enumerate(_SENT.split(body.replace("\n", " "))):
                sent = sent.strip()
                if len(sent) < 20:
                    continue
                overlap = len(q & _terms(sent)) + 0.5 * len(q & _terms(p.get("title", "")))
                scored.append((overlap, -p["n"], -pos, sent, p["n"]))
        scored.sort(reverse=True)
        picked, seen = [], set()
        for overlap, _, _, sent, n in scored:
            if overlap <= 0 and picked:
                break
            if sent in seen:
                continue
            seen.add(sent)
            picked.append(f"{sent} [{n}]")
            if len(picked) >= max_sentences:
                break
        if not picked:
            top = passages[0]
            picked = [f"{top['content'][:300].strip()} [{top['n']}]"]
        return "Here is what I found in our knowledge:\n\n" + "\n".join(f"- {s}" for s in picked)

    def complete(self, messages: list[dict], *, max_tokens: int = 600, temperature: float = 0.2,
                 stream: bool = False, on_token: Optional[Callable[[str], None]] = None,
                 passages: list[dict] | None = None, question: str = "") -> LLMResult:
        text = self.answer(question, passages or [])
        if stream and on_token:
            for piece in re.findall(r"\S+\s*", text):
                on_token(piece)
        return LLMResult(text=text, model=self.model, used_llm=False,
                         note="No LLM is configured: this answer quotes the retrieved passages.")
