"""WSGI entry point for gunicorn: ``kbframework.wsgi:app``.

A database or Redis that is down at start-up is one clear line, not a traceback."""
import sys

from kbframework.errors import KBError
from kbframework.web import create_app

try:
    app = create_app()
except KBError as exc:
    print(f"kbframework cannot start: {exc.message}", file=sys.stderr, flush=True)
    sys.exit(3)
