"""A generated espresso-machine manual (fpdf2) for citation tests.

Ten A4 pages: pages 1-4 in one column, pages 5-10 in two columns. Every page has a running
header -- the manual's name on the left, the chapter on the right (the chapter changes every two
pages) -- and a running footer: the support address on the left, "Page N" on the right. On the
two-column pages the column reader splits those lines in two. The facts sit on two-column pages
beside look-alike sections about another model (X300), with the same words and other figures.
"""
from __future__ import annotations

import random

HEADER = "ACME X200 Espresso Machine - User Manual"
FOOTER = "acme.example/support"
CHAPTERS = ["Safety", "Safety", "Setup", "Setup", "Brewing", "Brewing", "Cleaning", "Cleaning",
            "Descaling", "Descaling"]
TWO_COLUMNS = range(5, 11)
WORDS = ("boiler grinder burr hopper tamper portafilter basket crema shot group head gasket pump "
         "thermostat tray tank filter gauge cup warmer lever dial indicator lamp cable plug").split()

# (page, column, section title, text): the facts and their look-alikes
FACTS = {
    (7, 0): ("Purging the X300 steam wand",
             "After frothing milk with the X300, open the steam valve of the X300 for 8 seconds to purge "
             "the steam wand, then wipe the steam wand with a damp cloth so that milk does not dry on the "
             "wand. Milk left in the steam wand of the X300 blocks the wand."),
    (8, 1): ("Purging the X200 steam wand",
             "On the X200, purge the wand for 3 seconds after frothing."),
    (9, 0): ("Descaling the X300",
             "The X300 needs 750 ml of descaler solution in the water tank; run the descaling program of "
             "the X300 until the descaler solution tank is empty, then rinse the descaler out twice."),
    (10, 1): ("Descaling the X200",
              "The X200 takes 500 ml of solution."),
}


def filler(rng: random.Random, sentences: int) -> str:
    return " ".join(" ".join(rng.choice(WORDS) for _ in range(rng.randint(7, 12))).capitalize() + "."
                    for _ in range(sentences))


def manual_pdf() -> bytes:
    from fpdf import FPDF

    rng = random.Random(14)
    pdf = FPDF(format="A4")
    pdf.set_auto_page_break(False)
    for p in range(1, 11):
        pdf.add_page()
        pdf.set_font("Helvetica", size=8)
        pdf.text(15, 10, HEADER)
        pdf.text(160, 10, f"{(p + 1) // 2}. {CHAPTERS[p - 1]}")
        if p not in TWO_COLUMNS:
            pdf.set_xy(15, 20)
            pdf.set_font("Helvetica", size=10)
            pdf.multi_cell(180, 5, filler(rng, 6))
        else:
            for col, x in ((0, 15), (1, 110)):
                pdf.set_xy(x, 20)
                pdf.set_font("Helvetica", size=10)
                pdf.multi_cell(85, 5, filler(rng, 6))
                if (p, col) in FACTS:
                    title, text = FACTS[(p, col)]
                    pdf.set_x(x)
                    pdf.set_font("Helvetica", "B", size=11)
                    pdf.multi_cell(85, 7, title)
                    pdf.set_x(x)
                    pdf.set_font("Helvetica", size=10)
                    pdf.multi_cell(85, 5, text)
        pdf.set_font("Helvetica", size=8)
        pdf.text(15, 290, FOOTER)
        pdf.text(180, 290, f"Page {p}")
    return bytes(pdf.output())
