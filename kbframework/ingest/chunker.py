"""Structure-aware chunking: 500–800 tokens, 50–100 tokens of overlap.

Splits prefer, in order: headings, paragraphs, list items, sentences, and words only for
a single sentence longer than a chunk. A chunk records the section heading it starts in
and, for paged documents, its page range, so sources can say "page 4–5".
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from kbframework.ingest.tokens import count_tokens_many
from kbframework.types import ChunkDraft, Segment

HEADING_RE = re.compile(r"^(#{1,6})\s+(.*\S)\s*$")
LIST_RE = re.compile(r"^\s*(?:[-*•▪◦]|\d{1,3}[.)])\s+")
TABLE_RE = re.compile(r"^\s*\S.*\s\|\s.*\S\s*$")
LIST_LEADS = "-*•▪◦"  # what a list item's line starts with, or a digit
SENTENCE_RE = re.compile(r"(?<=[.!?…])[\"')\]]?\s+(?=[\"'(\[]?[A-Z0-9À-Ý])")


@dataclass
class ChunkSettings:
    min_tokens: int = 500
    max_tokens: int = 800
    overlap_min: int = 50
    overlap_max: int = 100

    def fingerprint(self) -> str:
        return f"{self.min_tokens}-{self.max_tokens}-{self.overlap_min}-{self.overlap_max}"


@dataclass
class _Unit:
    text: str
    kind: str  # heading | para | item | sentence | words
    sep: str  # separator placed before this unit when it is not first in a chunk
    page: int | None
    section: str
    tokens: int = 0
    starts_block: bool = True


@dataclass
class _Block:
    kind: str
    text: str
    page: int | None
    section: str
    lines: list[str] = field(default_factory=list)


def split_blocks(segments: list[Segment]) -> list[_Block]:
    """Headings, paragraphs, list items and table rows, each with its section and page."""
    blocks: list[_Block] = []
    section = ""
    for seg in segments:
        para: list[str] = []

        def flush_para():
            if para:
                blocks.append(_Block("para", " ".join(p.strip() for p in para), seg.page, section))
                para.clear()

        for raw in seg.text.splitlines():
            line = raw.rstrip()
            if not line.strip():
                flush_para()
                continue
            # each pattern is tried only on a line that could match it (most lines are prose)
            m = HEADING_RE.match(line) if line[0] == "#" else None
            lead = line.lstrip()[:1]
            if m:
                flush_para()
                section = m.group(2).strip()
                blocks.append(_Block("heading", line.strip(), seg.page, section))
            elif ((lead in LIST_LEADS or lead.isdigit()) and LIST_RE.match(line)) \
                    or ("|" in line and TABLE_RE.match(line)):
                flush_para()
                blocks.append(_Block("item", line.strip(), seg.page, section))
            else:
                para.append(line)
        flush_para()
    return blocks


def _sentences(text: str) -> list[str]:
    parts = [p.strip() for p in SENTENCE_RE.split(text) if p.strip()]
    return parts or [text]


class TokenCounts:
    """Token counts by text, asked of the tokenizer in as few calls as possible: one call for
    the blocks of a whole batch of documents (``prime_documents``) instead of several per
    document, and no text counted twice. Counting was as costly as embedding itself."""

    def __init__(self):
        self.known: dict[str, int] = {}
        self.blocks: dict[int, tuple[list[Segment], list[_Block]]] = {}  # id(segments) → its blocks

    def blocks_of(self, segments: list[Segment] | str) -> list[_Block]:
        """A document's blocks, split once for priming and chunking both."""
        got = self.blocks.get(id(segments))
        if got is not None and got[0] is segments:
            return got[1]
        blocks = split_blocks(_segments(segments))
        if isinstance(segments, list):
            self.blocks[id(segments)] = (segments, blocks)
        return blocks

    def prime(self, texts) -> None:
        missing = list(dict.fromkeys(t for t in texts if t not in self.known))
        if missing:
            self.known.update(zip(missing, count_tokens_many(missing)))

    def __call__(self, texts: list[str]) -> list[int]:
        self.prime(texts)
        return [self.known[t] for t in texts]


def prime_documents(counts: TokenCounts, documents: list[tuple[list[Segment] | str, ChunkSettings]]) -> None:
    """Count, for many documents at once, what ``chunk_text`` will ask: every block, then the
    sentences of the blocks too long to be a unit."""
    blocks = [(counts.blocks_of(segs), st or ChunkSettings()) for segs, st in documents]
    counts.prime(b.text for bl, _ in blocks for b in bl)
    counts.prime(sent for bl, st in blocks for b in bl if counts.known[b.text] > st.max_tokens
                 for sent in _sentences(b.text))


def _units(blocks: list[_Block], max_tokens: int, count: TokenCounts) -> list[_Unit]:
    units: list[_Unit] = []
    prev_kind = None
    for b in blocks:
        sep = "\n" if (b.kind == "item" and prev_kind == "item") else "\n\n"
        units.append(_Unit(b.text, b.kind, sep, b.page, b.section))
        prev_kind = b.kind
    counts = count([u.text for u in units]) if units else []
    out: list[_Unit] = []
    for u, n in zip(units, counts):
        u.tokens = n
        if n <= max_tokens:
            out.append(u)
            continue
        # an oversized block: its sentences, then words for an oversized sentence
        sents = _sentences(u.text)
        sc = count(sents)
        first = True
        for s, sn in zip(sents, sc):
            if sn <= max_tokens:
                out.append(_Unit(s, "sentence", u.sep if first else " ", u.page, u.section, sn,
                                 starts_block=first))
                first = False
                continue
            words = s.split()
            step = max(1, int(len(words) * max_tokens / sn * 0.9))
            pieces = [" ".join(words[i:i + step]) for i in range(0, len(words), step)]
            for piece, pn in zip(pieces, count(pieces)):
                out.append(_Unit(piece, "words", u.sep if first else " ", u.page, u.section, pn,
                                 starts_block=first))
                first = False
    return out


def _overlap(units: list[_Unit], settings: ChunkSettings, count: TokenCounts) -> list[_Unit]:
    """The trailing sentences of a finished chunk, 50–100 tokens when the text allows."""
    tail: list[_Unit] = []
    total = 0
    # the sentences of the last units, from the end (a long paragraph is split so the overlap
    # stays small); only as many units are split as the overlap reaches back into
    for u in _pieces_from_end(units, settings, count):
        if total + u.tokens > settings.overlap_max:
            if total < settings.overlap_min:
                words = u.text.split()
                want = settings.overlap_min + (settings.overlap_max - settings.overlap_min) // 2 - total
                ratio = max(1, u.tokens) / max(1, len(words))
                take = max(1, min(len(words), int(want / ratio)))
                piece = " ".join(words[-take:])
                tail.insert(0, _Unit(piece, "words", " ", u.page, u.section,
                                     count([piece])[0], starts_block=False))
            break
        tail.insert(0, u)
        total += u.tokens
        if total >= settings.overlap_min and u.starts_block:
            break
    return [_Unit(t.text, t.kind, t.sep, t.page, t.section, t.tokens, t.starts_block) for t in tail]


def _pieces_from_end(units: list[_Unit], settings: ChunkSettings, count: TokenCounts):
    for u in reversed(units):
        if u.kind == "heading":
            continue
        if u.tokens > settings.overlap_max and u.kind in ("para", "item"):
            sents = _sentences(u.text)
            pieces = [_Unit(s, "sentence", u.sep if i == 0 else " ", u.page, u.section, n, starts_block=i == 0)
                      for i, (s, n) in enumerate(zip(sents, count(sents)))]
            yield from reversed(pieces)
        else:
            yield u


def _render(units: list[_Unit]) -> str:
    out = []
    for i, u in enumerate(units):
        if i:
            out.append(u.sep if u.starts_block else " ")
        out.append(u.text)
    return "".join(out).strip()


def _segments(segments: list[Segment] | str) -> list[Segment]:
    return [Segment(segments)] if isinstance(segments, str) else segments


def chunk_text(segments: list[Segment] | str, title: str = "",
               settings: ChunkSettings | None = None, counts: TokenCounts | None = None) -> list[ChunkDraft]:
    """One document's chunks. ``counts``, shared by a batch of documents and primed with
    ``prime_documents``, saves the tokenizer calls; the chunks are the same without it."""
    settings = settings or ChunkSettings()
    count = counts if counts is not None else TokenCounts()
    units = _units(count.blocks_of(segments), settings.max_tokens, count)
    groups: list[list[_Unit]] = []
    current: list[_Unit] = []
    cur_tokens = 0
    fresh = 0  # tokens added since the overlap (a chunk must add something new)
    budget = settings.max_tokens - 24  # joins and re-tokenization add a few tokens
    for u in units:
        if current and fresh and (
            (u.kind == "heading" and cur_tokens >= settings.min_tokens)
            or cur_tokens + u.tokens > budget
        ):
            groups.append(current)
            current = [] if u.kind == "heading" else _overlap(current, settings, count)
            cur_tokens = sum(x.tokens for x in current)
            # an overlap that cannot fit with the next unit is dropped rather than overflowing
            while current and cur_tokens + u.tokens > budget:
                cur_tokens -= current.pop(0).tokens
            fresh = 0
        current.append(u)
        cur_tokens += u.tokens
        fresh += u.tokens
    if current and fresh:
        groups.append(current)

    texts = [_render(g) for g in groups]
    # the sum of the units' counts (one token per join) instead of tokenizing everything twice
    counts = [sum(u.tokens for u in g) + len(g) - 1 for g in groups]
    chunks: list[ChunkDraft] = []
    for i, (g, text, n) in enumerate(zip(groups, texts, counts)):
        section = next((u.section for u in g if u.section), "")
        heading = " › ".join(x for x in (title.strip(), section) if x and x != title.strip()) \
            if section else title.strip()
        if section and title.strip() and section != title.strip():
            heading = f"{title.strip()} › {section}"
        pages = [u.page for u in g if u.page is not None]
        meta = {}
        if pages:
            meta["page_start"], meta["page_end"] = min(pages), max(pages)
            if meta["page_start"] != meta["page_end"]:
                meta["page_offsets"] = _page_offsets(g, text)
        chunks.append(ChunkDraft(index=i, content=text, token_count=n, heading=heading,
                                 metadata=meta))
    return chunks


def _page_offsets(units: list[_Unit], text: str) -> list[list[int]]:
    """[[page, char offset in the chunk], …] where each page's text starts, so a citation can
    name the page a passage is on rather than the chunk's whole range."""
    out: list[list[int]] = []
    pos = 0
    for u in units:
        i = text.find(u.text, pos)
        if i < 0:
            continue
        if u.page is not None and (not out or out[-1][0] != u.page):
            out.append([u.page, i])
        pos = i + len(u.text)
    return out


_SENT_SPLIT = re.compile(r"(?<=[.!?:;])\s+|\n+")
_WORD_RE = re.compile(r"[^\W_]+(?:[-'][^\W_]+)*")
_IDENTITY = re.compile(r"^(?=.*\d)(?=.*[a-z])[a-z0-9-]+$")  # x200, mppt-2000, dr-red-01


def _root(w: str) -> str:
    """A rough stem for matching: purged/purging/purges -> purg."""
    w = w.lower().strip("-'")
    for suf in ("ing", "ed", "es", "s"):
        if len(w) > len(suf) + 3 and w.endswith(suf):
            return w[: -len(suf)]
    return w


def best_page(meta: dict, content: str, terms: set[str]) -> int | None:
    """The page of a multi-page chunk whose text answers the question best (see ``best_spot``)."""
    return best_spot(meta, content, terms)[0]


def best_spot(meta: dict, content: str, terms: set[str]) -> tuple[int | None, int]:
    """(page, offset of its best sentence in ``content``) of a multi-page chunk, or (None, 0).

    Each page is scored by its best sentence: the question's words it contains, each weighted
    by how few of the chunk's pages carry it (a word on every page tells pages apart poorly),
    and the question's identity tokens ("X200") three times over; a sentence naming another
    identity of the same shape ("X300") is about something else and loses that weight. A
    neighbouring page that only shares common words with the question does not win."""
    offs = meta.get("page_offsets") or []
    if len(offs) < 2 or not terms:
        return None, 0
    want = {_root(t) for t in terms if t}
    ids = {_root(t) for t in terms if _IDENTITY.match(t.lower())}
    pages = []
    for i, (page, start) in enumerate(offs):
        end = offs[i + 1][1] if i + 1 < len(offs) else len(content)
        sents, pos = [], start
        for m in _SENT_SPLIT.finditer(content, start, end):
            sents.append((pos, {_root(w) for w in _WORD_RE.findall(content[pos:m.start()])}))
            pos = m.end()
        sents.append((pos, {_root(w) for w in _WORD_RE.findall(content[pos:end])}))
        pages.append((page, [x for x in sents if x[1]]))
    df: dict[str, int] = {}
    for _, sents in pages:
        for w in set().union(*(x[1] for x in sents)) & want if sents else ():
            df[w] = df.get(w, 0) + 1
    n = len(pages)

    def weight(w: str) -> float:
        return (3.0 if w in ids else 1.0) * (1.0 + (n - df.get(w, n)) / n)

    best, at, score = None, 0, 0.0
    for page, sents in pages:
        for pos, words in sents:
            got = sum(weight(w) for w in words & want)
            other = {w for w in words if _IDENTITY.match(w) and w not in ids}
            if ids and other and not words & ids:
                got -= 3.0 * len(other)
            if got > score:
                best, at, score = page, pos, got
    return best, at


def page_label(meta: dict) -> str | None:
    """"page 4" or "page 4–5" for a chunk's metadata, None for unpaged documents."""
    a, b = meta.get("page_start"), meta.get("page_end")
    if a is None:
        return None
    return f"page {a}" if a == b else f"page {a}–{b}"
