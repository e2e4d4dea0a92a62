"""Sign-in throttling, per account and per address, shared by both login routes (the page
form and the JSON API) and by every web process (the counts live in Redis).

- per address: at most ``KB_LOGIN_PER_ADDRESS_MINUTE`` attempts (default 20) a minute from
  one visitor address, whichever route and whatever account;
- per account: after ``KB_LOGIN_MAX_FAILURES`` wrong passwords (default 10) within
  ``KB_LOGIN_LOCKOUT_SECONDS`` (default 900) the account refuses sign-ins until the oldest
  failure leaves that window -- from every address, so spreading a guessing run over many
  addresses does not help.

Failures are counted for any e-mail address, known or not, and the lockout answer is the
same for both, so the throttle never tells whether an account exists. A successful sign-in
clears its account's failures.
"""
from __future__ import annotations

import hashlib
import time
import uuid

from flask import current_app

from kbframework.config import _int
from kbframework.errors import KBError

LOCKED_MESSAGE = ("Too many sign-in attempts for this account or from your address. "
                  "Try again in {wait}.")


class LoginThrottled(KBError):
    status = 429
    code = "login_throttled"

    def __init__(self, retry_after: int):
        super().__init__(LOCKED_MESSAGE.format(wait=_human(retry_after)), details={"retry_after": retry_after})
        self.retry_after = retry_after


def _human(seconds: int) -> str:
    if seconds < 90:
        return f"{seconds} seconds"
    return f"{-(-seconds // 60)} minutes"


def limits() -> dict:
    return {"per_address_minute": _int("KB_LOGIN_PER_ADDRESS_MINUTE", 20),
            "max_failures": _int("KB_LOGIN_MAX_FAILURES", 10),
            "lockout_seconds": _int("KB_LOGIN_LOCKOUT_SECONDS", 900)}


def _account_key(email: str) -> str:
    norm = (email or "").strip().lower()
    return "kbf:login:acct:" + hashlib.sha256(norm.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def _address_enabled() -> bool:
    # the test suite switches request rate limits off (RATELIMIT_ENABLED) because it signs
    # in far more often than 20 times a minute from one address; account lockout stays on
    return bool(current_app.config.get("RATELIMIT_ENABLED", True))


def before_attempt(email: str, address: str) -> None:
    """Refuse (429 + Retry-After) when the address or the account is throttled; records the
    attempt against the address."""
    from kbframework.jobs.queues import get_redis
    from kbframework.web.embed_security import _ip_tag, hit

    lim = limits()
    if _address_enabled():
        which, retry = hit([(f"kbf:login:ip:{_ip_tag(address)}", 60, lim["per_address_minute"])])
        if which:
            raise LoginThrottled(retry)
    r = get_redis()
    key = _account_key(email)
    now = time.time()
    window = lim["lockout_seconds"]
    pipe = r.pipeline()
    pipe.zremrangebyscore(key, "-inf", now - window)
    pipe.zrange(key, 0, -1, withscores=True)
    _, entries = pipe.execute()
    if len(entries) >= lim["max_failures"]:
        oldest_relevant = entries[len(entries) - lim["max_failures"]][1]
        raise LoginThrottled(max(1, int(oldest_relevant + window - now + 0.999)))


def record_failure(email: str) -> None:
    from kbframework.jobs.queues import get_redis

    key = _account_key(email)
    window = limits()["lockout_seconds"]
    pipe = get_redis().pipeline()
    pipe.zadd(key, {uuid.uuid4().hex: time.time()})
    pipe.expire(key, window + 60)
    pipe.execute()


def record_success(email: str) -> None:
    from kbframework.jobs.queues import get_redis

    get_redis().delete(_account_key(email))
