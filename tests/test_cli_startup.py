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
