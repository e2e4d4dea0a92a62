"""drop the B-tree indexes whose column already leads another index of the same table

Revision ID: 0014_redundant_indexes
Revises: 0013_complete_word_lists

Every tenant table was created with a B-tree on ``organization_id`` alone, and most of them
later got a composite index that starts with the same column (``ix_chunks_org_model``,
``ix_documents_org_status``, …); ``documents.source_id`` is likewise the first column of the
unique constraint ``uq_documents_source_external``. A B-tree answers any query on a prefix of
its columns, the foreign keys' cascades included, so the single-column ones served nothing the
planner could not get from the composite, and each write kept them up: each chunk an ingest
job writes, each document status change (the status is indexed, so no update of a document is
HOT), each chat log and usage row an answer writes. They are small (the chunks one is 7 MB at
1M rows, its 101 organizations' ids deduplicated) and cheap to keep (half a microsecond a row
on 200,000 inserts): this is tidiness, not a speed-up: one index less per table for the
planner to weigh, for vacuum to scan and for an operator to wonder about.

``tests/test_schema_indexes.py`` fails if a migration or model brings such a pair back. The
drop takes each table's lock for a moment (no rows are read).
"""
from alembic import op

revision = "0014_redundant_indexes"
down_revision = "0013_complete_word_lists"
branch_labels = None
depends_on = None

# (index, table, columns): each is a prefix of another index on the same table
REDUNDANT = [
    ("ix_chunks_organization_id", "chunks", "organization_id"),
    ("ix_documents_organization_id", "documents", "organization_id"),
    ("ix_documents_source_id", "documents", "source_id"),
    ("ix_sources_organization_id", "sources", "organization_id"),
    ("ix_memberships_organization_id", "memberships", "organization_id"),
    ("ix_chat_logs_organization_id", "chat_logs", "organization_id"),
    ("ix_usage_ledger_organization_id", "usage_ledger", "organization_id"),
]


def upgrade() -> None:
    for name, _table, _columns in REDUNDANT:
        op.execute(f"DROP INDEX IF EXISTS {name}")


def downgrade() -> None:
    for name, table, columns in REDUNDANT:
        op.execute(f"CREATE INDEX IF NOT EXISTS {name} ON {table} ({columns})")
