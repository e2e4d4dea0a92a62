"""compact vectors, tenant-scoped full text, product-built HNSW indexes

Revision ID: 0005_vector_indexes
Revises: 0004_row_level_security

- ``chunks.embedding_half``: a stored half-precision copy of ``embedding`` (generated, so
  every writer gets it), kept in the row itself (STORAGE PLAIN) while the long values
  (content, tsv, the full-precision vector) go to TOAST early (toast_tuple_target): the
  hot path reads small rows. ``embedding`` stays the full-precision source for exact re-rank.
- the full-text GIN index becomes ``(organization_id, tsv)`` (btree_gin): the keyword leg
  touches only the organization's rows.
- one HNSW index per embedding model in use, built CONCURRENTLY after the migration commits
  (kbframework.retrieval.vector_index.ensure_all, which `kbf db upgrade` calls after migrating).
"""
from alembic import op
from sqlalchemy import text

revision = "0005_vector_indexes"
down_revision = "0004_row_level_security"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("CREATE EXTENSION IF NOT EXISTS btree_gin")
    op.execute("ALTER TABLE chunks ADD COLUMN embedding_half halfvec "
               "GENERATED ALWAYS AS (embedding::halfvec) STORED")
    op.execute("ALTER TABLE chunks ALTER COLUMN embedding_half SET STORAGE PLAIN")
    op.execute("ALTER TABLE chunks SET (toast_tuple_target = 256)")
    op.execute("CREATE INDEX ix_chunks_org_tsv ON chunks USING gin (organization_id, tsv)")
    op.execute("DROP INDEX IF EXISTS ix_chunks_tsv")
    # indexes a bench or an older build made on the full-precision column
    for (name,) in op.get_bind().execute(text(
            "SELECT indexname FROM pg_indexes WHERE tablename = 'chunks' AND indexname LIKE 'ix_chunks_hnsw_%'")):
        op.execute(f"DROP INDEX IF EXISTS {name}")
    # the HNSW indexes themselves are built CONCURRENTLY right after this transaction
    # commits, by `kbf db upgrade` (vector_index.ensure_all once the migrations ran)


def downgrade() -> None:
    for (name,) in op.get_bind().execute(text(
            "SELECT indexname FROM pg_indexes WHERE tablename = 'chunks' AND indexname LIKE 'ix_chunks_hnsw_%'")):
        op.execute(f"DROP INDEX IF EXISTS {name}")
    op.execute("CREATE INDEX IF NOT EXISTS ix_chunks_tsv ON chunks USING gin (tsv)")
    op.execute("DROP INDEX IF EXISTS ix_chunks_org_tsv")
    op.execute("ALTER TABLE chunks RESET (toast_tuple_target)")
    op.execute("ALTER TABLE chunks DROP COLUMN embedding_half")
