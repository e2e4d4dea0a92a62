"""``kbf jobs``: what the workers are doing and what failed, with the reason."""
from __future__ import annotations

import json
import sys

import click

from kbframework.jobs.listing import STATES


@click.command("jobs")
@click.option("--state", "states", multiple=True, type=click.Choice(STATES),
              help="only these states (repeatable); default: all")
@click.option("--limit", default=50, show_default=True, help="at most this many per queue and state")
@click.option("--json", "as_json", is_flag=True)
def jobs_cmd(states, limit, as_json):
    """List queued, running, retrying (scheduled), failed and held jobs with their reason."""
    from kbframework.jobs.listing import list_jobs
    from kbframework.jobs.queues import redis_ok

    held_only = not redis_ok()
    if held_only:
        click.echo("warning: Redis is not reachable; only jobs held in the outbox are listed", err=True)
        from kbframework.jobs.listing import held_jobs

        rows = held_jobs(limit)
        for r in rows:
            r.pop("_first", None)
    else:
        rows = list_jobs(states or STATES, limit=limit)
    if as_json:
        click.echo(json.dumps({"jobs": rows}, indent=2, default=str))
        return
    if not rows:
        click.echo("no jobs")
        return
    for r in rows:
        line = f"{r['state']:<9} {r['queue']:<8} {r['id']}  {r['function']}({', '.join(map(str, r['args']))})"
        if r["attempts"] > 1 or r["retried"]:
            line += f"  attempt {r['attempts']}"
        if r["reason"]:
            line += f"  reason: {r['reason']}"
        if r["next"]:
            line += f"  next: {r['next']}"
        click.echo(line)
    counts = {}
    for r in rows:
        counts[r["state"]] = counts.get(r["state"], 0) + 1
    click.echo(", ".join(f"{n} {s}" for s, n in counts.items()), err=True)
    if held_only:
        sys.exit(3)
