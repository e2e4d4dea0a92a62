"""PDF text extraction for the knowledge base (pure Python, built on pdfplumber).

Public API::

    check_pdf_bytes(data, max_bytes=...)          -> None, raises PdfError
    extract_pdf(path_or_bytes, max_bytes=..., max_pages=...) -> PdfExtraction

What :func:`extract_pdf` does, page by page:

* words are built from the characters with a tight x-tolerance (so words that
  are only separated by a small gap stay separate) after dropping whitespace
  and rotated characters (PDFs that draw a space glyph *over* a word would
  otherwise split it, and rotated text is margin noise such as print marks);
* ruled tables found by ``page.find_tables()`` are rendered as one line per
  row, cells joined with `` | ``, and their area is cut out of the running text;
* columns are detected from a histogram of the x-ranges covered by the text
  rows: an x-range crossed by (almost) no row, running through most of the
  page body, with real text columns on both sides, is a column gap.  Each
  column is read top to bottom before the next one; rows that span the gap
  (titles, running headers, wide figures) are read in place;
* running headers and footers are removed: lines among the first and last
  three lines of a page that repeat (digits replaced by '#', case and
  whitespace ignored) on at least half of the pages -- or half of the even or
  the odd pages, for alternating headers; the same test runs on printed rows
  and their pieces (cells, or the per-column lines a multi-column page splits
  a header into), so "Manual ... 4. Cleaning" goes whether the page has one
  column or two, the varying chapter title with it -- plus header lines carrying the
  page number (the printed number following the physical page index with a
  constant offset), plus standalone page numbers ("4", "- 4 -",
  "Page 4 of 11", "iv") at the very top or bottom;
* lines are joined into paragraphs (paragraph breaks from vertical spacing,
  first-line indentation, font-size changes, and lines that end early -- the
  next line's first word would have fitted), words hyphenated across a line
  break are re-joined ("manu-" + "facturer"; "non-" + "use" keeps its hyphen),
  list items stay on their own lines, and lines with wide gaps between words
  (table-like rows that ``find_tables`` did not see, contents entries with dot
  leaders) keep their own line with the gaps rendered as `` | ``.

Output format of ``PdfPage.text``: paragraphs separated by a blank line, each
paragraph on one line; consecutive list items and table rows separated by a
single newline.

Errors are reported as :class:`PdfError` with a machine-readable ``code`` and
a sentence for an administrator; no pdfminer/pdfplumber exception escapes.
"""

from __future__ import annotations

import bisect
import hashlib
import io
import logging
import math
import os
import re
import statistics
import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, BinaryIO, Union

from kbframework import KBError

log = logging.getLogger(__name__)

__all__ = [
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_PAGES",
    "ERROR_CODES",
    "PdfError",
    "PdfExtraction",
    "PdfPage",
    "check_pdf_bytes",
    "extract_pdf",
]

DEFAULT_MAX_BYTES = 25 * 1024 * 1024
DEFAULT_MAX_PAGES = 500

# --------------------------------------------------------------------------- #
# Public types
# --------------------------------------------------------------------------- #

ERROR_CODES = (
    "not_a_pdf",
    "encrypted",
    "corrupt",
    "empty",
    "no_text_layer",
    "too_large",
    "too_many_pages",
)


class PdfError(KBError):
    """A PDF that cannot be ingested.  ``code`` is one of :data:`ERROR_CODES`,
    ``message`` a sentence that can be shown to an administrator.  The connector words
    it for the API (``pdf_<code>``); one that escapes it is still a 400, never a 500."""

    status = 400
    code = "pdf_unreadable"

    def __init__(self, code: str, message: str):
        super().__init__(message, code=code)

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        return f"PdfError(code={self.code!r}, message={self.message!r})"

    def __reduce__(self):  # keep picklable (e.g. across worker processes)
        return (self.__class__, (self.code, self.message))


@dataclass
class PdfPage:
    number: int  # 1-based physical page number
    text: str  # cleaned text of the page ("" for pages without text)


@dataclass
class PdfExtraction:
    pages: list[PdfPage]
    page_count: int
    title: str | None
    removed_lines: list[str]  # distinct running header/footer lines removed
    sha256: str
    failed_pages: list[int] = field(default_factory=list)  # pages pdfminer could not parse

    @property
    def text(self) -> str:
        """All non-empty pages joined with blank lines."""
        return "\n\n".join(p.text for p in self.pages if p.text)


# --------------------------------------------------------------------------- #
# Tunables
# --------------------------------------------------------------------------- #

X_TOLERANCE = 1.5  # max gap (pt) between two characters of one word
HEADER_ZONE = 3  # first/last N lines of a page are header/footer candidates
MIN_REPEAT_PAGES = 3
CELL_GAP_EM = 1.8  # a gap wider than this (in font heights) inside a line splits cells
SIG_WINDOW = 1024  # %PDF- must appear within the first N bytes
EOF_WINDOW = 4096  # %%EOF must appear within the last N bytes

_CID_RE = re.compile(r"\(cid:\d+\)")
_SIGNATURE_RE = re.compile(rb"%PDF-\d\.\d")
_PAGE_NUM_RE = re.compile(
    r"^(?:(?:page|seite|p\.|s\.)\s*)?[-–—\[(]?\s*\d{1,5}\s*[-–—\])]?"
    r"(?:\s*(?:of|von|/|\|)\s*\d{1,5})?$",
    re.IGNORECASE,
)
_ROMAN_RE = re.compile(r"^[ivxlc]{1,7}$")  # lower-case only: "X" is more often maths
_LEADER_RE = re.compile(r"^(.*?\S)\s*(?:\.\s?){4,}\s*(\S.*)?$")
_LIST_RE = re.compile(
    r"^(?:[•●○◦▪▫■□◆◇►▸➢➤✓✔·∙*\-–—]"  # bullets and dashes
    r"|\(?\d{1,3}[.)]"  # 1.  1)  (1)
    r"|\(\d{1,3}\)"
    r"|\(?[a-z][)]"  # a)  (a)
    r"|\([a-zA-Z]\)"
    r"|\(?(?:i|ii|iii|iv|v|vi|vii|viii|ix|x|xi|xii)\))"  # (iv)  iv)
    r"(?:\s|$)"
)
_HYPHENS = ("-", "\u00ad", "\u2010", "\u2011")
# prefixes whose hyphen is kept when a compound is broken at the line end
_KEEP_HYPHEN_PREFIXES = {"non", "self", "well", "half", "cross", "e"}
_URL_END_RE = re.compile(r"(?:https?:|www\.)\S*/$")
_TITLE_JUNK_RE = re.compile(
    r"^(?:untitled|document\d*|title|slide \d+|microsoft word.*|.*\.(?:docx?|pdf|tex|dvi|indd|odt|rtf|pptx?|xlsx?))$",
    re.IGNORECASE,
)


# --------------------------------------------------------------------------- #
# Input checks
# --------------------------------------------------------------------------- #


def _mb(n: int) -> str:
    value = n / (1024 * 1024)
    return f"{value:.1f}".rstrip("0").rstrip(".")


def check_pdf_bytes(data: bytes, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
    """Cheap checks on the raw bytes, before parsing.  Raises :class:`PdfError`
    for an empty file (``empty``), a file over ``max_bytes`` (``too_large``) or
    content without the ``%PDF-x.y`` signature in its first 1024 bytes
    (``not_a_pdf``; the file name plays no part)."""
    if data is None or len(data) == 0:
        raise PdfError("empty", "The file is empty (0 bytes); upload the complete PDF document.")
    if max_bytes is not None and len(data) > max_bytes:
        raise PdfError(
            "too_large",
            f"This PDF is {_mb(len(data))} MB, which is over the {_mb(max_bytes)} MB limit; "
            "upload a smaller file or split it into parts.",
        )
    if not _SIGNATURE_RE.search(bytes(data[:SIG_WINDOW])):
        raise PdfError(
            "not_a_pdf",
            "This file is not a PDF document (its content does not start with the %PDF- "
            "signature, whatever its name says); upload a real PDF file.",
        )


def _read_input(path_or_bytes: Any, max_bytes: int) -> bytes:
    if isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
        return bytes(path_or_bytes)
    if isinstance(path_or_bytes, (str, os.PathLike)):
        size = os.path.getsize(path_or_bytes)
        if max_bytes is not None and size > max_bytes:
            raise PdfError(
                "too_large",
                f"This PDF is {_mb(size)} MB, which is over the {_mb(max_bytes)} MB limit; "
                "upload a smaller file or split it into parts.",
            )
        with open(path_or_bytes, "rb") as fh:
            return fh.read()
    if hasattr(path_or_bytes, "read"):
        limit = None if max_bytes is None else max_bytes + 1
        data = path_or_bytes.read(limit) if limit is not None else path_or_bytes.read()
        return bytes(data)
    raise TypeError("extract_pdf() expects a path, bytes or a binary file object")


def _corrupt(detail: str = "") -> PdfError:
    msg = "This PDF is damaged or truncated and cannot be read"
    if detail:
        msg += f" ({detail})"
    return PdfError("corrupt", msg + "; re-export it or upload the complete file again.")


def _encrypted() -> PdfError:
    return PdfError(
        "encrypted",
        "This PDF is password-protected; upload an unprotected copy.",
    )


class _WarningCounter(logging.Handler):
    """Counts pdfminer warnings emitted by the current thread (a sign of a
    damaged content stream when a document yields no text at all)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.thread = threading.get_ident()
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        if record.thread in (None, self.thread):
            self.count += 1


def _map_open_error(exc: BaseException) -> PdfError:
    """Translate a pdfminer/pdfplumber exception into a PdfError."""
    inner: BaseException = exc
    # pdfplumber wraps pdfminer exceptions: PdfminerException(original)
    for _ in range(3):
        if inner.args and isinstance(inner.args[0], BaseException):
            inner = inner.args[0]
        elif inner.__cause__ is not None:
            inner = inner.__cause__
        else:
            break
    names = {type(inner).__name__, type(exc).__name__}
    for cls in type(inner).__mro__:
        names.add(cls.__name__)
    if names & {"PDFPasswordIncorrect", "PDFEncryptionError", "PDFEncryptionWarning"}:
        return _encrypted()
    text = str(inner).lower()
    if "password" in text or "encrypt" in text:
        return _encrypted()
    return _corrupt()


# --------------------------------------------------------------------------- #
# Geometry helpers
# --------------------------------------------------------------------------- #


class _Line:
    __slots__ = ("first_w", "x0", "x1", "top", "bottom", "h", "text", "cells", "removed", "norm")

    def __init__(self, words: list[dict], cell_gap_em: float = CELL_GAP_EM):
        words = sorted(words, key=lambda w: w["x0"])
        self.first_w = words[0]["x1"] - words[0]["x0"]  # width of the first word
        self.x0 = min(w["x0"] for w in words)
        self.x1 = max(w["x1"] for w in words)
        self.top = min(w["top"] for w in words)
        self.bottom = max(w["bottom"] for w in words)
        self.h = statistics.median([w["bottom"] - w["top"] for w in words])
        cells: list[list[str]] = [[words[0]["text"]]]
        prev = words[0]
        for w in words[1:]:
            h = max(prev["bottom"] - prev["top"], w["bottom"] - w["top"], 1.0)
            if w["x0"] - prev["x1"] > cell_gap_em * h:
                cells.append([w["text"]])
            else:
                cells[-1].append(w["text"])
            prev = w
        self.cells = [" ".join(c) for c in cells]
        self.text = " ".join(w["text"] for w in words)
        m = _LEADER_RE.match(self.text) if "...." in self.text.replace(" ", "") else None
        if m:  # table-of-contents entry with dot leaders
            self.cells = [c for c in (m.group(1), m.group(2)) if c]
        self.removed = False
        self.norm = _norm(self.text)

    @property
    def rowlike(self) -> bool:
        return len(self.cells) > 1

    def display(self) -> str:
        return " | ".join(self.cells) if self.rowlike else self.text


class _Table:
    __slots__ = ("x0", "x1", "top", "bottom", "rows")

    def __init__(self, bbox: tuple, rows: list[str]):
        self.x0, self.top, self.x1, self.bottom = bbox
        self.rows = rows


def _norm(text: str) -> str:
    t = re.sub(r"\s+|\|", "", text.casefold())
    return re.sub(r"\d+", "#", t)


def _cluster_lines(words: list[dict], tol: float) -> list[list[dict]]:
    """Group words into text lines by their top coordinate."""
    out: list[list[dict]] = []
    ref = None
    for w in sorted(words, key=lambda w: (w["top"], w["x0"])):
        if ref is None or w["top"] - ref > tol:
            out.append([w])
            ref = w["top"]
        else:
            out[-1].append(w)
    return out


def _filled(words: list[dict], fill: float) -> list[list[float]]:
    """x-intervals covered by a row, bridging normal word spaces."""
    ivs: list[list[float]] = []
    for w in sorted(words, key=lambda w: w["x0"]):
        if ivs and w["x0"] - ivs[-1][1] <= fill:
            ivs[-1][1] = max(ivs[-1][1], w["x1"])
        else:
            ivs.append([w["x0"], w["x1"]])
    return ivs


def _median(values: list[float], default: float) -> float:
    return statistics.median(values) if values else default


# --------------------------------------------------------------------------- #
# Column detection
# --------------------------------------------------------------------------- #


def _find_column_gaps(rows: list[list[dict]], row_ivs: list[list[list[float]]], med_h: float) -> list[float]:
    """Return the x positions (gap centres) that separate text columns, or []."""
    nrows = len(rows)
    if nrows < 8:
        return []
    left = math.floor(min(iv[0][0] for iv in row_ivs))
    right = math.ceil(max(iv[-1][1] for iv in row_ivs))
    width = right - left
    if width < 20 * med_h:
        return []
    diff = [0] * (width + 2)
    for ivs in row_ivs:
        for a, b in ivs:
            ia = max(0, int(a) - left)
            ib = min(width + 1, int(math.ceil(b)) - left)
            diff[ia] += 1
            diff[ib] -= 1
    allowed = int(0.12 * nrows)
    min_gap = max(0.7 * med_h, 4.0)
    gaps: list[tuple[float, float]] = []
    run_start = None
    cov = 0
    for x in range(width + 1):
        cov += diff[x]
        free = cov <= allowed and 0 < x < width
        if free and run_start is None:
            run_start = x
        elif not free and run_start is not None:
            if x - run_start >= min_gap:
                gaps.append((left + run_start, left + x))
            run_start = None
    if not gaps:
        return []
    min_side = max(4, int(0.2 * nrows))
    good: list[float] = []
    for g0, g1 in gaps:
        n_left = sum(1 for ivs in row_ivs if ivs[0][0] < g0)
        n_right = sum(1 for ivs in row_ivs if ivs[-1][1] > g1)
        if n_left >= min_side and n_right >= min_side:
            good.append((g0 + g1) / 2)
    return good


def _spans(ivs: list[list[float]], gaps: list[float]) -> bool:
    return any(a <= g <= b for a, b in ivs for g in gaps)


def _column_of(x: float, gaps: list[float]) -> int:
    i = 0
    while i < len(gaps) and x > gaps[i]:
        i += 1
    return i


def _columns_look_like_text(rows, row_ivs, gaps, left, right, tol) -> bool:
    """Real text columns have lines with several words filling the column;
    label/value layouts and tables do not."""
    bounds = [left] + gaps + [right]
    per_col: list[list[dict]] = [[] for _ in range(len(gaps) + 1)]
    for row, ivs in zip(rows, row_ivs):
        if _spans(ivs, gaps):
            continue
        for w in row:
            per_col[_column_of((w["x0"] + w["x1"]) / 2, gaps)].append(w)
    for i, words in enumerate(per_col):
        lines = _cluster_lines(words, tol)
        if len(lines) < 4:
            return False
        col_w = bounds[i + 1] - bounds[i]
        if col_w <= 0:
            return False
        mean_words = sum(len(l) for l in lines) / len(lines)
        fills = [(max(w["x1"] for w in l) - min(w["x0"] for w in l)) / col_w for l in lines]
        if mean_words < 3.0 or statistics.median(fills) < 0.45:
            return False
    return True


# --------------------------------------------------------------------------- #
# Page layout -> blocks of lines
# --------------------------------------------------------------------------- #


class _PageLayout:
    __slots__ = ("number", "blocks", "lines", "med_h", "has_text", "has_images", "width", "height")

    def __init__(self, number: int):
        self.number = number
        self.blocks: list[Any] = []  # list of list[_Line] or _Table
        self.lines: list[_Line] = []  # all text lines (for header/footer detection)
        self.med_h = 10.0
        self.has_text = False
        self.has_images = False
        self.width = 0.0
        self.height = 0.0


def _keep_char(obj: dict) -> bool:
    if obj.get("object_type") != "char":
        return True
    text = obj.get("text", "")
    return bool(text) and not text.isspace() and obj.get("upright", True)


def _cell_text(words: list[dict], tol: float) -> str:
    txt = ""
    for line in _cluster_lines(words, tol):
        part = " ".join(w["text"] for w in sorted(line, key=lambda w: w["x0"]))
        txt = _join(txt, part) if txt else part
    return txt.replace("\u00ad", "")


def _table_rows(table, words: list[dict], tol: float) -> list[str] | None:
    """Render a pdfplumber table from our own words (much faster than
    ``table.extract()``, which scans every character for every cell).
    Returns None for "tables" that are really figures or layout boxes."""
    rows = [r for r in table.rows if r.cells]
    if len(rows) < 2:
        return None
    x0, top, x1, bottom = table.bbox
    cell_words: list[list[list[dict]]] = [[[] for _ in r.cells] for r in rows]
    row_tops = [r.bbox[1] for r in rows]
    for w in words:
        cx = (w["x0"] + w["x1"]) / 2
        cy = (w["top"] + w["bottom"]) / 2
        if not (x0 <= cx <= x1 and top <= cy <= bottom):
            continue
        # rows are ordered top to bottom; pick the last row starting above cy
        ri = max(0, bisect.bisect_right(row_tops, cy) - 1)
        for cand in (ri, ri - 1, ri + 1):
            if 0 <= cand < len(rows) and rows[cand].bbox[1] <= cy <= rows[cand].bbox[3]:
                ri = cand
                break
        else:
            continue
        for ci, cell in enumerate(rows[ri].cells):
            if cell is not None and cell[0] <= cx <= cell[2] and cell[1] <= cy <= cell[3]:
                cell_words[ri][ci].append(w)
                break
    data = [
        [None if cell is None else _cell_text(cw, tol) for cell, cw in zip(r.cells, cws)]
        for r, cws in zip(rows, cell_words)
    ]
    ncols = max(len(r) for r in data)
    present = [c for r in data for c in r if c is not None]
    nonempty = [c for c in present if c]
    multi = sum(1 for r in data if sum(1 for c in r if c) >= 2)
    if ncols < 2 or multi < 2 or not present:
        return None
    if len(nonempty) / len(present) < 0.4:
        return None
    if sum(1 for c in nonempty if re.search(r"\w", c)) < 0.5 * len(nonempty):
        return None
    out: list[str] = []
    for r in data:
        cells = [c for c in r if c is not None]  # None: covered by a merged cell
        while cells and not cells[-1]:
            cells.pop()
        if any(cells):
            out.append(" | ".join(cells))
    return out or None


def _layout_page(page, number: int) -> _PageLayout:
    lay = _PageLayout(number)
    lay.width = float(page.width)
    lay.height = float(page.height)
    fpage = page.filter(_keep_char)
    raw_words = fpage.extract_words(
        x_tolerance=X_TOLERANCE, y_tolerance=3, keep_blank_chars=False, use_text_flow=False
    )
    words = []
    for w in raw_words:
        t = w["text"]
        if "(cid:" in t:
            t = _CID_RE.sub("", t)
            if not t.strip():
                continue
            w = dict(w, text=t)
        if w.get("upright", True) is False:
            continue
        words.append(w)
    if not words:
        try:
            lay.has_images = bool(page.objects.get("image"))
        except Exception:  # pdfminer raises many unrelated types on a damaged page
            log.warning("page %s: its images could not be listed", number, exc_info=True)
        return lay
    lay.has_text = True
    lay.med_h = med_h = _median([w["bottom"] - w["top"] for w in words], 10.0)

    # ---- tables ---------------------------------------------------------
    tables: list[_Table] = []
    try:
        found = fpage.find_tables() if (page.lines or page.rects) else []
    except Exception:  # pdfminer raises many unrelated types; the words are kept as text
        log.warning("page %s: table detection failed, its text is read without tables", number, exc_info=True)
        found = []
    for t in found:
        rows = _table_rows(t, words, max(1.0, 0.45 * med_h))
        if rows:
            tables.append(_Table(t.bbox, rows))
    if tables:
        def in_table(w):
            cx = (w["x0"] + w["x1"]) / 2
            cy = (w["top"] + w["bottom"]) / 2
            return any(t.x0 - 1 <= cx <= t.x1 + 1 and t.top - 1 <= cy <= t.bottom + 1 for t in tables)

        words = [w for w in words if not in_table(w)]

    tol = max(1.0, 0.45 * med_h)
    rows = _cluster_lines(words, tol)
    fill = 0.6 * med_h
    row_ivs = [_filled(r, fill) for r in rows]

    gaps: list[float] = []
    if rows:
        gaps = _find_column_gaps(rows, row_ivs, med_h)
        if gaps:
            left = min(iv[0][0] for iv in row_ivs)
            right = max(iv[-1][1] for iv in row_ivs)
            if not _columns_look_like_text(rows, row_ivs, gaps, left, right, tol):
                gaps = []

    # ---- reading order ----------------------------------------------------
    # items: (top, bottom, kind, payload, spanning)
    items: list[tuple] = []
    for r, ivs in zip(rows, row_ivs):
        top = min(w["top"] for w in r)
        bottom = max(w["bottom"] for w in r)
        items.append((top, bottom, "row", r, bool(gaps) and _spans(ivs, gaps)))
    for t in tables:
        spanning = bool(gaps) and any(t.x0 <= g <= t.x1 for g in gaps)
        items.append((t.top, t.bottom, "table", t, spanning))
    items.sort(key=lambda it: (it[0], it[1]))

    # horizontal rules crossing a column gap separate layout regions (e.g. a
    # masthead above a multi-column body)
    rules: list[float] = []
    if gaps:
        for o in list(page.lines) + list(page.rects):
            if abs(o["bottom"] - o["top"]) <= 3 and any(o["x0"] < g < o["x1"] for g in gaps):
                rules.append((o["top"] + o["bottom"]) / 2)
        rules.sort()

    band_gap = 2.5 * med_h
    segments: list[tuple[str, list]] = []  # ("span", items) | ("cols", items)
    seg_bottom = -1e9
    for it in items:
        top, bottom, kind, payload, spanning = it
        kind_seg = "span" if spanning else "cols"
        new_seg = (
            not segments
            or segments[-1][0] != kind_seg
            or (kind_seg == "cols" and top - seg_bottom > band_gap)
            or (kind_seg == "cols" and any(seg_bottom - 1 <= y <= top + 1 for y in rules))
        )
        if new_seg:
            segments.append((kind_seg, []))
            seg_bottom = bottom
        segments[-1][1].append(it)
        seg_bottom = max(seg_bottom, bottom)

    ncols = len(gaps) + 1
    for kind_seg, seg_items in segments:
        if kind_seg == "span":
            block: list[_Line] = []
            for top, bottom, kind, payload, _ in seg_items:
                if kind == "table":
                    if block:
                        lay.blocks.append(block)
                        block = []
                    lay.blocks.append(payload)
                else:
                    block.append(_Line(payload))
            if block:
                lay.blocks.append(block)
            continue
        cols_words: list[list[dict]] = [[] for _ in range(ncols)]
        cols_tables: list[list[_Table]] = [[] for _ in range(ncols)]
        for top, bottom, kind, payload, _ in seg_items:
            if kind == "table":
                cols_tables[_column_of((payload.x0 + payload.x1) / 2, gaps)].append(payload)
            else:
                for w in payload:
                    cols_words[_column_of((w["x0"] + w["x1"]) / 2, gaps)].append(w)
        for ci in range(ncols):
            col_items: list[tuple[float, Any]] = [
                (min(w["top"] for w in lw), _Line(lw)) for lw in _cluster_lines(cols_words[ci], tol)
            ]
            col_items += [(t.top, t) for t in cols_tables[ci]]
            col_items.sort(key=lambda it: it[0])
            block = []
            for _, obj in col_items:
                if isinstance(obj, _Table):
                    if block:
                        lay.blocks.append(block)
                        block = []
                    lay.blocks.append(obj)
                else:
                    block.append(obj)
            if block:
                lay.blocks.append(block)

    lay.lines = [l for b in lay.blocks if isinstance(b, list) for l in b]
    return lay


# --------------------------------------------------------------------------- #
# Running headers / footers
# --------------------------------------------------------------------------- #


def _threshold(n: int) -> float:
    if n <= 1:
        return math.inf
    if n == 2:
        return 2
    return max(MIN_REPEAT_PAGES, math.ceil(n / 2))


def _is_page_number(text: str, expected: int | None, max_plausible: int) -> bool:
    """A standalone page number ("4", "- 4 -", "Page 4 of 11", "iv").  When the
    document's numbering offset is known, the number must be the expected one."""
    t = text.strip()
    if _ROMAN_RE.match(t):
        return True
    if not _PAGE_NUM_RE.match(t):
        return False
    value = int(re.search(r"\d+", t).group())
    if expected is not None:
        return value == expected
    return value <= max_plausible


def _varying_numbers(tuples: set[tuple[int, ...]]) -> int:
    """How many number positions vary systematically (a new value on most
    pages) between the occurrences of a line.  A running header/footer has at
    most one such position (the page number); body lines that merely look
    alike ("Step 3 of unit 31") have several."""
    if len(tuples) <= 1:
        return 0
    limit = max(2, len(tuples) / 2)
    return sum(1 for values in zip(*tuples) if len(set(values)) > limit)


def _int_tokens(line: _Line) -> list[int]:
    toks = line.text.split()
    out = []
    if len(toks) > 20:
        return out
    for t in (toks[0], toks[-1]):
        if t.isdigit() and len(t) <= 5:
            out.append(int(t))
    return out


def _visual_rows(lines: list[_Line]) -> list[list[_Line]]:
    """Lines printed side by side, grouped: on a multi-column page the column reader splits a
    running header ("Manual ... 4. Cleaning") into one line per column; here it is one row again."""
    rows: list[list[_Line]] = []
    for l in sorted(lines, key=lambda l: (l.top, l.x0)):
        if rows and abs(l.top - rows[-1][0].top) <= 0.5 * max(l.h, rows[-1][0].h, 1.0):
            rows[-1].append(l)
        else:
            rows.append([l])
    return [sorted(r, key=lambda l: l.x0) for r in rows]


def _row_units(row: list[_Line]) -> list[tuple[_Line, str]]:
    """The printed pieces of a row: each line's cells (wide gaps) or its text, with letters."""
    out = []
    for l in row:
        for c in (l.cells if l.rowlike else [l.text]):
            if re.search(r"[^\W\d_]{2}", c):
                out.append((l, c))
    return out


MAX_RUNNING_WORDS = 12  # a row part removed beside a running piece is header-sized


def _remove_headers_footers(layouts: list[_PageLayout]) -> list[str]:
    pages = [lay for lay in layouts if lay.lines]
    n = len(pages)
    removed: list[str] = []
    if not pages:
        return removed

    # 1. repeated lines among the first/last HEADER_ZONE lines
    count: Counter = Counter()
    count_par = [Counter(), Counter()]  # even, odd physical page numbers
    n_par = [0, 0]
    edges: dict[int, list[_Line]] = {}
    numbers: dict[str, set[tuple[int, ...]]] = {}
    not_running: set[str] = set()  # looked alike twice on one page: body text
    for lay in pages:
        lines = sorted(lay.lines, key=lambda l: (l.top, l.x0))
        # the zone shrinks on short pages so that it never swallows the body;
        # a page of a single line has no header/footer to speak of
        zone = 0 if len(lines) < 2 else min(HEADER_ZONE, max(1, len(lines) // 3))
        cand = lines[:zone] + [l for l in lines[len(lines) - zone :] if l not in lines[:zone]]
        edges[lay.number] = cand
        norms = {l.norm for l in cand if l.norm}
        seen: dict[str, str] = {}
        for l in cand:
            if l.norm:
                numbers.setdefault(l.norm, set()).add(
                    tuple(int(d) for d in re.findall(r"\d+", re.sub(r"\s+", "", l.text)))
                )
                if seen.setdefault(l.norm, l.text) != l.text:
                    not_running.add(l.norm)
        count.update(norms)
        count_par[lay.number % 2].update(norms)
        n_par[lay.number % 2] += 1
    thr = _threshold(n)
    thr_par = [_threshold(n_par[0]) if n_par[0] >= 3 else math.inf, _threshold(n_par[1]) if n_par[1] >= 3 else math.inf]
    repeated = {
        k
        for k in count
        if (count[k] >= thr or count_par[0][k] >= thr_par[0] or count_par[1][k] >= thr_par[1])
        and k not in not_running
        and _varying_numbers(numbers[k]) <= 1
    }

    # 1b. the same on printed rows and their pieces: a running piece ("ACME X200 User Manual")
    # repeats whether the page has one column (one line, cells apart) or two (one line per
    # column), and takes the varying part beside it (the chapter title) along
    ucount: Counter = Counter()
    ucount_par = [Counter(), Counter()]
    unumbers: dict[str, set[tuple[int, ...]]] = {}
    unot: set[str] = set()
    edge_rows: dict[int, list[list[_Line]]] = {}
    for lay in pages:
        rows = _visual_rows(lay.lines)
        zone = 0 if len(rows) < 2 else min(HEADER_ZONE, max(1, len(rows) // 3))
        cand_rows = rows[:zone] + [r for r in rows[len(rows) - zone :] if r not in rows[:zone]]
        edge_rows[lay.number] = cand_rows
        seen_u: dict[str, str] = {}
        for r in cand_rows:
            for _, piece in _row_units(r):
                k = _norm(piece)
                unumbers.setdefault(k, set()).add(
                    tuple(int(d) for d in re.findall(r"\d+", re.sub(r"\s+", "", piece))))
                if seen_u.setdefault(k, piece) != piece:
                    unot.add(k)
        ucount.update(list(seen_u))
        ucount_par[lay.number % 2].update(list(seen_u))
    repeated_units = {
        k
        for k in ucount
        if (ucount[k] >= thr or ucount_par[0][k] >= thr_par[0] or ucount_par[1][k] >= thr_par[1])
        and k not in unot
        and _varying_numbers(unumbers[k]) <= 1
    }

    # 2. header/footer lines carrying the page number (printed = physical + offset)
    offsets: Counter = Counter()
    for lay in pages:
        cand = edges[lay.number]
        edge2 = cand[:2] + cand[-2:]
        offs = {v - lay.number for l in edge2 for v in _int_tokens(l)}
        offsets.update(offs)
    page_offset = None
    if offsets:
        off, c = offsets.most_common(1)[0]
        if c >= thr:
            page_offset = off

    max_plausible = 2 * len(layouts) + 10
    for lay in pages:
        cand = edges[lay.number]
        for l in cand:
            if l.norm in repeated:
                l.removed = True
        for r in edge_rows[lay.number]:
            running = {id(l) for l, piece in _row_units(r) if _norm(piece) in repeated_units}
            if running:
                for l in r:
                    if id(l) in running or len(l.text.split()) <= MAX_RUNNING_WORDS:
                        l.removed = True
        # 3. page numbers -- standalone, or in a header/footer line when the
        # numbering offset is known -- peeled off the very top and bottom
        expected = None if page_offset is None else lay.number + page_offset
        remaining = sorted((l for l in lay.lines if not l.removed), key=lambda l: (l.top, l.x0))
        for seq in (remaining[:2], list(reversed(remaining[-2:]))):
            for l in seq:
                if _is_page_number(l.text, expected, max_plausible) or (
                    expected is not None and expected in _int_tokens(l)
                ):
                    l.removed = True
                else:
                    break
        for l in lay.lines:
            if l.removed:
                removed.append(l.text)
    return list(dict.fromkeys(removed))


# --------------------------------------------------------------------------- #
# Paragraph assembly
# --------------------------------------------------------------------------- #


def _join(a: str, b: str) -> str:
    """Join the text of two consecutive lines of one paragraph."""
    if not a:
        return b
    if not b:
        return a
    last = a[-1]
    if last in _HYPHENS and len(a) >= 2:
        left = a[:-1]
        if left[-1].isalpha() and b[0].islower():
            m = re.search(r"(\w+)$", left)
            prefix = m.group(1).lower() if m else ""
            if last == "\u00ad" or prefix not in _KEEP_HYPHEN_PREFIXES:
                return left + b
            return a + b
        if left[-1].isalnum():
            return (left + b) if last == "\u00ad" else (a + b)
        return a + " " + b
    if last in "–—" and len(a) >= 2 and a[-2].isalnum() and b[0].isalnum():
        return a + b
    if last == "/" and _URL_END_RE.search(a):
        return a + b
    if last == "@" and len(a) >= 2 and a[-2].isalnum():
        return a + b
    return a + " " + b


def _blocks_to_text(lay: _PageLayout) -> str:
    # page-wide typical vertical gap between consecutive lines of a block
    gaps = []
    for b in lay.blocks:
        if isinstance(b, list):
            ls = [l for l in b if not l.removed]
            for p, q in zip(ls, ls[1:]):
                h = min(p.h, q.h)
                g = q.top - p.bottom
                if abs(p.h - q.h) <= 0.15 * max(p.h, q.h) and -0.5 * h <= g <= 2 * h:
                    gaps.append(g)
    med_gap = _median(gaps, 0.25 * lay.med_h)

    paras: list[tuple[str, str]] = []  # (kind, text)

    for b in lay.blocks:
        if isinstance(b, _Table):
            paras.append(("table", "\n".join(b.rows)))
            continue
        lines = [l for l in b if not l.removed]
        if not lines:
            continue
        b_left = min(l.x0 for l in lines)
        b_right = max(l.x1 for l in lines)
        b_width = max(b_right - b_left, 1.0)
        cur_kind = None
        cur_text = ""
        cur_first: _Line | None = None
        prev: _Line | None = None

        def flush():
            nonlocal cur_kind, cur_text
            if cur_kind is not None and cur_text.strip():
                paras.append((cur_kind, cur_text.replace("\u00ad", "").strip()))
            cur_kind, cur_text = None, ""

        for l in lines:
            if l.rowlike:
                flush()
                paras.append(("row", l.display()))
                prev = l
                continue
            is_item = bool(_LIST_RE.match(l.text))
            brk = cur_kind is None or prev is None or prev.rowlike or is_item
            if not brk:
                h = min(prev.h, l.h)
                gap = l.top - prev.bottom
                if gap > med_gap + 0.45 * h:
                    brk = True
                elif abs(l.h - prev.h) > 0.18 * max(l.h, prev.h):
                    brk = True
                elif b_right - prev.x1 > l.first_w + 0.5 * h:
                    # the next line's first word would have fitted on the
                    # previous line: that line ended its paragraph on purpose
                    brk = True
                elif l.x0 > prev.x0 + 0.8 * h and l.x0 > b_left + 0.8 * h:
                    # indented first line of a new paragraph (but not a hanging
                    # indent right after a list marker)
                    if not (cur_kind == "list" and prev is cur_first):
                        brk = True
            if brk:
                flush()
                cur_kind = "list" if is_item else "para"
                cur_text = l.text
                cur_first = l
            else:
                cur_text = _join(cur_text, l.text)
            prev = l
        flush()

    out: list[str] = []
    prev_kind = None
    for kind, text in paras:
        if out:
            tight = kind == prev_kind and kind in ("list", "row")
            out.append("\n" if tight else "\n\n")
        out.append(text)
        prev_kind = kind
    text = "".join(out)
    text = re.sub(r"[ \t\u00a0]+", " ", text)
    text = re.sub(r" *\n *", "\n", text)
    return text.strip()


# --------------------------------------------------------------------------- #
# Title
# --------------------------------------------------------------------------- #


def _clean_meta_title(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bytes):
        for enc in ("utf-8", "latin-1"):
            try:
                value = value.decode(enc)
                break
            except UnicodeDecodeError:
                continue
    title = re.sub(r"\s+", " ", str(value)).strip().strip("\x00").strip()
    if len(title) < 3 or not re.search(r"[^\W\d_]", title) or _TITLE_JUNK_RE.match(title):
        return None
    return title[:300]


def _title_from_layout(layouts: list[_PageLayout]) -> str | None:
    for lay in layouts[:3]:
        lines = [l for l in lay.lines if not l.removed and l.top < 0.5 * lay.height]
        if not lines:
            if lay.lines:
                return None
            continue
        lines.sort(key=lambda l: (l.top, l.x0))
        big = max(lines, key=lambda l: l.h)
        if big.h < 1.25 * lay.med_h or not re.search(r"[^\W\d_]", big.text):
            return None
        parts = [big.text]
        last = big
        for l in lines[lines.index(big) + 1 :]:
            if len(parts) >= 3:
                break
            if abs(l.h - big.h) <= 0.1 * big.h and l.top - last.bottom <= big.h:
                parts.append(l.text)
                last = l
            elif l.top > last.bottom:
                break
        title = " ".join(parts)
        return title[:300]
    return None


# --------------------------------------------------------------------------- #
# Entry point
# --------------------------------------------------------------------------- #


def extract_pdf(
    path_or_bytes: Union[str, os.PathLike, bytes, bytearray, memoryview, BinaryIO],
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_pages: int = DEFAULT_MAX_PAGES,
) -> PdfExtraction:
    """Extract cleaned page texts from a PDF (path, bytes or binary file).

    Raises :class:`PdfError` (``not_a_pdf``, ``encrypted``, ``corrupt``,
    ``empty``, ``no_text_layer``, ``too_large``, ``too_many_pages``).
    A missing path raises the usual ``OSError``.
    """
    data = _read_input(path_or_bytes, max_bytes)
    check_pdf_bytes(data, max_bytes)
    if b"%%EOF" not in data[-EOF_WINDOW:]:
        raise _corrupt("the end of the file is missing")
    sha = hashlib.sha256(data).hexdigest()

    import pdfplumber  # imported lazily: heavy import, only needed here

    warnings = _WarningCounter()
    pdfminer_log = logging.getLogger("pdfminer")
    pdfminer_log.addHandler(warnings)
    try:
        layouts, page_count, meta_title, failed = _parse(pdfplumber, data, max_pages)
    finally:
        pdfminer_log.removeHandler(warnings)

    if len(failed) == page_count:
        raise _corrupt("none of its pages could be parsed")
    if not any(lay.has_text for lay in layouts):
        if warnings.count and not any(lay.has_images for lay in layouts):
            raise _corrupt("its page content could not be decoded")
        raise PdfError(
            "no_text_layer",
            "This PDF has no extractable text (it looks like a scanned or image-only document); "
            "run OCR on it or upload a PDF with a text layer.",
        )

    try:
        removed = _remove_headers_footers(layouts)
    except Exception:  # defensive: never lose the text over a cleaning step
        log.warning("header/footer removal failed; the pages keep them", exc_info=True)
        removed = []
    pages = [PdfPage(number=lay.number, text=_page_text(lay)) for lay in layouts]
    title = meta_title or _title_from_layout(layouts)
    return PdfExtraction(
        pages=pages,
        page_count=page_count,
        title=title,
        removed_lines=removed,
        sha256=sha,
        failed_pages=failed,
    )


def _page_text(lay: _PageLayout) -> str:
    if not lay.blocks:
        return ""
    try:
        return _blocks_to_text(lay)
    except Exception:  # defensive fallback: plain lines in reading order
        log.warning("page %s: paragraph assembly failed, plain lines instead", lay.number, exc_info=True)
        parts = []
        for b in lay.blocks:
            if isinstance(b, _Table):
                parts.extend(b.rows)
            else:
                parts.extend(l.text for l in b if not l.removed)
        return "\n".join(parts)


def _parse(pdfplumber, data: bytes, max_pages: int | None):
    try:
        pdf = pdfplumber.open(io.BytesIO(data))
    except PdfError:
        raise
    except Exception as exc:  # pdfminer raises many unrelated types
        raise _map_open_error(exc) from None

    try:
        try:
            page_objs = pdf.pages
            page_count = len(page_objs)
        except Exception as exc:
            raise _map_open_error(exc) from None
        if page_count == 0:
            raise PdfError("empty", "This PDF has no pages; upload a document with content.")
        if max_pages is not None and page_count > max_pages:
            raise PdfError(
                "too_many_pages",
                f"This PDF has {page_count} pages, which is over the limit of {max_pages} pages; "
                "split it into smaller files.",
            )
        try:
            meta_title = _clean_meta_title((pdf.metadata or {}).get("Title"))
        except Exception:  # a damaged info dictionary: the title comes from the layout
            log.warning("the document's metadata could not be read", exc_info=True)
            meta_title = None

        layouts: list[_PageLayout] = []
        failed: list[int] = []
        for i, page in enumerate(page_objs, start=1):
            try:
                layouts.append(_layout_page(page, i))
            except (MemoryError, RecursionError):
                raise _corrupt(f"page {i} could not be processed") from None
            except Exception:  # pdfminer raises many unrelated types; the page is reported as failed
                log.warning("page %s could not be parsed", i, exc_info=True)
                failed.append(i)
                layouts.append(_PageLayout(i))
            finally:
                try:
                    page.close()
                except Exception:  # only frees caches: nothing is lost
                    log.debug("page %s did not close cleanly", i, exc_info=True)
    finally:
        try:
            pdf.close()
        except Exception:  # only frees the parser: nothing is lost
            log.debug("the PDF did not close cleanly", exc_info=True)

    return layouts, page_count, meta_title, failed
