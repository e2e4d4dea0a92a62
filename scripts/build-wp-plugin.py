"""Build the installable zip of the WordPress plugin: dist/kbframework-connect-<version>.zip.

The zip holds one top-level folder, ``kbframework-connect/``, as WordPress's "Upload Plugin"
expects. Entries are sorted and dated by the version line so the same sources give the same
bytes. Standard library only.
"""
from __future__ import annotations

import re
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "wordpress-plugin" / "kbframework-connect"


def version() -> str:
    head = (SRC / "kbframework-connect.php").read_text(encoding="utf-8")
    m = re.search(r"^\s*\*\s*Version:\s*([0-9][0-9A-Za-z.\-]*)", head, re.M)
    if not m:
        sys.exit("no 'Version:' line in kbframework-connect.php")
    return m.group(1)


def build(out_dir: Path = ROOT / "dist") -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / f"kbframework-connect-{version()}.zip"
    files = sorted(p for p in SRC.rglob("*") if p.is_file() and not p.name.startswith("."))
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as z:
        for p in files:
            info = zipfile.ZipInfo(f"kbframework-connect/{p.relative_to(SRC).as_posix()}", (2026, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, p.read_bytes())
    return target


if __name__ == "__main__":
    print(build(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "dist"))
