"""RQ job functions. They take ids, never ORM objects, and build the host once per worker
process, so a worker sees exactly the plugins the web process sees.

A job for one organization runs in the organization recorded when it was queued
(``kbframework.jobs.scope``); the worker's own default sees no rows. The jobs that are truly
cross-organization declare the system bypass here, each with its reason."""
from __future__ import annotations

import logging

from kbframework import tenancy
from kbframework.jobs.boot import boot

log = logging.getLogger("kbframework.jobs.tasks")


def ingest_documents_job(document_ids: list[str], force: bool = False) -> dict:
    boot()
    from kbframework.ingest.queue import ingest_now

    return {"results": [r.__dict__ for r in ingest_now(document_ids, force=force)]}


def refresh_statistics_job(deferrals: int = 0) -> dict:
    """ANALYZE after a load, queued behind its ingest jobs (kbframework.ingest.queue)."""
    boot()
    from kbframework.ingest.queue import refresh_statistics_queued

    return refresh_statistics_queued(deferrals)


def refresh_word_counts_job(org: str, deferrals: int = 0, force: bool = False) -> dict:
    """Count a small organization's words again after a load that wrote its chunks, queued
    behind its ingest jobs (kbframework.ingest.queue, retrieval.term_stats)."""
    boot()
    from kbframework.ingest.behind_the_load import refresh_word_counts_queued

    return refresh_word_counts_queued(org, deferrals, force)


def build_vector_index_job(model: str, dim: int, org: str | None = None) -> dict:
    """Build an organization's HNSW index for a model, and its own full-text index, once the
    load that took it past the exact-scan size is written (a job queued by an earlier release
    names no organization: then every organization that needs one gets it)."""
    boot()
    from kbframework.retrieval import vector_index

    with tenancy.system("build the vector index of an organization's chunks (CREATE INDEX CONCURRENTLY)"):
        if org is None:
            return {"built": vector_index.ensure_all()}
        # the organization's own full-text index first: the vector build analyzes after it
        full_text = vector_index.build_fulltext(org)
        return {**vector_index.build(model, dim, org, analyze_after=True), "full_text": full_text}


def drop_organization_vector_indexes_job(org_id: str) -> list[str]:
    """Drop a deleted organization's own vector indexes (organization deletion calls it
    in place; a job so that an operator's script can queue it too)."""
    boot()
    from kbframework.retrieval.vector_index import drop_for_organization

    with tenancy.system("drop a deleted organization's vector indexes"):
        return drop_for_organization(org_id)


def sync_source_job(source_id: str, kind: str = "incremental") -> dict:
    boot()
    from kbframework.sources.sync import run_sync

    return run_sync(source_id, kind=kind)


def webhook_job(source_id: str, external_id: str, event: str, payload: dict | None = None,
                webhook_event_id: int | None = None) -> dict:
    boot()
    from rq import get_current_job

    from kbframework.sources.sync import process_webhook
    from kbframework.sources.webhook_queue import release

    job = get_current_job()
    # from here on, a new delivery for this item queues a new job (this one may have read it)
    event = release(source_id, external_id, job.id if job else None, event)
    return process_webhook(source_id, external_id, event, payload, webhook_event_id)


def reindex_job(organization_id: str, which: str = "all", document_id: str | None = None) -> dict:
    boot()
    from datetime import datetime, timezone

    from rq import get_current_job

    from kbframework.sources.documents import reindex_now

    since = None
    job = get_current_job()
    if job is not None:  # a retry after a dead worker resumes where the first attempt got to
        first = (job.meta or {}).get("first_started_at")
        if first and (job.meta or {}).get("attempts"):
            since = datetime.fromisoformat(first)
        elif not first:
            job.meta["first_started_at"] = datetime.now(timezone.utc).isoformat()
            job.save_meta()
    with tenancy.organization(organization_id):  # the job names its organization: it runs there
        return reindex_now(organization_id, which=which, document_id=document_id, skip_indexed_since=since)


def expire_job() -> dict:
    boot()
    from kbframework.sources.documents import expire_documents

    with tenancy.system("expire documents past their date in every organization"):
        return expire_documents()


def recover_job() -> dict:
    """The scheduler's recovery pass: abandoned jobs, stopped sync runs, held and lost work."""
    boot()
    from kbframework.jobs.recovery import sweep

    with tenancy.system("the recovery sweep over every organization's runs and receipts"):
        return sweep(registries=True)


def retention_job() -> dict:
    """Delete conversations and feedback older than each organization's retention."""
    boot()
    from kbframework.orgs.privacy import purge_expired

    with tenancy.system("retention purge of every organization"):
        return purge_expired()


def reconcile_due_job() -> dict:
    """Enqueue the reconciliation sync of every source whose interval has passed, each for its
    source's organization."""
    boot()
    from kbframework.jobs.queues import enqueue
    from kbframework.sources.schedule import due_syncs, source_organizations

    with tenancy.system("the scheduler's sweep of every organization's sources due for a sync"):
        out = due_syncs()
        orgs = source_organizations(list(out))
    for source_id, kind in out.items():
        if source_id in orgs:  # a source deleted since is not synced
            enqueue("sync", "kbframework.jobs.tasks.sync_source_job", source_id, kind,
                    job_id=f"reconcile-{source_id}", for_organization=orgs[source_id])
    return {"enqueued": {k: v for k, v in out.items() if k in orgs}}


def read_upload_job(document_id: str) -> dict:
    boot()
    from kbframework.sources.uploads import read_upload

    return read_upload(document_id)
