"""``pgbus-web tokens ...``: the JSON API's bearer tokens (docs/api.md)."""

from __future__ import annotations

import click

from ..auth.users import ROLES
from ..core import permissions, tokens
from ..core.words import command_line, results
from .common import database_url_option, engine_from, friendly_errors, main_group
from .prune import Duration

# Who makes and revokes tokens here: whoever holds the database URL.
ACTOR = permissions.break_glass(permissions.CLI).actor


@main_group.group("tokens")
def tokens_group() -> None:
    """Bearer tokens for the JSON API of `pgbus-web serve`."""


@tokens_group.command("add")
@click.argument("name")
@click.option(
    "--role",
    type=click.Choice(ROLES),
    required=True,
    help="viewer: reads; operator: also acts on runs and starts operations; approver: also approves "
    "another's operation; admin: also reveals redacted values and changes the policy. The policy's "
    "grants (token:NAME) may add powers for some classes.",
)
@click.option(
    "--expires-in",
    type=Duration(),
    default=None,
    metavar="DURATION",
    help="Refused at every door this long after now (e.g. 30d, 12h, 2w). Default: never expires.",
)
@click.option(
    "--read-only", is_flag=True, help="The token reads and never acts, whatever its role or the policy's grants."
)
@database_url_option
@friendly_errors
def add(name: str, role: str, expires_in, read_only: bool, database_url: str | None) -> None:
    """Make a token for NAME (its actor is api:NAME). The token is printed
    once, on stdout alone; only its SHA-256 is kept."""
    try:
        token, row = tokens.add(
            engine_from(database_url), name, role, expires_in=expires_in, read_only=read_only, actor=ACTOR
        )
    except tokens.TokenError as problem:
        raise click.ClickException(command_line.nothing_changed(problem)) from None
    click.echo(command_line.token_added(name, role, read_only=read_only, expires_at=row["expires_at"]), err=True)
    click.echo(token)


@tokens_group.command("list")
@database_url_option
@friendly_errors
def list_tokens(database_url: str | None) -> None:
    """Every token: name, role, created, last used, revoked, expires,
    scope (read-only or the role with the policy's grants), last used from."""
    rows = tokens.listing(engine_from(database_url))
    click.echo("NAME\tROLE\tCREATED\tLAST USED\tREVOKED\tEXPIRES\tSCOPE\tFROM")
    for row in rows:
        click.echo(
            "\t".join(
                (
                    row["name"],
                    row["role"],
                    command_line.moment(row["created_at"]),
                    command_line.moment(row["last_used_at"]),
                    command_line.moment(row["revoked_at"]),
                    command_line.moment(row["expires_at"]),
                    "read-only" if row["read_only"] else "grants",
                    row["last_used_from"] or "-",
                )
            )
        )


@tokens_group.command("revoke")
@click.argument("name")
@database_url_option
@friendly_errors
def revoke(name: str, database_url: str | None) -> None:
    """Revoke NAME's token: refused from its next request on."""
    if not tokens.revoke(engine_from(database_url), name, actor=ACTOR):
        raise click.ClickException(command_line.no_live_token(name))
    click.echo(results.token_revoked(name))
