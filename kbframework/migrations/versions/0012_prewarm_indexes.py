"""the organizations' new search indexes loaded into shared buffers once built

Revision ID: 0012_prewarm_indexes
Revises: 0011_documents_vocabulary

A freshly built index is on disk, not in PostgreSQL's shared buffers: the build writes its
pages through a small ring of buffers. So the first question to each organization after its
index was built (or after the server restarted) read the index's pages one by one as the HNSW
graph walk reached them: at 1M chunks, the first vector search of each medium organization
(45,000 chunks) took 93 ms against 25 ms after it (350 ms after a restart), and one question
in twenty of the scale bench's medium class is such a first question, so it set the class's
p95. Read in one sequential pass right after the build (``pg_prewarm``), the same index costs
tens of milliseconds once, before any visitor asks.

``pg_prewarm`` is a contrib extension only a superuser may create: the migration creates it
when it can (the embedded server) and says so when it cannot (an operator creates it; see
docs/operations.md). ``kbf_prewarm_index`` lets the product's tenant role load one index of
the chunks table, as the migration's role, and nothing else: it returns the blocks read, or
NULL when the extension is missing.
"""
from alembic import op

revision = "0012_prewarm_indexes"
down_revision = "0011_documents_vocabulary"
branch_labels = None
depends_on = None

CREATE_EXTENSION = """
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'pg_prewarm') THEN
        RETURN;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'pg_prewarm') THEN
        RAISE WARNING 'kbframework: the server has no pg_prewarm extension: a new search index is '
                      'read from disk by the first questions that use it (docs/operations.md).';
    ELSIF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = current_user AND rolsuper) THEN
        RAISE WARNING 'kbframework: % is not a superuser and cannot create the pg_prewarm extension; '
                      'a superuser can: CREATE EXTENSION pg_prewarm (docs/operations.md).', current_user;
    ELSE
        CREATE EXTENSION pg_prewarm;
    END IF;
END $$
"""

PREWARM = """
CREATE OR REPLACE FUNCTION kbf_prewarm_index(idx regclass)
RETURNS bigint
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, public
AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_index i WHERE i.indexrelid = idx AND i.indrelid = 'public.chunks'::regclass) THEN
        RAISE EXCEPTION 'kbf_prewarm_index: % is not an index of chunks', idx;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'pg_prewarm') THEN
        RETURN NULL;
    END IF;
    RETURN pg_prewarm(idx);
END
$$
"""

SIGNATURE = "kbf_prewarm_index(regclass)"


def upgrade() -> None:
    op.execute(CREATE_EXTENSION)
    op.execute(PREWARM)
    op.execute(f"REVOKE ALL ON FUNCTION {SIGNATURE} FROM PUBLIC")
    op.execute(f"GRANT EXECUTE ON FUNCTION {SIGNATURE} TO kbf_tenant")


def downgrade() -> None:
    op.execute(f"DROP FUNCTION IF EXISTS {SIGNATURE}")
