"""Our own tests use the fixtures of kbframework.testing (also shipped to plugin authors)."""
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("KB_SHARED_DIR", ROOT.parent / "shared"))


@pytest.fixture(scope="session")
def shared_data():
    path = SHARED / "data"
    if not path.exists():
        pytest.skip(f"the shared fixtures are not at {path}")
    return path
