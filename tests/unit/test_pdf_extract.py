"""Tests for kbframework_pdf.extract (PDF text extraction).

Generated PDFs are built with fpdf2 (test dependency); the real-world PDFs are
read from shared/data/pdfs (beside the repository, or $KB_PDF_DATA_DIR) and the
tests using them are skipped when that folder is missing.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "plugins" / "pdf"))

from kbframework_pdf.extract import (  # noqa: E402
    ERROR_CODES,
    PdfError,
    PdfExtraction,
    check_pdf_bytes,
    extract_pdf,
)

fpdf = pytest.importorskip("fpdf")
from fpdf import FPDF  # noqa: E402


def _data_dir() -> Path | None:
    candidates = []
    if os.environ.get("KB_PDF_DATA_DIR"):
        candidates.append(Path(os.environ["KB_PDF_DATA_DIR"]))
    candidates += [ROOT.parent / "shared" / "data" / "pdfs", ROOT / "shared" / "data" / "pdfs"]
    for c in candidates:
        if (c / "pdf_inventory.json").is_file():
            return c
    return None


DATA = _data_dir()
needs_data = pytest.mark.skipif(DATA is None, reason="shared/data/pdfs not available")


def lines_of(text: str) -> list[str]:
    return [l for l in text.split("\n") if l.strip()]


def new_pdf() -> FPDF:
    pdf = FPDF(format="A4")
    pdf.core_fonts_encoding = "windows-1252"  # lets the core fonts draw "•"
    pdf.set_auto_page_break(False)
    return pdf


def out(pdf: FPDF) -> bytes:
    return bytes(pdf.output())


def simple_pdf(pages: int = 3, text: str = "Hello world, this is page {n}.") -> bytes:
    pdf = new_pdf()
    for n in range(1, pages + 1):
        pdf.add_page()
        pdf.set_font("helvetica", size=12)
        pdf.text(20, 30, text.format(n=n))
    return out(pdf)


def assert_error(code: str, fn, *args, **kwargs) -> PdfError:
    with pytest.raises(PdfError) as info:
        fn(*args, **kwargs)
    err = info.value
    assert err.code == code, (err.code, err.message)
    assert err.code in ERROR_CODES
    assert len(err.message) > 20 and err.message.endswith(".")
    assert str(err) == err.message
    return err


# --------------------------------------------------------------------------- #
# Generated documents: layout
# --------------------------------------------------------------------------- #

N_HF_PAGES = 9


def body_lines(p: int) -> list[str]:
    return [f"Body paragraph {p}.{i}: the calibration value for unit {p * 10 + i} is stable." for i in range(1, 6)]


@pytest.fixture(scope="module")
def header_footer_pdf() -> bytes:
    """9 pages: alternating running headers (even pages: number left,
    odd pages: number right), a constant footer, and "Page N of 9".  The body
    lines look alike from page to page (only digits change) and must stay."""
    pdf = new_pdf()
    for p in range(1, N_HF_PAGES + 1):
        pdf.add_page()
        pdf.set_font("helvetica", size=9)
        if p % 2 == 0:
            pdf.text(20, 12, f"{p}    Acme Widget Manual, Edition 2024")
        else:
            pdf.text(20, 12, "Chapter overview and safety notes")
            pdf.text(180, 12, str(p))
        pdf.set_font("helvetica", size=11)
        y = 30
        for line in body_lines(p):
            pdf.text(20, y, line)
            y += 12
        pdf.set_font("helvetica", size=9)
        pdf.text(20, 282, "Acme Corporation - Confidential")
        pdf.text(95, 289, f"Page {p} of {N_HF_PAGES}")
    return out(pdf)


def test_running_headers_and_footers_removed_body_kept(header_footer_pdf):
    res = extract_pdf(header_footer_pdf)
    assert res.page_count == N_HF_PAGES
    assert [p.number for p in res.pages] == list(range(1, N_HF_PAGES + 1))
    for page in res.pages:
        # exactly the body lines, in order: nothing of the headers/footers left
        assert lines_of(page.text) == body_lines(page.number), page.number
    removed = set(res.removed_lines)
    assert "Acme Corporation - Confidential" in removed
    assert "Page 4 of 9" in removed
    assert "4 Acme Widget Manual, Edition 2024" in removed  # even-page header (4 of 9 pages)
    assert "Chapter overview and safety notes 5" in removed  # odd-page header
    assert not any(r.startswith("Body paragraph") for r in removed)


def test_standalone_page_number_removed_single_page():
    pdf = new_pdf()
    pdf.add_page()
    pdf.set_font("helvetica", size=11)
    pdf.text(20, 30, "Only one page of text lives here.")
    pdf.text(20, 40, "The number 1 below is its page number.")
    pdf.text(104, 285, "- 1 -")
    res = extract_pdf(out(pdf))
    assert lines_of(res.pages[0].text) == [
        "Only one page of text lives here.",
        "The number 1 below is its page number.",
    ]
    assert res.removed_lines == ["- 1 -"]


LEFT = [f"Left sentence {w} talks about apples and orchards in the valley." for w in
        ("one", "two", "three", "four", "five", "six", "seven", "eight")]
RIGHT = [f"Right sentence {w} describes rivers and bridges near the coast." for w in
         ("one", "two", "three", "four", "five", "six", "seven", "eight")]


@pytest.fixture(scope="module")
def two_column_pdf() -> bytes:
    pdf = new_pdf()
    pdf.add_page()
    pdf.set_font("helvetica", "B", size=16)
    pdf.set_xy(15, 15)
    pdf.cell(180, 10, "Two Column Test Document", align="C")
    pdf.set_font("helvetica", size=10)
    pdf.set_xy(15, 35)
    pdf.multi_cell(85, 5, " ".join(LEFT), align="J")
    pdf.set_xy(110, 35)  # same baselines as the left column
    pdf.multi_cell(85, 5, " ".join(RIGHT), align="J")
    return out(pdf)


def test_two_columns_fixture_really_interleaves(two_column_pdf):
    """Sanity check of the fixture: naive line-by-line extraction mixes columns."""
    import pdfplumber

    with pdfplumber.open(io.BytesIO(two_column_pdf)) as pdf:
        naive = pdf.pages[0].extract_text()
    assert any("Left" in l and "Right" in l for l in naive.split("\n"))


def test_two_columns_reading_order(two_column_pdf):
    res = extract_pdf(two_column_pdf)
    text = res.pages[0].text
    assert lines_of(text)[0] == "Two Column Test Document"
    for sentence in LEFT + RIGHT:
        assert sentence in text, sentence  # sentences intact: lines joined, columns not mixed
    last_left = max(text.index(s) for s in LEFT)
    first_right = min(text.index(s) for s in RIGHT)
    assert last_left < first_right
    # each column is one paragraph
    assert lines_of(text)[1:] == [" ".join(LEFT), " ".join(RIGHT)]
    assert res.title == "Two Column Test Document"


def test_table_rows_on_one_line_and_not_duplicated():
    pdf = new_pdf()
    pdf.add_page()
    pdf.set_font("helvetica", size=11)
    pdf.set_xy(15, 20)
    pdf.multi_cell(180, 6, "Inventory of the spare parts follows below.")
    pdf.ln(4)
    with pdf.table(col_widths=(60, 40, 40), width=140) as table:
        for row in [("Part", "Quantity", "Colour"), ("Widget", "12", "Blue"),
                    ("Gadget", "7", "Green"),
                    ("Sprocket assembly for the heavy duty conveyor belt", "3", "Red")]:
            r = table.row()
            for cell in row:
                r.cell(cell)
    pdf.ln(6)
    pdf.multi_cell(180, 6, "End of the inventory list.")
    text = extract_pdf(out(pdf)).pages[0].text
    assert lines_of(text) == [
        "Inventory of the spare parts follows below.",
        "Part | Quantity | Colour",
        "Widget | 12 | Blue",
        "Gadget | 7 | Green",
        # a cell wrapped over two lines still gives one row
        "Sprocket assembly for the heavy duty conveyor belt | 3 | Red",
        "End of the inventory list.",
    ]
    assert text.count("Widget") == 1 and text.count("conveyor") == 1


def test_hyphenation_paragraphs_and_lists():
    pdf = new_pdf()
    pdf.add_page()
    pdf.set_font("helvetica", size=11)
    lines = [
        "The device was built by a well known and trusted manu-",
        "facturer of solar equipment and uses state-of-the-art",
        "components in every single unit that leaves the plant.",
        None,
        "\u2022 First item of the list",
        "\u2022 Second item of the list",
        "1. Numbered step one",
        "2. Numbered step two",
        None,
        "A closing paragraph follows the list and it is long enough",
        "to wrap onto a second line of text.",
    ]
    y = 20.0
    for line in lines:
        if line is None:
            y += 6
            continue
        pdf.text(20, y, line)
        y += 5.5
    text = extract_pdf(out(pdf)).pages[0].text
    assert text.split("\n") == [
        "The device was built by a well known and trusted manufacturer of solar equipment "
        "and uses state-of-the-art components in every single unit that leaves the plant.",
        "",
        "\u2022 First item of the list",
        "\u2022 Second item of the list",
        "1. Numbered step one",
        "2. Numbered step two",
        "",
        "A closing paragraph follows the list and it is long enough to wrap onto a second line of text.",
    ]


# --------------------------------------------------------------------------- #
# Generated documents: bad files
# --------------------------------------------------------------------------- #


def test_password_protected_pdf_is_encrypted_error():
    pdf = new_pdf()
    pdf.add_page()
    pdf.set_font("helvetica", size=12)
    pdf.text(20, 30, "Top secret text.")
    pdf.set_encryption(owner_password="owner-pw", user_password="user-pw")
    err = assert_error("encrypted", extract_pdf, out(pdf))
    assert "password" in err.message


def test_owner_password_only_pdf_is_readable():
    pdf = new_pdf()
    pdf.add_page()
    pdf.set_font("helvetica", size=12)
    pdf.text(20, 30, "Readable although restricted.")
    pdf.set_encryption(owner_password="owner-pw")  # empty user password
    res = extract_pdf(out(pdf))
    assert res.pages[0].text == "Readable although restricted."


def test_truncated_pdf_is_corrupt():
    data = simple_pdf(3)
    assert_error("corrupt", extract_pdf, data[: len(data) // 2])
    assert_error("corrupt", extract_pdf, data[:-12])  # only the trailer cut off
    # a cut file with an end marker glued back on is still caught
    assert_error("corrupt", extract_pdf, data[: len(data) // 2] + b"\n%%EOF\n")


def test_damaged_content_is_corrupt():
    data = simple_pdf(3)
    damaged = data[:300] + b"\x00garbage\x00" * 50 + data[700:]
    assert_error("corrupt", extract_pdf, damaged)
    assert_error("corrupt", extract_pdf, b"%PDF-1.4\n" + bytes(range(256)) * 20 + b"\n%%EOF\n")


def test_not_a_pdf_by_content(tmp_path):
    png = tmp_path / "picture.pdf"  # a PNG with a .pdf name
    png.write_bytes(b"\x89PNG\r\n\x1a\n" + b"\x00" * 200)
    assert_error("not_a_pdf", extract_pdf, png)
    txt = tmp_path / "notes.pdf"
    txt.write_text("Just some text pretending to be a PDF.\n")
    assert_error("not_a_pdf", extract_pdf, str(txt))
    assert_error("not_a_pdf", check_pdf_bytes, b"<html><body>%PDF-</body>" + b" " * 2000)
    # the signature may follow a little junk (within the first 1024 bytes)...
    check_pdf_bytes(b"\xef\xbb\xbf junk \n%PDF-1.7\n")
    # ...but not more
    assert_error("not_a_pdf", check_pdf_bytes, b" " * 1100 + b"%PDF-1.7\n")


def test_empty_file_and_zero_pages():
    assert_error("empty", extract_pdf, b"")
    objs = [b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [] /Count 0 >>"]
    data = b"%PDF-1.4\n"
    offsets = []
    for i, obj in enumerate(objs, 1):
        offsets.append(len(data))
        data += b"%d 0 obj\n" % i + obj + b"\nendobj\n"
    xref = len(data)
    data += b"xref\n0 3\n0000000000 65535 f \n" + b"".join(b"%010d 00000 n \n" % o for o in offsets)
    data += b"trailer\n<< /Size 3 /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % xref
    assert_error("empty", extract_pdf, data)


def test_image_only_pdf_has_no_text_layer(tmp_path):
    from PIL import Image

    img = tmp_path / "scan.png"
    Image.new("RGB", (200, 100), (240, 240, 240)).save(img)
    pdf = new_pdf()
    pdf.add_page()
    pdf.image(str(img), x=10, y=10, w=150)
    err = assert_error("no_text_layer", extract_pdf, out(pdf))
    assert "OCR" in err.message


def test_blank_pages_have_no_text_layer():
    pdf = new_pdf()
    pdf.add_page()
    pdf.add_page()
    assert_error("no_text_layer", extract_pdf, out(pdf))


def test_size_and_page_caps(tmp_path):
    data = simple_pdf(5)
    assert_error("too_large", extract_pdf, data, max_bytes=len(data) - 1)
    path = tmp_path / "big.pdf"
    path.write_bytes(data)
    assert_error("too_large", extract_pdf, path, max_bytes=1000)
    assert_error("too_large", check_pdf_bytes, data, max_bytes=100)
    err = assert_error("too_many_pages", extract_pdf, data, max_pages=3)
    assert "5 pages" in err.message
    assert extract_pdf(data, max_pages=5).page_count == 5


def test_inputs_and_result_fields(tmp_path):
    data = simple_pdf(2)
    path = tmp_path / "doc.pdf"
    path.write_bytes(data)
    by_bytes = extract_pdf(data)
    by_path = extract_pdf(path)
    by_str = extract_pdf(str(path))
    by_file = extract_pdf(io.BytesIO(data))
    for res in (by_bytes, by_path, by_str, by_file):
        assert isinstance(res, PdfExtraction)
        assert res.sha256 == hashlib.sha256(data).hexdigest()
        assert [p.text for p in res.pages] == ["Hello world, this is page 1.", "Hello world, this is page 2."]
        assert res.failed_pages == []
    assert by_bytes.text == "Hello world, this is page 1.\n\nHello world, this is page 2."


def test_pdf_error_is_picklable():
    import pickle

    err = pickle.loads(pickle.dumps(PdfError("corrupt", "Broken file.")))
    assert (err.code, err.message) == ("corrupt", "Broken file.")


# --------------------------------------------------------------------------- #
# Real-world documents
# --------------------------------------------------------------------------- #

_cache: dict[str, tuple[PdfExtraction, float]] = {}


def real(name: str) -> PdfExtraction:
    """Extract a real PDF once per test session (GeoTopo takes seconds)."""
    if name not in _cache:
        start = time.perf_counter()
        res = extract_pdf(DATA / name)
        _cache[name] = (res, time.perf_counter() - start)
    return _cache[name][0]


@pytest.fixture(scope="module")
def inventory() -> dict:
    return json.loads((DATA / "pdf_inventory.json").read_text())


@needs_data
@pytest.mark.parametrize(
    "name",
    [
        "libresolar-mppt-1210-hus-manual.pdf",
        "federal-register-2020-17221.pdf",
        "WARN-Report-for-7-1-2015-to-03-25-2016.pdf",
        "multicolumn.pdf",
        "GeoTopo-komprimiert.pdf",
    ],
)
def test_real_pdf_basics(name, inventory):
    res = real(name)
    inv = inventory[name]
    assert res.sha256 == inv["sha256"]
    assert res.page_count == inv["pages"] == len(res.pages)
    assert res.failed_pages == []
    assert "(cid:" not in res.text


@needs_data
def test_libresolar_headers_footers_words_and_table():
    res = real("libresolar-mppt-1210-hus-manual.pdf")
    assert res.title == "MPPT 1210 HUS"
    assert "MPPT 1210 HUS 2021-05-02" in res.removed_lines
    assert "Libre Solar / Martin Jäger 7" in res.removed_lines
    for page in res.pages[1:]:
        lines = lines_of(page.text)
        assert lines, page.number
        assert not lines[0].startswith("MPPT 1210 HUS"), page.number
        assert not any(l.startswith("Libre Solar / Martin Jäger") for l in lines), page.number
    p3 = res.pages[2].text
    # words are separated (naive extraction glues "LibreSolar/MartinJäger")
    assert "Thanks for using this Libre Solar charge controller." in lines_of(p3)
    # a hyphenated line break re-joined, a real compound kept
    assert "to the best of our knowledge." in p3
    assert "by the use or non-use of the information" in p3
    # list items on their own lines
    assert "\u2022 Ensure that the charge controller is configured correctly for the used battery type." in lines_of(p3)
    p9 = lines_of(res.pages[8].text)
    assert "Nominal system voltage | 12 V" in p9
    assert "Maximum current | 2.0 A | total for both ports" in p9
    # table of contents entries lose their dot leaders
    assert "3.2 Three-stage battery charging | 4" in lines_of(res.pages[1].text)


@needs_data
def test_federal_register_columns_and_alternating_headers():
    res = real("federal-register-2020-17221.pdf")
    text = res.text
    assert "Federal Register / Vol. 85, No. 152 / Thursday, August 6, 2020 / Proposed Rules" not in text
    assert "VerDate" not in text
    assert "SLASOPORP" not in text  # rotated print marks in the margin
    assert "47699" not in res.pages[1].text
    assert "47700 Federal Register / Vol. 85, No. 152 / Thursday, August 6, 2020 / Proposed Rules" in res.removed_lines
    p1 = res.pages[0].text
    # three columns, read column by column
    a = p1.index("This section of the FEDERAL REGISTER contains notices to the public")
    b = p1.index("\u2022 Fax: 202\u2013493\u20132251.")
    c = p1.index("proposal, explain the reason for any recommended change, and include supporting data.")
    assert a < b < c
    assert "AGENCY: Federal Aviation Administration (FAA), DOT." in lines_of(p1)
    # URL broken over two lines is re-joined
    assert "internet https://www.myboeingfleet.com." in p1
    # masthead above the column body stays a block of its own
    assert lines_of(p1)[:4] == ["Proposed Rules", "Federal Register", "Vol. 85, No. 152", "Thursday, August 6, 2020"]


@needs_data
def test_warn_report_table_rows():
    res = real("WARN-Report-for-7-1-2015-to-03-25-2016.pdf")
    p1 = lines_of(res.pages[0].text)
    assert "Notice Date | Effective | Received | Company | City | No. Of | Layoff/Closure" in p1
    # dates drawn with overlapping space glyphs come out whole
    assert "06/22/2015 | 03/25/2016 | 07/01/2015 | Maxim Integrated Product | San Jose | 150 | Closure Permanent" in p1
    # rows that repeat at the top of two pages are data, not running headers
    assert res.removed_lines == []
    assert "Total | 632 | 53,454 | 295 | 11 | 90 | 212 | 12 | 12" in lines_of(res.pages[15].text)
    assert sum(res.pages[0].text.count(s) for s in ["Maxim Integrated Product | San Jose | 150"]) == 1


@needs_data
def test_multicolumn_reading_order_footers_table():
    res = real("multicolumn.pdf")
    assert res.title == "Two-Column Document with Lorem Ipsum"
    assert res.removed_lines == ["1", "2", "3"]
    p1 = res.pages[0].text
    assert lines_of(p1)[:4] == ["Two-Column Document with Lorem Ipsum", "Your Name", "January 3, 2024", "Abstract"]
    left_end = p1.index("Vivamus viverra fermentum felis. Donec nonummy")
    right_start = p1.index("pellentesque ante. Phasellus adipiscing semper elit.")
    assert p1.index("This is a sample document with two columns filled with Lorem Ipsum text.") < left_end < right_start
    assert "Lorem ipsum dolor sit amet, consectetuer adipiscing elit." in p1  # "adip-\niscing"
    for page in res.pages:
        assert lines_of(page.text)[-1] not in {"1", "2", "3"}
    p3 = lines_of(res.pages[2].text)
    assert "Austria | 8.9 | 83,879 | Vienna | German" in p3
    assert "Finland | 5.5 | 338,424 | Helsinki | Finnish, Swedish" in p3


@needs_data
def test_geotopo_chapter_headers_with_page_numbers():
    res = real("GeoTopo-komprimiert.pdf")
    assert res.title == "Geometrie und Topologie"
    assert "iii" in res.removed_lines  # roman page number of the front matter
    for header in ["7 1.2. METRISCHE RÄUME", "8 1.2. METRISCHE RÄUME", "52 3.3. ÜBERLAGERUNGEN", "2 Inhaltsverzeichnis"]:
        assert header in res.removed_lines
    # physical page 10 is printed page 7
    assert not res.pages[9].text.startswith("7 1.2.")
    assert lines_of(res.pages[9].text)[0] == "Also für n = 1:"
    # the table of contents keeps its first entry (it starts with a number too)
    assert lines_of(res.pages[3].text)[:2] == ["Inhaltsverzeichnis", "1 Topologische Grundbegriffe | 2"]
    assert "Nach Voraussetzung kann K mit endlich vielen offenen Kugeln" in res.pages[20].text
