"""Extensions created unbound; ``create_app`` attaches them with ``init_app``."""
from flask_cors import CORS
from flask_limiter import Limiter
from flask_limiter.util import get_remote_address
from flask_login import LoginManager


def _storage_uri() -> str:
    from kbframework.jobs.queues import redis_url_for_limits

    return redis_url_for_limits()


login_manager = LoginManager()
limiter = Limiter(key_func=get_remote_address, default_limits=[], strategy="fixed-window",
                  headers_enabled=True)  # storage: RATELIMIT_STORAGE_URI (Redis), set by create_app
cors = CORS()
