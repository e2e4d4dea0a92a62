"""How a re-index cuts its documents into jobs: by count and by the text held at once."""
from kbframework.ingest import queue
from kbframework.ingest.queue import job_batches


def test_jobs_are_cut_at_the_document_count():
    ids = [(str(i), 10) for i in range(queue.JOB_DOCUMENTS * 2 + 3)]
    sizes = [len(b) for b in job_batches(ids)]
    assert sizes == [queue.JOB_DOCUMENTS, queue.JOB_DOCUMENTS, 3]


def test_jobs_are_cut_once_their_text_reaches_the_limit(monkeypatch):
    monkeypatch.setattr(queue, "JOB_CHARACTERS", 100)
    got = job_batches([("a", 60), ("b", 30), ("c", 20), ("d", 150), ("e", 5)])
    assert got == [["a", "b", "c"], ["d"], ["e"]]  # order kept, nothing dropped


def test_no_documents_no_jobs():
    assert job_batches([]) == []
