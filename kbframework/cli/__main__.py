"""``python -m kbframework.cli``: the same as ``kbf``."""
from kbframework.cli import main

main()
