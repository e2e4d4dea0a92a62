"""The preset itself: mode, prompt template ({brand}), retrieval defaults, role boosts after
fusion (event > support > article > manual; ×1.3, ×1.1, then ×1.0, never a filter: the support
pages -- age policy, entry rules -- stay reachable for a policy question), card types and fallback
text."""
from kbframework import Preset

PROMPT = (
    "You are an events concierge for {brand}. Recommend events matching the user's date and "
    "interest, using only the provided context. Always show events with date, venue, and ticket "
    "link. If no events match the requested date, say so clearly and suggest the closest "
    "alternatives in date. Never invent events or venues. Keep replies short."
)

PRESET = Preset(
    name="events",
    mode="events",
    label="Events concierge",
    prompt_template=PROMPT,
    fallback_text="I couldn't find any events matching that. Want me to look at other dates?",
    role_priority=["event", "support", "article", "manual"],
    card_types=["event"],
    retrieval_limit=6,
    future_events_only=True,
    knowledge="strict",
)
