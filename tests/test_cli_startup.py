"""``kbf --help`` must start fast: it may load the host's command table and the plugins'
``kb_register_commands``, but none of the libraries a command imports on first use."""
from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("sqlalchemy", "flask", "numpy", "wordllama", "pdfplumber", "trafilatura", "lxml",
         "requests", "redis", "rq", "psycopg2", "pydantic", "tokenizers")

PROBE = """
import json, sys
from kbframework.cli import main
try:
    main(["--help"])
except SystemExit:
    pass
print(json.dumps(sorted({m.split(".")[0] for m in sys.modules})), file=sys.stderr)
"""


def test_help_imports_no_heavy_library():
    r = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60)
    assert "Usage:" in r.stdout, r.stderr
    loaded = set(json.loads(r.stderr.strip().splitlines()[-1]))
    assert not loaded & set(HEAVY), f"kbf --help imported {sorted(loaded & set(HEAVY))}"


def test_the_probe_sees_a_heavy_import():
    """The check above can fail: a command that imports SQLAlchemy shows up in sys.modules."""
    probe = PROBE.replace('main(["--help"])', 'import sqlalchemy; main(["--help"])')
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert "sqlalchemy" in json.loads(r.stderr.strip().splitlines()[-1])


def _loaded_by(args: list[str]) -> set[str]:
    probe = PROBE.replace('main(["--help"])', f"main({args!r})")
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert "Usage:" in r.stdout, r.stderr
    return set(json.loads(r.stderr.strip().splitlines()[-1]))


def test_a_host_command_loads_no_plugin_for_the_command_table():
    """The plugins' commands join only when the table is listed or a name is not the host's."""
    listed = _loaded_by(["--help"])
    assert "pluggy" in listed and any(m.startswith("kbframework_") for m in listed)
    own = _loaded_by(["services", "--help"])
    assert "pluggy" not in own and not [m for m in own if m.startswith("kbframework_")], sorted(own)


DB_PROBE = """
import sys
from sqlalchemy import text
from kbframework.db import session_scope
with session_scope() as s:
    s.execute(text("SELECT 1"))
print("redis" in sys.modules)
"""


def test_a_database_command_needs_no_redis(kb_services):
    """Opening the database starts (or finds) the embedded PostgreSQL only: Redis is started
    by whatever queues a job, so ``kbf ask`` never loads the Redis client."""
    r = subprocess.run([sys.executable, "-c", DB_PROBE], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "False"


def test_a_reader_that_goes_away_ends_the_command_quietly():
    """``kbf plugins | head -1``: once the reader has closed the pipe, the command stops with
    the shell's status for a broken pipe and no error message or traceback."""
    import os
    from pathlib import Path

    read_end, write_end = os.pipe()
    os.close(read_end)  # every write now fails with EPIPE
    kbf = Path(sys.executable).with_name("kbf")
    try:
        r = subprocess.run([str(kbf), "plugins"], stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=60)
    finally:
        os.close(write_end)
    assert r.returncode == 141, r.stderr
    assert r.stderr == ""
