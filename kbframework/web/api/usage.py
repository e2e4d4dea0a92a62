"""A month of token usage and cost, and the budget."""
from __future__ import annotations

from flask import request
from flask_login import login_required

from kbframework.db import session_scope
from kbframework.orgs.budget import usage_summary
from kbframework.web.api.common import blueprint, org_id

bp = blueprint("usage", __name__)


@bp.get("/usage")
@login_required
def usage():
    with session_scope() as s:
        return usage_summary(s, org_id(), request.args.get("month") or None)
