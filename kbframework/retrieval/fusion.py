"""How the searches' rankings become one, and what this question may tilt.

Reciprocal Rank Fusion with equal weights is the baseline: it needs no calibration between a
cosine and a BM25 score, and the rrf step of the trace always shows its order. The soft-match
leg (``soft_match``: the other two legs' chunks re-scored word by word) weighs half a leg in it. Two kinds of
tilt may change it, each named in the trace with its reason:

    leg weights     the preset's ``fusion_weights``; a SKU-shaped question ("ALT-TH2") leans
                    on the keyword leg (a vector cannot tell ALT-TH2 from ALT-TH2-FP)
    role priority   the preset's role boost (×1.3, ×1.1), with the roles the question's own
                    words ask for moved to the front: a policy question (returns, shipping,
                    age limit…) or a question about what the visitor may do ("can I bring a
                    camera?", "do I need cash at the bar?") asks a support page; a time
                    window ("this weekend", "tonight") asks for what happens then, events; a
                    price or stock bound ("under €50", "in stock") asks for what has a price
                    and a stock, products and events; a question for events themselves
                    ("upcoming concerts at Sala Farol", "what's happening at Estufa"; not one
                    about the visitor's own ticket) events. A boost re-ranks, it never filters.
                    The neutral preset (no boost of its own) gets these tilts too.
    venue pages     a question for a venue itself (its address, the way there, a kind of place:
                    "jazz club in Vale Dourado"; not its events, a rule or a price) puts the
                    venue's own page, a non-event document whose title names one of the
                    organization's venues, ×1.3 (the role_boost step lists them).
"""
from __future__ import annotations

import re

from kbframework.retrieval import policy
from kbframework.retrieval.identity import is_sku_shaped
EVENT_TILT = True
# the words that ask for events themselves (not "tickets", "club" or "bar", which policy and venue
# questions use as much: "can I buy tickets at the door?", "is the club step-free?"; and "party",
# "festival", "show" only in the plural, since products carry them in their names: a party dress,
# a festival lantern, a show jacket)
_ASKS_EVENTS = re.compile(
    r"\b(?:events?|parties|gigs?|concerts?|festivals|raves|shows|performances?|screenings?"
    r"|what['’]?s\s+on|whats\s+on|anything\s+on|going\s+on|happening|line-?ups?|live\s+music)\b", re.I)
# the visitor's own ticket or booking: a question for the rules about it, whatever event it names
_OWN_BOOKING = re.compile(r"\b(?:my|our)\s+(?:\w+\s+)?(?:tickets?|bookings?|orders?|reservations?|seats?)\b", re.I)


VENUE_PAGE_BOOST = 1.3
# a question for a place itself: where it is, how to get there, or a kind of place ("jazz club in
# Vale Dourado", "the venue in the converted power station", "address of Armazém 7")
_ASKS_VENUE = re.compile(
    r"\b(?:address|where\s+is|where['’]s|how\s+(?:do|can|would)\s+(?:i|we)\s+get\s+(?:to|there)|directions"
    r"|getting\s+there|location\s+of|venues?|clubs?|bars?|stages?|theat(?:re|er)s?|halls?|taverns?)\b", re.I)


def asks_for_a_venue(question: str) -> bool:
    """The question asks for a venue (its address, the way there, a kind of place), not for the
    events held there."""
    from kbframework.retrieval.conversation import _COMPARATIVE

    q = question or ""
    if not _ASKS_VENUE.search(q) or asks_for_events(q):
        return False
    # a rule ("what ID do I need for a club night?") or a price ("cheaper theatre seats") is not a place
    return not (policy.is_policy_question(q) or asks_what_is_allowed(q) or _COMPARATIVE.search(q))


def venue_pages(titles: dict[str, str], roles: dict[str, str], venues: list[str]) -> set[str]:
    """The documents that are a venue's own page: not an event, and their title names one of
    the organization's venues ("Armazém 7 — venue information")."""
    from kbframework.retrieval.phrases import fold

    names = [fold(v) for v in venues or [] if v and len(v) >= 3]
    out = set()
    for d, title in titles.items():
        if roles.get(d) == "event" or not title:
            continue
        t = fold(title)
        if any(re.search(rf"(?<!\w){re.escape(n)}(?!\w)", t) for n in names):
            out.add(d)
    return out


def boost_venue_pages(boosted: list[dict], pages: set[str], factor: float = VENUE_PAGE_BOOST) -> list[dict]:
    """A re-rank: the venue pages' scores × factor, then the order again."""
    out = []
    for f in boosted:
        g = dict(f)
        if g["document_id"] in pages:
            g["boost"] = round(g.get("boost", 1.0) * factor, 4)
            g["boosted_score"] = round(g.get("boosted_score", g["score"]) * factor, 8)
        out.append(g)
    out.sort(key=lambda f: (-f["boosted_score"], f["rank"]))
    for i, f in enumerate(out):
        f["final_rank"] = i + 1
    return out


def asks_for_events(question: str) -> bool:
    """The question asks for events themselves ("upcoming concerts at Sala Farol", "shows at
    Teatro Garrido"), not about the visitor's own ticket ("what happens to my ticket if the
    show is rained off?")."""
    return bool(_ASKS_EVENTS.search(question or "")) and not _OWN_BOOKING.search(question or "")

SKU_KEYWORD, SKU_VECTOR = 2.0, 0.5
PRICED_ROLES = ("product", "event")  # what a price or stock bound describes
POLICY_ROLES = ("support", "manual")  # where policies are written

# "can I bring…", "can we…", "can my 15-year-old…", "can you mend…", "do I need…", "am I allowed…":
# the answer is a rule of the house, unless the question is about getting something
# ("can I get a red dress?", "can you recommend a tent?": a product or an event answers that)
_MAY_I = re.compile(
    r"^\s*(?:(?:and|so|but|ok(?:ay)?)[\s,]+)?(?:(?:can|could|may)\s+(?:i|we|my|our|you)"
    r"|(?:do|does|will)\s+(?:i|we|my|our)\s+(?:need|have\s+to)"
    r"|(?:am|are)\s+(?:i|we)\s+allowed|is\s+it\s+(?:ok(?:ay)?|allowed|possible)\s+to)\b", re.I)
_GETTING = re.compile(r"^\s*\S+\s+\S+\s+(?:\S+\s+)?(?:buy|get|order|find|have|see|recommend|suggest|show|"
                      r"book|reserve|try\s+on|afford)\b", re.I)


def asks_what_is_allowed(question: str) -> bool:
    """A question about what the visitor may or must do, not about getting something."""
    return bool(_MAY_I.search(question or "")) and not _GETTING.search(question or "")


def base_weights() -> dict:
    """The untilted weights: the vector, keyword and listing legs equal, the soft-match leg (a
    re-scoring of the first two legs' chunks) at its own ``soft_match.WEIGHT``."""
    from kbframework.retrieval.soft_match import WEIGHT as SOFT_WEIGHT

    return {"vector": 1.0, "keyword": 1.0, "listing": 1.0, "soft": SOFT_WEIGHT}


def leg_weights(question: str, preset=None) -> tuple[dict, str]:
    """RRF weights per leg and why: equal unless the preset or a SKU-shaped question tilts them."""
    w = base_weights()
    why = "equal weights"
    if preset is not None and getattr(preset, "fusion_weights", None):
        w.update({k: float(v) for k, v in preset.fusion_weights.items()})
        why = f"the preset's weights {preset.fusion_weights}"
    if is_sku_shaped(question):
        w["keyword"], w["vector"] = w["keyword"] * SKU_KEYWORD, w["vector"] * SKU_VECTOR
        w["soft"] = w["soft"] * SKU_VECTOR  # word vectors know a SKU no better than the text's
        why = "a SKU-shaped query leans on the keyword leg"
    return w, why


def asked_roles(question: str, pf) -> tuple[list[str], str | None]:
    """The roles this question's own words ask for, most wanted first, and why."""
    if policy.is_policy_question(question):
        return list(POLICY_ROLES), "a policy question: support pages first"
    if asks_what_is_allowed(question):
        return list(POLICY_ROLES), "a question about what the visitor may do: support pages first"
    if pf is not None and pf.date_start is not None:
        return ["event"], "a time window: events first"
    if pf is not None and (pf.price_min is not None or pf.price_max is not None or pf.in_stock):
        return list(PRICED_ROLES), "a price or stock bound: products and events first"
    if EVENT_TILT and asks_for_events(question):
        return ["event"], "a question for events (concerts, shows, what's on…): events first"
    return [], None


def role_priority(question: str, pf, preset_priority: list[str] | None) -> tuple[list[str], str | None]:
    """The preset's role priority with the roles the question asks for moved to the front."""
    base = list(preset_priority or [])
    front, why = asked_roles(question, pf)
    if not front:
        return base, None
    out = front + [r for r in base if r not in front]
    return (out, why) if out != base else (base, None)
