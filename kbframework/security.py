"""Passwords (Argon2id), secrets at rest (Fernet), random tokens.

Argon2 and Fernet are imported by the functions that use them: most callers (an
organization looked up by its slug, a token hashed) need neither, and loading both takes
tens of milliseconds of a short command like ``kbf ask``.
"""
from __future__ import annotations

import functools
import hashlib
import json
import secrets

from kbframework.config import get_config
from kbframework.errors import KBError


@functools.lru_cache(maxsize=1)
def _hasher():
    from argon2 import PasswordHasher

    return PasswordHasher()


def hash_password(password: str) -> str:
    return _hasher().hash(password)


def verify_password(stored: str, password: str) -> bool:
    from argon2.exceptions import InvalidHashError, VerificationError

    try:
        return _hasher().verify(stored, password)
    except (VerificationError, InvalidHashError):
        return False


def new_token(nbytes: int = 32) -> str:
    return secrets.token_urlsafe(nbytes)


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _fernet():
    from cryptography.fernet import Fernet

    return Fernet(get_config().secret("encryption_key", "KB_ENCRYPTION_KEY", fernet=True).encode())


def encrypt_json(data: dict) -> str:
    return _fernet().encrypt(json.dumps(data).encode()).decode()


class SecretsUnreadable(KBError):
    """The instance's key no longer opens what it encrypted: an operator's mistake, not
    the caller's, and nothing retried will fix it until the old key is back."""

    status = 503
    code = "secrets_unreadable"


def decrypt_json(token: str | None) -> dict:
    if not token:
        return {}
    from cryptography.fernet import InvalidToken

    try:
        return json.loads(_fernet().decrypt(token.encode()))
    except InvalidToken:
        raise SecretsUnreadable("Stored secrets cannot be decrypted: KB_ENCRYPTION_KEY changed?") from None


def mask(value: str | None) -> str | None:
    """Show a secret back only as its last four characters."""
    if not value:
        return value
    return "••••" + value[-4:] if len(value) > 8 else "••••"
