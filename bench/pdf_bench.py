"""Issue 6: pages per second extracted and indexed for a 200-page PDF, and peak worker memory.

The PDF is generated (fpdf2, a test dependency): running header and footer with page numbers,
two paragraphs a page. The upload goes through the plugin's service and a real
`kbf worker --burst` process does the extraction and indexing.
"""
from __future__ import annotations

import random
import subprocess
import sys
import time
from pathlib import Path


def make_pdf(pages: int = 200) -> bytes:
    from fpdf import FPDF

    rng = random.Random(7)
    words = ("battery charge controller voltage current solar panel load output fuse cable terminal "
             "temperature sensor display error reset warranty install mount ground").split()
    pdf = FPDF()
    pdf.set_auto_page_break(False)
    for p in range(1, pages + 1):
        pdf.add_page()
        pdf.set_font("Helvetica", size=9)
        pdf.set_xy(10, 8)
        pdf.cell(0, 5, "ACME MPPT 2000 - Installation and operating manual")
        pdf.set_xy(10, 20)
        pdf.set_font("Helvetica", size=11)
        for _ in range(2):
            text = " ".join(" ".join(rng.choice(words) for _ in range(rng.randint(8, 16))).capitalize() + "."
                            for _ in range(9))
            pdf.multi_cell(190, 5.5, text)
            pdf.ln(3)
        pdf.set_xy(10, 285)
        pdf.set_font("Helvetica", size=9)
        pdf.cell(0, 5, f"Page {p} of {pages}")
    return bytes(pdf.output())


def run(pages: int = 200) -> dict:
    from kbframework.orgs.accounts import create_org
    from kbframework.db import session_scope
    from kbframework.sources.uploads import upload

    data = make_pdf(pages)
    with session_scope() as s:
        org = create_org(s, f"PDF bench {time.time()}", "UTC", f"pdf-bench-{int(time.time())}")
        oid = org.id
    t0 = time.perf_counter()
    doc = upload(oid, "pdf", data, "bench.pdf", title="Bench manual")
    kbf = str(Path(sys.executable).parent / "kbf")
    worker = subprocess.Popen([kbf, "worker", "--burst", "--queues", "ingest"])
    peak = 0.0
    from bench.core_bench import rss_peak_mb

    while worker.poll() is None:
        peak = max(peak, rss_peak_mb(worker.pid))
        time.sleep(0.1)
    elapsed = time.perf_counter() - t0
    with session_scope() as s:
        from kbframework.models import Document

        d = s.get(Document, doc["id"])
        status, chunks = d.status, d.chunk_count
    out = {"pages": pages, "seconds": round(elapsed, 2), "pages_per_s": round(pages / elapsed, 1),
           "status": status, "chunks": chunks, "worker_peak_rss_mb": round(peak, 1)}
    print(f"pdf: {pages} pages in {elapsed:.1f}s → {out['pages_per_s']} pages/s, {chunks} chunks, "
          f"worker peak {peak:.0f} MB", flush=True)
    return out
