"""Uploading a file as a document, for every source type whose connector accepts files.

``POST /api/admin/v1/sources/<type>/upload`` (multipart: ``file``, ``title``?, ``role``?,
``replace_document_id``?; ``?wait=1`` reads and indexes it before answering).
"""
from __future__ import annotations

from flask import request

from kbframework.errors import ValidationFailed
from kbframework.sources.uploads import upload, upload_connector
from kbframework.web.api.common import blueprint, org_id
from kbframework.web.auth import admin_required

bp = blueprint("uploads", __name__)


@bp.post("/sources/<type_>/upload")
@admin_required
def upload_file(type_):
    connector = upload_connector(type_)
    f = request.files.get("file")
    if f is None or not f.filename:
        raise ValidationFailed(f"Send the {connector.label or type_} file as a multipart field named 'file'.",
                               code="file_missing")
    replace = request.form.get("replace_document_id") or None
    out = upload(org_id(), type_, f.read(), f.filename, title=request.form.get("title") or None,
                 role=request.form.get("role") or "support", replace_document_id=replace,
                 inline=request.args.get("wait") == "1")
    if out.get("accepted"):
        return out, 202  # stored; indexed once the job queue is reachable again
    return out, 200 if replace else 201
