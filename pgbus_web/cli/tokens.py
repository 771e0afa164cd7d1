"""``pgbus-web tokens ...``: the JSON API's bearer tokens (docs/api.md)."""

from __future__ import annotations

import click

from ..auth.users import ROLES
from ..core import tokens
from .common import database_url_option, engine_from, friendly_errors, main_group


def _when(moment) -> str:
    return "-" if moment is None else f"{moment:%Y-%m-%d %H:%M:%S} UTC"


@main_group.group("tokens")
def tokens_group() -> None:
    """Bearer tokens for the JSON API of `pgbus-web serve`."""


@tokens_group.command("add")
@click.argument("name")
@click.option("--role", type=click.Choice(ROLES), required=True,
              help="viewer: reads; operator: also acts on runs and starts operations; approver: also approves "
                   "another's operation; admin: also reveals redacted values and changes the policy. The policy's "
                   "grants (token:NAME) may add powers for some classes.")
@database_url_option
@friendly_errors
def add(name: str, role: str, database_url: str | None) -> None:
    """Make a token for NAME (its actor is api:NAME). The token is printed
    once, on stdout alone; only its SHA-256 is kept."""
    try:
        token, _ = tokens.add(engine_from(database_url), name, role)
    except tokens.TokenError as problem:
        raise click.ClickException(f"{problem}; nothing was changed") from None
    click.echo(f"Added the {role} token {name}. It is shown this once: keep it now.", err=True)
    click.echo(token)


@tokens_group.command("list")
@database_url_option
@friendly_errors
def list_tokens(database_url: str | None) -> None:
    """Every token: name, role, created, last used, revoked."""
    rows = tokens.listing(engine_from(database_url))
    click.echo("NAME\tROLE\tCREATED\tLAST USED\tREVOKED")
    for row in rows:
        click.echo("\t".join((row["name"], row["role"], _when(row["created_at"]), _when(row["last_used_at"]),
                              _when(row["revoked_at"]))))


@tokens_group.command("revoke")
@click.argument("name")
@database_url_option
@friendly_errors
def revoke(name: str, database_url: str | None) -> None:
    """Revoke NAME's token: refused from its next request on."""
    if not tokens.revoke(engine_from(database_url), name):
        raise click.ClickException(f"no live token named {name!r}")
    click.echo(f"Revoked the token {name}.")
