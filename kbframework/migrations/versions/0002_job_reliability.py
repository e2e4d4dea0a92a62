"""job reliability: an outbox for jobs that could not reach Redis, the job behind each sync
run

Revision ID: 0002_job_reliability
Revises: 0001
"""
from alembic import op
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

revision = "0002_job_reliability"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Work accepted while Redis was unreachable: the sweeper moves each row onto its queue.
    op.create_table(
        "job_outbox",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("queue", sa.String(length=40), nullable=False),
        sa.Column("func", sa.String(length=300), nullable=False),
        sa.Column("args", postgresql.JSONB(astext_type=sa.Text()), server_default=sa.text("'[]'::jsonb"),
                  nullable=False),
        sa.Column("kwargs", postgresql.JSONB(astext_type=sa.Text()), server_default=sa.text("'{}'::jsonb"),
                  nullable=False),
        sa.Column("job_id", sa.String(length=200), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("attempts", sa.Integer(), server_default="0", nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    # which job (or process) runs a sync: a run whose owner is gone is closed by the sweeper
    op.add_column("sync_runs", sa.Column("job_id", sa.String(length=200), nullable=True))
    op.create_index("ix_sync_runs_running", "sync_runs", ["status"], unique=False,
                    postgresql_where=sa.text("status = 'running'"))


def downgrade() -> None:
    op.drop_index("ix_sync_runs_running", table_name="sync_runs")
    op.drop_column("sync_runs", "job_id")
    op.drop_table("job_outbox")
