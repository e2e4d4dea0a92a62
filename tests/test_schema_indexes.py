"""The migrated schema carries no B-tree whose columns lead another B-tree of the same table
(migration 0014_redundant_indexes), the models declare what the migrations build, and the
queries those indexes were for still find an index: an organization's chunks, its documents by
source, the cascade when an organization goes."""
from sqlalchemy import text

# a plain B-tree (no predicate, no expression, not unique) whose key columns are the first
# key columns of another B-tree on the same table answers nothing the other does not
REDUNDANT = """
SELECT a.indexrelid::regclass::text AS redundant, b.indexrelid::regclass::text AS covered_by
FROM pg_index a
JOIN pg_index b ON b.indrelid = a.indrelid AND b.indexrelid <> a.indexrelid
JOIN pg_class ca ON ca.oid = a.indexrelid JOIN pg_am ama ON ama.oid = ca.relam
JOIN pg_class cb ON cb.oid = b.indexrelid JOIN pg_am amb ON amb.oid = cb.relam
JOIN pg_class t ON t.oid = a.indrelid JOIN pg_namespace n ON n.oid = t.relnamespace
WHERE n.nspname = 'public' AND ama.amname = 'btree' AND amb.amname = 'btree'
  AND NOT a.indisunique AND a.indpred IS NULL AND a.indexprs IS NULL
  AND b.indpred IS NULL AND b.indexprs IS NULL AND a.indnkeyatts < b.indnkeyatts
  AND (b.indkey::int2[])[0:a.indnkeyatts - 1] = (a.indkey::int2[])[0:a.indnkeyatts - 1]
ORDER BY 1, 2
"""


def test_no_index_repeats_the_leading_columns_of_another(kb_services):
    from kbframework.db import get_engine

    with get_engine().connect() as conn:
        pairs = conn.execute(text(REDUNDANT)).all()
    assert pairs == [], f"indexes another index already covers: {pairs}"


def test_the_check_finds_a_redundant_index(kb_services):
    """The query above is not vacuous: an index on chunks(organization_id) is caught."""
    from kbframework.db import get_engine

    with get_engine().connect() as conn:
        with conn.begin():
            conn.execute(text("CREATE INDEX ix_test_redundant ON chunks (organization_id)"))
            pairs = conn.execute(text(REDUNDANT)).all()
            conn.rollback()
    assert ("ix_test_redundant", "ix_chunks_org_model") in [tuple(p) for p in pairs]


def test_the_models_declare_the_migrated_indexes(kb_services):
    """Every index of the ORM's tables that the migrations build (beside those of primary keys and
    unique constraints) is one the models declare,
    and the other way round (the HNSW and full-text indexes the product builds per
    organization are not the models' business)."""
    from kbframework.db import get_engine
    from kbframework.models import Base

    declared = set()
    for table in Base.metadata.tables.values():
        declared |= {ix.name for ix in table.indexes}
    with get_engine().connect() as conn:
        built = {r[0] for r in conn.execute(text(
            "SELECT i.indexname FROM pg_indexes i JOIN pg_index x ON x.indexrelid = i.indexname::regclass "
            "WHERE i.schemaname = 'public' AND i.tablename = ANY(:t) "
            "AND NOT EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = x.indexrelid) "
            "AND i.indexname NOT LIKE 'ix_chunks_hnsw_%' AND i.indexname NOT LIKE 'ix_chunks_fts_%'"),
            {"t": list(Base.metadata.tables)}).all()}
    assert built - declared == set(), f"built by migrations, not in the models: {built - declared}"
    assert declared - built == set(), f"in the models, not built by migrations: {declared - built}"


def _plan(conn, sql: str, params: dict) -> str:
    conn.execute(text("SET LOCAL enable_seqscan = off"))
    return "\n".join(r[0] for r in conn.execute(text("EXPLAIN " + sql), params).all())


def test_what_the_dropped_indexes_served_still_uses_an_index(kb_services):
    import uuid

    from kbframework.db import get_engine

    org, source = str(uuid.uuid4()), str(uuid.uuid4())
    with get_engine().connect() as conn:
        with conn.begin():
            chunks = _plan(conn, "SELECT id FROM chunks WHERE organization_id = :o", {"o": org})
            docs = _plan(conn, "SELECT id FROM documents WHERE source_id = :s", {"s": source})
            logs = _plan(conn, "SELECT id FROM chat_logs WHERE organization_id = :o", {"o": org})
            conn.rollback()
    assert "ix_chunks_org" in chunks and "Seq Scan" not in chunks, chunks
    assert "uq_documents_source_external" in docs, docs
    assert "ix_chat_logs_org_created" in logs, logs
