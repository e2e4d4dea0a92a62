"""``kbf privacy erase|purge``: visitors' data — erase one conversation, purge what is past
each organization's retention."""
from __future__ import annotations

import click

from kbframework.cli.common import _org, out_json
from kbframework.errors import KBError


@click.group("privacy")
def privacy_group():
    """Visitors' data: erase a conversation, purge what is past its retention."""


@privacy_group.command("erase")
@click.option("--org", "org_slug", required=True)
@click.option("--session", "session_id", required=True, help="the conversation's session id (the widget's)")
def privacy_erase(org_slug, session_id):
    """Delete one visitor's conversation and the feedback given in it."""
    from kbframework.db import session_scope
    from kbframework.orgs.privacy import erase_session

    with session_scope() as s:
        res = erase_session(s, _org(s, org_slug).id, session_id)
    if not res["chat_logs"] and not res["feedback"]:
        raise KBError(f"No conversation with session id '{session_id}' in {org_slug}.", status=404)
    click.echo(f"erased session {session_id}: {res['chat_logs']} turns, {res['feedback']} feedback")


@privacy_group.command("purge")
def privacy_purge():
    """Delete now what is past each organization's retention (the scheduler does it hourly)."""
    from kbframework.orgs.privacy import purge_expired

    out_json(purge_expired())
