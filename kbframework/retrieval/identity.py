"""Identity before similarity: the organization's own names (titles, SKUs, links), found in a
question or in an assistant's reply.

A question that names a product, an event or a page exactly ("Altair Trailhead 2 Tent",
"ALT-TH2", "O Farol Apagado tickets") is about that document, whatever a vector says about its
look-alikes. A SKU matches as a whole token (``ALT-TH2`` is not ``ALT-TH2-FP``); a name matches
in full, or without its leading brand word ("Trailhead 2 footprint"), or by its leading words
when they cover most of one title more than any other: "Altair Homestead 4" is the family tent,
not the tent carpet, unless the question names the carpet (an accessory does not outrank the
main product for a buying question).

The same index reads an assistant's previous reply, so a plain ``{role, content}`` history
still tells which documents were shown ("what's the link?").
"""
from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field

from sqlalchemy import text

from kbframework.retrieval.phrases import tokens

MIN_COVER = 0.6  # leading words must cover this share of a title to name it
_SKU = re.compile(r"(?<![\w-])([A-Za-z0-9]+(?:-[A-Za-z0-9]+)+)(?![\w-])")
_URL = re.compile(r"https?://[^\s<>\"')\]]+")
_cache: dict = {}
_lock = threading.Lock()


@dataclass
class Named:
    document_id: str
    how: str          # "sku" | "url" | "title" | "title_without_brand" | "leading_words"
    position: int     # where in the text it was named (for "the second one")
    cover: float = 1.0


@dataclass
class NameIndex:
    docs: dict = field(default_factory=dict)        # id → (title, role, token tuple)
    by_first: dict = field(default_factory=dict)    # first stemmed token → [ids]
    by_second: dict = field(default_factory=dict)   # second stemmed token (brand dropped) → [ids]
    skus: dict = field(default_factory=dict)        # upper-case SKU → [ids]
    urls: dict = field(default_factory=dict)        # url without trailing slash → [ids]

    def add(self, doc_id: str, title: str, role: str, sku: str | None, url: str | None) -> None:
        toks = tuple(t for t, _, _ in tokens(title or ""))
        if toks:
            self.docs[doc_id] = (title, role, toks)
            self.by_first.setdefault(toks[0], []).append(doc_id)
            if len(toks) >= 3:
                self.by_second.setdefault(toks[1], []).append(doc_id)
        if isinstance(sku, str) and len(sku) >= 3:
            self.skus.setdefault(sku.upper(), []).append(doc_id)
        if isinstance(url, str) and url.startswith("http"):
            self.urls.setdefault(url.rstrip("/"), []).append(doc_id)

    # ------------------------------------------------------------------ finding names

    def _title_matches(self, toks: list, raw: str) -> list[Named]:
        stems = [t for t, _, _ in toks]
        out: list[Named] = []
        for i, st in enumerate(stems):
            for doc_id in self.by_first.get(st, ()):
                title, _, tt = self.docs[doc_id]
                n = _common_prefix(stems[i:], tt)
                if n == len(tt) and _distinctive(tt, raw[toks[i][1]:toks[i + n - 1][2]], title):
                    out.append(Named(doc_id, "title", toks[i][1], 1.0))
                elif n >= 2 and n / len(tt) >= MIN_COVER and _distinctive(tt[:n], "", title):
                    out.append(Named(doc_id, "leading_words", toks[i][1], n / len(tt)))
            for doc_id in self.by_second.get(st, ()):
                title, _, tt = self.docs[doc_id]
                n = _common_prefix(stems[i:], tt[1:])
                if n == len(tt) - 1 and n >= 2 and _distinctive(tt[1:], "", title):
                    out.append(Named(doc_id, "title_without_brand", toks[i][1], 0.95))
        return out

    def find(self, raw: str) -> list[Named]:
        """Every document named in ``raw``, best evidence first per document, by position."""
        found: list[Named] = []
        for m in _SKU.finditer(raw or ""):
            for doc_id in self.skus.get(m.group(1).upper(), ()):
                found.append(Named(doc_id, "sku", m.start(), 1.0))
        for m in _URL.finditer(raw or ""):
            for doc_id in self.urls.get(m.group(0).rstrip(").,;]").rstrip("/"), ()):
                found.append(Named(doc_id, "url", m.start(), 1.0))
        titles = self._title_matches(tokens(raw or ""), raw or "")
        whole = {n.position for n in titles if n.how in ("title", "title_without_brand")}
        found += [n for n in titles if n.how != "leading_words" or n.position not in whole]
        rank = {"sku": 0, "url": 0, "title": 1, "title_without_brand": 2, "leading_words": 3}
        best: dict = {}
        for n in found:
            cur = best.get(n.document_id)
            if cur is None or (rank[n.how], -n.cover) < (rank[cur.how], -cur.cover):
                best[n.document_id] = n
        return sorted(best.values(), key=lambda n: (n.position, rank[n.how]))

    def identify(self, question: str) -> tuple[list[str], list[Named]]:
        """The documents a question names exactly, for putting first. SKUs and whole names win;
        leading words name a document only when they cover its title better than any rival's
        (the main product over the accessory that extends its name)."""
        named = self.find(question)
        strong = [n for n in named if n.how in ("sku", "url", "title", "title_without_brand")]
        if strong:
            # the most specific name wins: "Trailhead 2 Footprint" over a shorter title inside it
            longest = max(len(self.docs.get(n.document_id, ("", "", ()))[2]) for n in strong)
            keep = [n for n in strong if n.how in ("sku", "url")
                    or len(self.docs[n.document_id][2]) == longest]
            return _ids(keep), named
        lead = [n for n in named if n.how == "leading_words"]
        if not lead:
            return [], named
        # an accessory's extra words ("… Tent Carpet", "… Rain Cover") lose to the main product's
        main = [n for n in lead if not ACCESSORY & set(self.docs[n.document_id][2])] or lead
        top = max(n.cover for n in main)
        keep = [n for n in main if n.cover == top]
        return (_ids(keep) if len(keep) <= 3 else []), named


def _ids(named: list[Named]) -> list[str]:
    out: list[str] = []
    for n in named:
        if n.document_id not in out:
            out.append(n.document_id)
    return out


def _common_prefix(a: list, b: tuple) -> int:
    n = 0
    while n < len(a) and n < len(b) and a[n] == b[n]:
        n += 1
    return n


ACCESSORY = frozenset("""
carpet footprint cover lid gasket filter set case strap loft peg canister refill spare replacement kit liner
pouch sleeve adapter charger mount holder hook
""".split())
_COMMON = frozenset("""
return returns policy shipping delivery contact about faq help terms privacy tickets ticket refund refunds
size sizes guide care warranty opening hours the a an and of for in on at to our your with
""".split())


def _distinctive(toks: tuple, written: str, title: str) -> bool:
    """A name worth trusting: two words or more with one of them not a common word, or one
    rare word written with its capital ("Kinetik")."""
    words = [t for t in toks if t not in _COMMON]
    if len(toks) >= 2:
        return bool(words)
    return bool(words) and len(toks[0]) >= 5 and bool(written) and written[:1].isupper() \
        and written.lower() == title.strip().lower()


def name_index(session, org_id) -> NameIndex:
    """The organization's names, from its documents; rebuilt when a document changes (the
    cache is keyed on the count and the newest ``updated_at``, one cheap query)."""
    key = str(org_id)
    stamp = tuple(session.execute(text(
        "SELECT count(*), max(updated_at) FROM documents WHERE organization_id = :org"), {"org": key}).one())
    with _lock:
        hit = _cache.get(key)
        if hit and hit[0] == stamp:
            return hit[1]
    rows = session.execute(text(
        "SELECT id::text, title, document_role, metadata->>'sku', source_url FROM documents "
        "WHERE organization_id = :org AND status IN ('active', 'syncing', 'error', 'expired')"),
        {"org": key}).all()
    idx = NameIndex()
    for r in rows:
        idx.add(r[0], r[1], r[2], r[3], r[4])
    with _lock:
        if len(_cache) > 256:
            _cache.clear()
        _cache[key] = (stamp, idx)
    return idx


def forget_names(org_id=None) -> None:
    with _lock:
        if org_id is None:
            _cache.clear()
        else:
            _cache.pop(str(org_id), None)


def is_sku_shaped(question: str) -> bool:
    """A code such as ``ALT-TH2``, ``alt-th2`` or ``FH-DB-20``: parts joined by hyphens, one of
    them mixing letters and digits, or the whole written in capitals. Hyphenated words with a
    number ("5-year-old", "2-person", "24-pack", "3-season") are words, not codes."""
    for m in _SKU.finditer(question or ""):
        code = m.group(1)
        parts = code.split("-")
        if any(re.search(r"\d", x) and re.search(r"[A-Za-z]", x) for x in parts):
            return True
        if code.isupper() and re.search(r"[A-Z]", code):
            return True
    return False
