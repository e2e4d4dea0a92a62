"""State files are replaced whole or not at all, and a damaged one reads as missing."""
import json
import os

import pytest

from kbframework.embedded import statefile


def test_write_then_read(tmp_path):
    p = tmp_path / "s.json"
    statefile.write_json(p, {"pid": 1})
    assert statefile.read_json(p) == {"pid": 1}
    statefile.write_json(p, {"pid": 2})
    assert statefile.read_json(p) == {"pid": 2}
    assert [x.name for x in tmp_path.iterdir()] == ["s.json"]


def test_interrupted_write_keeps_the_old_file(tmp_path, monkeypatch):
    p = tmp_path / "s.json"
    statefile.write_json(p, {"pid": 1})

    def interrupted(src, dst):  # the second signal arrives just before the rename
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        statefile.write_json(p, {"pid": 2})
    monkeypatch.undo()
    assert json.loads(p.read_text()) == {"pid": 1}
    assert [x.name for x in tmp_path.iterdir()] == ["s.json"]


@pytest.mark.parametrize("content", ["", "{\"pid\": 1", "null", "[1]", "\udcff"])
def test_damaged_file_is_set_aside(tmp_path, content):
    p = tmp_path / "s.json"
    p.write_text(content, errors="surrogateescape")
    assert statefile.read_json(p) is None
    assert not p.exists() and (tmp_path / "s.json.broken").exists()
    statefile.write_json(p, {"ok": True})
    assert statefile.read_json(p) == {"ok": True}


def test_missing_file_is_none(tmp_path):
    assert statefile.read_json(tmp_path / "nope.json") is None


def test_sweep_removes_leftover_temporaries(tmp_path):
    (tmp_path / ".s.json.x1.tmp").write_text("{")
    (tmp_path / "other.tmp").write_text("")
    statefile.sweep_temporaries(tmp_path, "s.json")
    assert sorted(x.name for x in tmp_path.iterdir()) == ["other.tmp"]
