"""The preset itself: mode, prompt template ({brand}), retrieval defaults, role boosts after
fusion (support > manual > article; ×1.3, ×1.1, then ×1.0, never a filter), card types and
fallback text."""
from kbframework import Preset

PROMPT = (
    "You are a support agent for {brand}. Answer using the provided documentation only. If the "
    "answer is not in context, say 'I don't have that information' and suggest contacting "
    "support. Quote the relevant snippet when helpful. Never guess."
)

PRESET = Preset(
    name="support",
    mode="support",
    label="Support / Helpdesk",
    prompt_template=PROMPT,
    fallback_text="I don't have that information. Please contact our support team, and we'll help you.",
    role_priority=["support", "manual", "article"],
    card_types=["article"],
    retrieval_limit=6,
    future_events_only=True,
    knowledge="strict",
)
