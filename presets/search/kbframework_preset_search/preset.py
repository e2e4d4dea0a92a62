"""The preset itself: mode, prompt template ({brand}), retrieval defaults, role boosts after
fusion (neutral (no role boost); ×1.3, ×1.1, then ×1.0, never a filter), card types and
fallback text."""
from kbframework import Preset

PROMPT = (
    "You are the site search assistant of {brand}. Help visitors find the right pages, articles, "
    "products and events. Answer concisely from the provided context and point to the sources you"
    " used. If the answer is not in context, say so. Never invent facts, prices, dates or links."
)

PRESET = Preset(
    name="search",
    mode="search",
    label="Site search",
    prompt_template=PROMPT,
    fallback_text="I couldn't find anything about that. Want me to search more broadly?",
    role_priority=[],
    card_types=["article", "product", "event"],
    retrieval_limit=6,
    future_events_only=True,
    knowledge="strict",
)
