"""stored word counts that say when they hold every word of an organization

Revision ID: 0013_complete_word_lists
Revises: 0012_prewarm_indexes

The question expansion asks, for a hundred or so neighbours of a question's words, whether the
organization's chunks use them, and the keyword leg counts the question's own words. A word
``term_stats`` does not hold was counted on the full-text index, one lookup each: in an
organization of 1,666 chunks among a million (no full-text index of its own) that was 9.5 ms of
its keyword leg's 26 ms on average. A list that holds *every* word the organization's chunks
use answers "not used" for the others without a lookup; it is complete only until new chunks
are written, so ingestion counts its writes per organization (``changes``) and a refresh
records how many it had seen when it started counting (``counted_changes``): the list is
complete while the two are equal. ``NULL``: counted before this revision, so not known to be.
"""
from alembic import op

revision = "0013_complete_word_lists"
down_revision = "0012_prewarm_indexes"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE term_stats_state ADD COLUMN IF NOT EXISTS changes bigint NOT NULL DEFAULT 0")
    op.execute("ALTER TABLE term_stats_state ADD COLUMN IF NOT EXISTS counted_changes bigint")


def downgrade() -> None:
    op.execute("ALTER TABLE term_stats_state DROP COLUMN IF EXISTS counted_changes")
    op.execute("ALTER TABLE term_stats_state DROP COLUMN IF EXISTS changes")
