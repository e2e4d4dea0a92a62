"""PDF knowledge through the API and CLI, on the real services, with the shared real PDFs."""
import io
from datetime import datetime, timedelta, timezone

import pytest
from sqlalchemy import select

from kbframework.db import session_scope
from kbframework.models import Chunk, Document

MANUAL = "pdfs/libresolar-mppt-1210-hus-manual.pdf"


def upload(admin, data, name="manual.pdf", **form):
    return admin.post("/api/admin/v1/upload/pdf?wait=1", data={"file": (io.BytesIO(data), name), **form},
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
    r = kb_admin.post("/api/admin/v1/upload/pdf", data={
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
    from kbframework.documents import expire_documents

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
    r = subprocess.run([kbf, "doc", "add-pdf", "--org", kb_org["slug"], str(shared_data / MANUAL)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "active" in r.stdout and "chunks" in r.stdout
    bad = Path("/tmp/kbf-not-a.pdf")
    bad.write_text("hello")
    r = subprocess.run([kbf, "doc", "add-pdf", "--org", kb_org["slug"], str(bad)], capture_output=True, text=True)
    assert r.returncode != 0 and "error:" in r.stderr and "Traceback" not in r.stderr
