"""``pgbus-web db ...``: the schema."""

from __future__ import annotations

import click

from .. import db, schema
from .common import database_url_option, engine_from, friendly_errors, main_group


@main_group.group("db")
def db_group() -> None:
    """Install the schema."""


@db_group.command("install")
@database_url_option
@friendly_errors
def install(database_url: str | None) -> None:
    """Install PGMQ and the pgbus tables (idempotent)."""
    engine = engine_from(database_url, db.UNBOUNDED_STATEMENTS)
    try:
        result = schema.install(engine)
    except schema.SchemaVersionError as exc:
        raise click.ClickException(str(exc)) from None
    finally:
        engine.dispose()
    if result.installed:
        click.echo(f"Installed pgbus-web schema version {result.version}.")
    else:
        click.echo(f"Schema version {result.version} is already installed; nothing to do.")
