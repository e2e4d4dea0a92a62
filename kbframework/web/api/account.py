"""Who is signed in, and which plugins this host runs."""
from __future__ import annotations

from flask_login import current_user, login_required

from kbframework.hooks import registry
from kbframework.hooks.manager import list_plugins
from kbframework.web.api.common import blueprint
from kbframework.web.auth import csrf_token

bp = blueprint("account", __name__)


@bp.get("/me")
@login_required
def me():
    return {"user": {"id": current_user.user_id, "email": current_user.email, "role": current_user.role},
            "organization": {"id": current_user.organization_id, "name": current_user.organization_name,
                             "slug": current_user.organization_slug},
            "csrf_token": csrf_token()}


@bp.get("/plugins")
@login_required
def plugins():
    return {"plugins": list_plugins(), "source_types": sorted(registry.source_types()),
            "presets": sorted(registry.presets())}
