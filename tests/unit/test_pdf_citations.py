"""Citations a reader can check: running headers and footers removed on two-column pages too,
and the page a multi-page passage cites is the one whose text answers the question."""
from __future__ import annotations

import re

import pytest

pytest.importorskip("fpdf")

from kbframework.ingest.chunker import best_page  # noqa: E402
from kbframework.providers.extractive import _terms  # noqa: E402
from kbframework_pdf.extract import extract_pdf  # noqa: E402
from tests.pdf_manual import CHAPTERS, FACTS, FOOTER, HEADER, manual_pdf  # noqa: E402


@pytest.fixture(scope="module")
def manual():
    return extract_pdf(manual_pdf())


def test_running_headers_and_footers_are_gone_on_one_and_two_column_pages(manual):
    assert manual.page_count == 10
    for page in manual.pages:
        text = page.text
        assert HEADER not in text and "ACME X200 Espresso" not in text, page.number
        assert FOOTER not in text, page.number
        assert not re.search(rf"\bPage {page.number}\b", text), page.number
        chapter = f"{(page.number + 1) // 2}. {CHAPTERS[page.number - 1]}"
        assert chapter not in text, (page.number, chapter)
    removed = set(manual.removed_lines)
    assert HEADER in removed and "4. Cleaning" in removed and FOOTER in removed  # split pieces
    assert f"{HEADER} 1. Safety" in removed  # the same header on a one-column page


def test_facts_and_look_alikes_stay_in_their_columns(manual):
    for (page, _col), (title, text) in FACTS.items():
        body = manual.pages[page - 1].text
        assert title in body, (page, title)
        assert " ".join(text.split()) in " ".join(body.split()), (page, title)
    assert "X200" not in manual.pages[6].text.replace(HEADER, "")  # page 7 is about the X300 only


def _meta(pages: list[tuple[int, str]]):
    content, offs = "", []
    for number, text in pages:
        offs.append([number, len(content)])
        content += text + "\n\n"
    return {"page_offsets": offs}, content


X300 = ("Purging the X300 steam wand. After frothing milk with the X300, open the steam valve of the "
        "X300 for 8 seconds to purge the steam wand, then wipe the steam wand so milk does not dry.")
X200 = "Purging the X200 steam wand. On the X200, purge the wand for 3 seconds after frothing."
CASES = [
    # (pages, question, expected page)
    ([(7, X300), (8, X200)], "How long should I purge the X200 steam wand after frothing milk?", 8),
    ([(7, X200), (8, X300)], "How long should I purge the X200 steam wand after frothing milk?", 7),
    ([(7, X300), (8, X200)], "How long should I purge the X300 steam wand after frothing milk?", 7),
    ([(3, "Descaling the X300: the X300 needs 750 ml of descaler solution; rinse the descaler out."),
      (4, "Descaling the X200: the X200 takes 500 ml of solution.")],
     "How much descaler solution does the X200 need?", 4),
    # no identity in the question: the page with the rarer shared words wins
    ([(1, "The grinder and the boiler and the pump."), (2, "The grinder burr can be replaced with a key.")],
     "how do I replace the grinder burr", 2),
    # words spread over one page do not beat one sentence that has them together
    ([(5, "Fuse. Cover. Service. Blade."), (6, "The blade fuse sits behind the service cover.")],
     "where is the blade fuse, behind which cover?", 6),
]


@pytest.mark.parametrize("pages,question,expected", CASES, ids=[c[1][:40] + str(c[2]) for c in CASES])
def test_best_page_is_the_page_that_answers(pages, question, expected):
    meta, content = _meta(pages)
    assert best_page(meta, content, _terms(question)) == expected


def test_best_page_without_pages_or_terms():
    assert best_page({}, "text", {"x"}) is None
    meta, content = _meta([(1, "a b c"), (2, "d e f")])
    assert best_page(meta, content, set()) is None
    assert best_page(meta, content, {"zzz"}) is None  # nothing matches: no page claimed
