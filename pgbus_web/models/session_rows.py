"""pgbus_web_sessions: one row per signed-in browser session, read on
every request of it (core/sessions.py), so an ended one is refused at
every process."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from . import as_dict, as_dicts

COLUMNS = "id, name, provider, address, started_at, last_seen_at, expires_at, ended_at, ended_by, end_reason"


def insert(
    conn: Connection,
    *,
    session_id: str,
    name: str,
    provider: str,
    address: str | None,
    now: datetime,
    expires_at: datetime,
) -> dict[str, Any]:
    return as_dict(
        conn.execute(
            sa.text(
                "INSERT INTO pgbus_web_sessions (id, name, provider, address, started_at, last_seen_at, expires_at)"
                f" VALUES (:id, :name, :provider, :address, :now, :now, :expires_at) RETURNING {COLUMNS}"
            ),
            {
                "id": session_id,
                "name": name,
                "provider": provider,
                "address": address,
                "now": now,
                "expires_at": expires_at,
            },
        ).one()
    )


def by_id(conn: Connection, session_id: str) -> dict[str, Any] | None:
    return as_dict(
        conn.execute(sa.text(f"SELECT {COLUMNS} FROM pgbus_web_sessions WHERE id = :id"), {"id": session_id}).first()
    )


def live(conn: Connection, *, now: datetime) -> list[dict[str, Any]]:
    """Sessions neither ended nor past their expiry, newest first."""
    return as_dicts(
        conn.execute(
            sa.text(
                f"SELECT {COLUMNS} FROM pgbus_web_sessions WHERE ended_at IS NULL AND expires_at > :now"
                " ORDER BY started_at DESC, id"
            ),
            {"now": now},
        )
    )


def touch(conn: Connection, session_id: str, *, now: datetime, every: timedelta) -> None:
    """Last seen now, unless written less than *every* ago."""
    conn.execute(
        sa.text("UPDATE pgbus_web_sessions SET last_seen_at = :now WHERE id = :id AND last_seen_at < :since"),
        {"id": session_id, "now": now, "since": now - every},
    )


def end(conn: Connection, session_id: str, *, now: datetime, by: str | None, reason: str) -> dict[str, Any] | None:
    """End one live session; its row, or None when none is live by that id."""
    return as_dict(
        conn.execute(
            sa.text(
                "UPDATE pgbus_web_sessions SET ended_at = :now, ended_by = :by, end_reason = :reason"
                f" WHERE id = :id AND ended_at IS NULL RETURNING {COLUMNS}"
            ),
            {"id": session_id, "now": now, "by": by, "reason": reason},
        ).first()
    )


def end_all(conn: Connection, name: str, *, now: datetime, by: str | None, reason: str) -> int:
    """End every live session of *name* (an expired one needs no end); how many."""
    return conn.execute(
        sa.text(
            "UPDATE pgbus_web_sessions SET ended_at = :now, ended_by = :by, end_reason = :reason"
            " WHERE name = :name AND ended_at IS NULL AND expires_at > :now"
        ),
        {"name": name, "now": now, "by": by, "reason": reason},
    ).rowcount


def delete_before(conn: Connection, before: datetime, *, batch: int) -> int:
    """Delete up to *batch* sessions that ended or expired before *before*."""
    return conn.execute(
        sa.text(
            "DELETE FROM pgbus_web_sessions WHERE id IN (SELECT id FROM pgbus_web_sessions"
            " WHERE coalesce(ended_at, expires_at) < :before LIMIT :batch)"
        ),
        {"before": before, "batch": int(batch)},
    ).rowcount


def count_before(conn: Connection, before: datetime) -> int:
    return int(
        conn.execute(
            sa.text("SELECT count(*) FROM pgbus_web_sessions WHERE coalesce(ended_at, expires_at) < :before"),
            {"before": before},
        ).scalar_one()
    )
