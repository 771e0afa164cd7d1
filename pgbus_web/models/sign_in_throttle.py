"""pgbus_web_sign_in_throttle: sign-in attempts per key over a fixed
window that starts at a key's first attempt (auth/throttle.py)."""

from __future__ import annotations

from datetime import timedelta

import sqlalchemy as sa
from sqlalchemy.engine import Connection

# The window has passed: the row starts again at this attempt.
_EXPIRED = "t.window_start <= now() - :window"

_RESERVE = sa.text(
    "INSERT INTO pgbus_web_sign_in_throttle AS t (key, window_start, attempts) VALUES (:key, now(), 1)"
    " ON CONFLICT (key) DO UPDATE SET"
    f" window_start = CASE WHEN {_EXPIRED} THEN now() ELSE t.window_start END,"
    f" attempts = CASE WHEN {_EXPIRED} THEN 1 ELSE t.attempts + 1 END"
    f" WHERE {_EXPIRED} OR t.attempts < :limit"
    " RETURNING attempts"
)


def reserve(conn: Connection, key: str, *, limit: int, window: timedelta) -> int | None:
    """Count one attempt for *key* unless it already has *limit* in the
    window: the attempts now, or None when refused (nothing written). One
    statement: the row's lock makes concurrent reservations take turns."""
    return conn.execute(_RESERVE, {"key": key, "limit": int(limit), "window": window}).scalar_one_or_none()


def release(conn: Connection, key: str) -> None:
    """Give back one reserved attempt (it succeeded)."""
    conn.execute(
        sa.text("UPDATE pgbus_web_sign_in_throttle SET attempts = attempts - 1 WHERE key = :key AND attempts > 0"),
        {"key": key},
    )


def clear(conn: Connection, key: str) -> None:
    conn.execute(sa.text("DELETE FROM pgbus_web_sign_in_throttle WHERE key = :key"), {"key": key})


def prune(conn: Connection, *, window: timedelta, limit: int = 500) -> int:
    """Delete up to *limit* rows whose window has passed, skipping rows a
    sign-in holds (never waits, so it cannot deadlock with one)."""
    return conn.execute(
        sa.text(
            "DELETE FROM pgbus_web_sign_in_throttle WHERE key IN ("
            " SELECT key FROM pgbus_web_sign_in_throttle WHERE window_start <= now() - :window"
            " LIMIT :limit FOR UPDATE SKIP LOCKED)"
        ),
        {"window": window, "limit": int(limit)},
    ).rowcount
