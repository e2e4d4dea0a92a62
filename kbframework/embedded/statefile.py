"""Small JSON state files that survive being interrupted.

A process killed in the middle of rewriting a handle file (a worker's scheduler gets two
terminations in a row) used to leave half a JSON document behind, and every later ``kbf``
process failed on it. Here a file is written whole to a temporary name and renamed over the
old one (rename is atomic on POSIX), and a file that cannot be read anyway is set aside
and treated as absent, so the next start rebuilds it from the live server.
"""
from __future__ import annotations

import json
import logging
import os
import tempfile
from pathlib import Path

log = logging.getLogger(__name__)


def write_json(path: Path, data: dict) -> None:
    """Write ``data`` so that readers see either the old file or the new one, never a part."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=str(path.parent))
    try:
        with os.fdopen(fd, "w") as fh:
            json.dump(data, fh, indent=2, sort_keys=True)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def read_json(path: Path) -> dict | None:
    """The file's content, or None when it is missing. An unreadable file (cut short,
    not JSON, not an object) is renamed to ``<name>.broken`` and reported as missing."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        log.warning("state file %s unreadable (%s); rebuilding it", path, exc)
        _set_aside(path)
        return None
    try:
        data = json.loads(raw)
    except ValueError:
        data = None
    if not isinstance(data, dict):
        log.warning("state file %s is damaged; set aside as %s.broken and rebuilt", path, path.name)
        _set_aside(path)
        return None
    return data


def remove(path: Path) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        pass


def _set_aside(path: Path) -> None:
    try:
        os.replace(path, path.with_name(path.name + ".broken"))
    except OSError:
        remove(path)


def sweep_temporaries(folder: Path, name: str) -> None:
    """Remove temporary files left by a writer that was killed before its rename."""
    for p in folder.glob(f".{name}.*.tmp"):
        remove(p)
