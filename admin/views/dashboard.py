"""The dashboard page."""
from __future__ import annotations

from flask import render_template
from flask_login import login_required

from kbframework.db import session_scope
from kbframework.hooks import registry
from kbframework.review.dashboard import dashboard_summary
from kbframework.admin.views.base import bp, org


@bp.get("/")
@login_required
def dashboard():
    with session_scope() as s:
        summary = dashboard_summary(s, org())
    types = registry.source_types()
    return render_template("admin_dashboard.html", d=summary,
                           type_labels={n: c.label or n for n, c in types.items()})
