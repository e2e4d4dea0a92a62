"""The ``kbf`` command line: the group lives in ``main``; this package is the entry point."""
from kbframework.cli.main import main  # noqa: F401
