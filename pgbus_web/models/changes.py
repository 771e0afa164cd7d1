"""pgbus_web_change_log and pgbus_web_change_total: the change marker that
schema/v3.sql's triggers move with every committed write to the runs, their
steps, events, signals and batches (web/answering/not_modified.py answers unchanged polls
with it)."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.engine import Connection


def marker(conn: Connection) -> int:
    """A number that is larger after any committed write to those tables:
    the folded total plus the log rows not folded yet (a few dozen)."""
    return conn.execute(
        sa.text(
            "SELECT (SELECT changes FROM pgbus_web_change_total WHERE id = 1)"
            " + (SELECT COALESCE(sum(changes), 0) FROM pgbus_web_change_log)"
        )
    ).scalar_one()


def marker_with(conn: Connection, extra_sql: str, binds: dict) -> tuple[int, object]:
    """marker() and *extra_sql* (a scalar subquery, with its *binds*) in
    one statement: a live-refresh poll asks the database once."""
    row = conn.execute(
        sa.text(
            "SELECT (SELECT changes FROM pgbus_web_change_total WHERE id = 1)"
            " + (SELECT COALESCE(sum(changes), 0) FROM pgbus_web_change_log), "
            f"({extra_sql})"
        ),
        binds,
    ).one()
    return row[0], row[1]


def mark(conn: Connection) -> None:
    """Move the marker by hand: for writes made with the triggers off
    (the seeders' bulk loads as a superuser)."""
    conn.execute(sa.text("INSERT INTO pgbus_web_change_log DEFAULT VALUES"))
