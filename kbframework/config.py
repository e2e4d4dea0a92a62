"""One configuration, read from ``KB_``-prefixed environment variables (plus the usual
``DATABASE_URL``, ``REDIS_URL``, ``OPENAI_API_KEY``). Every variable is listed in the README.
"""
from __future__ import annotations

import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path

from kbframework.addresses import parse_private_network_setting


def _env(name: str, default: str | None = None) -> str | None:
    val = os.environ.get(name)
    return val if val not in (None, "") else default


def _int(name: str, default: int) -> int:
    val = _env(name)
    try:
        return int(val) if val is not None else default
    except ValueError:
        raise SystemExit(f"{name} must be an integer, got {val!r}")


def _float(name: str, default: float) -> float:
    val = _env(name)
    try:
        return float(val) if val is not None else default
    except ValueError:
        raise SystemExit(f"{name} must be a number, got {val!r}")


@dataclass
class Config:
    data_dir: Path
    database_url: str | None
    database_read_url: str | None
    redis_url: str | None
    embedding_provider: str
    llm_provider: str
    openai_api_key: str | None
    llm_base_url: str | None
    llm_model: str
    openai_embedding_model: str
    exact_scan_max_rows: int
    hnsw_ef_search: int
    host: str
    port: int
    max_question_chars: int
    upload_max_bytes: int
    pdf_max_pages: int
    session_days: int
    allow_private_network: str = ""
    tenant_private_network: bool = False
    extra: dict = field(default_factory=dict)

    @classmethod
    def from_env(cls) -> "Config":
        data_dir = Path(_env("KB_DATA_DIR", "./var")).resolve()
        return cls(
            data_dir=data_dir,
            database_url=_env("DATABASE_URL"),
            database_read_url=_env("DATABASE_READ_URL"),
            redis_url=_env("REDIS_URL"),
            embedding_provider=_env("KB_EMBEDDING_PROVIDER", "wordllama"),
            llm_provider=_env("KB_LLM_PROVIDER", "auto"),
            openai_api_key=_env("OPENAI_API_KEY"),
            llm_base_url=_env("KB_LLM_BASE_URL", _env("OPENAI_BASE_URL")),
            llm_model=_env("KB_LLM_MODEL", "gpt-4o-mini"),
            openai_embedding_model=_env("KB_OPENAI_EMBEDDING_MODEL", "text-embedding-3-small"),
            exact_scan_max_rows=_int("KB_EXACT_SCAN_MAX_ROWS", 20000),
            hnsw_ef_search=_int("KB_HNSW_EF_SEARCH", 200),
            host=_env("KB_HOST", "127.0.0.1"),
            port=_int("KB_PORT", 5000),
            max_question_chars=_int("KB_MAX_QUESTION_CHARS", 4000),
            upload_max_bytes=_int("KB_UPLOAD_MAX_BYTES", 25 * 1024 * 1024),
            pdf_max_pages=_int("KB_PDF_MAX_PAGES", 500),
            session_days=_int("KB_SESSION_DAYS", 14),
            allow_private_network=_env("KB_ALLOW_PRIVATE_NETWORK", "") or "",
            tenant_private_network=_env("KB_TENANT_PRIVATE_NETWORK", "0") == "1",
        )

    @property
    def private_network_policy(self):
        """``KB_ALLOW_PRIVATE_NETWORK`` as an ``addresses.AddressPolicy`` (a bad value stops start-up)."""
        try:
            return parse_private_network_setting(self.allow_private_network)
        except ValueError as exc:
            raise SystemExit(f"KB_ALLOW_PRIVATE_NETWORK: {exc}")

    def secret(self, name: str, env: str, nbytes: int = 32, fernet: bool = False) -> str:
        """A secret from the environment, else one generated once and kept in the data dir."""
        val = _env(env)
        if val:
            return val
        path = self.data_dir / "secrets" / name
        if path.exists():
            return path.read_text().strip()
        path.parent.mkdir(parents=True, exist_ok=True)
        if fernet:
            from cryptography.fernet import Fernet

            val = Fernet.generate_key().decode()
        else:
            val = secrets.token_urlsafe(nbytes)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(val)
        return val


_config: Config | None = None


def get_config() -> Config:
    global _config
    if _config is None:
        _config = Config.from_env()
    return _config


def reset_config() -> None:
    global _config
    _config = None
