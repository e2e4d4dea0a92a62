"""WSGI entry point for gunicorn: ``kbframework.wsgi:app``."""
from kbframework.web import create_app

app = create_app()
