"""Uninstalling any one connector or preset distribution leaves the host, the admin and the
other plugins working. Each distribution is really uninstalled (``pip uninstall``) from a
copy of this environment (hard links: fast, and the original stays untouched); a source of
the removed type, or the organization's preset, is left behind in the database on purpose."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CHECK = Path(__file__).parent / "support" / "without_plugin.py"


def plugin_distributions() -> dict[str, str]:
    """{entry point name: distribution name} of every installed plugin."""
    return {ep.name: ep.dist.name for ep in metadata.entry_points(group="kbframework")}


@pytest.fixture(scope="module")
def leftovers(kb_services):
    """An organization holding a source of every installed type."""
    from kbframework.db import session_scope
    from kbframework.hooks import registry
    from kbframework.orgs.accounts import create_org, ensure_source

    with session_scope() as s:
        org = create_org(s, "Uninstall check", "UTC", "uninstall-check")
        for name, connector in registry.source_types().items():
            ensure_source(s, org.id, name, connector.label)
        return {"slug": org.slug, "id": org.id}


def environment_without(dist: str, where: Path) -> Path:
    """A copy of this virtual environment with ``dist`` uninstalled; returns its python."""
    shutil.copytree(sys.prefix, where, symlinks=True, copy_function=os.link)
    python = where / "bin" / "python"
    r = subprocess.run([str(python), "-m", "pip", "uninstall", "-y", "-q", dist], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return python


@pytest.mark.parametrize("entry_point", sorted(plugin_distributions()))
def test_the_host_works_without_each_plugin_distribution(entry_point, leftovers, kb_services, tmp_path):
    from sqlalchemy import update

    from kbframework.db import get_engine, session_scope
    from kbframework.hooks import registry
    from kbframework.jobs.queues import redis_url
    from kbframework.models import Setting

    dists = plugin_distributions()
    if entry_point in registry.presets():
        with session_scope() as s:  # the organization keeps using the preset that goes away
            s.execute(update(Setting).where(Setting.organization_id == leftovers["id"]).values(preset=entry_point))
    python = environment_without(dists[entry_point], tmp_path / "venv")
    # a PYTHONPATH entry that holds the removed package would bring it back: drop it too
    pythonpath = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
                  if p and not any((Path(p) / m).exists() for m in _modules_of(dists[entry_point]))]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(pythonpath), "KB_DATA_DIR": str(kb_services.data_dir),
           "DATABASE_URL": get_engine().url.render_as_string(hide_password=False), "REDIS_URL": redis_url()}
    others = [n for n in dists if n != entry_point]
    r = subprocess.run([str(python), str(CHECK), entry_point, leftovers["slug"], *others], capture_output=True,
                       text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["removed"] == entry_point and entry_point not in out["source_types"] + out["presets"]
    assert out["pages"] >= 11
    if entry_point in registry.source_types():
        assert out["orphan_sources"] == [entry_point]


def _modules_of(dist: str) -> list[str]:
    """The top-level import packages a distribution provides (from its metadata)."""
    d = metadata.distribution(dist)
    top = (d.read_text("top_level.txt") or "").split()
    return top or [dist.replace("-", "_")]
