"""A hot standby of the embedded PostgreSQL, for reads (``DATABASE_READ_URL``).

The standby is a second server on the same binaries, made by ``pg_basebackup -R`` from the
primary's unix socket and kept current by streaming replication. It exists so that the
read path (retrieval) can be pointed at a replica and tried on one machine exactly as an
operator runs it on two: the same ``primary_conninfo``, the same recovery, the same lag.
On a real deployment the replica is a managed or hand-built standby; nothing here is
needed then, only ``DATABASE_READ_URL``.
"""
from __future__ import annotations

import shutil
from pathlib import Path

from kbframework.config import Config, get_config
from kbframework.embedded import postgres as pg
from kbframework.embedded import statefile
from kbframework.errors import ServiceUnavailable


def standby_dir(cfg: Config) -> Path:
    return cfg.data_dir / "pg-standby"


def standby_state_path(cfg: Config) -> Path:
    return cfg.data_dir / "pg-standby.state.json"


def standby_running(cfg: Config | None = None) -> bool:
    cfg = cfg or get_config()
    info = pg.postmaster_info(standby_dir(cfg))
    return bool(info and pg._alive(info["pid"]))


def standby_url(cfg: Config | None = None) -> str:
    cfg = cfg or get_config()
    d = standby_dir(cfg)
    info = pg.postmaster_info(d)
    socket_dir = info["socket_dir"] if info and info["socket_dir"] else str(pg.socket_dir_for(d))
    return f"postgresql+psycopg2://postgres@/postgres?host={socket_dir}"


def start_standby(cfg: Config | None = None) -> str:
    """Clone the running embedded primary (first time only) and start the copy as a hot
    standby; return its URL. The primary must be the embedded one and running."""
    cfg = cfg or get_config()
    if cfg.database_url:
        raise ServiceUnavailable("The embedded standby replicates the embedded server; with "
                                 "DATABASE_URL set, build the replica on your own server and set "
                                 "DATABASE_READ_URL to it")
    pg.start_postgres(cfg)
    d = standby_dir(cfg)
    with pg._locked(cfg):
        if standby_running(cfg):
            return standby_url(cfg)
        bindir = pg.bin_dir()
        account = pg.server_account()
        if pg.data_major(d) is None:
            _clone_primary(cfg, d, bindir, account)
        info = pg.start_server(d, bindir, account, pg.socket_dir_for(d))
        statefile.write_json(standby_state_path(cfg), {"pid": info.get("pid"),
                                                       "socket_dir": info.get("socket_dir"),
                                                       "data_dir": str(d)})
    return standby_url(cfg)


def _clone_primary(cfg: Config, d: Path, bindir: Path, account) -> None:
    primary = pg.postmaster_info(pg.pg_dir(cfg))
    if not primary or not primary.get("socket_dir"):
        raise ServiceUnavailable("The embedded primary is not running; start it with `kbf services start`")
    if d.exists():
        shutil.rmtree(d)
    d.mkdir(parents=True)
    d.chmod(0o700)
    pg._give_to(account, d)
    pg._allow_traverse(d)
    # -R writes standby.signal and primary_conninfo; -X stream copies the WAL made meanwhile
    rc, out = pg.run_as(account, [str(bindir / "pg_basebackup"), "-h", primary["socket_dir"],
                                  "-p", str(primary["port"]), "-U", "postgres", "-D", str(d),
                                  "-R", "-X", "stream", "-c", "fast", "--no-password"],
                        cwd=d, timeout=600)
    if rc != 0:
        shutil.rmtree(d, ignore_errors=True)
        raise ServiceUnavailable(f"pg_basebackup from the embedded primary failed: {out.strip()[-2000:]}")
    # the copy must not inherit the primary's pid file, log or socket lock (the primary's
    # socket lives in its data folder, so its lock file is copied with it)
    for name in ("postmaster.pid", "server.log"):
        (d / name).unlink(missing_ok=True)
    for lock in d.glob(".s.PGSQL.*"):
        lock.unlink(missing_ok=True)


def stop_standby(cfg: Config | None = None, *, remove: bool = False) -> bool:
    cfg = cfg or get_config()
    d = standby_dir(cfg)
    with pg._locked(cfg):
        stopped = pg.stop_server(d, pg.bin_dir(), pg.server_account()) if standby_running(cfg) else False
        statefile.remove(standby_state_path(cfg))
        if remove:
            shutil.rmtree(d, ignore_errors=True)
    return stopped
