"""row-level security on every tenant table

A second wall behind the organization filter every query already has: rows of a tenant
table are visible only to a transaction whose ``app.organization_id`` is their organization,
or that declared a system bypass (``app.rls_bypass = 'on'``; see kbframework/tenancy.py).
Connections enter the ``kbf_tenant`` role (NOLOGIN, NOBYPASSRLS), which owns the tenant
tables with FORCE ROW LEVEL SECURITY, so the policies apply even when the configured
database user is a superuser. A later migration that adds a tenant table calls
``SELECT kbf_protect_tenant_table('name')`` (tests/test_row_level_security.py fails until it does).

Revision ID: 0004_row_level_security
Revises: 0002_job_reliability
"""
from alembic import op

revision = "0004_row_level_security"
down_revision = "0002_job_reliability"
branch_labels = None
depends_on = None

CREATE_ROLE = """
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'kbf_tenant') THEN
        CREATE ROLE kbf_tenant NOLOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE;
    END IF;
END $$
"""

PROTECT_FUNCTION = r"""
CREATE OR REPLACE FUNCTION kbf_protect_tenant_table(tbl text, col text DEFAULT 'organization_id')
RETURNS void LANGUAGE plpgsql AS $fn$
DECLARE
    visible text := format('(current_setting(''app.rls_bypass'', true) = ''on'' OR %I = '
                           'NULLIF(current_setting(''app.organization_id'', true), '''')::uuid)', col);
BEGIN
    EXECUTE format('ALTER TABLE %I OWNER TO kbf_tenant', tbl);
    EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', tbl);
    EXECUTE format('ALTER TABLE %I FORCE ROW LEVEL SECURITY', tbl);
    EXECUTE format('DROP POLICY IF EXISTS kbf_tenant_isolation ON %I', tbl);
    EXECUTE format('CREATE POLICY kbf_tenant_isolation ON %I USING %s WITH CHECK %s', tbl, visible, visible);
END $fn$
"""

PROTECT_ALL = """
DO $$
DECLARE t text;
BEGIN
    FOR t IN SELECT c.table_name FROM information_schema.columns c
             JOIN information_schema.tables tb
               ON tb.table_name = c.table_name AND tb.table_schema = c.table_schema
             WHERE c.table_schema = 'public' AND c.column_name = 'organization_id'
               AND tb.table_type = 'BASE TABLE'
    LOOP
        PERFORM kbf_protect_tenant_table(t);
    END LOOP;
    PERFORM kbf_protect_tenant_table('organizations', 'id');
END $$
"""

UNPROTECT_ALL = """
DO $$
DECLARE t text;
BEGIN
    FOR t IN SELECT tablename FROM pg_policies
             WHERE policyname = 'kbf_tenant_isolation' AND schemaname = 'public'
    LOOP
        EXECUTE format('DROP POLICY kbf_tenant_isolation ON %I', t);
        EXECUTE format('ALTER TABLE %I NO FORCE ROW LEVEL SECURITY', t);
        EXECUTE format('ALTER TABLE %I DISABLE ROW LEVEL SECURITY', t);
        EXECUTE format('ALTER TABLE %I OWNER TO %I', t, session_user);
    END LOOP;
END $$
"""


def upgrade() -> None:
    op.execute(CREATE_ROLE)
    op.execute("GRANT kbf_tenant TO CURRENT_USER")
    op.execute("GRANT USAGE, CREATE ON SCHEMA public TO kbf_tenant")  # CREATE: needed to own tables
    op.execute("GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO kbf_tenant")
    op.execute("GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA public TO kbf_tenant")
    op.execute("GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA public TO kbf_tenant")
    op.execute("ALTER DEFAULT PRIVILEGES IN SCHEMA public "
               "GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO kbf_tenant")
    op.execute("ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT USAGE, SELECT, UPDATE ON SEQUENCES TO kbf_tenant")
    op.execute(PROTECT_FUNCTION)
    op.execute(PROTECT_ALL)


def downgrade() -> None:
    op.execute(UNPROTECT_ALL)
    op.execute("DROP FUNCTION IF EXISTS kbf_protect_tenant_table(text, text)")
