"""``POST /api/admin/v1/upload/pdf`` (multipart: file, title?, role?, replace_document_id?)."""
from __future__ import annotations

from flask import Blueprint, request
from flask_login import current_user

from kbframework.errors import ValidationFailed
from kbframework.web.auth import admin_required

from kbframework_pdf.service import upload

bp = Blueprint("pdf_upload", __name__)


@bp.post("/api/admin/v1/upload/pdf")
@admin_required
def upload_pdf():
    f = request.files.get("file")
    if f is None or not f.filename:
        raise ValidationFailed("Send the PDF as a multipart field named 'file'.", code="file_missing")
    data = f.read()
    if not data:
        raise ValidationFailed("The uploaded file is empty.", code="pdf_empty")
    out = upload(current_user.organization_id, data, f.filename, title=request.form.get("title") or None,
                 role=request.form.get("role") or "support",
                 replace_document_id=request.form.get("replace_document_id") or None,
                 inline=request.args.get("wait") == "1")
    if out.get("accepted"):
        return out, 202  # stored; indexed once the job queue is reachable again
    return out, 201 if not request.form.get("replace_document_id") else 200
