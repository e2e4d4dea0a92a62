"""``kbf``: the command line. Every failure is one clear line on stderr and a non-zero exit."""
from __future__ import annotations

import json
import os
import sys
from datetime import datetime, timezone
from pathlib import Path

import click

from kbframework.errors import KBError


class KBGroup(click.Group):
    """The root ``kbf`` group. The plugins' commands (``kb_register_commands``) join the table
    only when it is listed (``kbf --help``) or a name is not the host's: a host command runs
    without loading a single plugin for the command line's sake."""

    def get_command(self, ctx, name):
        cmd = super().get_command(ctx, name)
        if cmd is None:
            self._with_plugin_commands()
            cmd = super().get_command(ctx, name)
        return cmd

    def list_commands(self, ctx):
        self._with_plugin_commands()
        return super().list_commands(ctx)

    def _with_plugin_commands(self):
        """A plugin that fails while registering is one line on stderr, like every failure."""
        try:
            add_plugin_commands(self)
        except KBError as exc:
            click.echo(f"error: {exc.message}", err=True)
            sys.exit(3)

    def parse_args(self, ctx, args):
        from kbframework.text.inputs import BadInput, check_text

        try:
            for arg in args:  # undecodable bytes in an argument arrive as lone surrogates
                check_text(arg, "An argument")
        except BadInput as exc:
            raise click.UsageError(str(exc), ctx=ctx)
        return super().parse_args(ctx, args)

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except KBError as exc:
            click.echo(f"error: {exc.message}", err=True)
            if exc.details:
                click.echo(f"       {json.dumps(exc.details)}", err=True)
            sys.exit(2 if exc.status < 500 else 3)
        except SystemExit:
            raise
        except click.exceptions.ClickException:
            raise
        except click.exceptions.Exit:
            raise
        except BrokenPipeError:
            # the reader went away (`kbf ask … | head`): stop quietly, as a Unix tool does; stdout
            # points at /dev/null so the interpreter's own flush at exit cannot fail again
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            sys.exit(141)  # 128 + SIGPIPE, what a shell reports for a tool killed by the pipe
        except Exception as exc:  # the database or Redis down, a broken plugin...
            from sqlalchemy.exc import OperationalError, ProgrammingError

            if isinstance(exc, OperationalError):
                click.echo(f"error: the database is not reachable: {exc.orig}".strip(), err=True)
            elif isinstance(exc, ProgrammingError) and getattr(exc.orig, "pgcode", None) == "42P01":
                # undefined_table: a database nobody migrated yet (a new DATABASE_URL, a new data folder)
                click.echo("error: the database has no kbframework schema yet (or an older one): "
                           "run `kbf db upgrade` first", err=True)
            else:
                click.echo(f"error: {type(exc).__name__}: {exc}", err=True)
            if os.environ.get("KB_DEBUG"):
                raise
            sys.exit(1)


@click.group(cls=KBGroup)
def cli():
    """kbframework: an organization's knowledge, answered with sources."""
    import logging

    logging.basicConfig(level=os.environ.get("KB_LOG_LEVEL", "WARNING"),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")


from kbframework.cli.common import _org, out_json  # noqa: E402  (shared with the command modules)


# --------------------------------------------------------------------------- services


@cli.group()
def services():
    """The embedded PostgreSQL + pgvector and Redis."""


@services.command("start")
def services_start():
    from kbframework.config import get_config
    from kbframework.embedded import start_postgres, start_redis

    cfg = get_config()
    if cfg.database_url is None:
        start_postgres(cfg)
        click.echo(f"postgres: running (data in {cfg.data_dir / 'pg'})")
    else:
        from kbframework.db import get_engine
        from kbframework.embedded.server_check import check_pgvector

        v = check_pgvector(get_engine())
        click.echo(f"postgres: DATABASE_URL is set, nothing started (PostgreSQL {v['server']}, "
                   f"pgvector {v['installed'] or v['available']})")
    if cfg.redis_url is None:
        start_redis(cfg)
        click.echo(f"redis: running (data in {cfg.data_dir / 'redis'})")
    else:
        click.echo("redis: REDIS_URL is set, nothing started")


@services.command("stop")
def services_stop():
    from kbframework.embedded import stop_postgres, stop_redis

    click.echo(f"postgres: {'stopped' if stop_postgres() else 'was not running'}")
    click.echo(f"redis: {'stopped' if stop_redis() else 'was not running'}")


@services.command("upgrade")
@click.option("--old-bin", default=None, metavar="DIR",
              help="bin folder of the PostgreSQL that made the data folder (default: the pgserver wheel's)")
@click.option("--remove-old", is_flag=True, help="delete the old folder once the new server answers")
def services_upgrade(old_bin, remove_old):
    """Move ./var/pg made by an older embedded PostgreSQL (16) to PostgreSQL 18, losing nothing."""
    from kbframework.config import get_config
    from kbframework.embedded.upgrade import upgrade

    cfg = get_config()
    if cfg.database_url:
        raise click.ClickException("DATABASE_URL is set: upgrade that server with its own tools")
    res = upgrade(cfg, old_bin=old_bin, remove_old=remove_old, say=lambda m: click.echo(f"  {m}"))
    if not res["upgraded"]:
        click.echo(f"postgres: {res['message']}, nothing to do")
        return
    click.echo(f"postgres: upgraded {res['from']} -> {res['to']}; {res['rows']} rows in "
               f"{', '.join(res['databases'])} copied and counted")
    if res["old_dir"]:
        click.echo(f"postgres: the old folder is kept at {res['old_dir']} (delete it when satisfied)")
    click.echo("next: kbf db upgrade")


@services.command("status")
@click.option("--json", "as_json", is_flag=True)
def services_status(as_json):
    from kbframework.config import get_config
    from kbframework.embedded import status

    st = status()
    if get_config().database_url is not None or st["postgres"]["running"]:
        from kbframework.db import replication_status

        st["replication"] = replication_status()
    if as_json:
        return out_json(st)
    for name, info in st.items():
        if name == "replication":
            continue
        if not info["embedded"]:
            click.echo(f"{name}: external ({'DATABASE_URL' if name == 'postgres' else 'REDIS_URL'} is set)")
        else:
            line = f"{name}: {'running' if info['running'] else 'stopped'}"
            if info.get("major"):
                line += f" (PostgreSQL {info['major']}, {info['dir']})"
                from kbframework.embedded.postgres import binary_major

                if info["major"] != binary_major():
                    line += " - run `kbf services upgrade`"
            click.echo(line)
    rep = st.get("replication") or {}
    for sb in rep.get("standbys", []):
        lag = sb.get("replay_lag_s")
        click.echo(f"standby {sb.get('application_name') or '?'}: {sb.get('state')}, replay lag "
                   f"{'%.3f s' % lag if lag is not None else '0 s'}, "
                   f"{int(sb.get('bytes_behind') or 0)} bytes behind")
    read = rep.get("read")
    if read is not None:
        if "error" in read:
            click.echo(f"read replica (DATABASE_READ_URL): unreachable - {read['error']}")
        elif not read["in_recovery"]:
            click.echo("read replica (DATABASE_READ_URL): not a standby (it is a primary)")
        else:
            lag = read["lag_s"]
            click.echo(f"read replica (DATABASE_READ_URL): in recovery, last replayed transaction "
                       f"{'%.1f s ago' % lag if lag is not None else 'none yet'}, "
                       f"{int(read['replay_backlog_bytes'] or 0)} bytes received but not replayed")
    if not all(i["running"] for i in st.values() if isinstance(i, dict) and i.get("embedded")):
        sys.exit(1)


@services.group("standby")
def services_standby():
    """A hot standby of the embedded PostgreSQL, for DATABASE_READ_URL."""


@services_standby.command("start")
def services_standby_start():
    """Clone the embedded primary (first time) and start it as a streaming hot standby."""
    from kbframework.embedded.standby import start_standby

    url = start_standby()
    click.echo(f"standby: running, streaming from the embedded primary")
    click.echo(f"export DATABASE_READ_URL='{url.replace('postgresql+psycopg2://', 'postgresql://')}'")


@services_standby.command("stop")
@click.option("--remove", is_flag=True, help="also delete the standby's data folder")
def services_standby_stop(remove):
    from kbframework.embedded.standby import stop_standby

    click.echo(f"standby: {'stopped' if stop_standby(remove=remove) else 'was not running'}")


@services.command("env")
def services_env():
    """Print export lines for other tools: eval "$(kbf services env)"."""
    from kbframework.config import get_config
    from kbframework.embedded import pg_url, redis_url_for

    cfg = get_config()
    db = cfg.database_url or pg_url(cfg).replace("postgresql+psycopg2://", "postgresql://")
    rd = cfg.redis_url or redis_url_for(cfg)
    click.echo(f"export DATABASE_URL='{db}'")
    click.echo(f"export REDIS_URL='{rd}'")


# --------------------------------------------------------------------------- db


@cli.group()
def db():
    """Database schema (Alembic migrations)."""


@db.command("upgrade")
@click.argument("revision", default="head")
def db_upgrade(revision):
    from kbframework.migrate import current, upgrade
    from kbframework.retrieval import vector_index

    upgrade(revision)
    click.echo(f"database at revision {current()}")
    for res in vector_index.ensure_all():  # every embedding model in use keeps its HNSW index
        if res["built"] or res.get("vacuumed"):
            click.echo(f"{res['name']}: {_index_step_done(res)}")


@db.command("current")
def db_current():
    from kbframework.migrate import current

    click.echo(current() or "empty (run kbf db upgrade)")


@db.command("downgrade")
@click.argument("revision")
def db_downgrade(revision):
    from kbframework.migrate import current, downgrade

    downgrade(revision)
    click.echo(f"database at revision {current() or 'base'}")


def _prewarmed(res: dict) -> str:
    blocks = res.get("prewarmed_blocks")
    return f", {blocks} blocks loaded into shared buffers" if blocks else ""


def _index_step_done(res: dict) -> str:
    """What one result of the post-load step (``vector_index.ensure_all``) did."""
    if res.get("vacuumed"):
        return f"vacuumed and analyzed in {res['seconds']} s"
    if res["built"]:
        return f"built in {res['seconds']} s{_prewarmed(res)}"
    return f"dropped ({res['dropped']})" if res.get("dropped") else "already valid"


@db.command("indexes")
@click.option("--build", "build_missing", is_flag=True, help="build every missing or invalid vector index now")
@click.option("--rebuild", metavar="NAME", default=None, help="REINDEX one index CONCURRENTLY")
@click.option("--json", "as_json", is_flag=True)
def db_indexes(build_missing, rebuild, as_json):
    """The organizations' own indexes: one HNSW index per organization and embedding model, for
    each organization with more chunks of the model than an exact scan serves
    (KB_EXACT_SCAN_MAX_ROWS), and a full-text index for each of those organizations, with
    chunks, size and state."""
    from kbframework.db import get_engine
    from kbframework.retrieval import vector_index

    if rebuild:
        res = vector_index.rebuild(rebuild)
        click.echo(f"rebuilt {res['name']} in {res['seconds']} s{_prewarmed(res)}")
    if build_missing:
        for res in vector_index.ensure_all():
            click.echo(f"{res['name']}: {_index_step_done(res)}")
    with get_engine().connect() as conn:
        counts = vector_index.chunk_counts(conn)  # one pass over the chunks for the indexes and the word lists
        rows = vector_index.status(conn, counts)
    if as_json:
        return out_json(rows)
    sizes = vector_index.org_sizes(counts)
    if not rows:
        click.echo(f"no organization has more than {vector_index.threshold()} chunks of one model: "
                   "every search is an exact scan, no vector index is needed")
        _word_lists(sizes)
        return
    for r in rows:
        size = f"{r['bytes'] / 1048576:.1f} MB"
        extra = ""
        if r["progress"]:
            extra = f" ({r['progress']['phase']}, {r['progress']['tuples_done']}/{r['progress']['tuples_total']})"
        org = r["organization"] or r["organization_id"] or "(every organization)"
        chunks = "-" if r["rows"] is None else f"{r['rows']} chunks"
        click.echo(f"{r['name']}\t{org}\t{r['model'] or r.get('kind') or '-'}\t{r['dim'] or '-'}\t{chunks}\t"
                   f"{r['state']}{extra}\t{size}")
    if any(r["state"] in ("missing", "invalid", "superseded", "unused") for r in rows) and not build_missing:
        click.echo("run `kbf db indexes --build` to build the missing ones and drop the ones no longer used",
                   err=True)
    _word_lists(sizes)


def _word_lists(sizes: dict[str, int] | None = None) -> None:
    """One line on the stored word counts the keyword ranking and the expansion read."""
    from kbframework import tenancy
    from kbframework.db import session_scope
    from kbframework.retrieval.term_stats import summary

    with tenancy.system("show the state of every organization's stored word counts"), session_scope() as s:
        w = summary(s, sizes)
    parts = [f"{w['complete']} complete"]
    if w["written_since_small"]:
        parts.append(f"{w['written_since_small']} written since their count (counted again behind the load)")
    if w["written_since_large"]:
        parts.append(f"{w['written_since_large']} above {w['complete_list_max_chunks']} chunks written since "
                     "their count (their counts serve; counted again after a tenth's change)")
    if w["never_counted"]:
        parts.append(f"{w['never_counted']} never counted (`kbf db indexes --build` counts them)")
    click.echo(f"word lists: {w['organizations']} organizations with chunks, {w['words']} words stored; "
               + ", ".join(parts))


# --------------------------------------------------------------------------- orgs and users


@cli.group()
def org():
    """Organizations."""


@org.command("create")
@click.argument("name")
@click.option("--timezone", "tz", default="UTC", show_default=True, help="IANA time zone")
@click.option("--slug")
def org_create(name, tz, slug):
    from kbframework.orgs.accounts import create_org
    from kbframework.db import session_scope

    with session_scope() as s:
        o = create_org(s, name, tz, slug)
        click.echo(f"created organization {o.slug} ({o.id}), time zone {o.timezone}")


@cli.group()
def user():
    """Users and memberships."""


@user.command("create")
@click.argument("email")
@click.option("--org", "org_slug", required=True)
@click.option("--role", type=click.Choice(["admin", "member"]), default="admin", show_default=True)
@click.option("--password", help="default: a random one, printed once")
def user_create(email, org_slug, role, password):
    import secrets

    from kbframework.orgs.accounts import create_user
    from kbframework.db import session_scope

    pw = password or secrets.token_urlsafe(12)
    with session_scope() as s:
        create_user(s, email, pw, _org(s, org_slug), role)
    click.echo(f"user {email} is {role} of {org_slug}" + ("" if password else f"; password: {pw}"))


# --------------------------------------------------------------------------- documents


@cli.group()
def doc():
    """Documents (manual notes, PDFs, lifecycle)."""


@doc.command("add-manual")
@click.option("--org", "org_slug", required=True)
@click.option("--title", required=True)
@click.option("--body-file", type=click.Path(dir_okay=False, allow_dash=True), required=True)
@click.option("--tags", default="")
@click.option("--role", default="manual", show_default=True)
@click.option("--expires", help="ISO date-time with time zone")
@click.option("--queue", "use_queue", is_flag=True, help="hand the indexing to a worker instead")
def doc_add_manual(org_slug, title, body_file, tags, role, expires, use_queue):
    from kbframework.sources import documents as docs
    from kbframework.ingest.queue import queue_ingest
    from kbframework.db import session_scope

    body = sys.stdin.read() if body_file == "-" else _read_text(body_file)
    data = {"title": title, "body": body, "tags": [t for t in tags.split(",") if t.strip()], "role": role}
    if expires:
        data["expires_at"] = expires
    from kbframework import tenancy

    with session_scope() as s:
        org_id = _org(s, org_slug).id
        d = docs.create_manual(s, org_id, data)
        did = d.id
    with tenancy.organization(org_id):  # a queued job runs for the document's organization
        res = queue_ingest([did], inline=not use_queue)
    if use_queue:
        click.echo(f"document {did} queued for indexing")
    else:
        r = res[0]
        if r.action == "error":
            raise KBError(f"document {did} was saved but indexing failed: {r.error}")
        click.echo(f"document {did} indexed: {r.chunks} chunks")


def _read_text(path: str) -> str:
    p = Path(path)
    if not p.exists():
        raise KBError(f"No such file: {path}")
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise KBError(f"{path} is not UTF-8 text.")
    from kbframework.text.inputs import BadInput, check_text

    try:
        check_text(text, path)
    except BadInput as exc:
        raise KBError(str(exc)) from None
    return text


@doc.command("add")
@click.option("--org", "org_slug", required=True)
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--type", "type_", required=True, help="a source type that accepts files, e.g. pdf")
@click.option("--title")
@click.option("--role", default="support", show_default=True)
@click.option("--replace", "replace_id", help="the id of a document of that type to replace with this file")
@click.option("--queue", "use_queue", is_flag=True, help="hand the reading to a worker instead")
def doc_add(org_slug, file, type_, title, role, replace_id, use_queue):
    """Add a file (a PDF manual, ...) as a document of a source type that accepts uploads."""
    from kbframework.db import session_scope
    from kbframework.sources.uploads import upload

    path = Path(file)
    if not path.exists():
        raise KBError(f"No such file: {file}")
    with session_scope() as s:
        oid = _org(s, org_slug).id
    d = upload(oid, type_, path.read_bytes(), path.name, title=title, role=role, replace_document_id=replace_id,
               inline=not use_queue)
    if d["status"] == "error":
        raise KBError(f"document {d['id']} could not be indexed: {d['last_error']}")
    click.echo(f"document {d['id']} ({d['title']}): {d['status']}, {d['chunk_count']} chunks")


@doc.command("list")
@click.option("--org", "org_slug", required=True)
@click.option("--status")
@click.option("--json", "as_json", is_flag=True)
def doc_list(org_slug, status, as_json):
    from kbframework.sources import documents as docs
    from kbframework.db import session_scope

    with session_scope() as s:
        res = docs.list_documents(s, _org(s, org_slug).id, status=status, per_page=200)
    if as_json:
        return out_json(res)
    for d in res["items"]:
        click.echo(f"{d['id']}\t{d['status']}\t{d['document_role']}\t{d['chunk_count']}\t{d['title']}")


@doc.command("show")
@click.argument("doc_id")
@click.option("--org", "org_slug", required=True)
def doc_show(doc_id, org_slug):
    from kbframework.sources import documents as docs
    from kbframework.db import session_scope

    with session_scope() as s:
        out_json(docs.document_detail(s, _org(s, org_slug).id, doc_id))


@doc.command("restore")
@click.argument("doc_id")
@click.option("--org", "org_slug", required=True)
@click.option("--until", help="new end (ISO date-time with time zone)")
def doc_restore(doc_id, org_slug, until):
    from marshmallow import ValidationError, fields

    from kbframework.sources import documents as docs

    from kbframework.db import session_scope

    try:
        until_dt = fields.AwareDateTime().deserialize(until) if until else None
    except ValidationError:
        raise KBError("--until must be an ISO date-time with a time zone, e.g. 2026-12-31T23:00:00+01:00")
    with session_scope() as s:
        d = docs.restore_document(s, _org(s, org_slug).id, doc_id, until_dt)
        click.echo(f"document {d.id} is {d.status}")


@cli.command("reindex")
@click.option("--org", "org_slug", required=True)
@click.option("--failed", is_flag=True)
@click.option("--all", "all_", is_flag=True)
@click.option("--document")
def reindex(org_slug, failed, all_, document):
    from kbframework.db import session_scope
    from kbframework.sources.documents import reindex_now

    with session_scope() as s:
        oid = _org(s, org_slug).id
    res = reindex_now(oid, which="failed" if failed else "all", document_id=document)
    out_json(res)
    if res.get("failed_count"):
        click.echo(f"error: {res['failed_count']} of {res['documents']} documents failed to index "
                   "(see 'failed' above; their previous chunks keep serving)", err=True)
        sys.exit(1)


# --------------------------------------------------------------------------- answering


@cli.command("ask")
@click.option("--org", "org_slug", required=True)
@click.option("--mode")
@click.option("--json", "as_json", is_flag=True)
@click.option("--history", "history_file", type=click.Path(dir_okay=False))
@click.option("--now", help="pretend the time is this ISO date-time")
@click.argument("question")
def ask(org_slug, mode, as_json, history_file, now, question):
    """Ask a question the way the chat does; --json prints the whole debug trace."""
    from kbframework.db import session_scope
    from kbframework.retrieval.answer import answer

    history = []
    if history_file:
        try:
            history = json.loads(_read_text(history_file))
        except json.JSONDecodeError as exc:
            raise KBError(f"{history_file} is not JSON: {exc}")
    with session_scope() as s:
        oid = _org(s, org_slug).id
    res = answer(oid, question, mode=mode, history=history, channel="cli", now=_parse_now(now))
    if as_json:
        return out_json(res)
    click.echo(res["answer"])
    if res.get("alternatives"):
        click.echo(f"\n{res['alternatives']['label']}:")
        for c in res["alternatives"]["cards"]:
            click.echo(f"  - {c['title']}")
    if res["cards"]:
        click.echo("\nCards:")
        for c in res["cards"]:
            bits = [c["type"], c["title"]] + [str(c[k]) for k in ("price", "date", "venue") if c.get(k)]
            click.echo("  - " + " · ".join(bits))
    if res["sources"]:
        click.echo("\nSources:")
        for src in res["sources"]:
            where = f" ({src['pages']})" if src.get("pages") else ""
            click.echo(f"  [{src['n']}] {src['document_title']}{where} · {src['source_type']}"
                       + (f" · {src['source_url']}" if src.get("source_url") else ""))


def _parse_now(now):
    if not now:
        return None
    try:
        dt = datetime.fromisoformat(now)
    except ValueError:
        raise KBError(f"--now must be an ISO date-time, got {now!r}")
    return dt if dt.tzinfo else dt.replace(tzinfo=timezone.utc)


@cli.command("filters")
@click.option("--org", "org_slug", required=True)
@click.option("--now")
@click.option("--json", "as_json", is_flag=True)
@click.argument("query")
def filters_cmd(org_slug, now, as_json, query):
    """Show what every filter extractor finds in a query, and the merged filter."""
    from kbframework.db import session_scope
    from kbframework.retrieval.answer import filter_context, load_context
    from kbframework.retrieval.filters import describe_parts, extract_filter_parts, merge_parts

    when = _parse_now(now) or datetime.now(timezone.utc)
    with session_scope() as s:
        ctx = load_context(s, _org(s, org_slug).id)
        parts, errors = extract_filter_parts(query, filter_context(s, ctx, when, []))
        merged = merge_parts(ctx.org.id, when, parts).describe()
    data = {"query": query, "now": when.isoformat(), "timezone": ctx.tz, "parts": describe_parts(parts),
            "merged": merged, "errors": errors}
    if as_json:
        return out_json(data)
    for p in data["parts"]:
        click.echo(f"{p['extractor']:>12}  {p['field']:<11} {json.dumps(p['value'], default=str, ensure_ascii=False)}"
                   f"  ← {p['matched']!r}" + ("" if p.get("applied", True) else f"  (not applied: {p['why_not']})"))
    if not data["parts"]:
        click.echo("no filters found")
    click.echo("merged: " + json.dumps(merged, default=str))


# --------------------------------------------------------------------------- evaluation


@cli.group("eval")
def eval_group():
    """Measure retrieval quality and the temporal parser."""


@eval_group.command("retrieval")
@click.option("--dataset", "dataset", required=True, type=click.Path(file_okay=False),
              help="folder with corpus.jsonl, queries.jsonl, qrels.tsv")
@click.option("--method", "methods", multiple=True, type=click.Choice(["vector", "keyword", "soft", "hybrid"]),
              help="repeatable; default: all three")
@click.option("--now", help="reference time (ISO); default: the most recent Wednesday 15:00 in the corpus' zone")
@click.option("--no-filters", is_flag=True, help="skip the filter extractors (time and metadata)")
@click.option("--no-rewrite", is_flag=True, help="do not rewrite follow-ups")
@click.option("--keep", is_flag=True, help="keep the scratch organization")
@click.option("--json", "as_json", is_flag=True)
def eval_retrieval(dataset, methods, now, no_filters, no_rewrite, keep, as_json):
    """nDCG@10, recall@10/@50 and MRR@10 of each retrieval method on a qrels-style set."""
    from kbframework.retrieval.evaluation import METHODS, format_retrieval_report, run_retrieval_eval

    rep = run_retrieval_eval(dataset, list(methods) or list(METHODS), now=_parse_now(now),
                             use_filters=not no_filters, use_rewrite=not no_rewrite, keep=keep,
                             log=lambda m: click.echo(m, err=True))
    if as_json:
        return out_json(rep)
    click.echo(format_retrieval_report(rep))


@eval_group.command("gate")
@click.option("--questions", type=click.Path(), default=None,
              help="A gate set (JSON: answerable [{q, expect}], unanswerable [question]); default: the demo's.")
@click.option("--calibrate", is_flag=True,
              help="Fit the gate's weights and threshold on half of the development set and demo questions, "
                   "check them on the other half, and print the misses with their signals.")
@click.option("--dataset", type=click.Path(file_okay=False), default=None,
              help="With --calibrate: the development set (default: shared/data/retrieval_dev when present).")
@click.option("--json", "as_json", is_flag=True)
def eval_gate(questions, calibrate, dataset, as_json):
    """The answerability gate's two rates on the demo knowledge (a scratch organization)."""
    from kbframework.retrieval.evaluation import DEMO_GATE_QUESTIONS, format_gate_report, run_gate_eval

    if calibrate:
        from kbframework.retrieval.evaluation import run_gate_calibration
        from kbframework.retrieval.gate_calibration import DEFAULT_DATASET, format_calibration

        path = dataset or (DEFAULT_DATASET if DEFAULT_DATASET.exists() else None)
        rep = run_gate_calibration(path, questions=questions, log=lambda m: click.echo(m, err=True))
        if as_json:
            click.echo(json.dumps({k: v for k, v in rep.items() if k != "cases"}, indent=2, default=str))
            return
        click.echo(format_calibration(rep))
        return
    rep = run_gate_eval(questions or DEMO_GATE_QUESTIONS, log=lambda m: click.echo(m, err=True))
    if as_json:
        click.echo(json.dumps(rep, indent=2, default=str))
        return
    click.echo(format_gate_report(rep))


@eval_group.command("temporal")
@click.option("--cases", required=True, type=click.Path(dir_okay=False),
              help="JSON list of {query, now, timezone, expect_start, expect_end}")
@click.option("--json", "as_json", is_flag=True)
def eval_temporal(cases, as_json):
    """Check phrase → range cases against the temporal parser; exit 1 when any fails."""
    from kbframework.retrieval.evaluation import format_temporal_report, run_temporal_eval

    rep = run_temporal_eval(cases)
    if as_json:
        out_json(rep)
    else:
        click.echo(format_temporal_report(rep))
    if rep["failed"]:
        sys.exit(1)


# --------------------------------------------------------------------------- keys


@cli.group()
def key():
    """Public assistant keys for the embed and widget."""


@key.command("create")
@click.option("--org", "org_slug", required=True)
@click.option("--origin", "origins", multiple=True, help="allowed website origin, e.g. https://shop.example")
@click.option("--name", default="Website")
def key_create(org_slug, origins, name):
    from kbframework.db import session_scope
    from kbframework.orgs.keys import create_key

    with session_scope() as s:
        k = create_key(s, _org(s, org_slug).id, list(origins), name)
        click.echo(f"key {k.key} (id {k.id}) for {org_slug}; allowed origins: {', '.join(k.allowed_origins) or 'none (deny all)'}")


@key.command("list")
@click.option("--org", "org_slug", required=True)
@click.option("--json", "as_json", is_flag=True)
def key_list(org_slug, as_json):
    from kbframework.db import session_scope
    from kbframework.orgs.keys import key_to_dict, list_keys

    with session_scope() as s:
        rows = [key_to_dict(k) for k in list_keys(s, _org(s, org_slug).id)]
    if as_json:
        return out_json(rows)
    for k in rows:
        click.echo(f"{k['id']}\t{k['key']}\t{k['status']}\t{','.join(k['allowed_origins'])}\t{k['expires_at'] or ''}")


@key.command("rotate")
@click.argument("key_id")
@click.option("--grace", default="24h", show_default=True, help="how long the old key keeps working: 30m, 24h, 7d")
def key_rotate(key_id, grace):
    from kbframework.db import session_scope
    from kbframework.orgs.keys import parse_duration, rotate_key

    with session_scope() as s:
        old, new = rotate_key(s, None, key_id, parse_duration(grace))
        click.echo(f"new key {new.key} (id {new.id}); the old key works until {old.expires_at.isoformat()}")


@key.command("set")
@click.argument("key_id")
@click.option("--origin", "origins", multiple=True, help="replace the allowed origins (repeatable)")
@click.option("--title")
@click.option("--color", help="brand colour, e.g. #2f6fed")
@click.option("--logo", help="http(s) URL of the logo")
@click.option("--welcome", help='first message ("" = none)')
@click.option("--placeholder")
@click.option("--position", type=click.Choice(["bottom-right", "bottom-left"]))
@click.option("--show-sources/--hide-sources", default=None)
@click.option("--rate-per-minute", type=int)
@click.option("--rate-per-day", type=int)
@click.option("--rate-per-ip-minute", type=int)
@click.option("--max-message-chars", type=int)
def key_set(key_id, origins, title, color, logo, welcome, placeholder, position, show_sources,
            rate_per_minute, rate_per_day, rate_per_ip_minute, max_message_chars):
    """Change a key's origins, limits or visitor-facing settings (KEY_ID: id or kb_pk_ value)."""
    from kbframework.db import session_scope
    from kbframework.orgs.keys import update_key

    settings = {n: v for n, v in (("title", title), ("color", color), ("logo", logo), ("welcome", welcome),
                                  ("placeholder", placeholder), ("position", position),
                                  ("show_sources", show_sources)) if v is not None}
    if max_message_chars is not None:
        settings["limits"] = {"max_message_chars": max_message_chars}
    with session_scope() as s:
        k = update_key(s, None, key_id, origins=list(origins) or None, settings=settings,
                       rate_per_minute=rate_per_minute, rate_per_day=rate_per_day,
                       rate_per_ip_minute=rate_per_ip_minute)
        click.echo(f"key {k.key}: origins {', '.join(k.allowed_origins) or 'none (deny all)'}; limits "
                   f"{k.rate_per_minute}/min, {k.rate_per_day}/day, {k.rate_per_ip_minute}/min per IP; "
                   f"settings {json.dumps(k.settings or {}, ensure_ascii=False)}")


# --------------------------------------------------------------------------- sources


@cli.group()
def source():
    """Sources: WooCommerce, WordPress, sitemaps, PDFs, manual."""


@source.command("add")
@click.option("--org", "org_slug", required=True)
@click.option("--type", "type_", required=True)
@click.option("--name", required=True)
@click.option("--config", "config_json", default="{}", help="JSON object")
@click.option("--interval", type=int, help="reconciliation every N minutes")
def source_add(org_slug, type_, name, config_json, interval):
    from kbframework.db import session_scope
    from kbframework.sources.config import create_source

    try:
        config = json.loads(config_json)
    except json.JSONDecodeError as exc:
        raise KBError(f"--config is not JSON: {exc}")
    with session_scope() as s:
        src = create_source(s, _org(s, org_slug).id, {"type": type_, "name": name, "config": config,
                                                      "sync_interval_minutes": interval})
        click.echo(f"source {src.id} ({type_}) created")
        click.echo(f"webhook URL: /api/webhooks/v1/{type_}/{src.id}")


@source.command("list")
@click.option("--org", "org_slug", required=True)
def source_list(org_slug):
    from sqlalchemy import select

    from kbframework.db import session_scope
    from kbframework.models import Source

    with session_scope() as s:
        for src in s.scalars(select(Source).where(Source.organization_id == _org(s, org_slug).id)):
            click.echo(f"{src.id}\t{src.type}\t{src.status}\t{src.last_sync_at or '-'}\t{src.name}"
                       + (f"\t{src.last_error}" if src.last_error else ""))


def _source_org(source_id) -> str:
    """The organization a source belongs to (a job queued from here runs there)."""
    from kbframework.db import session_scope
    from kbframework.models import Source
    from kbframework.orgs.accounts import as_uuid

    with session_scope() as s:
        src = s.get(Source, as_uuid(source_id))
        if src is None:
            raise click.ClickException(f"no source {source_id}")
        return str(src.organization_id)


@source.command("sync")
@click.argument("source_id")
@click.option("--full", is_flag=True)
@click.option("--wait", is_flag=True, help="run here and wait instead of queueing")
def source_sync(source_id, full, wait):
    kind = "full" if full else "incremental"
    if wait:
        from kbframework.sources.sync import run_sync

        res = run_sync(source_id, kind=kind, inline_ingest=True)
        out_json(res)
        if res.get("status") == "error":
            sys.exit(1)
        stats = res.get("stats") or {}
        failed = int(stats.get("errors") or 0) + int(stats.get("index_errors") or 0)
        if failed:
            click.echo(f"error: {failed} of {stats.get('fetched', 0)} items failed "
                       f"({stats.get('errors') or 0} could not be applied, {stats.get('index_errors') or 0} "
                       "could not be indexed)", err=True)
            sys.exit(1)
        return
    from kbframework.jobs.queues import enqueue, is_held

    job = enqueue("sync", "kbframework.jobs.tasks.sync_source_job", source_id, kind,
                  for_organization=_source_org(source_id))
    if is_held(job):
        click.echo(f"Redis is not reachable: the sync is held as {job.id} and queued once it is back")
    else:
        click.echo(f"sync queued as job {job.id}")


@source.command("secret")
@click.argument("source_id")
def source_secret(source_id):
    """Print the source's webhook secret (to paste into the remote system)."""
    from kbframework.db import session_scope
    from kbframework.models import Source
    from kbframework.orgs.accounts import as_uuid
    from kbframework.security import decrypt_json

    with session_scope() as s:
        src = s.get(Source, as_uuid(source_id))
        if src is None:
            raise KBError("No such source.")
        click.echo(decrypt_json(src.secrets).get("webhook_secret") or "this source has no webhook secret")


@source.command("register-webhooks")
@click.argument("source_id")
@click.option("--base-url", required=True, help="this platform's public address, e.g. https://kb.example.com")
def source_register_webhooks(source_id, base_url):
    """Create the product webhooks on the remote store (needs a Read/Write key)."""
    from kbframework.sources.config import register_webhooks

    res = register_webhooks(None, source_id, base_url)
    click.echo(f"delivery URL: {res['delivery_url']}")
    for hook in res["webhooks"]:
        click.echo(f"  {hook['topic']:<18} webhook {hook.get('id')} {hook.get('status') or ''} ({hook['action']})")


# --------------------------------------------------------------------------- plugins


@cli.command("usage")
@click.option("--org", "org_slug", required=True)
@click.option("--month", help="YYYY-MM (default: this month in the organization's time zone)")
@click.option("--json", "as_json", is_flag=True)
def usage_cmd(org_slug, month, as_json):
    """Tokens and estimated cost this month, per day and per purpose, and the budget state."""
    import re as _re

    from kbframework.orgs import budget
    from kbframework.db import session_scope

    if month and not _re.fullmatch(r"\d{4}-(0[1-9]|1[0-2])", month):
        raise KBError("--month must look like 2026-11")
    with session_scope() as s:
        oid = _org(s, org_slug).id
        data = budget.usage_summary(s, oid, month)
    data["status"] = budget.status(oid)
    if as_json:
        return out_json(data)
    t, st = data["totals"], data["status"]
    click.echo(f"{data['month']}: {t['all_tokens']} tokens ({t['billable_tokens']} billable), "
               f"estimated ${t['cost_usd']:.4f}")
    b = data["budget"]
    if b["unit"] != "none":
        limit = f"{b['limit']:,.0f} tokens" if b["unit"] == "tokens" else f"${b['limit']:,.2f}"
        click.echo(f"budget: {limit} a month; used {st['percent']}% → {st['state']}")
    for p in data["by_purpose"]:
        click.echo(f"  {p['purpose']:<18} {p['calls']:>6} calls {p['tokens']:>10} tokens  ${p['cost_usd']:.4f}")
    for d in data["days"]:
        if d["calls"]:
            click.echo(f"  {d['day']}  {d['tokens_in'] + d['tokens_out']:>10} tokens  ${d['cost_usd']:.4f}")


@cli.command("plugins")
@click.option("--json", "as_json", is_flag=True)
def plugins_cmd(as_json):
    """List plugins, their versions and the hooks they implement."""
    from kbframework.hooks import registry
    from kbframework.hooks.manager import list_plugins

    rows = list_plugins()
    registry.validate_startup()
    if as_json:
        return out_json(rows)
    for p in rows:
        if p.get("error"):
            click.echo(f"{p['name']:<40} FAILED TO LOAD: {p['error']}")
            continue
        click.echo(f"{p['name']:<40} {p['distribution']} {p['version']}")
        click.echo(f"{'':<40} hooks: {', '.join(p['hooks']) or '-'}")


@cli.group("plugin")
def plugin_group():
    """Write new plugins (the guide: docs/plugins.md)."""


@plugin_group.command("new")
@click.argument("name")
@click.option("--kind", type=click.Choice(["connector", "preset", "extractor", "card"]), default="connector",
              show_default=True)
@click.option("--dir", "directory", default=".", show_default=True, type=click.Path(file_okay=False),
              help="where to create the NAME/ folder")
@click.option("--force", is_flag=True, help="write into an existing, non-empty folder")
def plugin_new(name, kind, directory, force):
    """Write a new plugin distribution: pyproject with the entry point, package, README, first test."""
    from kbframework.cli.scaffold import new_plugin, names

    path = new_plugin(name, kind, directory, force=force)
    click.echo(f"wrote {kind} plugin {names(name)['dist']} in {path}")
    click.echo(f"next: pip install -e {path} && kbf plugins && (cd {path} && pytest -q)")


# --------------------------------------------------------------------------- processes


@cli.command("worker")
@click.option("--burst", is_flag=True, help="drain the queues and exit")
@click.option("--with-scheduler", is_flag=True, help="also run the periodic jobs (expiry, reconciliation)")
@click.option("--queues", default="webhook,ingest,sync,reindex", show_default=True)
@click.option("--processes", type=click.IntRange(min=1), default=None,
              help="worker processes under one supervisor, one job each at a time  [default: "
                   "KB_WORKER_PROCESSES, else 1]")
def worker(burst, with_scheduler, queues, processes):
    """Run RQ workers on the queues (jobs run in the worker process, no fork per job)."""
    from kbframework.jobs.worker import default_processes, run_pool, run_worker

    names = [q for q in queues.split(",") if q]
    try:
        n = processes if processes is not None else default_processes()
    except ValueError as exc:
        raise click.UsageError(str(exc))
    if n == 1:
        run_worker(names, burst=burst, with_scheduler=with_scheduler)
    else:
        sys.exit(run_pool(n, names, burst=burst, with_scheduler=with_scheduler))


@cli.command("scheduler", hidden=True)
def scheduler_cmd():
    """RQ's CronScheduler with our periodic jobs (started by `kbf worker --with-scheduler`)."""
    from kbframework.jobs.worker import run_cron

    run_cron()


@cli.command("run")
@click.option("--host", default=None)
@click.option("--port", default=None, type=int)
@click.option("--workers", default=2, show_default=True, help="web server processes")
@click.option("--worker-processes", type=click.IntRange(min=1), default=None,
              help="job worker processes  [default: KB_WORKER_PROCESSES, else one per core, at most 4]")
def run(host, port, workers, worker_processes):
    """The whole platform: web server (gunicorn) + the job workers with the scheduler."""
    from kbframework.cli.runner import run_all

    if worker_processes is None:
        from kbframework.jobs.worker import default_processes

        try:  # one job runs on one core: one machine ingests with every core it has
            worker_processes = default_processes(fallback=min(4, os.cpu_count() or 1))
        except ValueError as exc:
            raise click.UsageError(str(exc))
    run_all(host, port, workers, worker_processes)


@cli.command("demo")
@click.option("--email", default="admin@demo.local", show_default=True)
@click.option("--password", default=None)
def demo(email, password):
    """Create (or refresh) the demo organization, its admin and its knowledge."""
    from kbframework.demo import seed_demo

    info = seed_demo(email, password)
    click.echo("")
    click.echo("  Demo organization: {org} ({tz})".format(**info))
    click.echo(f"  Admin login:       {info['email']}  /  {info['password']}")
    click.echo(f"  Assistant key:     {info['key']}")
    click.echo(f"  Documents:         {info['documents']} ({info['chunks']} chunks)")
    click.echo("")


from kbframework.cli.jobs import jobs_cmd  # noqa: E402

cli.add_command(jobs_cmd)

from kbframework.cli import budget, orgs, privacy  # noqa: E402

cli.add_command(budget.budget_group)
cli.add_command(privacy.privacy_group)
for _cmd in orgs.COMMANDS:
    org.add_command(_cmd)

def add_plugin_commands(group: click.Group) -> click.Group:
    """Let every plugin add its commands (``kb_register_commands``); a name that is already
    taken, or a plugin that raises, stops ``kbf`` with a message naming the plugin."""
    from kbframework.errors import StartupError
    from kbframework.hooks.manager import get_plugin_manager

    if getattr(group, "_kb_plugin_commands", False):
        return group
    group._kb_plugin_commands = True
    pm = get_plugin_manager()
    for impl in reversed(pm.hook.kb_register_commands.get_hookimpls()):
        before = dict(group.commands)
        try:
            impl.function(cli=group)
        except Exception as exc:  # the edge: a plugin's own registration code
            raise StartupError(f"The plugin '{impl.plugin_name}' failed in kb_register_commands: "
                               f"{type(exc).__name__}: {exc}", code="plugin_failed") from exc
        for name, cmd in before.items():
            if group.commands.get(name) is not cmd:
                group.commands[name] = cmd
                raise StartupError(f"The plugin '{impl.plugin_name}' registers the command '{name}', "
                                   f"which kbf already has.", code="duplicate_command")
    return group
