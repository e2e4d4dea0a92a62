"""A bulk load's ingest jobs are few and full: each job pays a fixed cost (its documents read,
its last write waited for, RQ's bookkeeping), so a sync queues ``JOB_DOCUMENTS`` documents a
job rather than one job per applied batch, and every document still ends indexed."""
from __future__ import annotations

import math
import uuid

import pytest
from rq.registry import FinishedJobRegistry
from sqlalchemy import func, select

from kbframework import hookimpl
from kbframework.db import session_scope
from kbframework.ingest.queue import JOB_DOCUMENTS
from kbframework.jobs.queues import queue
from kbframework.models import Chunk, Document
from kbframework.sources.sync import BATCH
from kbframework.types import DocumentDraft, RawRecord, SourceConnector

RECORDS = 2 * JOB_DOCUMENTS + BATCH // 2  # two full jobs and a partial one


class BulkShop(SourceConnector):
    name = "bulkshop"
    label = "Bulk shop"
    supports_sync = True
    records = RECORDS
    words = 0  # extra words in each description

    def fetch_all(self, config, ctx):
        for i in range(self.records):
            yield RawRecord(external_id=str(i), payload={"n": i}, kind="product")

    def fetch_changed(self, config, since, ctx):
        return self.fetch_all(config, ctx)

    def fetch_one(self, config, external_id, ctx):
        return None

    def normalize(self, record, config, ctx):
        n = record.payload["n"]
        return DocumentDraft(title=f"Lamp {n}", type="bulk_product", document_role="product",
                             external_id=record.external_id,
                             normalized_content=f"# Lamp {n}\n\nA brass desk lamp, model {n}, with a linen shade."
                             + " Polished brass." * self.words)


class BulkShopPlugin:
    @hookimpl
    def kb_source_types(self):
        return [BulkShop()]


@pytest.fixture
def bulkshop(kb_register_plugin):
    BulkShop.records, BulkShop.words = RECORDS, 0
    kb_register_plugin(BulkShopPlugin(), "test-bulkshop")
    return BulkShop


def _sync_and_job_sizes(admin, kb_drain) -> tuple[str, list[int]]:
    r = admin.post("/api/admin/v1/sources", json={"type": "bulkshop", "name": "Lamps", "config": {}})
    assert r.status_code == 201, r.get_data(as_text=True)
    sid = r.get_json()["id"]
    r = admin.post(f"/api/admin/v1/sources/{sid}/sync", json={"kind": "full"})
    assert r.status_code == 202, r.get_data(as_text=True)
    kb_drain()
    q = queue("ingest")
    jobs = [q.fetch_job(j) for j in FinishedJobRegistry(queue=q).get_job_ids()]
    return sid, sorted((len(j.args[0]) for j in jobs if j is not None and j.func_name.endswith("ingest_documents_job")),
                       reverse=True)


def test_a_sync_queues_full_ingest_jobs_and_indexes_every_document(kb_admin, bulkshop, kb_drain):
    assert JOB_DOCUMENTS > BATCH  # a job takes several applied batches
    sid, sizes = _sync_and_job_sizes(kb_admin, kb_drain)
    assert sizes == [JOB_DOCUMENTS, JOB_DOCUMENTS, RECORDS - 2 * JOB_DOCUMENTS]
    assert len(sizes) == math.ceil(RECORDS / JOB_DOCUMENTS)
    with session_scope() as s:
        states = dict(s.execute(select(Document.status, func.count()).where(
            Document.source_id == uuid.UUID(sid)).group_by(Document.status)).all())
        chunks = s.scalar(select(func.count()).select_from(Chunk).join(Document, Document.id == Chunk.document_id)
                          .where(Document.source_id == uuid.UUID(sid)))
    assert states == {"active": RECORDS} and chunks == RECORDS


def test_a_connector_without_settings_takes_none_and_refuses_a_stray_one(kb_admin, bulkshop):
    r = kb_admin.post("/api/admin/v1/sources", json={"type": "bulkshop", "name": "Lamps", "config": {"per_page": 5}})
    assert r.status_code == 400 and "per_page" in str(r.get_json()["error"]), r.get_data(as_text=True)
    r = kb_admin.post("/api/admin/v1/sources", json={"type": "bulkshop", "name": "Lamps", "config": "all"})
    assert r.status_code == 400 and r.get_json()["error"]["message"] == "'config' must be an object."
    assert kb_admin.get("/api/admin/v1/sources").get_json()["items"] == []
    r = kb_admin.post("/api/admin/v1/sources", json={"type": "bulkshop", "name": "Lamps"})
    assert r.status_code == 201 and r.get_json()["config"] == {}


def test_long_documents_make_smaller_jobs(kb_admin, bulkshop, kb_drain, monkeypatch):
    """A job's documents share the worker's memory: once their text reaches JOB_CHARACTERS
    the job is queued with fewer than JOB_DOCUMENTS (checked after each applied batch)."""
    from kbframework.ingest import queue as ingest_queue

    monkeypatch.setattr(ingest_queue, "JOB_CHARACTERS", 3 * BATCH * 1_000)  # three applied batches of long documents
    bulkshop.records, bulkshop.words = 4 * BATCH, 70  # about 1,100 characters each
    sid, sizes = _sync_and_job_sizes(kb_admin, kb_drain)
    assert sizes == [3 * BATCH, BATCH], sizes  # not one job of 200
    with session_scope() as s:
        states = dict(s.execute(select(Document.status, func.count()).where(
            Document.source_id == uuid.UUID(sid)).group_by(Document.status)).all())
    assert states == {"active": 4 * BATCH}
