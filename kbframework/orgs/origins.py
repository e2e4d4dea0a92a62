"""What an assistant key allows: the website origins it answers (normalized), and the input
limits a visitor's request must keep (defaults and the ranges an admin may set). The domain
owns these; the public embed API enforces them."""
from __future__ import annotations

from urllib.parse import urlsplit

DEFAULT_LIMITS = {
    "max_message_chars": 1000,    # one visitor message
    "max_history_messages": 6,    # entries in "history"
    "max_history_chars": 8000,    # all history contents together (assistant turns counted up to 1,500)
    "max_body_bytes": 65536,      # the raw request body
}
LIMIT_RANGES = {"max_message_chars": (1, 4000), "max_history_messages": (0, 20),
                "max_history_chars": (0, 50000), "max_body_bytes": (1024, 1048576)}


def normalize_origin(value: str | None) -> str | None:
    """``scheme://host[:port]`` in lower case (default ports dropped), or None."""
    if not value or not isinstance(value, str):
        return None
    try:
        parts = urlsplit(value.strip())
        port = parts.port
    except ValueError:
        return None
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        return None
    scheme = parts.scheme.lower()
    host = parts.hostname.lower()
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    default = 443 if scheme == "https" else 80
    return f"{scheme}://{host}" + (f":{port}" if port and port != default else "")
