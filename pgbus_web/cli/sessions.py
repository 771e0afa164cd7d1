"""``pgbus-web sessions ...``: the signed-in sessions and API tokens an
admin sees and ends, and the access log (docs/standalone.md, Sessions and
the access log). As the token given with --token, or break-glass."""

from __future__ import annotations

import click

from ..core import access_log, permissions, policy, sessions
from ..core.words import command_line, results
from .common import database_url_option, engine_from, friendly_errors, main_group, principal, refused, token_option


def _acting(database_url, token, act):
    """*act*(engine, principal, policy), refusals in the refusal table's words."""
    engine = engine_from(database_url)
    try:
        who = principal(engine, token)
        return act(engine, who, policy.current(engine))
    except (permissions.NotPermitted, sessions.SessionNotFound, sessions.TokenNotFound) as problem:
        raise refused(problem) from None
    finally:
        engine.dispose()


@main_group.group("sessions")
def sessions_group() -> None:
    """Signed-in sessions and API tokens: list them, end them (the sessions power: an admin)."""


@sessions_group.command("list")
@database_url_option
@token_option
@friendly_errors
def list_sessions(database_url, token) -> None:
    """The live sessions, then the live tokens."""
    found = _acting(database_url, token, sessions.listing)
    click.echo("SESSION\tNAME\tPROVIDER\tFROM\tSINCE\tLAST SEEN")
    for row in found["sessions"]:
        click.echo(
            "\t".join(
                (
                    row["id"],
                    row["name"],
                    row["provider"],
                    row["address"] or "-",
                    command_line.moment(row["started_at"]),
                    command_line.moment(row["last_seen_at"]),
                )
            )
        )
    click.echo("")
    click.echo("TOKEN\tROLE\tSCOPE\tCREATED\tEXPIRES\tLAST USED\tFROM")
    for row in found["tokens"]:
        shown = sessions.token_shown(row)
        click.echo(
            "\t".join(
                (
                    shown["name"],
                    shown["role"],
                    shown["scope"],
                    command_line.moment(shown["created_at"]),
                    command_line.moment(shown["expires_at"]),
                    command_line.moment(shown["last_used_at"]),
                    shown["last_used_from"] or "-",
                )
            )
        )


@sessions_group.command("end")
@click.argument("session_id")
@database_url_option
@token_option
@friendly_errors
def end(session_id, database_url, token) -> None:
    """End the session SESSION_ID: refused on its next request at every process."""
    row = _acting(database_url, token, lambda engine, who, kept: sessions.end(engine, who, kept, session_id))
    click.echo(results.session_ended(row["name"]))


@sessions_group.command("end-all")
@click.argument("name")
@database_url_option
@token_option
@friendly_errors
def end_all(name, database_url, token) -> None:
    """End every session of NAME."""
    ended = _acting(database_url, token, lambda engine, who, kept: sessions.end_all(engine, who, kept, name))
    click.echo(results.sessions_ended(name))
    click.echo(command_line.sessions_counted(ended))


@sessions_group.command("revoke-token")
@click.argument("name")
@database_url_option
@token_option
@friendly_errors
def revoke_token(name, database_url, token) -> None:
    """Revoke the live token NAME (as `tokens revoke`, but as the --token's principal)."""
    _acting(database_url, token, lambda engine, who, kept: sessions.revoke_token(engine, who, kept, name))
    click.echo(results.token_revoked(name))


@sessions_group.command("log")
@database_url_option
@token_option
@click.option(
    "--limit",
    type=click.IntRange(1, 10_000),
    default=access_log.SHOWN,
    show_default=True,
    help="The newest lines shown.",
)
@friendly_errors
def log(database_url, token, limit) -> None:
    """The access log, newest first."""
    lines = _acting(database_url, token, lambda engine, who, kept: access_log.latest(engine, who, kept, limit=limit))
    click.echo("AT\tKIND\tWHO\tBY\tFROM\tDETAIL")
    for line in lines:
        click.echo(
            "\t".join(
                (
                    command_line.moment(line["at"]),
                    line["kind"],
                    line["subject"],
                    line["actor"] or "-",
                    line["address"] or "-",
                    line["detail"] or "-",
                )
            )
        )
