"""Whether a database holds the schema this release reads: what ``serve``
checks at start and ``/health`` reports while it is missing."""

from __future__ import annotations

from sqlalchemy.engine import Connection

from . import SCHEMA_VERSION, installed_version


def problem(conn: Connection) -> str | None:
    """None when the installed schema is this release's; else one line
    saying what is wrong and naming the command that fixes it."""
    found = installed_version(conn)
    if found == SCHEMA_VERSION:
        return None
    if found is None:
        return "the database has no pgbus-web schema: run `pgbus-web db install` first"
    return (
        f"the database has pgbus-web schema version {found}, this release needs version "
        f"{SCHEMA_VERSION}: run `pgbus-web db install` of the matching release"
    )
