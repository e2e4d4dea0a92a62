"""``kbf db upgrade``: Alembic, with the script folder inside the package."""
from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config as AlembicConfig
from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError

from kbframework.db import get_engine

MIGRATIONS = Path(__file__).parent / "migrations"


def alembic_config() -> AlembicConfig:
    cfg = AlembicConfig()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    return cfg


def _as_owner(conn) -> None:
    """Migrations run as the configured database user, not the tenant role connections
    normally enter (row-level security): an explicit bypass for schema changes."""
    conn.execute(text("SET LOCAL ROLE NONE"))
    conn.execute(text("SELECT set_config('app.rls_bypass', 'on', true)"))


def upgrade(revision: str = "head") -> None:
    """The schema only. The vector indexes belong to retrieval and are kept by the caller
    (``kbf db upgrade`` runs ``vector_index.ensure_all`` next), so the foundation never
    reaches up into retrieval."""
    engine = get_engine()
    with engine.begin() as conn:
        _as_owner(conn)
        conn.execute(text("CREATE EXTENSION IF NOT EXISTS vector"))
    _update_vector_extension(engine)
    with engine.begin() as conn:
        _as_owner(conn)
        cfg = alembic_config()
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, revision)
    # the pgvector type must be registered on connections opened before the extension existed
    engine.dispose()


def _update_vector_extension(engine) -> None:
    """A database restored from an older server may still carry an older pgvector in its
    catalog; bring it to the version the server offers (needs the extension's owner)."""
    from kbframework.embedded.server_check import pgvector_versions

    with engine.connect() as conn:
        v = pgvector_versions(conn)
    if v["installed"] and v["available"] and v["installed"] != v["available"]:
        with engine.begin() as conn:
            conn.execute(text("ALTER EXTENSION vector UPDATE"))


def downgrade(revision: str) -> None:
    with get_engine().begin() as conn:
        _as_owner(conn)
        cfg = alembic_config()
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, revision)


def current() -> str | None:
    with get_engine().connect() as conn:
        try:
            return conn.execute(text("SELECT version_num FROM alembic_version")).scalar()
        except SQLAlchemyError:  # no alembic_version table yet: an empty database
            return None
