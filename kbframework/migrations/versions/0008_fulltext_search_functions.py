"""full-text matching that keeps its index under row-level security

Revision ID: 0008_fulltext_search_functions
Revises: 0007_weighted_fulltext

Under a row-level-security policy PostgreSQL applies the policy before any condition whose
function is not ``LEAKPROOF``, and ``@@`` (``ts_match_vq``) is not: the ``(organization_id,
tsv)`` GIN index then serves only its organization half, and every keyword question (and every
document-frequency count of the keyword leg's BM25) read and un-TOASTed the tsvector of every
chunk of the organization: 3 s for a new word in a 40,000-chunk organization, against 30 ms
with the index.

Two functions do the matching with the index instead, as their owner (the role that ran the
migration: in the embedded server a superuser, which row-level security does not bind).
Each applies the very test the policy applies, on its ``org`` argument, before it returns a
row: ``org`` must be the transaction's organization (``app.organization_id``) or the
transaction must have declared the system bypass, so a tenant's transaction cannot ask for
another organization's rows. They return only chunk ids, document ids and counts; the caller
reads the chunks themselves through the policy. ``SET search_path`` keeps a caller's objects
out of a definer's function, and only the tenant role may execute them. ``enable_seqscan =
off`` and ``enable_indexscan = off``: with a LIMIT the planner prefers reading the table, or
the organization's rows by their btree index, in order until enough rows match, and it does not
count the cost of un-TOASTing each tsvector on the way (87 ms against 37 ms with the full-text
index for 2,000 of 16,000 matches; 278 ms against 4 ms to find that no chunk of a 40,000-chunk
organization has a word); the full-text index is then read by a bitmap scan. ``plan_cache_mode =
force_custom_plan``: PostgreSQL 18 caches the plans of SQL functions, and after a few calls in
a session it would keep a generic plan made without the query's words, which reads the
organization's rows by its btree index and tests each tsvector (0.5–1.7 s a call instead of
20–50 ms).

When the migration's role cannot bypass row-level security (a managed database whose user is
neither a superuser nor ``BYPASSRLS``), the functions still return the right rows, as slowly as
before; the migration says so.
"""
from alembic import op

revision = "0008_fulltext_search_functions"
down_revision = "0007_weighted_fulltext"
branch_labels = None
depends_on = None

# the policy's own test (0004_row_level_security), on the function's argument
ALLOWED = ("(current_setting('app.rls_bypass', true) = 'on' "
           "OR org = NULLIF(current_setting('app.organization_id', true), '')::uuid)")

MATCH = f"""
CREATE OR REPLACE FUNCTION kbf_fulltext_match(org uuid, q tsquery, lim integer DEFAULT NULL)
RETURNS TABLE (id bigint, document_id uuid)
LANGUAGE sql STABLE SECURITY DEFINER ROWS 1000
SET search_path = pg_catalog, public
SET enable_seqscan = off
SET enable_indexscan = off
SET plan_cache_mode = force_custom_plan
AS $$
    SELECT c.id, c.document_id FROM public.chunks c
    WHERE c.organization_id = org AND c.tsv @@ q AND {ALLOWED}
    LIMIT lim
$$
"""

DOCUMENT_FREQUENCY = f"""
CREATE OR REPLACE FUNCTION kbf_fulltext_df(org uuid, lexemes text[], cap integer)
RETURNS TABLE (lexeme text, df integer)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, public
SET enable_seqscan = off
SET enable_indexscan = off
SET plan_cache_mode = force_custom_plan
AS $$
    SELECT l, (SELECT count(*)::integer FROM (
                   SELECT 1 FROM public.chunks c
                   WHERE c.organization_id = org AND c.tsv @@ to_tsquery('simple', quote_literal(l))
                   LIMIT cap) x)
    FROM unnest(lexemes) AS l
    WHERE {ALLOWED}
$$
"""

SIGNATURES = ("kbf_fulltext_match(uuid, tsquery, integer)", "kbf_fulltext_df(uuid, text[], integer)")

WARN_WITHOUT_BYPASS = """
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = current_user AND (rolsuper OR rolbypassrls)) THEN
        RAISE WARNING 'kbframework: the database user % can neither bypass row-level security nor is a '
                      'superuser: keyword search will not use its full-text index (slow for large '
                      'organizations). Run the migrations as a user with BYPASSRLS, or see '
                      'docs/operations.md.', current_user;
    END IF;
END $$
"""


def upgrade() -> None:
    op.execute(MATCH)
    op.execute(DOCUMENT_FREQUENCY)
    for sig in SIGNATURES:
        op.execute(f"REVOKE ALL ON FUNCTION {sig} FROM PUBLIC")
        op.execute(f"GRANT EXECUTE ON FUNCTION {sig} TO kbf_tenant")
    op.execute(WARN_WITHOUT_BYPASS)


def downgrade() -> None:
    for sig in SIGNATURES:
        op.execute(f"DROP FUNCTION IF EXISTS {sig}")
