"""WSGI entry point for gunicorn: ``kbframework.wsgi:app``.

A database or Redis that is down at start-up is one clear line, not a traceback. Each worker
loads its models before it takes a request (``web.warm``) and says so in one line."""
import sys

from kbframework.errors import KBError
from kbframework.web import create_app
from kbframework.web.warm import warm_up

try:
    app = create_app()
except KBError as exc:
    print(f"kbframework cannot start: {exc.message}", file=sys.stderr, flush=True)
    sys.exit(3)

_warm = warm_up()
print("kbframework web process ready in {seconds} s: {what}".format(
    seconds=_warm["seconds"],
    what=", ".join(f"{k.replace('_', ' ')} {v}" for k, v in _warm.items() if k != "seconds")),
    file=sys.stderr, flush=True)
