"""What an answer keeps to: the documents the question is about, not all the searches found.

The searches find more than a question asks for: "dress" finds the dress code beside the
dresses, "free" finds "orders over €60 ship free" beside the free events, a named event brings
its neighbours. Before the context is chosen, ``keep_to_what_is_asked`` applies the first rule
that fits -- what the visitor points at, a comparative, a detail of a named document, a listing,
a policy question -- and the trace names what it left out (``debug.referents_only``,
``comparative_only``, ``identity_only``, ``listing_only``, ``policy_only``). The referents step
uses two of the helpers here: "it" after a question that named a document, and a pick among
what was shown by a constraint of its own.
"""
from __future__ import annotations

import re

from sqlalchemy import text

from kbframework.retrieval import conversation, policy, referents
from kbframework.retrieval.identity import name_index
from kbframework.retrieval.phrases import tokens
from kbframework.retrieval.search import FILTERED_ROLES


_R_SINGULAR = re.compile(r"\b(?:it|its|it['’]s|that\s+one|this\s+one|the\s+one)\b", re.I)


_R_PLURAL = re.compile(r"\b(?:they|them|their|those|these|ones|both|all)\b", re.I)


def the_one_named_before(s, t, chosen: list[str]) -> list[str]:
    """"where is it?" after "what time does Amelie Lens start?": "it" is the event that
    question named, not the guide shown beside it."""
    if len(chosen) < 2 or not _R_SINGULAR.search(t.question) or _R_PLURAL.search(t.question):
        return []
    before = next((m["content"] for m in reversed(t.hist or []) if m.get("role") == "user"), None)
    if not before:
        return []
    ids, _ = name_index(s, t.ctx.org.id).identify(before)
    named = {str(i) for i in ids}
    return [d for d in chosen if d in named]


_R_SELECTS = re.compile(r"\b(?:any|which|only|ones|those\s+that|the\s+ones)\b", re.I)


def selects_among_shown(t, how: str) -> list[str]:
    """The constraint words a follow-up picks among all that was shown with ("any free ones?",
    "which are under 30?"); empty for a yes/no question about it ("are they in stock?") or a
    pick by position, weekday or name."""
    if how != referents.ALL_SHOWN or not _R_SELECTS.search(t.question):
        return []
    q = t.question.lower()
    return [p.matched for p in t.parts
            if not getattr(p, "dropped", None) and p.matched and p.field != "currency" and p.matched.lower() in q]


def keep_to_what_is_asked(s, t) -> None:
    """Leave out of ``t.boosted`` what the searches found beside the documents the question
    is about; the first rule that applies decides, and the trace names it."""
    if t.kind.refers_back and t.pinned and policy.is_policy_question(t.question):
        # "can I return it?": the document pointed at and the policy pages, not the other
        # products the searches found beside them
        roles = roles_of(s, t.ctx.org.id, {f["document_id"] for f in t.boosted})
        _keep_only(t, {d for d, r in roles.items() if r in policy.SUPPORT_ROLES}, "referents_only",
                   "a policy question about what was shown")
    elif t.kind.refers_back and t.pinned:
        # "is the second one in stock?", "is it free?", "any free ones?": about what the visitor
        # points at, even when the rewrite is all constraints ("is the first one under 50?" is
        # about the first one, not every dress under 50). What the searches found beside it
        # ("ship free" for "free") is not part of the answer; a policy question about it ("can
        # I return it?") keeps the policy pages it finds
        _keep_only(t, set(), "referents_only", "a follow-up about what was shown")
    elif t.kind.comparative and not policy.is_policy_question(t.question):
        # "anything cheaper?", "anything later?": a bound on products and events; the pages the
        # bound does not apply to (the dress code that "dress" found) are no answer to it
        roles = roles_of(s, t.ctx.org.id, {f["document_id"] for f in t.boosted})
        _keep_only(t, {d for d, r in roles.items() if r in FILTERED_ROLES}, "comparative_only",
                   "a comparative picks among products and events")
    elif t.identity and not t.legs.get("listing") and _only_names_them(s, t):
        # "tickets for Amelie Lens?", "how much is the Crimson Evening Dress?": about the named
        # document alone; what else the searches found (another event, the dress code) is noise.
        # A policy question about it ("can I return the Crimson Evening Dress?") keeps the policies
        support = set()
        if policy.is_policy_question(t.question):
            roles = roles_of(s, t.ctx.org.id, {f["document_id"] for f in t.boosted})
            support = {d for d, r in roles.items() if r in policy.SUPPORT_ROLES}
        _keep_only(t, support | _same_name(s, t), "identity_only", "the question is about the document it names")
    elif t.legs.get("listing"):
        # a question of constraints that documents meet ("what's on Saturday?"): those documents
        # are the answer. The other legs searched with the constraint words alone ("Saturday"),
        # and what they found beside the listing (the return policy, at 0.215) is chance
        _keep_only(t, {h.document_id for h in t.legs["listing"]}, "listing_only",
                   "the listing answers a question of constraints")
        if t.pf.order:  # "the cheapest event this weekend": the listing's order is the answer's
            rank = {h.document_id: i for i, h in enumerate(t.legs["listing"])}
            t.boosted.sort(key=lambda f: rank.get(f["document_id"], len(rank)))
            for i, f in enumerate(t.boosted):  # the context and the cards follow the final rank
                f["final_rank"] = i + 1
    elif policy.is_policy_question(t.question) and t.boosted:
        # "what is the dress code?", "is it 18+?": answered by the policy pages (and guides);
        # the dresses that "dress" found are the topic's words, not an answer
        roles = roles_of(s, t.ctx.org.id, {f["document_id"] for f in t.boosted})
        if roles.get(t.boosted[0]["document_id"]) in policy.SUPPORT_ROLES:
            _keep_only(t, {d for d, r in roles.items() if r not in FILTERED_ROLES}, "policy_only",
                       "a policy question answered by its pages")


_R_MORE_LIKE = re.compile(r"\b(?:similar|like\s+(?:it|this|that|them)|alternatives?|other|others|else|more)\b",
                          re.I)


def _only_names_them(s, t) -> bool:
    """The question asks a detail (tickets, price, time, place) of a document it names, and
    every other subject word is a word of that document: nothing else is asked for ("tickets
    for Amelie Lens?"; not "Amelie Lens or something similar?", nor a bare product name)."""
    asked = {w.strip("?.!,'’").lower() for w in t.question.split()} & conversation.SHOWN_FACTS
    if not asked or _R_MORE_LIKE.search(t.question):
        return False  # a bare name ("Altair Trailhead 2 Tent") also wants what goes with it
    words = conversation.content_words(t.question, t.vocab)
    if not words:
        return True
    named = set()
    for title in titles_of(s, t.ctx.org.id, set(t.identity)).values():
        named |= {tok for tok, _, _ in tokens(title or "")}
    return all(tok in named for w in words for tok, _, _ in tokens(w))


def _same_name(s, t) -> set:
    """The other documents whose title holds every subject word too: the other dates of a
    show ("O Farol Apagado (matinee)" beside "O Farol Apagado")."""
    words = [tok for w in conversation.content_words(t.question, t.vocab) for tok, _, _ in tokens(w)]
    if not words:
        return set()
    titles = titles_of(s, t.ctx.org.id, {f["document_id"] for f in t.boosted})
    return {d for d, title in titles.items() if set(words) <= {tok for tok, _, _ in tokens(title or "")}}


def _keep_only(t, keep: set, key: str, why: str) -> None:
    """Leave out of the answer every document but ``keep`` and those pinned or named; the
    trace's ``key`` lists what was left out."""
    keep = keep | set(t.pinned) | set(t.identity)
    dropped = sorted({f["document_id"] for f in t.boosted if f["document_id"] not in keep})
    if dropped:
        t.boosted = [f for f in t.boosted if f["document_id"] in keep]
        t.debug[key] = {"dropped_documents": dropped}
        t.debug["explain"].append(f"{why}: {len(dropped)} other document(s) the searches found left out")


def roles_of(s, org_id, doc_ids) -> dict:
    return _column_of(s, org_id, doc_ids, "document_role")


def titles_of(s, org_id, doc_ids) -> dict:
    return _column_of(s, org_id, doc_ids, "title")


def _column_of(s, org_id, doc_ids, column: str) -> dict:
    """{document id: its ``column``} for the organization's documents among ``doc_ids``."""
    if not doc_ids:
        return {}
    rows = s.execute(text(f"SELECT id, {column} FROM documents "
                          "WHERE organization_id = :org AND id = ANY(CAST(:ids AS uuid[]))"),
                     {"org": str(org_id), "ids": list(doc_ids)}).all()
    return {str(r[0]): r[1] for r in rows}
