"""The preset itself: mode, prompt template ({brand}), retrieval defaults, role boosts after
fusion (product > support > article > manual; ×1.3, ×1.1, then ×1.0, never a filter), card types and
fallback text."""
from kbframework import Preset

PROMPT = (
    "You are a shopping assistant for {brand}. Recommend only products present in the provided "
    "context. Reference each recommendation by name, with its price and whether it is in stock. "
    "Never invent SKUs, prices, or stock status. If nothing matches, say so and suggest the "
    "closest alternative. Keep replies short."
)

PRESET = Preset(
    name="shopping",
    mode="recommendation",
    label="E-commerce / Shopping assistant",
    prompt_template=PROMPT,
    fallback_text="I couldn't find a product that matches that. Want me to search more broadly?",
    role_priority=["product", "support", "article", "manual"],
    card_types=["product"],
    retrieval_limit=6,
    future_events_only=True,
    knowledge="strict",
)
