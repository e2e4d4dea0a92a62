"""Deleting an organization and everything it owns: its rows in every table, the stored files
only its documents use, its Redis keys and its queued jobs (on Redis, and held in PostgreSQL while Redis was down).

Rows go with the organization (every table's ``organization_id`` cascades), users who belong
to no other organization go too. Files are stored by content hash and may be shared between
organizations, so a file is removed only when no remaining document names its hash. Redis
keys are found by the ids they contain (the organization's, its sources', its assistant
keys'); queued jobs by the ids in their arguments.
"""
from __future__ import annotations

import logging
from pathlib import Path

from sqlalchemy import delete, func, select

from kbframework.models import AssistantKey, Document, Membership, Organization, Source, User

log = logging.getLogger("kbframework.orgs.lifecycle")


def owned_ids(s, org_id) -> dict:
    """The ids other stores use to name what the organization owns."""
    return {"organization": [str(org_id)],
            "sources": [str(x) for x in s.scalars(select(Source.id).where(Source.organization_id == org_id))],
            "keys": [str(x) for x in s.scalars(select(AssistantKey.id).where(AssistantKey.organization_id == org_id))],
            "documents": [str(x) for x in s.scalars(select(Document.id).where(Document.organization_id == org_id))]}


def _file_hashes(s, org_id) -> set[str]:
    rows = s.scalars(select(Document.metadata_["file_sha256"].astext).where(
        Document.organization_id == org_id, Document.metadata_.has_key("file_sha256")))  # noqa: W601
    return {h for h in rows if h}


def stored_files(hashes: set[str]) -> list[Path]:
    """Files under the data folder's ``files/`` stored by one of these content hashes."""
    from kbframework.config import get_config

    root = get_config().data_dir / "files"
    if not hashes or not root.is_dir():
        return []
    return [p for p in root.glob("*/*") if p.is_file() and p.name.split(".")[0] in hashes]


def delete_organization(org_id) -> dict:
    """Remove the organization and everything it owns; returns what was removed. Runs with the
    row-level security bypass: whether a user or a stored file is also another organization's
    can only be seen across organizations."""
    from kbframework import tenancy

    with tenancy.system("delete an organization and everything it owns"):
        return _delete_organization(org_id)


def _delete_organization(org_id) -> dict:
    from kbframework.db import session_scope

    with session_scope() as s:
        org = s.get(Organization, org_id)
        if org is None:
            from kbframework.errors import NotFound

            raise NotFound("No such organization.")
        slug = org.slug
        ids = owned_ids(s, org.id)
        hashes = _file_hashes(s, org.id)
        members = list(s.scalars(select(Membership.user_id).where(Membership.organization_id == org.id)))
    named = set(ids["organization"] + ids["sources"] + ids["documents"])
    jobs = cancel_jobs(named) + drop_held_jobs(named)
    with session_scope() as s:
        s.execute(delete(Organization).where(Organization.id == org_id))  # every owned row cascades
        s.flush()
        lonely = [u for u in members if not s.scalar(select(func.count()).select_from(Membership)
                                                     .where(Membership.user_id == u))]
        if lonely:
            s.execute(delete(User).where(User.id.in_(lonely)))
        still_used = {h for h in s.scalars(select(Document.metadata_["file_sha256"].astext).where(
            Document.metadata_["file_sha256"].astext.in_(hashes)))} if hashes else set()
    files = []
    for path in stored_files(hashes - still_used):
        try:
            path.unlink()
            files.append(str(path))
        except OSError as exc:
            log.warning("could not remove %s: %s", path, exc)
    keys = delete_redis_keys(ids["organization"] + ids["sources"] + ids["keys"])
    indexes = _drop_vector_indexes(org_id)
    log.warning("organization %s (%s) deleted: %d users, %d files, %d Redis keys, %d jobs, %d vector indexes",
                slug, org_id, len(lonely), len(files), keys, jobs, len(indexes))
    return {"organization": slug, "id": str(org_id), "users": len(lonely), "files": files, "redis_keys": keys,
            "jobs": jobs, "sources": len(ids["sources"]), "documents": len(ids["documents"]),
            "vector_indexes": indexes}


def _drop_vector_indexes(org_id) -> list[str]:
    """The organization's own vector indexes: their predicate names it, so nothing else
    would ever drop them (an empty index still costs every insert a predicate test)."""
    from sqlalchemy.exc import SQLAlchemyError

    from kbframework.jobs.tasks import drop_organization_vector_indexes_job

    try:
        return drop_organization_vector_indexes_job(str(org_id))
    except SQLAlchemyError as exc:  # the rows are gone; `kbf db indexes --build` drops it later
        log.warning("could not drop the vector indexes of organization %s: %s", org_id, exc)
        return []


def delete_redis_keys(ids: list[str]) -> int:
    from kbframework.jobs.queues import get_redis

    r = get_redis()
    n = 0
    for i in ids:
        batch = list(r.scan_iter(match=f"*{i}*", count=1000))
        if batch:
            n += r.delete(*batch)
    return n


def cancel_jobs(ids: set[str]) -> int:
    """Remove queued, scheduled and deferred jobs whose arguments name one of these ids."""
    from rq.job import Job
    from rq.registry import DeferredJobRegistry, ScheduledJobRegistry

    from kbframework.jobs.queues import QUEUE_NAMES, get_redis, queue

    r = get_redis()
    n = 0
    for name in QUEUE_NAMES:
        q = queue(name)
        job_ids = set(q.get_job_ids())
        for reg in (ScheduledJobRegistry(queue=q), DeferredJobRegistry(queue=q)):
            job_ids |= set(reg.get_job_ids())
        for jid in job_ids:
            try:
                job = Job.fetch(jid, connection=r)
                args = [str(a) for a in (job.args or [])] + [str(v) for v in (job.kwargs or {}).values()]
            except Exception:  # a job whose data is gone or unreadable: nothing of ours to find
                log.debug("skipping unreadable job %s", jid, exc_info=True)
                continue
            if any(a in ids or any(i in a for i in ids) for a in args):
                q.remove(jid)
                for reg in (ScheduledJobRegistry(queue=q), DeferredJobRegistry(queue=q)):
                    reg.remove(jid)
                job.delete()
                n += 1
    return n


def drop_held_jobs(ids: set[str]) -> int:
    """Remove jobs held in PostgreSQL while Redis was down (``job_outbox``) that name these ids."""
    from kbframework.db import session_scope
    from kbframework.models import JobOutbox

    n = 0
    with session_scope() as s:
        for job in s.scalars(select(JobOutbox)):
            text = " ".join(str(a) for a in (job.args or [])) + " " + " ".join(
                str(v) for v in (job.kwargs or {}).values()) + " " + (job.job_id or "")
            if any(i in text for i in ids):
                s.delete(job)
                n += 1
    return n


def count_rows(s) -> dict:
    """Rows per table (``kbf org delete`` prints it; the tests compare it)."""
    from kbframework.models import Base

    return {t.name: s.scalar(select(func.count()).select_from(t)) for t in Base.metadata.sorted_tables}


def org_row_counts(s, org_id) -> dict:
    """Rows per table that belong to one organization."""
    from kbframework.models import Base

    out = {}
    for t in Base.metadata.sorted_tables:
        col = t.c.get("organization_id") if t.name != "organizations" else t.c.id
        if col is not None:
            out[t.name] = s.scalar(select(func.count()).select_from(t).where(col == org_id))
    return out
