"""The host, built once per worker process: the database engine (starting the embedded
servers when none is configured) and the plugins, validated as the web process validates
them. Every job function and the failure callback start here, so a job never runs against a
half-built host; it sits below the job functions so recovery can use it too."""
from __future__ import annotations

_ready = False


def boot() -> None:
    global _ready
    if _ready:
        return
    from kbframework.db import init_engine
    from kbframework.embedded import ensure_services
    from kbframework.hooks import registry

    db_url, _ = ensure_services()
    init_engine(db_url)
    registry.validate_startup()
    _ready = True
