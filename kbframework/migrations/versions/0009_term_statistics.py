"""stored word statistics for the large organizations' keyword ranking

Revision ID: 0009_term_statistics
Revises: 0008_fulltext_search_functions

BM25 needs, for each word of a question, how many of the organization's chunks use it.
Counted on first sight (``kbf_fulltext_df``), a word costs up to 2,000 heap visits in a large
organization: at 1M chunks the large organization's keyword step paid 401 ms at p95 against a
171 ms statement, most of it counts. ``term_stats`` keeps every word's count for the
organizations above the exact-scan size, refreshed from ``ts_stat`` after loads
(``kbframework.retrieval.term_stats.refresh_term_stats``); a word it does not hold (new
since the refresh, or not in the organization's knowledge) is still counted as before.
``term_stats_state`` records each refresh and the chunks it saw, so the next one runs only when
the organization changed enough.
"""
from alembic import op

revision = "0009_term_statistics"
down_revision = "0008_fulltext_search_functions"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("""
        CREATE TABLE term_stats (
            organization_id uuid NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
            lexeme text NOT NULL,
            df integer NOT NULL,
            PRIMARY KEY (organization_id, lexeme)
        )""")
    op.execute("""
        CREATE TABLE term_stats_state (
            organization_id uuid PRIMARY KEY REFERENCES organizations(id) ON DELETE CASCADE,
            chunks integer NOT NULL,
            words integer NOT NULL,
            seconds real NOT NULL,
            refreshed_at timestamptz NOT NULL DEFAULT now()
        )""")
    op.execute("SELECT kbf_protect_tenant_table('term_stats')")
    op.execute("SELECT kbf_protect_tenant_table('term_stats_state')")


def downgrade() -> None:
    op.execute("DROP TABLE IF EXISTS term_stats_state")
    op.execute("DROP TABLE IF EXISTS term_stats")
