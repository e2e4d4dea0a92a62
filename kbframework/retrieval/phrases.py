"""Rule-based phrase finders for queries: prices, stock, and the organization's own vocabulary.

Pure functions (no database, no network), shared by the rule-based filter extractor and the
offline follow-up rewriter. Each finder returns spans, so a caller can both build a filter and
replace the phrase in the text ("and tomorrow?" swaps the date phrase, keeps the price).

Precision first: a number is a price only next to a comparator ("under 50", "between 20 and
40", "less than 50 euros") or a currency ("€30 or less"); quantities are not prices ("24 pack",
"under 2 kg", "R-value above 4", "kids under 5"); "cheap" alone sets no bound.
"""
from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field

from kbframework.retrieval.patterns import compile_on_use

# --------------------------------------------------------------------------- prices

_NUM = r"\d{1,3}(?:,\d{3})+(?:\.\d{1,2})?|\d+(?:[.,]\d{1,2})?"
_CUR_PRE = r"(?:[€$£]|(?:eur|usd|gbp|rsd)\b\.?)"
_CUR_POST = (r"(?:\s?[€$£]|\s?(?:eur|euros?|usd|dollars?|bucks|gbp|pounds?|quid|rsd|din(?:ars?)?)\b)")
AMOUNT = rf"(?:(?P<pre{{i}}>{_CUR_PRE})\s?)?(?P<num{{i}}>{_NUM})(?P<k{{i}}>k(?![a-z]))?(?P<post{{i}}>{_CUR_POST})?(?![\w%°])"


def _amt(i: int) -> str:
    return AMOUNT.replace("{i}", str(i))


_MAX_WORDS = (r"under|below|beneath|less\s+than|cheaper\s+than|lower\s+than|up\s+to|at\s+most|"
              r"no\s+more\s+than|not\s+more\s+than|max(?:imum)?|within|budget(?:\s+(?:of|is))?|"
              r"for\s+less\s+than|for\s+under|<=?|≤")
_MIN_WORDS = (r"over|above|more\s+than|at\s+least|min(?:imum)?|from|starting\s+(?:at|from)|"
              r"pricier\s+than|higher\s+than|>=?|≥")
_R_RANGE = compile_on_use(rf"\b(?:between|from)\s+{_amt(1)}\s*(?:and|to|-|–)\s*{_amt(2)}", re.I)
_R_DASH = compile_on_use(rf"(?<![\w.,]){_amt(1)}\s*(?:-|–|to)\s*{_amt(2)}", re.I)
_R_MAX = compile_on_use(rf"(?:(?<=\s)|^|(?<=[(,]))(?P<w>{_MAX_WORDS})\s*{_amt(1)}", re.I)
_R_MAX_POST = compile_on_use(rf"(?<![\w.,]){_amt(1)}\s*(?P<w>or\s+(?:less|under|cheaper|below)|max(?:imum)?\b|at\s+most|tops)",
                             re.I)
_R_MIN = compile_on_use(rf"(?:(?<=\s)|^|(?<=[(,]))(?P<w>{_MIN_WORDS})\s*{_amt(1)}", re.I)
_R_MIN_POST = compile_on_use(rf"(?<![\w.,]){_amt(1)}\s*(?P<w>or\s+(?:more|over|above)|and\s+(?:up|above|over)|\+)",
                             re.I)

_UNITS = frozenset("""
kg g gr gram grams lb lbs oz l litre litres liter liters ml cl dl cm mm m km metre metres meter meters
inch inches ft feet foot mile miles people person persons pax guests year years yr yrs y month months
week weeks day days hour hours h hr hrs min mins minute minutes sec seconds lumen lumens lm w watt watts
v volt volts mah wh pack packs pcs pc piece pieces cup cups pair pairs items units x times percent degrees
deg stars points pts seats seater players kids children adults rooms layers bar psi kw
""".split())
_MEASURE_BEFORE = frozenset("""
weight weighs weighing weighs r-value value rating rated size sizes age aged ages kids children child
temperature temperatures degrees length capacity volume height width depth lumens battery power
comfort limit people persons person guests year years old minus zero rated kid boys girls
temperature temperatures weights heights lengths
""".split())
_PRICE_WORDS = compile_on_use(r"\b(?:price[ds]?|pric(?:e|ing)|costs?|costing|budget|spend|pay|paying|€|\$|£|"
                              r"euros?|dollars?|pounds?|cheap(?:er|est)?|expensive|affordable)\b", re.I)
_CUR_CODE = {"€": "EUR", "eur": "EUR", "euro": "EUR", "euros": "EUR", "$": "USD", "usd": "USD",
             "dollar": "USD", "dollars": "USD", "bucks": "USD", "£": "GBP", "gbp": "GBP", "pound": "GBP",
             "pounds": "GBP", "quid": "GBP", "rsd": "RSD", "din": "RSD", "dinar": "RSD", "dinars": "RSD"}


@dataclass
class Found:
    field: str
    value: object
    start: int
    end: int
    matched: str
    extra: dict = field(default_factory=dict)


def _num(m: re.Match, i: int) -> float | None:
    raw = m.group(f"num{i}")
    if raw is None:
        return None
    if re.fullmatch(r"\d{1,3}(?:,\d{3})+(?:\.\d{1,2})?", raw):
        raw = raw.replace(",", "")
    else:
        raw = raw.replace(",", ".")
    try:
        v = float(raw)
    except ValueError:
        return None
    if m.group(f"k{i}"):
        v *= 1000
    return v


def _currency(m: re.Match, *idx: int) -> str | None:
    for i in idx:
        for g in (f"pre{i}", f"post{i}"):
            c = m.group(g)
            if c:
                return _CUR_CODE.get(c.strip().lower().rstrip("."))
    return None


def _word_after(q: str, end: int) -> str:
    m = re.match(r"[\s-]*([^\W\d_][\w'-]*)", q[end:])
    return m.group(1).lower() if m else ""


def _words_before(q: str, start: int, n: int = 2) -> list[str]:
    return [w.lower() for w in re.findall(r"[\w'-]+", q[:start])[-n:]]


def _quantity_context(q: str, m: re.Match, last: int) -> bool:
    """True when the number reads as a quantity: a unit after it or a measurement before it."""
    if _word_after(q, m.end(f"num{last}") if m.group(f"post{last}") is None else m.end()) in _UNITS \
            and not m.group(f"post{last}"):
        return True
    before = _words_before(q, m.start(), 1)
    return any(w in _MEASURE_BEFORE for w in before)


def find_prices(q: str, priced: bool = False) -> list[Found]:
    """Price bounds in a query: [Found(price_min|price_max|currency, value, span)].

    ``priced``: the caller knows the query is about things with prices (it names one of the
    shop's categories: "hoodies over 100"), so a bare lower bound counts as well."""
    if not any(c.isdigit() for c in q):
        return []  # every amount pattern needs a digit, so none is compiled for such a question
    out: list[Found] = []
    taken: list[tuple[int, int]] = []

    def free(a, b):
        return all(b <= s or a >= e for s, e in taken)

    priced = priced or bool(_PRICE_WORDS.search(q))
    for m in _R_RANGE.finditer(q):
        lo, hi = _num(m, 1), _num(m, 2)
        cur = _currency(m, 1, 2)
        if lo is None or hi is None or (not cur and not priced and _quantity_context(q, m, 2)):
            continue
        if m.group(0).lower().startswith("from") and not cur and not priced:
            continue
        if lo > hi:
            lo, hi = hi, lo
        out += [Found("price_min", lo, m.start(), m.end(), m.group(0)),
                Found("price_max", hi, m.start(), m.end(), m.group(0))]
        if cur:
            out.append(Found("currency", cur, m.start(), m.end(), m.group(0)))
        taken.append(m.span())
    for m in _R_DASH.finditer(q):
        cur = _currency(m, 1, 2)
        if not cur or not free(*m.span()):
            continue
        lo, hi = _num(m, 1), _num(m, 2)
        if lo is None or hi is None:
            continue
        out += [Found("price_min", min(lo, hi), m.start(), m.end(), m.group(0)),
                Found("price_max", max(lo, hi), m.start(), m.end(), m.group(0)),
                Found("currency", cur, m.start(), m.end(), m.group(0))]
        taken.append(m.span())
    for rx, fld in ((_R_MAX, "price_max"), (_R_MAX_POST, "price_max"), (_R_MIN, "price_min"),
                    (_R_MIN_POST, "price_min")):
        for m in rx.finditer(q):
            if not free(*m.span()):
                continue
            v = _num(m, 1)
            cur = _currency(m, 1)
            if v is None:
                continue
            if not cur:
                # without a currency: a bound only when nothing marks the number as a quantity,
                # and a lower bound only when the query talks about prices at all
                if _quantity_context(q, m, 1) or (fld == "price_min" and not priced):
                    continue
                if rx in (_R_MAX_POST, _R_MIN_POST) and not priced:
                    continue
            out.append(Found(fld, v, m.start(), m.end(), m.group(0).strip()))
            if cur:
                out.append(Found("currency", cur, m.start(), m.end(), m.group(0).strip()))
            taken.append(m.span())
    out.sort(key=lambda f: f.start)
    return out


# --------------------------------------------------------------------------- free

_EVENTISH = (r"(?:events?|part(?:y|ies)|gigs?|concerts?|shows?|nights?|things|stuff|activities|"
             r"exhibitions?|screenings?|workshops?|festivals?|tickets?|options?|ones?|fun|music|"
             r"dj\s+sets?|live\s+music|open\s+air)")
_R_FREE = compile_on_use(
    r"\bno[\s-]+cover(?:[\s-]+charges?)?\b"
    r"|\bno\s+(?:entry|entrance|admission|door|ticket)\s+(?:fees?|charges?|price)\b"
    r"|\bwithout\s+(?:a\s+)?(?:cover(?:\s+charge)?|entry\s+fee|tickets?)\b"
    r"|\b(?:for\s+)?free\s+of\s+charge\b"
    r"|\bfree\s+(?:entry|entrance|admission|to\s+(?:attend|enter|get\s+in|go))\b"
    r"|\b(?:entry|entrance|admission)\s+(?:is\s+)?free\b"
    r"|\bfor\s+free\b"
    rf"|(?<![\w-])free\s+(?:(?:\w+\s+)?{_EVENTISH})\b"
    rf"|\b(?:anything|something|everything|what['’]?s|what\s+is|which|any|events?|part(?:y|ies)|gigs?"
    rf"|concerts?|shows?|things)\s+(?:that\s+(?:is|are)\s+|that['’]s\s+|are\s+|is\s+)?free\b"
    r"(?![\s-]+(?:shipping|delivery|returns?|gift|wrap(?:ping)?|size|sample|trial|parking|wi-?fi))",
    re.I)
# each alternative of _R_FREE contains one of these, so a question without them matches none
_FREE_WORDS = ("free", "cover", "fee", "charge", "price", "ticket")
# "free" that is not a price: "gluten-free", "free shipping", "I'm free tonight", "feel free"
_R_FREE_NOT_AFTER = compile_on_use(r"[\s-]+(?:shipping|delivery|returns?|gifts?|wrap\w*|sizes?|samples?|trial"
                                   r"|parking|wi-?fi|time|up|from|of\s+(?!charge))\b", re.I)
_R_FREE_NOT_BEFORE = compile_on_use(r"(?:\b(?:i['’]?m|i\s+am|we['’]re|we\s+are|you['’]re|are\s+you|am\s+i|feel|set"
                                    r"|break|hands|duty|tax|sugar|gluten|fat|lactose|dairy|bpa|cruelty|nickel"
                                    r"|alcohol|smoke|scent|fragrance)|-)\s*$", re.I)
_R_ITEM_QUESTION = compile_on_use(r"^\s*(?:is|are|was|will)\s+(?:it|the|this|that|they|these|those|my|your|entry"
                                  r"|entrance|admission)\b", re.I)


def find_free(q: str) -> list[Found]:
    """"free events", "no cover", "free entry", "anything free tonight?" as a price-0 bound.

    Not for a yes/no question about one item ("is the jazz evening free?" must be able to
    answer "no"), and not "free shipping", "gluten-free", "I'm free tonight"."""
    low = q.lower()
    if not any(w in low for w in _FREE_WORDS) or _R_ITEM_QUESTION.search(q):
        return []
    for m in _R_FREE.finditer(q):
        word = re.search(r"free", m.group(0), re.I)
        if word is not None:
            at = m.start() + word.start()
            if _R_FREE_NOT_BEFORE.search(q[max(0, at - 20):at]):
                continue
            if m.group(0).lower().rstrip().endswith("free") and _R_FREE_NOT_AFTER.match(q, m.end()):
                continue
        return [Found("price_max", 0.0, m.start(), m.end(), m.group(0), {"free": True})]
    return []


# --------------------------------------------------------------------------- order

# "the cheapest event this weekend", "your most expensive tent", "the earliest show on Friday":
# the documents that meet the rest, in that order
_R_ORDER = compile_on_use(r"\b(?:the\s+)?(cheapest|least\s+expensive|lowest[\s-]priced|most\s+expensive|priciest"
                          r"|dearest|highest[\s-]priced|earliest|soonest|latest)\b", re.I)
_ORDERS = {"cheapest": "price_asc", "least expensive": "price_asc", "lowest priced": "price_asc",
           "lowest-priced": "price_asc", "most expensive": "price_desc", "priciest": "price_desc",
           "dearest": "price_desc", "highest priced": "price_desc", "highest-priced": "price_desc",
           "earliest": "start_asc", "soonest": "start_asc", "latest": "start_desc"}


def find_order(q: str) -> list[Found]:
    """A superlative that orders what meets the question: [Found("order", "price_asc"...)]."""
    m = _R_ORDER.search(q)
    if not m:
        return []
    word = " ".join(m.group(1).lower().split())
    return [Found("order", _ORDERS[word], m.start(), m.end(), m.group(0))]


# --------------------------------------------------------------------------- stock

_R_STOCK = compile_on_use(r"\b(?:in[- ]stock|on\s+stock|available\s+now|currently\s+available|ready\s+to\s+ship|"
                          r"available|not\s+sold\s+out)\b", re.I)
_R_STOCK_NOT = compile_on_use(r"(?:\bnot|n't|\bno\s+longer|\bun)\s*$", re.I)
_R_AVAILABLE_IN = compile_on_use(r"\s+(?:in|for|on|at|to|from|with|as|sizes?|colou?rs?|online|via)\b", re.I)
# "back in stock?", "in stock again?", "still in stock?", "when…": a question about one item's stock,
# not a filter ("back to the dresses: which are in stock?" is one)
_R_RESTOCK = compile_on_use(r"\b(?:back\s+in\s+stock|again|still|restock\w*|when)\b", re.I)
_R_YES_NO = compile_on_use(r"^\s*(?:is|are|was|will)\s+(?:it|the|this|that|they|these|those|there|my|your)\b", re.I)


def find_stock(q: str) -> list[Found]:
    """"in stock" / "available" as a stock filter; not for yes/no questions about one item
    ("is the X in stock?" must be able to answer "no") and not "available in red"."""
    if _R_YES_NO.search(q) or _R_RESTOCK.search(q):  # "is it in stock?", "back in stock?", "when..."
        return []
    for m in _R_STOCK.finditer(q):
        if _R_STOCK_NOT.search(q[:m.start()]):
            continue
        if m.group(0).lower() == "available" and _R_AVAILABLE_IN.match(q, m.end()):
            continue
        return [Found("in_stock", True, m.start(), m.end(), m.group(0))]
    return []


# --------------------------------------------------------------------------- vocabulary

_STOP = frozenset("""
a an the and or of for in on at to with from by is are be it its this that these those my your our
me i you we they any some all new more most one two set care men women man woman
up down out off over under through around about away back
""".split())


def fold(s: str) -> str:
    """Lower case without accents; '&' reads as 'and'."""
    s = unicodedata.normalize("NFKD", s.replace("&", " and "))
    return "".join(c for c in s if not unicodedata.combining(c)).lower()


def stem(w: str) -> str:
    """A light English singular: dresses → dress, knives → knif(e), boots → boot; hoodie and
    hoodies both → hoody (a key to compare words by, not a word to show)."""
    w = w.replace("’", "'")
    if w.endswith("'s") or w.endswith("s'"):
        w = w[:-2]
    if len(w) <= 3:
        return w
    if w.endswith("ies") and len(w) > 4:
        return w[:-3] + "y"
    if w.endswith("ie") and len(w) > 3:  # hoodie, beanie: their plurals above end in y
        return w[:-2] + "y"
    if w.endswith(("sses", "shes", "ches", "xes", "zes")):
        return w[:-2]
    if w.endswith("ves") and len(w) > 4:
        return w[:-3] + "f"
    if w.endswith("fe"):
        return w[:-1]
    if w.endswith("s") and not w.endswith(("ss", "us", "is")):
        return w[:-1]
    return w


_TOKEN = compile_on_use(r"[a-z0-9]+(?:'[a-z]+)?")


def tokens(s: str) -> list[tuple[str, int, int]]:
    """(stemmed token, start, end): tokens of the folded text with offsets into ``s``."""
    chars, pos = [], []
    for i, c in enumerate(s):
        f = fold(c) if (ord(c) > 127 or c == "&") else c.lower()
        chars.append(f)
        pos.extend([i] * len(f))
    folded = "".join(chars)
    pos.append(len(s))
    return [(stem(m.group(0)), pos[m.start()], pos[m.end() - 1] + 1) for m in _TOKEN.finditer(folded)]


class VocabularyIndex:
    """Phrase lookup over the organization's labels: longest match first, no overlaps."""

    def __init__(self, vocab: dict):
        self.index: dict[tuple, dict[str, list[str]]] = {}
        self.maxlen = 1
        for kind, key in (("tag", "tags"), ("category", "categories"), ("city", "cities"), ("venue", "venues")):
            for value in vocab.get(key) or []:
                if not isinstance(value, str):
                    continue
                if kind == "category" and ">" in value:
                    # the leaf only: "Camping > Tents" ← "tents". A parent ("camping", "hiking") is
                    # mostly a usage word in questions ("merino hiking socks" are clothing)
                    segs = [x.strip() for x in value.split(">") if x.strip()]
                    self._add(segs[-1], "category", value)
                else:
                    self._add(value, kind, value)

    def _add(self, phrase: str, kind: str, value: str) -> None:
        toks = tuple(t for t, _, _ in tokens(phrase))
        if not toks or (len(toks) == 1 and (toks[0] in _STOP or len(toks[0]) < 3 or toks[0].isdigit())):
            return
        if all(t.isdigit() or t in _UNITS for t in toks):
            return
        keys = [toks]
        if len(toks) > 1:  # "T-Shirts" is found as "tshirts" too
            keys.append((stem("".join(toks)),))
        for key in keys:
            slot = self.index.setdefault(key, {})
            vals = slot.setdefault(kind, [])
            if value not in vals:
                vals.append(value)
        self.maxlen = max(self.maxlen, len(toks))

    def find(self, q: str) -> list[Found]:
        toks = tokens(q)
        out: list[Found] = []
        i = 0
        while i < len(toks):
            for n in range(min(max(self.maxlen, 2), len(toks) - i), 0, -1):
                key = tuple(t for t, _, _ in toks[i:i + n])
                hit = self.index.get(key) if n <= self.maxlen else None
                if n == 2 and _compound(q, toks[i], toks[i + 1]):
                    # "t-shirts", "t shirts" for the label "Tshirts" (and "T-Shirt" beside it)
                    joined = self.index.get((stem(q[toks[i][1]:toks[i][2]].lower() + toks[i + 1][0]),))
                    if joined:
                        hit = _merged(hit or {}, joined)
                if hit:
                    s, e = toks[i][1], toks[i + n - 1][2]
                    for kind, vals in hit.items():
                        value = vals if kind in ("tag", "category") else vals[0]
                        out.append(Found(kind, value, s, e, q[s:e], {"term": q[s:e]}))
                    i += n
                    break
            else:
                i += 1
        return out


def _merged(a: dict, b: dict) -> dict:
    """Two index slots as one: each kind's values of both, in order, once."""
    return {k: list(dict.fromkeys(a.get(k, []) + b.get(k, []))) for k in {**a, **b}}


def _compound(q: str, a: tuple, b: tuple) -> bool:
    """Two tokens that may be one word written apart: joined by a hyphen, or a one-letter first
    part ("t shirt", "e bike")."""
    between = q[a[2]:b[1]]
    return between == "-" or (between == " " and a[2] - a[1] == 1)


_index_cache: dict = {}


def vocabulary_index(vocab: dict) -> VocabularyIndex:
    key = vocab.get("version") or id(vocab)
    idx = _index_cache.get(key)
    if idx is None:
        if len(_index_cache) > 64:
            _index_cache.clear()
        idx = _index_cache[key] = VocabularyIndex(vocab)
    return idx
