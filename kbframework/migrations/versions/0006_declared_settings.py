"""declared settings: the free-form settings.extra becomes one column per declared setting

Existing values move over (branding and budget were nested objects; a token budget wins
over a money budget when both were set, as only one unit is kept). Keys nobody declared
are dropped with the column; downgrade puts the declared ones back into ``extra``.

Revision ID: 0006_declared_settings
Revises: 0005_vector_indexes
"""
import json

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0006_declared_settings"
down_revision = "0005_vector_indexes"
branch_labels = None
depends_on = None

# (column, type, server default, path in the old extra); frozen here, not read from the code
COLUMNS = (
    ("fallback_text", sa.Text(), None, ("fallback_text",)),
    ("knowledge", sa.String(20), None, ("knowledge",)),
    ("char_budget", sa.Integer(), "18000", ("char_budget",)),
    ("weekend_starts_friday", sa.Boolean(), sa.text("false"), ("weekend_starts_friday",)),
    ("place_names", postgresql.JSONB(), sa.text("'[]'::jsonb"), ("place_names",)),
    ("answer_threshold", sa.Float(), None, ("answer_threshold",)),
    ("synonyms", postgresql.JSONB(), sa.text("'{}'::jsonb"), ("synonyms",)),
    ("query_planner", sa.Boolean(), sa.text("true"), ("query_planner",)),
    ("planner_timeout", sa.Float(), "8", ("planner_timeout",)),
    ("chunking", postgresql.JSONB(), sa.text("'{}'::jsonb"), ("chunking",)),
    ("embedding_provider", sa.String(60), None, ("embedding_provider",)),
    ("branding_title", sa.String(200), None, ("branding", "title")),
    ("branding_color", sa.String(7), None, ("branding", "color")),
    ("branding_logo", sa.Text(), None, ("branding", "logo")),
    ("branding_welcome", sa.Text(), None, ("branding", "welcome")),
    ("budget_unit", sa.String(10), "none", None),
    ("budget_limit", sa.Float(), None, None),
    ("budget_soft_pct", sa.Integer(), "80", ("budget", "soft_pct")),
    ("budget_hard_stop", sa.Boolean(), sa.text("true"), ("budget", "hard_stop")),
    ("prices", postgresql.JSONB(), sa.text("'{}'::jsonb"), ("prices",)),
    ("retention_days", sa.Integer(), "90", None),
    ("allow_private_network", sa.Boolean(), sa.text("false"), ("allow_private_network",)),
)


def _get(extra, path):
    v = extra
    for p in path:
        v = v.get(p) if isinstance(v, dict) else None
    return v


def _coerce(col_type, v):
    try:
        if isinstance(col_type, sa.Boolean):
            return v if isinstance(v, bool) else str(v).lower() in ("1", "true", "yes", "on")
        if isinstance(col_type, sa.Integer):
            return int(v)
        if isinstance(col_type, sa.Float):
            return float(v)
        if isinstance(col_type, postgresql.JSONB):
            return json.dumps(v) if isinstance(v, (dict, list)) else None
        return str(v)
    except (TypeError, ValueError):
        return None


def upgrade() -> None:
    for name, type_, default, _ in COLUMNS:
        nullable = default is None
        op.add_column("settings", sa.Column(name, type_, server_default=default, nullable=nullable))
    conn = op.get_bind()
    for sid, extra in conn.execute(sa.text("SELECT id, extra FROM settings")).all():
        extra = extra or {}
        values = {}
        for name, type_, _, path in COLUMNS:
            if path is None:
                continue
            v = _get(extra, path)
            if v is not None:
                v = _coerce(type_, v)
                if v is not None:
                    values[name] = v
        budget = extra.get("budget") if isinstance(extra.get("budget"), dict) else {}
        tokens = budget.get("monthly_tokens") or extra.get("monthly_token_budget")
        if tokens:
            values.update(budget_unit="tokens", budget_limit=float(tokens))
        elif budget.get("monthly_usd"):
            values.update(budget_unit="cost", budget_limit=float(budget["monthly_usd"]))
        if values:
            sets = ", ".join(f"{k} = CAST(:{k} AS jsonb)" if k in ("chunking", "prices", "place_names", "synonyms") else f"{k} = :{k}"
                             for k in values)
            conn.execute(sa.text(f"UPDATE settings SET {sets} WHERE id = :id"), {**values, "id": sid})
    op.drop_column("settings", "extra")


def downgrade() -> None:
    op.add_column("settings", sa.Column("extra", postgresql.JSONB(), server_default=sa.text("'{}'::jsonb"),
                                        nullable=False))
    conn = op.get_bind()
    names = [c[0] for c in COLUMNS]
    for row in conn.execute(sa.text(f"SELECT id, {', '.join(names)} FROM settings")).mappings().all():
        extra: dict = {}
        for name, _, _, path in COLUMNS:
            v = row[name]
            if path is None or v is None or v in ({}, []):
                continue
            holder = extra
            for p in path[:-1]:
                holder = holder.setdefault(p, {})
            holder[path[-1]] = v
        if row["budget_unit"] in ("tokens", "cost") and row["budget_limit"] is not None:
            key = "monthly_tokens" if row["budget_unit"] == "tokens" else "monthly_usd"
            extra.setdefault("budget", {})[key] = row["budget_limit"]
        conn.execute(sa.text("UPDATE settings SET extra = CAST(:e AS jsonb) WHERE id = :id"),
                     {"e": json.dumps(extra, default=str), "id": row["id"]})
    for name in reversed(names):
        op.drop_column("settings", name)
