"""``kbf budget set|show``: an organization's monthly budget, in tokens or money."""
from __future__ import annotations

import re

import click

from kbframework.cli.common import _org, out_json
from kbframework.errors import ValidationFailed


@click.group("budget")
def budget_group():
    """Monthly budgets: in tokens (every model call) or money (estimated USD)."""


def _percent(v: str) -> int:
    m = re.fullmatch(r"\s*(\d{1,3})\s*%?\s*", v or "")
    if not m or not 1 <= int(m.group(1)) <= 100:
        raise ValidationFailed("--soft must be a percentage between 1 and 100, e.g. 80%.")
    return int(m.group(1))


@budget_group.command("set")
@click.option("--org", "org_slug", required=True)
@click.option("--tokens", type=int, help="a monthly budget in tokens (every metered call counts)")
@click.option("--cost", type=float, help="a monthly budget in USD (estimated; offline calls cost 0)")
@click.option("--soft", help="warn at this share of the budget (default 80%)")
@click.option("--no-hard-stop", is_flag=True, help="only warn at 100 %; never stop the chat")
@click.option("--none", "clear", is_flag=True, help="remove the budget")
def budget_set(org_slug, tokens, cost, soft, no_hard_stop, clear):
    """Set the monthly budget: ``kbf budget set --org shop --tokens 2000000 --soft 80%``."""
    from kbframework import settings as declared
    from kbframework.db import session_scope

    if sum(x is not None and x is not False for x in (tokens, cost, clear or None)) != 1:
        raise ValidationFailed("Give exactly one of --tokens N, --cost X or --none.")
    data: dict = {"budget_unit": "none"} if clear else (
        {"budget_unit": "tokens", "budget_limit": tokens} if tokens is not None
        else {"budget_unit": "cost", "budget_limit": cost})
    if not clear and data["budget_limit"] <= 0:
        raise ValidationFailed("The budget must be more than 0 (use --none to remove it).")
    if soft is not None:
        data["budget_soft_pct"] = _percent(soft)
    data["budget_hard_stop"] = not no_hard_stop
    with session_scope() as s:
        oid = _org(s, org_slug).id
        declared.apply(s, oid, data, operator=True)
    _echo_budget(oid)


@budget_group.command("show")
@click.option("--org", "org_slug", required=True)
@click.option("--json", "as_json", is_flag=True)
def budget_show(org_slug, as_json):
    """This month's use against the budget."""
    from kbframework.db import session_scope

    with session_scope() as s:
        oid = _org(s, org_slug).id
    _echo_budget(oid, as_json)


def _echo_budget(oid, as_json: bool = False) -> None:
    from kbframework.orgs import budget

    st = budget.status(oid)
    if as_json:
        return out_json(st)
    b = st["budget"]
    if b["unit"] == "none":
        click.echo(f"{st['month']}: no budget ({st['all_tokens']:,} tokens, ${st['cost_usd']:.4f} so far)")
        return
    used = f"{st['used']:,.0f} of {b['limit']:,.0f} tokens" if b["unit"] == "tokens" else \
        f"${st['used']:.4f} of ${b['limit']:,.2f}"
    click.echo(f"{st['month']}: {used} ({st['percent']}%, {st['state']}); warning at {b['soft_pct']:g}%, "
               f"{'hard stop' if b['hard_stop'] else 'no hard stop'} at 100%")
