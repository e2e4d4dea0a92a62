"""The embedded server starts with settings for the machine it is on, not initdb's defaults."""


def test_the_running_embedded_server_has_the_products_settings(kb_services):
    import os

    from sqlalchemy import text

    from kbframework.db import get_engine
    from kbframework.embedded.postgres import tuning

    if os.environ.get("KB_TEST_EXTERNAL") == "1":
        import pytest

        pytest.skip("an operator's own server keeps its own settings")
    want = tuning()
    with get_engine().connect() as conn:
        assert conn.execute(text("SHOW random_page_cost")).scalar() == want["random_page_cost"] == "1.1"
        shared = conn.execute(text("SELECT setting::bigint * 8 / 1024 FROM pg_settings "
                                   "WHERE name = 'shared_buffers'")).scalar()
    assert shared == int(want["shared_buffers"].removesuffix("MB")) and 128 <= shared <= 4096
    with get_engine().connect() as conn:
        assert conn.execute(text("SHOW io_method")).scalar() == "sync"  # PostgreSQL 18's default is worker


def test_the_settings_of_postgresql_18_are_not_given_to_older_binaries(monkeypatch):
    from pathlib import Path

    from kbframework.embedded import postgres

    monkeypatch.delenv("KB_PG_IO_METHOD", raising=False)
    monkeypatch.setattr(postgres, "binary_major", lambda bindir=None: "16")
    assert postgres.server_settings(Path("/nowhere/bin")) == {}
    monkeypatch.setattr(postgres, "binary_major", lambda bindir=None: "18")
    assert postgres.server_settings(Path("/nowhere/bin")) == {"io_method": "sync"}  # no pg_prewarm there
    assert postgres.server_settings(postgres.bin_dir()) == {"io_method": "sync", "shared_preload_libraries": "pg_prewarm"}
    monkeypatch.setenv("KB_PG_IO_METHOD", "worker")
    assert postgres.server_settings(Path("/nowhere/bin"))["io_method"] == "worker"


def test_tuning_follows_the_memory_and_the_overrides(monkeypatch):
    from kbframework.embedded import postgres

    monkeypatch.delenv("KB_PG_SHARED_BUFFERS", raising=False)
    monkeypatch.delenv("KB_PG_RANDOM_PAGE_COST", raising=False)
    monkeypatch.setattr(postgres, "_memory_bytes", lambda: 24 << 30)
    assert postgres.tuning() == {"shared_buffers": "4096MB", "effective_cache_size": "18432MB",
                                 "random_page_cost": "1.1"}
    monkeypatch.setattr(postgres, "_memory_bytes", lambda: 2 << 30)
    assert postgres.tuning()["shared_buffers"] == "512MB"
    monkeypatch.setattr(postgres, "_memory_bytes", lambda: 256 << 20)
    assert postgres.tuning()["shared_buffers"] == "128MB"
    monkeypatch.setenv("KB_PG_SHARED_BUFFERS", "1GB")
    monkeypatch.setenv("KB_PG_RANDOM_PAGE_COST", "2")
    got = postgres.tuning()
    assert got["shared_buffers"] == "1GB" and got["random_page_cost"] == "2"
