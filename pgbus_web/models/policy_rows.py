"""pgbus_web_policy and pgbus_web_policy_history: the policy's rules that
differ from their defaults, and every change (core/policy.py holds the
rules and their checks)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import Connection

from . import as_dict, as_dicts

_COLUMNS = "key, value, version, changed_at, changed_by, reason"


# The last change's id (0 before any): larger after every change. A scalar
# subquery another statement may carry (worker_reads.poll_markers).
MARKER_SQL = "SELECT COALESCE(max(id), 0) FROM pgbus_web_policy_history"


def marker(conn: Connection) -> int:
    found: int = conn.execute(sa.text(MARKER_SQL)).scalar_one()
    return found


def read_all(conn: Connection) -> tuple[int, list[dict[str, Any]]]:
    """(marker(), every stored rule) in one statement."""
    rows = as_dicts(
        conn.execute(
            sa.text(
                f"SELECT ({MARKER_SQL}) AS marker, {_COLUMNS}"
                " FROM (SELECT 1) one LEFT JOIN pgbus_web_policy ON true ORDER BY key"
            )
        )
    )
    stamp = rows[0]["marker"] if rows else 0
    return stamp, [row for row in rows if row["key"] is not None]


def find_for_update(conn: Connection, key: str) -> dict[str, Any] | None:
    return as_dict(
        conn.execute(
            sa.text(f"SELECT {_COLUMNS} FROM pgbus_web_policy WHERE key = :key FOR UPDATE"), {"key": key}
        ).first()
    )


def lock(conn: Connection) -> None:
    """One change at a time, so the history's ids are the order of the changes."""
    conn.execute(sa.text("LOCK TABLE pgbus_web_policy_history IN SHARE ROW EXCLUSIVE MODE"))


def record(conn: Connection, *, key: str, old: Any, new: Any, actor: str, reason: str, now: datetime) -> int:
    """A history row for a change; its id (the rule's new version)."""
    version: int = conn.execute(
        sa.text(
            "INSERT INTO pgbus_web_policy_history (key, old_value, new_value, actor, reason, changed_at)"
            " VALUES (:key, :old, :new, :actor, :reason, :now) RETURNING id"
        ).bindparams(
            sa.bindparam("old", type_=JSONB(none_as_null=True)), sa.bindparam("new", type_=JSONB(none_as_null=True))
        ),
        {"key": key, "old": old, "new": new, "actor": actor, "reason": reason, "now": now},
    ).scalar_one()
    return version


def put(conn: Connection, *, key: str, value: Any, version: int, actor: str, reason: str, now: datetime) -> None:
    conn.execute(
        sa.text(
            "INSERT INTO pgbus_web_policy (key, value, version, changed_at, changed_by, reason)"
            " VALUES (:key, :value, :version, :now, :actor, :reason)"
            " ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, version = EXCLUDED.version,"
            " changed_at = EXCLUDED.changed_at, changed_by = EXCLUDED.changed_by, reason = EXCLUDED.reason"
        ).bindparams(sa.bindparam("value", type_=JSONB)),
        {"key": key, "value": value, "version": version, "actor": actor, "reason": reason, "now": now},
    )


def delete(conn: Connection, key: str) -> None:
    conn.execute(sa.text("DELETE FROM pgbus_web_policy WHERE key = :key"), {"key": key})


def history(conn: Connection, *, key: str | None = None, limit: int = 100) -> list[dict[str, Any]]:
    """The newest changes first (of one rule when *key* is given)."""
    where = "WHERE key = :key" if key is not None else ""
    return as_dicts(
        conn.execute(
            sa.text(
                f"SELECT id, key, old_value, new_value, actor, reason, changed_at FROM pgbus_web_policy_history"
                f" {where} ORDER BY id DESC LIMIT :limit"
            ),
            {"key": key, "limit": int(limit)},
        )
    )
