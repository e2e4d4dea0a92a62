"""``kbf services upgrade``: move a data folder made by an older embedded PostgreSQL (the
first wave's ``pgserver``, PostgreSQL 16 + pgvector 0.6) to the current server, losing nothing.

Dump and restore rather than ``pg_upgrade``: the two servers' folders belong to different
system users, and pgvector's catalog entries are then created fresh at 0.8. The old server
is started on a private socket (no client can write meanwhile), every database is dumped
with the new ``pg_dump`` (it reads older servers) and restored into a new folder; row counts
of every table are compared; only then is the old folder renamed aside, kept, and the new
one moved into place and started. If the new one does not answer, the old one is put back.
"""
from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
from datetime import datetime, timezone
from pathlib import Path

from kbframework.config import Config
from kbframework.embedded import postgres as pg
from kbframework.embedded import statefile
from kbframework.errors import ServiceUnavailable, ValidationFailed


def old_bin_dir(explicit: str | None = None) -> Path | None:
    """Binaries of the older server: ``--old-bin``, ``KB_OLD_PG_BIN``, or pgserver's wheel."""
    if explicit or os.environ.get("KB_OLD_PG_BIN"):
        return Path(explicit or os.environ["KB_OLD_PG_BIN"])
    spec = importlib.util.find_spec("pgserver")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0]) / "pginstall" / "bin"


def _owner(d: Path) -> tuple[int, int] | None:
    if os.geteuid() != 0:
        return None
    st = d.stat()
    if st.st_uid == 0:
        return pg.server_account()
    return st.st_uid, st.st_gid


def _client(bindir: Path, tool: str, socket_dir: Path, *args: str) -> tuple[int, str]:
    return pg.run_as(None, [str(bindir / tool), "-h", str(socket_dir), "-U", "postgres", *args],
                     timeout=3600)


def _query(bindir: Path, socket_dir: Path, db: str, sql: str) -> list[list[str]]:
    rc, out = _client(bindir, "psql", socket_dir, "-X", "-A", "-t", "-F", "\t", "-v", "ON_ERROR_STOP=1",
                      "-d", db, "-c", sql)
    if rc != 0:
        raise ServiceUnavailable(f"query on {socket_dir} failed: {out.strip()}")
    return [line.split("\t") for line in out.splitlines() if line]


def _databases(bindir: Path, sock: Path) -> list[str]:
    rows = _query(bindir, sock, "postgres",
                  "SELECT datname FROM pg_database WHERE datallowconn AND NOT datistemplate ORDER BY 1")
    return [r[0] for r in rows]


def _row_counts(bindir: Path, sock: Path, db: str) -> dict[str, int]:
    tables = _query(bindir, sock, db,
                    "SELECT format('%I.%I', schemaname, tablename) FROM pg_tables "
                    "WHERE schemaname NOT IN ('pg_catalog', 'information_schema') ORDER BY 1")
    if not tables:
        return {}
    sql = " UNION ALL ".join(f"SELECT '{t[0]}', count(*) FROM {t[0]}" for t in tables)
    return {name: int(n) for name, n in _query(bindir, sock, db, sql)}


def upgrade(cfg: Config, *, old_bin: str | None = None, remove_old: bool = False,
            say=lambda msg: None) -> dict:
    """Upgrade ``KB_DATA_DIR/pg`` in place; returns what was done (counts, old folder)."""
    d = pg.pg_dir(cfg)
    new_bin = pg.bin_dir()
    want = pg.binary_major(new_bin)
    have = pg.data_major(d)
    if have is None:
        raise ValidationFailed(f"There is no PostgreSQL data folder at {d} to upgrade.")
    if have == want:
        return {"upgraded": False, "major": want, "message": f"{d} already runs PostgreSQL {want}"}
    if int(have) > int(want):
        raise ValidationFailed(f"{d} was made by PostgreSQL {have}, newer than this server ({want}).")
    obin = old_bin_dir(old_bin)
    if obin is None or not (obin / "pg_ctl").exists():
        raise ValidationFailed(
            f"{d} was made by PostgreSQL {have}; its binaries are needed to read it. Install them "
            "with `pip install 'kbframework[upgrade]'` (the pgserver wheel) or pass --old-bin DIR "
            "(or set KB_OLD_PG_BIN) to a PostgreSQL "
            f"{have} bin folder.")
    if pg.binary_major(obin) != have:
        raise ValidationFailed(f"{obin} holds PostgreSQL {pg.binary_major(obin)} binaries, "
                               f"but {d} needs PostgreSQL {have}.")
    old_account = _owner(d)
    new_account = pg.server_account()
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    new = cfg.data_dir / f"pg.new-{want}"
    kept = cfg.data_dir / f"pg-{have}-old-{stamp}"
    with pg._locked(cfg):
        if pg.postgres_running(cfg):
            say(f"stopping the running PostgreSQL {have} server")
            pg.stop_server(d, obin, old_account)
        work = Path(tempfile.mkdtemp(prefix="kbf-up-"))
        work.chmod(0o711)
        old_sock, new_sock = work / "old", work / "new"
        try:
            say(f"starting PostgreSQL {have} on {d} (private socket)")
            pg.start_server(d, obin, old_account, old_sock)
            if new.exists():
                shutil.rmtree(new)
            say(f"creating a PostgreSQL {want} folder at {new}")
            pg.initialise(new, new_account, new_bin)
            pg.start_server(new, new_bin, new_account, new_sock)
            counts = _copy_everything(new_bin, old_sock, new_sock, work, say)
        finally:
            pg.stop_server(new, new_bin, new_account) if new.exists() else None
            pg.stop_server(d, obin, old_account)
            shutil.rmtree(work, ignore_errors=True)
        os.rename(d, kept)
        os.rename(new, d)
        statefile.remove(pg.state_path(cfg))
    try:
        say(f"starting PostgreSQL {want} on {d}")
        pg.start_postgres(cfg)
        sock = Path(pg.postmaster_info(d)["socket_dir"])
        for db, tables in counts.items():
            if _row_counts(new_bin, sock, db) != tables:
                raise ServiceUnavailable(f"row counts in {db} differ after the move")
    except Exception:
        pg.stop_postgres(cfg)
        os.rename(d, new)
        os.rename(kept, d)
        statefile.remove(pg.state_path(cfg))
        raise
    if remove_old:
        shutil.rmtree(kept, ignore_errors=True)
    rows = sum(sum(t.values()) for t in counts.values())
    return {"upgraded": True, "from": have, "to": want, "databases": sorted(counts),
            "rows": rows, "old_dir": None if remove_old else str(kept)}


def _copy_everything(new_bin: Path, old_sock: Path, new_sock: Path, work: Path, say) -> dict:
    """Roles, then every database, then a row-count comparison of every table."""
    rc, out = _client(new_bin, "pg_dumpall", old_sock, "--globals-only", "--no-role-passwords",
                      "-f", str(work / "globals.sql"))
    if rc != 0:
        raise ServiceUnavailable(f"pg_dumpall --globals-only failed: {out.strip()}")
    rc, out = _client(new_bin, "psql", new_sock, "-X", "-q", "-d", "postgres", "-f", str(work / "globals.sql"))
    errors = [line for line in out.splitlines() if "ERROR" in line and "already exists" not in line]
    if rc != 0 or errors:
        raise ServiceUnavailable("restoring roles failed: " + "; ".join(errors or [out.strip()]))
    counts = {}
    for db in _databases(new_bin, old_sock):
        say(f"copying database {db}")
        dump = work / f"{db}.dump"
        rc, out = _client(new_bin, "pg_dump", old_sock, "-d", db, "-Fc", "-f", str(dump))
        if rc != 0:
            raise ServiceUnavailable(f"pg_dump of {db} failed: {out.strip()}")
        create = [] if db == "postgres" else ["--create"]
        target = db if db == "postgres" else "postgres"
        rc, out = _client(new_bin, "pg_restore", new_sock, "--exit-on-error", *create, "-d", target, str(dump))
        if rc != 0:
            raise ServiceUnavailable(f"pg_restore of {db} failed: {out.strip()}")
        before = _row_counts(new_bin, old_sock, db)
        after = _row_counts(new_bin, new_sock, db)
        if before != after:
            diff = {t: (before.get(t), after.get(t)) for t in set(before) | set(after)
                    if before.get(t) != after.get(t)}
            raise ServiceUnavailable(f"row counts differ after restoring {db}: {diff}")
        counts[db] = before
    return counts
