"""What every admin API resource shares: its blueprint's URL prefix, the caller's
organization, and the JSON body and query numbers read with clear errors."""
from __future__ import annotations

from flask import Blueprint, request
from flask_login import current_user

from kbframework.errors import KBError, ValidationFailed
from kbframework.orgs.accounts import as_uuid

PREFIX = "/api/admin/v1"


def blueprint(name: str, import_name: str) -> Blueprint:
    """One blueprint per resource, all under the admin API's prefix."""
    return Blueprint(f"api_{name}", import_name, url_prefix=PREFIX)


def org_id():
    return as_uuid(current_user.organization_id)


def body() -> dict:
    if not request.data:
        return {}
    data = request.get_json(silent=True)
    if data is None:
        raise KBError("The request body is not valid JSON.", code="malformed_json")
    if not isinstance(data, dict):
        raise ValidationFailed("The request body must be a JSON object.")
    return data


def int_arg(v, default):
    try:
        return int(v) if v not in (None, "") else default
    except ValueError:
        raise ValidationFailed(f"'{v}' is not a number.")


HELD_MESSAGE = ("Saved. The job queue is not reachable right now; the document is indexed as soon "
                "as it is back.")


def accepted(out: dict, job, status: int):
    """A write that succeeded while its job had to wait in the outbox (Redis unreachable):
    202 and a body that says the work will happen, instead of refusing a saved write."""
    from kbframework.jobs.queues import is_held

    if is_held(job):
        return {**out, "accepted": True, "indexing": "pending", "message": HELD_MESSAGE}, 202
    return out, status
