"""PDF knowledge through the API and CLI, on the real services, with the shared real PDFs."""
import io
import re
from datetime import datetime, timedelta, timezone

import pytest
from sqlalchemy import select

from kbframework.db import session_scope
from kbframework.models import Chunk, Document
from kbframework.types import EmbeddingProvider

MANUAL = "pdfs/libresolar-mppt-1210-hus-manual.pdf"


def upload(admin, data, name="manual.pdf", **form):
    return admin.post("/api/admin/v1/sources/pdf/upload?wait=1", data={"file": (io.BytesIO(data), name), **form},
                      content_type="multipart/form-data")


def test_upload_extract_and_cite_pages(kb_admin, shared_data):
    r = upload(kb_admin, (shared_data / MANUAL).read_bytes(), "mppt.pdf", title="MPPT 1210 HUS manual")
    assert r.status_code == 201, r.get_data(as_text=True)
    doc = r.get_json()
    d = kb_admin.get(f"/api/admin/v1/documents/{doc['id']}").get_json()
    assert d["status"] == "active" and d["type"] == "pdf" and d["document_role"] == "support"
    assert d["chunks"] and all(c["pages"] for c in d["chunks"])
    assert d["chunks"][-1]["metadata"]["page_end"] >= 8
    assert "removed_lines" in d["metadata"]
    out = kb_admin.post("/api/admin/v1/chat", json={"question": "What is the maximum charge current?"}).get_json()
    assert out["sources"] and out["sources"][0]["document_id"] == doc["id"]
    assert out["sources"][0]["pages"].startswith("page ")


@pytest.mark.parametrize("data,code", [
    (b"\x89PNG\r\n\x1a\n" + b"0" * 200, "pdf_not_a_pdf"),
    (b"just some text pretending to be a pdf", "pdf_not_a_pdf"),
])
def test_bad_files_change_nothing(kb_admin, data, code):
    r = upload(kb_admin, data, "evil.pdf")
    assert r.status_code == 400 and r.get_json()["error"]["code"] == code
    with session_scope() as s:
        assert s.scalars(select(Document)).all() == []


def test_truncated_pdf_is_a_document_error(kb_admin, shared_data):
    data = (shared_data / MANUAL).read_bytes()
    r = upload(kb_admin, data[: len(data) // 2], "broken.pdf")
    assert r.status_code == 201
    d = r.get_json()
    assert d["status"] == "error" and d["last_error"]


def test_replace_keeps_old_chunks_until_new_ones_are_in(kb_admin, shared_data, kb_drain):
    doc = upload(kb_admin, (shared_data / MANUAL).read_bytes(), "mppt.pdf").get_json()
    with session_scope() as s:
        old = s.scalars(select(Chunk.id).where(Chunk.document_id == doc["id"])).all()
    r = kb_admin.post("/api/admin/v1/sources/pdf/upload", data={
        "file": (io.BytesIO((shared_data / "pdfs/multicolumn.pdf").read_bytes()), "v2.pdf"),
        "replace_document_id": doc["id"]}, content_type="multipart/form-data")
    assert r.status_code == 200
    # before the job runs the old chunks still answer
    out = kb_admin.post("/api/admin/v1/chat", json={"question": "charge controller battery"}).get_json()
    assert any(s["document_id"] == doc["id"] for s in out["sources"])
    kb_drain()
    with session_scope() as s:
        new = s.scalars(select(Chunk.id).where(Chunk.document_id == doc["id"])).all()
        assert new and not set(new) & set(old)
        assert s.get(Document, doc["id"]).metadata_["filename"] == "v2.pdf"


def test_expiry_and_restore(kb_admin):
    past = (datetime.now(timezone.utc) - timedelta(days=1)).isoformat()
    r = kb_admin.post("/api/admin/v1/documents/manual?wait=1", json={
        "title": "Last night's party", "body": "The Friday party at Warehouse with DJ Test.", "role": "event",
        "event_start": (datetime.now(timezone.utc) - timedelta(days=1, hours=5)).isoformat(), "event_end": past})
    doc = r.get_json()
    from kbframework.sources.documents import expire_documents

    assert expire_documents()["expired"] == 1
    d = kb_admin.get(f"/api/admin/v1/documents/{doc['id']}").get_json()
    assert d["status"] == "expired"
    out = kb_admin.post("/api/admin/v1/chat", json={"question": "party at Warehouse DJ Test"}).get_json()
    assert out["sources"] == []
    until = (datetime.now(timezone.utc) + timedelta(days=2)).isoformat()
    r = kb_admin.post(f"/api/admin/v1/documents/{doc['id']}/restore", json={"until": until})
    assert r.status_code == 200 and r.get_json()["status"] == "active"
    out = kb_admin.post("/api/admin/v1/chat", json={"question": "party at Warehouse DJ Test"}).get_json()
    assert out["sources"] and out["sources"][0]["document_id"] == doc["id"]


def test_cli_add_pdf(kb_services, kb_org, shared_data):
    import subprocess
    import sys
    from pathlib import Path

    kbf = str(Path(sys.executable).parent / "kbf")
    r = subprocess.run([kbf, "doc", "add", "--org", kb_org["slug"], "--type", "pdf", str(shared_data / MANUAL)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "active" in r.stdout and "chunks" in r.stdout
    bad = Path("/tmp/kbf-not-a.pdf")
    bad.write_text("hello")
    r = subprocess.run([kbf, "doc", "add", "--org", kb_org["slug"], "--type", "pdf", str(bad)], capture_output=True, text=True)
    assert r.returncode != 0 and "error:" in r.stderr and "Traceback" not in r.stderr


def manual_pdf(pages: int = 20, fact_page: int = 12) -> bytes:
    """A generated manual: a running header and footer, filler text, one fact on one page."""
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_auto_page_break(False)
    filler = ("The controller keeps the battery within its safe range and reports its state on the "
              "display. Check all terminals before you connect the panel. ")
    for p in range(1, pages + 1):
        pdf.add_page()
        pdf.set_font("Helvetica", size=9)
        pdf.set_xy(10, 8)
        pdf.cell(0, 5, "ACME MPPT 2000 - Operating manual")
        pdf.set_xy(10, 20)
        pdf.set_font("Helvetica", size=11)
        body = filler * 6
        if p == fact_page:
            body += ("Replacing the fuse: the main fuse is a 15 ampere blade fuse behind the grey service "
                     "cover; switch the load off before you open it.")
        pdf.multi_cell(190, 5.5, body)
        pdf.set_xy(10, 285)
        pdf.set_font("Helvetica", size=9)
        pdf.cell(0, 5, f"Page {p} of {pages}")
    return bytes(pdf.output())


def test_answer_cites_the_page_the_answer_is_on(kb_admin):
    doc = upload(kb_admin, manual_pdf(), "acme-manual.pdf", title="ACME MPPT 2000 manual").get_json()
    assert doc["status"] == "active", doc
    out = kb_admin.post("/api/admin/v1/chat", json={"question": "Which fuse does it use and where is it?"}).get_json()
    top = out["sources"][0]
    assert top["document_id"] == doc["id"]
    assert "12" in top["pages"], top["pages"]
    assert "15 ampere blade fuse" in " ".join(c["content"] for c in out["debug"]["context"])
    detail = kb_admin.get(f"/api/admin/v1/documents/{doc['id']}").get_json()
    assert "ACME MPPT 2000 - Operating manual" not in detail["normalized_content"]  # running header gone
    assert "Page 12 of 20" not in detail["normalized_content"]  # footer gone


def test_two_column_manual_cites_the_page_that_answers(kb_admin):
    """Facts on two-column pages beside look-alike sections about another model: the cited page
    is the one with the answer, and no running header or footer is left in the text."""
    from tests.pdf_manual import FOOTER, HEADER, manual_pdf

    doc = upload(kb_admin, manual_pdf(), "x200-manual.pdf", title="ACME X200 manual").get_json()
    assert doc["status"] == "active", doc
    detail = kb_admin.get(f"/api/admin/v1/documents/{doc['id']}").get_json()
    text = detail["normalized_content"]
    assert HEADER not in text and FOOTER not in text and "4. Cleaning" not in text
    assert not re.search(r"\bPage \d+\b", text)
    for question, page, fact in [
            ("How long should I purge the X200 steam wand after frothing milk?", 8, "3 seconds"),
            ("How much descaler solution does the X200 take?", 10, "500 ml")]:
        out = kb_admin.post("/api/admin/v1/chat", json={"question": question}).get_json()
        top = out["sources"][0]
        assert top["document_id"] == doc["id"]
        assert "–" in top["page_range"], top  # the passage spans pages: the cited one is chosen
        assert top["pages"] == f"page {page}", (question, top)
        assert fact in top["snippet"], top["snippet"]


def test_encrypted_pdf_is_a_clear_document_error(kb_admin):
    from fpdf import FPDF

    pdf = FPDF()
    pdf.add_page()
    pdf.set_font("Helvetica", size=11)
    pdf.cell(0, 10, "secret")
    pdf.set_encryption(owner_password="owner", user_password="user")
    r = upload(kb_admin, bytes(pdf.output()), "locked.pdf")
    d = r.get_json()
    assert r.status_code == 201 and d["status"] == "error"
    assert "password" in d["last_error"].lower()
    with session_scope() as s:
        assert s.scalars(select(Chunk).where(Chunk.document_id == d["id"])).all() == []


class HashEmbedder(EmbeddingProvider):
    """A second, deterministic embedding model (bag of hashed words), to switch to."""

    name = "hash64"
    model = "test-hash-64"
    dim = 64
    batch_size = 64
    needs_key = False

    def available(self):
        return True

    def embed_batch(self, texts):
        import hashlib
        import math

        out = []
        for t in texts:
            v = [0.0] * self.dim
            for w in t.lower().split():
                v[int(hashlib.md5(w.encode()).hexdigest(), 16) % self.dim] += 1.0
            n = math.sqrt(sum(x * x for x in v)) or 1.0
            out.append([x / n for x in v])
        return out

    def count_tokens(self, text):
        return len(text.split())


def test_embedding_model_switch_serves_answers_throughout(kb_admin, kb_register_plugin, kb_drain):
    from kbframework.hooks.markers import hookimpl
    from kbframework.ingest.pipeline import ingest_documents
    from kbframework.retrieval.search import forget_counts

    class Plugin:
        @hookimpl
        def kb_embedding_providers(self):
            return [HashEmbedder()]

    kb_register_plugin(Plugin(), "hash64")
    a = kb_admin.post("/api/admin/v1/documents/manual?wait=1", json={
        "title": "Return policy", "body": "Items can be returned within 30 days for a refund."}).get_json()
    b = kb_admin.post("/api/admin/v1/documents/manual?wait=1", json={
        "title": "Shipping", "body": "Parcels ship within two business days by courier."}).get_json()
    r = kb_admin.put("/api/admin/v1/settings", json={"embedding_provider": "hash64"})
    assert r.status_code == 200 and r.get_json().get("reindex_queued") is True

    def ask(q):
        out = kb_admin.post("/api/admin/v1/chat", json={"question": q}).get_json()
        return out, {s["document_id"] for s in out["sources"]}

    # before any re-embedding: the old vectors answer
    out, docs = ask("returned within 30 days refund")
    assert a["id"] in docs and not out["debug"]["embedding"]["degraded"]
    # half-way: one document re-embedded with the new model, the other still on the old one
    ingest_documents([a["id"]], force=True)
    forget_counts()
    out, docs = ask("returned within 30 days refund")
    assert set(out["debug"]["embedding"]["models"]) == {"test-hash-64", "wordllama-l2_supercat-256"}
    assert a["id"] in docs
    out, docs = ask("parcels ship courier business days")
    assert b["id"] in docs
    # the queued whole-organization re-index finishes the switch
    kb_drain()
    forget_counts()
    out, docs = ask("parcels ship courier business days")
    assert set(out["debug"]["embedding"]["models"]) == {"test-hash-64"}
    assert b["id"] in docs
    for d in (a, b):
        chunks = kb_admin.get(f"/api/admin/v1/documents/{d['id']}").get_json()["chunks"]
        assert {c["embedding_model"] for c in chunks} == {"test-hash-64"}
