"""Policy questions keep their pages first, whatever the preset boosts.

A shopping preset lifts products (×1.3) over support pages (×1.1): right for "red dress under
50", wrong for "can I return a dress?", where the return policy is the answer and a dress is only
the topic. When the question asks about a policy -- returns, shipping, payment, age limits, entry
rules, opening hours -- the support role (then manual notes) moves to the front of the preset's
priority for this question. The boost stays a re-rank, never a filter.
"""
from __future__ import annotations

import re

_POLICY = re.compile(
    r"\b(?:return(?:s|ing|ed)?|refunds?|exchanges?|send\s+(?:it|them)\s+back|money\s+back|shipping|ship(?:s|ped)?"
    r"|deliver(?:y|ies|ed)?|postage|tracking|courier|payments?|pay(?:ing)?\s+(?:by|with|cash|card)|cash\s+on"
    r"|paypal|invoice|warranty|guarantee|age\s+(?:limit|policy|restriction)|how\s+old|18\+|21\+|minimum\s+age"
    r"|ids?\b|identity\s+card|passport|entry\s+(?:rules?|policy|requirements?)|dress\s+code|re-?entry"
    r"|door\s+policy|cloakroom|policy|policies|terms|privacy|opening\s+hours|open\s+until|contact"
    r"|what\s+(?:should|do|can|shall)\s+(?:i|we)\s+wear|what\s+to\s+wear)(?!\w)",  # (?!\w): "18+?" ends in "+"
    re.I)
SUPPORT_ROLES = _SUPPORT_ROLES = ("support", "manual")


def is_policy_question(question: str) -> bool:
    return bool(_POLICY.search(question or ""))


def priority_for(question: str, priority: list[str]) -> list[str]:
    """The preset's role priority, with the support roles first for a policy question."""
    if not priority or not is_policy_question(question):
        return list(priority or [])
    front = [r for r in _SUPPORT_ROLES if r in priority]
    return front + [r for r in priority if r not in front]


# how visitors ask about a policy, in the words policy pages use: merged under the
# organization's own ``synonyms`` (its entries win). Keys are matched by all their words
BUILTIN_SYNONYMS = {
    "what should i wear": ["dress code"],
    "what to wear": ["dress code"],
    "age limit": ["18+", "minimum age", "ID"],
    "minimum age": ["18+", "age limit", "ID"],
    "how old": ["18+", "minimum age", "ID"],
}


def synonyms_with_builtins(own: dict | None) -> dict:
    return {**BUILTIN_SYNONYMS, **(own or {})}

