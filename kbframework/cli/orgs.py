"""``kbf org list|show|set|delete``: the operator's commands for organizations, their declared
settings (the operator may change every one, operator-only ones included) and their deletion."""
from __future__ import annotations

import json

import click

from kbframework.cli.common import _org, out_json
from kbframework.errors import ValidationFailed


@click.command("list")
@click.option("--json", "as_json", is_flag=True)
def org_list(as_json):
    """Every organization: slug, name, time zone, documents, conversations, budget."""
    from sqlalchemy import func, select

    from kbframework.db import session_scope
    from kbframework.models import ChatLog, Document, Organization, Setting

    with session_scope() as s:
        docs = dict(s.execute(select(Document.organization_id, func.count()).where(Document.status != "deleted")
                              .group_by(Document.organization_id)).all())
        logs = dict(s.execute(select(ChatLog.organization_id, func.count()).group_by(ChatLog.organization_id)).all())
        rows = s.execute(select(Organization, Setting).outerjoin(Setting, Setting.organization_id == Organization.id)
                         .order_by(Organization.created_at)).all()
        items = [{"slug": o.slug, "name": o.name, "timezone": o.timezone, "id": str(o.id),
                  "documents": docs.get(o.id, 0), "conversations_turns": logs.get(o.id, 0),
                  "budget": (f"{st.budget_limit:g} {st.budget_unit}" if st and st.budget_unit != "none"
                             and st.budget_limit else None)} for o, st in rows]
    if as_json:
        return out_json(items)
    for it in items:
        click.echo(f"{it['slug']}\t{it['name']}\t{it['timezone']}\t{it['id']}\t{it['documents']} documents\t"
                   f"{it['conversations_turns']} chat turns\tbudget {it['budget'] or '-'}")


@click.command("show")
@click.argument("slug")
@click.option("--json", "as_json", is_flag=True)
def org_show(slug, as_json):
    """Every declared setting of an organization and who may change it."""
    from kbframework import settings as declared
    from kbframework.db import session_scope

    with session_scope() as s:
        values = declared.current(s, _org(s, slug).id)
    if as_json:
        return out_json(values)
    for d in declared.SETTINGS:
        who = "" if declared.admin_may_change(d) else "  (operator only)"
        click.echo(f"{d.name} = {json.dumps(values[d.name], default=str, ensure_ascii=False)}{who}")


@click.command("set")
@click.argument("slug")
@click.argument("assignments", nargs=-1, required=True, metavar="KEY=VALUE...")
def org_set(slug, assignments):
    """Change declared settings: ``kbf org set shop retention_days=30 allow_private_network=true``.
    An empty value (``brand=``) clears a setting that may be empty. ``kbf org show SLUG`` lists them."""
    from kbframework import settings as declared
    from kbframework.db import session_scope

    data = {}
    for a in assignments:
        if "=" not in a:
            raise ValidationFailed(f"'{a}' is not KEY=VALUE. Settings: {', '.join(declared.BY_NAME)}.")
        k, v = a.split("=", 1)
        data[k.strip()] = v
    with session_scope() as s:
        oid = _org(s, slug).id
        reindex = declared.apply(s, oid, data, operator=True, from_text=True)
        s.flush()
        values = declared.current(s, oid)
    for k in data:
        click.echo(f"{k} = {json.dumps(values[k], default=str, ensure_ascii=False)}")
    if reindex:
        from kbframework.jobs.queues import enqueue

        enqueue("reindex", "kbframework.jobs.tasks.reindex_job", str(oid), "all")
        click.echo("re-index of every document queued")


@click.command("delete")
@click.argument("slug")
@click.option("--yes", is_flag=True, help="really delete: without it, only what would go is shown")
def org_delete(slug, yes):
    """Delete an organization and everything it owns (rows in every table, stored files only it
    uses, Redis keys, queued jobs). Without --yes, show what would be deleted."""
    from kbframework.db import session_scope
    from kbframework.orgs.lifecycle import delete_organization, org_row_counts

    with session_scope() as s:
        o = _org(s, slug)
        oid, name = o.id, o.name
        counts = org_row_counts(s, oid)
    summary = ", ".join(f"{n} {t}" for t, n in counts.items() if n)
    if not yes:
        click.echo(f"would delete organization {slug} ({name}): {summary}")
        click.echo("run again with --yes to delete it")
        raise SystemExit(1)
    res = delete_organization(oid)
    click.echo(f"deleted organization {slug}: {summary}; {res['users']} users without another organization, "
               f"{len(res['files'])} files, {res['redis_keys']} Redis keys, {res['jobs']} queued jobs")


COMMANDS = (org_list, org_show, org_set, org_delete)  # joined to `kbf org` by commands.py
