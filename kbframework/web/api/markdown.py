"""The knowledge editor's markdown preview."""
from __future__ import annotations

from flask_login import login_required

from kbframework.errors import ValidationFailed
from kbframework.text.markdown import render_markdown
from kbframework.web.api.common import blueprint, body

bp = blueprint("markdown", __name__)


@bp.post("/markdown/preview")
@login_required
def markdown_preview():
    src = body().get("markdown", "")
    if not isinstance(src, str):
        raise ValidationFailed("Send the text as a string in 'markdown'.")
    if len(src) > 500_000:
        raise ValidationFailed("The text is too long to preview (at most 500,000 characters).", status=413)
    return {"html": render_markdown(src)}
