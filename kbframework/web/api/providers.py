"""The active model providers, and a live check that they answer."""
from __future__ import annotations

from flask_login import login_required

from kbframework.review.providers import check_providers, providers_info
from kbframework.web.api.common import blueprint

bp = blueprint("providers", __name__)


@bp.get("/providers")
@login_required
def get_providers():
    return providers_info()


@bp.post("/providers/check")
@login_required
def post_providers_check():
    return check_providers()
