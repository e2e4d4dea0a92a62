"""Which organization a queued job works for, so the worker runs it behind that
organization's row-level security wall.

A job that belongs to one organization records the organization in its meta when it is
queued: the organization of the code that queued it (a web request, a job already running
for that organization), or one named with ``for_organization=`` by code that runs
cross-organization (the scheduler's sweeps, the CLI). The worker runs the job inside
``tenancy.organization(...)``. A job that records none runs in the worker's default scope,
*nobody*, and sees no tenant rows, unless its function declares ``tenancy.system("why")``
itself: the work that is truly cross-organization (the due-source sweep, the recovery sweep,
expiry, the retention purge, index builds) says so in its own code.
"""
from __future__ import annotations

import logging
import uuid
from contextlib import contextmanager
from typing import Iterator, Optional

from kbframework import tenancy

log = logging.getLogger("kbframework.jobs")

ORG_KEY = "organization_id"


def with_organization(meta: dict | None, for_organization=None) -> dict:
    """``meta`` plus the organization the job works for: the one named, else one already in
    ``meta`` (a job held in the outbox and queued later by the sweep), else the current scope's."""
    out = dict(meta or {})
    org = for_organization or out.get(ORG_KEY) or tenancy.current_organization()
    if org:
        out[ORG_KEY] = str(org if isinstance(org, uuid.UUID) else uuid.UUID(str(org)))
    return out


def organization_of(job) -> Optional[str]:
    return ((getattr(job, "meta", None) or {}).get(ORG_KEY)) or None


@contextmanager
def running(job) -> Iterator[None]:
    """The job's organization scope; a job without one keeps the process default (nobody in a
    worker)."""
    org = organization_of(job)
    if not org:
        yield
        return
    with tenancy.organization(org):
        yield


class ScopedJobs:
    """Mixin for an RQ worker class: each job, and its success or failure callback, runs in the
    organization recorded on it."""

    def perform_job(self, job, queue, *args, **kwargs):
        with running(job):
            return super().perform_job(job, queue, *args, **kwargs)
