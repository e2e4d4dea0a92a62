"""The dashboard summary."""
from __future__ import annotations

from flask_login import login_required

from kbframework.db import session_scope
from kbframework.review.dashboard import dashboard_summary
from kbframework.web.api.common import blueprint, org_id

bp = blueprint("dashboard", __name__)


@bp.get("/dashboard")
@login_required
def dashboard():
    with session_scope() as s:
        return dashboard_summary(s, org_id())
