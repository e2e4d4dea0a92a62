"""weighted full text: a chunk's title (A) over its section headings (B) over its body (C)

Revision ID: 0007_weighted_fulltext
Revises: 0006_declared_settings

``chunks.tsv`` stays a generated column (every writer gets it, the ingestion included), with a
new expression. The chunker writes ``heading`` as the document title, then the section path
after " › " ("Altair Trailhead 2 Tent › Pitching"), so the title is the part before the first
" › " and the headings are the rest. Until now the whole heading weighed A and the body B,
so a section heading counted as much as the product's own name. ``SET EXPRESSION`` rewrites
the table: every existing chunk's ``tsv`` is recomputed, and the GIN index
``(organization_id, tsv)`` is rebuilt with it. The expression is frozen here, not read from
the code (``kbframework.models.Chunk.tsv`` repeats it).
"""
from alembic import op

revision = "0007_weighted_fulltext"
down_revision = "0006_declared_settings"
branch_labels = None
depends_on = None

WEIGHTED = (
    "setweight(to_tsvector('english', split_part(coalesce(heading, ''), ' › ', 1)), 'A') || "
    "setweight(to_tsvector('english', CASE WHEN strpos(coalesce(heading, ''), ' › ') > 0 "
    "THEN substr(heading, strpos(heading, ' › ') + 3) ELSE '' END), 'B') || "
    "setweight(to_tsvector('english', content), 'C')")
PREVIOUS = ("setweight(to_tsvector('english', coalesce(heading, '')), 'A') || "
            "setweight(to_tsvector('english', content), 'B')")


def upgrade() -> None:
    op.execute(f"ALTER TABLE chunks ALTER COLUMN tsv SET EXPRESSION AS ({WEIGHTED})")
    op.execute("CREATE INDEX IF NOT EXISTS ix_chunks_org_tsv ON chunks USING gin (organization_id, tsv)")


def downgrade() -> None:
    op.execute(f"ALTER TABLE chunks ALTER COLUMN tsv SET EXPRESSION AS ({PREVIOUS})")
