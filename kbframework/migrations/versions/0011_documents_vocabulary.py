"""an index of the documents that give an organization's filter vocabulary anything

Revision ID: 0011_documents_vocabulary
Revises: 0010_rls_once_per_statement

The filter extractors and the conversation step read each organization's vocabulary (the tags
and categories of its products and events, every document's city and venue;
``retrieval.filters.org_vocabulary``, cached a minute per process). Its query read every
document of the organization to keep the few that have any of these: 54 ms for an organization
of 80,000 notes, none of which has one, paid by a visitor's question once a minute. This
partial index holds only the documents the query keeps, so for such an organization it reads
nothing, and for a shop it reads its products and events, as before. A row outside the
predicate (a note, a page without a place) costs this index nothing on insert or update.
"""
from alembic import op

revision = "0011_documents_vocabulary"
down_revision = "0010_rls_once_per_statement"
branch_labels = None
depends_on = None

# the same predicate, word for word, as the vocabulary query's (retrieval.filters), so the
# planner sees the index apply
VOCABULARY_ROWS = ("document_role IN ('product', 'event') OR (city IS NOT NULL AND city <> '') "
                   "OR (venue IS NOT NULL AND venue <> '')")


def upgrade() -> None:
    op.execute(f"CREATE INDEX IF NOT EXISTS ix_documents_vocabulary ON documents (organization_id) "
               f"WHERE {VOCABULARY_ROWS}")


def downgrade() -> None:
    op.execute("DROP INDEX IF EXISTS ix_documents_vocabulary")
