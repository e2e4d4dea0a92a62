"""row-level security that reads the transaction's scope once per statement

Revision ID: 0010_rls_once_per_statement
Revises: 0009_term_statistics

The policy of 0004_row_level_security called ``current_setting`` on every row a statement
read: the function is stable, not constant, so PostgreSQL evaluated it again for each row
the scan returned. A count of a medium organization's 45,000 chunks took 26 ms under the
policy against 5 ms without it (an index-only scan with no heap visit, the whole rest being
the policy), and every first question to an organization pays that count. Written as scalar
sub-selects, the two settings become init-plans: computed once when the statement starts,
then compared per row as plain values (26 ms → 5 ms for the same count). What a row must
satisfy is unchanged: the transaction's organization, or the system bypass.

``kbf_protect_tenant_table`` writes the new form, so a later migration's table gets it too.
"""
from alembic import op

revision = "0010_rls_once_per_statement"
down_revision = "0009_term_statistics"
branch_labels = None
depends_on = None

# each a single SQL string literal (its quotes doubled), given to format() with the guarded column
ONCE = ("'((SELECT current_setting(''app.rls_bypass'', true)) = ''on'' OR %I = "
        "(SELECT NULLIF(current_setting(''app.organization_id'', true), '''')::uuid))'")
PER_ROW = ("'(current_setting(''app.rls_bypass'', true) = ''on'' OR %I = "
           "NULLIF(current_setting(''app.organization_id'', true), '''')::uuid)'")

PROTECT_FUNCTION = r"""
CREATE OR REPLACE FUNCTION kbf_protect_tenant_table(tbl text, col text DEFAULT 'organization_id')
RETURNS void LANGUAGE plpgsql AS $fn$
DECLARE
    visible text := format(%(visible)s, col);
BEGIN
    EXECUTE format('ALTER TABLE %%I OWNER TO kbf_tenant', tbl);
    EXECUTE format('ALTER TABLE %%I ENABLE ROW LEVEL SECURITY', tbl);
    EXECUTE format('ALTER TABLE %%I FORCE ROW LEVEL SECURITY', tbl);
    EXECUTE format('DROP POLICY IF EXISTS kbf_tenant_isolation ON %%I', tbl);
    EXECUTE format('CREATE POLICY kbf_tenant_isolation ON %%I USING %%s WITH CHECK %%s', tbl, visible, visible);
END $fn$
"""

# every table the policy guards, again, with its own column ("organizations" is guarded by id)
PROTECT_AGAIN = """
DO $$
DECLARE t text;
BEGIN
    FOR t IN SELECT tablename FROM pg_policies
             WHERE policyname = 'kbf_tenant_isolation' AND schemaname = 'public'
    LOOP
        PERFORM kbf_protect_tenant_table(t, CASE WHEN t = 'organizations' THEN 'id' ELSE 'organization_id' END);
    END LOOP;
END $$
"""


def _write(visible: str) -> None:
    op.execute(PROTECT_FUNCTION % {"visible": visible})
    op.execute(PROTECT_AGAIN)


def upgrade() -> None:
    _write(ONCE)


def downgrade() -> None:
    _write(PER_ROW)
