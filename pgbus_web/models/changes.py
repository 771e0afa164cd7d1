"""pgbus_web_change_log and pgbus_web_change_total: the change marker that
schema/v3.sql's triggers move with every committed write to the runs, their
steps, events, signals and batches (web/answering/not_modified.py answers unchanged polls
with it). Since schema/v14.sql each log row also says whether an
operation's chunk wrote it (by_operation()), so the marker is also read
without those (marker_with)."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection


def marker(conn: Connection) -> int:
    """A number that is larger after any committed write to those tables:
    the folded total plus the log rows not folded yet (a few dozen)."""
    found: int = conn.execute(
        sa.text(
            "SELECT (SELECT changes FROM pgbus_web_change_total WHERE id = 1)"
            " + (SELECT COALESCE(sum(changes), 0) FROM pgbus_web_change_log)"
        )
    ).scalar_one()
    return found


def marker_with(conn: Connection, extra_sql: str, binds: dict[str, Any]) -> tuple[int, int, object]:
    """marker(), the same without the changes operations' chunks made, and
    *extra_sql* (a scalar subquery, with its *binds*) in one statement: a
    live-refresh poll asks the database once."""
    row = conn.execute(
        sa.text(
            "SELECT t.changes + l.changes, t.changes - t.by_operations + l.others, "
            f"({extra_sql})"
            " FROM pgbus_web_change_total t,"
            " (SELECT COALESCE(sum(changes), 0) AS changes,"
            " COALESCE(sum(changes) FILTER (WHERE NOT by_operation), 0) AS others"
            " FROM pgbus_web_change_log) l"
            " WHERE t.id = 1"
        ),
        binds,
    ).one()
    return row[0], row[1], row[2]


def by_operation(conn: Connection) -> None:
    """Mark this transaction's writes as an operation's chunk's: they move
    the marker, and the marker without operations' changes stays."""
    conn.execute(sa.text("SELECT set_config('pgbus_web.by_operation', 'on', true)"))


def mark(conn: Connection) -> None:
    """Move the marker by hand: for writes made with the triggers off
    (the seeders' bulk loads as a superuser)."""
    conn.execute(sa.text("INSERT INTO pgbus_web_change_log DEFAULT VALUES"))
