"""What an external server (``DATABASE_URL``) must offer: pgvector 0.8 or newer.

Below 0.8 the product's tenant-filtered vector search loses recall (no iterative index
scans) and compact vectors are unavailable (``halfvec`` came in 0.7), so start-up stops
with a message naming exactly what is missing instead of failing later on one query.
"""
from __future__ import annotations

from sqlalchemy import text

from kbframework.errors import ServiceUnavailable

REQUIRED = (0, 8, 0)

# what each pgvector release added that kbframework uses
FEATURES = [((0, 5, 0), "HNSW indexes"),
            ((0, 7, 0), "halfvec (compact half-precision vectors)"),
            ((0, 8, 0), "iterative index scans (hnsw.iterative_scan) for tenant-filtered search")]


def parse_version(v: str | None) -> tuple[int, ...] | None:
    if not v:
        return None
    try:
        return tuple(int(p) for p in v.split(".")[:3])
    except ValueError:
        return None


def missing_features(version: tuple[int, ...] | None) -> list[str]:
    return [name for since, name in FEATURES if version is None or version < since]


def pgvector_versions(conn) -> dict:
    row = conn.execute(text(
        "SELECT current_setting('server_version'), "
        "(SELECT default_version FROM pg_available_extensions WHERE name = 'vector'), "
        "(SELECT extversion FROM pg_extension WHERE extname = 'vector')")).first()
    return {"server": row[0], "available": row[1], "installed": row[2]}


def check_pgvector(engine) -> dict:
    """Raise ServiceUnavailable when the server cannot give pgvector 0.8; return the versions."""
    with engine.connect() as conn:
        v = pgvector_versions(conn)
    available = parse_version(v["available"])
    if available is None:
        raise ServiceUnavailable(
            f"The PostgreSQL {v['server']} server at DATABASE_URL has no pgvector extension. "
            "kbframework needs pgvector 0.8 or newer (install the package for your PostgreSQL, "
            "or unset DATABASE_URL to use the embedded PostgreSQL 18 + pgvector 0.8).")
    if available < REQUIRED:
        missing = "; ".join(missing_features(available))
        raise ServiceUnavailable(
            f"The server at DATABASE_URL offers pgvector {v['available']}, kbframework needs 0.8 or "
            f"newer. Missing: {missing}. Upgrade pgvector on that server (then `kbf db upgrade` "
            "runs ALTER EXTENSION vector UPDATE), or unset DATABASE_URL to use the embedded server.")
    return v
