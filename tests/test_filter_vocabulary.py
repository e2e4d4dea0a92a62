"""An organization's filter vocabulary (the tags and categories of its products and events, every
document's city and venue): what it holds, that its query reads only the documents that give it
anything, and that past its minute the cached one answers while it is read again."""
import threading
import time

from sqlalchemy import event, text

from tests.retrieval_support import EVENTS, PRODUCTS, SUPPORT, seed

PLACE_ARTICLE = {"title": "Our shop in Novi Sad", "role": "article", "city": "Novi Sad", "venue": "Dunavska 5",
                 "tags": ["shop"], "body": "# Our shop in Novi Sad\n\nCome and see us on Dunavska street."}


def _vocabulary(org_id):
    from kbframework import tenancy
    from kbframework.db import session_scope
    from kbframework.retrieval.filters import org_vocabulary

    with tenancy.organization(org_id), session_scope() as s:
        return org_vocabulary(s, org_id)


def test_the_vocabulary_holds_products_events_and_places_and_reads_only_their_documents(kb_org):
    from kbframework import tenancy
    from kbframework.db import get_engine
    from kbframework.retrieval.filters import _VOCAB_SQL

    seed(kb_org["id"], PRODUCTS + EVENTS[:2] + SUPPORT + [PLACE_ARTICLE])
    v = _vocabulary(kb_org["id"])
    assert {"dresses", "red", "jackets", "techno"} <= set(v["tags"])
    assert "policy" not in v["tags"] and "shop" not in v["tags"]  # a support page's and an article's tags are not filters
    assert set(v["categories"]) == {"Dresses", "Jackets"}
    assert set(v["cities"]) == {"Belgrade", "Novi Sad"}  # the article's city counts, as every document's does
    assert set(v["venues"]) == {"Warehouse", "Dunavska 5"}
    with tenancy.organization(kb_org["id"]), get_engine().connect() as conn:
        conn.execute(text("SET enable_seqscan = off"))  # a test table is small enough for a scan
        plan = "\n".join(r[0] for r in conn.execute(text(f"EXPLAIN {_VOCAB_SQL}"), {"org": kb_org["id"]}))
    assert "ix_documents_vocabulary" in plan, plan


def test_a_stale_vocabulary_answers_at_once_while_it_is_read_again(kb_org, monkeypatch):
    from kbframework import tenancy
    from kbframework.db import get_engine, session_scope
    from kbframework.ingest.queue import queue_ingest
    from kbframework.orgs.accounts import ensure_source
    from kbframework.retrieval import filters
    from kbframework.sources.apply import apply_draft
    from kbframework.types import DocumentDraft

    seed(kb_org["id"], PRODUCTS[:1])
    assert "zebra" not in _vocabulary(kb_org["id"])["tags"]  # read and cached
    with tenancy.organization(kb_org["id"]), session_scope() as s:  # a new product, the cache not told
        src = ensure_source(s, kb_org["id"], "manual", "Test knowledge")
        doc, _ = apply_draft(s, src, DocumentDraft(title="Zebra Scarf", normalized_content="# Zebra Scarf\n\nStriped.",
                                                   type="manual", document_role="product", external_id="t-zebra",
                                                   tags=["zebra"]), force=True)
        doc_id = doc.id
    queue_ingest([doc_id], inline=True)
    monkeypatch.setattr(filters, "VOCAB_TTL", 0.0)  # every cached vocabulary is past its minute now
    readers = []

    def seen(conn, cursor, statement, *args):
        if "WITH d AS" in statement:
            readers.append(threading.get_ident())

    event.listen(get_engine(), "before_cursor_execute", seen)
    try:
        assert "zebra" not in _vocabulary(kb_org["id"])["tags"]  # the cached one, at once
        assert threading.get_ident() not in readers  # the question's own thread read nothing
        for _ in range(100):  # the background read replaces it
            with filters._cache_lock:
                hit = filters._vocab_cache.get(kb_org["id"])
            if hit and "zebra" in hit[1]["tags"]:
                break
            time.sleep(0.05)
        else:
            raise AssertionError("the vocabulary was not read again in the background")
        assert readers and threading.get_ident() not in readers
        monkeypatch.setattr(filters, "VOCAB_STALE_MAX", 0.0)  # unused too long: read before answering
        assert "zebra" in _vocabulary(kb_org["id"])["tags"]
        assert threading.get_ident() in readers
    finally:
        event.remove(get_engine(), "before_cursor_execute", seen)
