"""drop the chunks' index on organization_id alone

Revision ID: 0010_drop_chunk_org_index
Revises: 0009_term_statistics

``ix_chunks_org_model`` (organization_id, embedding_model) leads with the same column, so every
plan that used ``ix_chunks_organization_id`` can use it instead; the second index only cost
every chunk written one more B-tree insertion (and at 1M chunks about 7 MB of disk and cache).
"""
from alembic import op

revision = "0010_drop_chunk_org_index"
down_revision = "0009_term_statistics"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("DROP INDEX IF EXISTS ix_chunks_organization_id")


def downgrade() -> None:
    op.execute("CREATE INDEX IF NOT EXISTS ix_chunks_organization_id ON chunks (organization_id)")
