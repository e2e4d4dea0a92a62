"""Helpers every command module shares; they import this, never ``commands`` (which imports them)."""
from __future__ import annotations

import json

import click


def out_json(data):
    click.echo(json.dumps(data, indent=2, default=str, ensure_ascii=False))


def _org(s, slug):
    from kbframework.orgs.accounts import get_org_by_slug

    return get_org_by_slug(s, slug)
