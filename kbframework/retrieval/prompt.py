"""The prompt: preset system prompt + rules + numbered evidence + the recent conversation."""
from __future__ import annotations

RULES = (
    "Rules: use only the numbered context passages below; if the answer is not there, say so "
    "plainly; never invent products, prices, stock, dates, venues, links or policies; cite the "
    "passages you used as [n]; keep to the point."
)
GENERAL = ("You may add stable general background knowledge, but prices, stock, editions, dates, "
           "links and policies must come from the context passages.")


def render_system(template: str, brand: str, knowledge: str = "strict") -> str:
    try:
        text = template.format(brand=brand or "this organization")
    except (KeyError, IndexError, ValueError):
        text = template.replace("{brand}", brand or "this organization")
    return f"{text}\n\n{RULES}" + (f"\n{GENERAL}" if knowledge == "general" else "")


def render_passages(passages: list[dict]) -> str:
    blocks = []
    for p in passages:
        head = f"[{p['n']}] {p['title']}"
        extra = []
        for key in ("date", "venue", "price", "stock", "url", "ticket_url", "pages"):
            if p.get(key):
                extra.append(f"{key}: {p[key]}")
        if extra:
            head += " (" + "; ".join(extra) + ")"
        blocks.append(f"{head}\n{p['content']}")
    return "\n\n".join(blocks)


def build_messages(system: str, passages: list[dict], history: list[dict], question: str) -> list[dict]:
    context = render_passages(passages)
    msgs = [{"role": "system", "content": f"{system}\n\nContext passages:\n\n{context}"}]
    msgs.extend({"role": m["role"], "content": m["content"]} for m in history)  # no extra keys
    msgs.append({"role": "user", "content": question})
    return msgs


def prompt_preview(messages: list[dict]) -> str:
    return "\n\n".join(f"### {m['role']}\n{m['content']}" for m in messages)
