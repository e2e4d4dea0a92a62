"""Admin API v1: session-authenticated, CSRF-protected, scoped to the caller's organization.

One module per resource; each holds only routes (reading the request, calling a service
function, shaping the reply). The work lives in the services they call, which the admin
pages call too, so a page and the API always agree.
"""
from __future__ import annotations

from flask import Flask


def register(app: Flask) -> None:
    from kbframework.web.api import (account, chat, conversations, dashboard, documents, feedback, jobs, keys, markdown,
                                     providers, settings, sources, uploads, usage)

    for module in (account, chat, conversations, dashboard, documents, feedback, jobs, keys, markdown, providers, settings,
                   sources, uploads, usage):
        app.register_blueprint(module.bp)
