"""pgbus_web_api_tokens: the JSON API's bearer tokens, stored as the
SHA-256 of the token (core/tokens.py makes and checks them)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from . import as_dict, as_dicts

COLUMNS = "id, name, role, created_at, last_used_at, revoked_at"


def insert(conn: Connection, *, name: str, role: str, token_sha256: str, now: datetime) -> dict[str, Any]:
    return as_dict(conn.execute(
        sa.text(
            f"INSERT INTO pgbus_web_api_tokens (name, role, token_sha256, created_at)"
            f" VALUES (:name, :role, :digest, :now) RETURNING {COLUMNS}"
        ),
        {"name": name, "role": role, "digest": token_sha256, "now": now},
    ).first())


def live_by_name(conn: Connection, name: str) -> dict[str, Any] | None:
    return as_dict(conn.execute(
        sa.text(f"SELECT {COLUMNS} FROM pgbus_web_api_tokens WHERE name = :name AND revoked_at IS NULL"),
        {"name": name},
    ).first())


def by_digest(conn: Connection, token_sha256: str) -> dict[str, Any] | None:
    """The token with this digest, revoked or not."""
    return as_dict(conn.execute(
        sa.text(f"SELECT {COLUMNS} FROM pgbus_web_api_tokens WHERE token_sha256 = :digest"),
        {"digest": token_sha256},
    ).first())


def all_tokens(conn: Connection) -> list[dict[str, Any]]:
    return as_dicts(conn.execute(sa.text(f"SELECT {COLUMNS} FROM pgbus_web_api_tokens ORDER BY name, id")))


def revoke(conn: Connection, name: str, *, now: datetime) -> int:
    return conn.execute(
        sa.text("UPDATE pgbus_web_api_tokens SET revoked_at = :now WHERE name = :name AND revoked_at IS NULL"),
        {"name": name, "now": now},
    ).rowcount


def touch(conn: Connection, token_id: int, *, now: datetime, every: timedelta) -> None:
    """Record a use, unless one was recorded less than *every* ago (a
    script polling each second writes once a minute, not each second)."""
    conn.execute(
        sa.text(
            "UPDATE pgbus_web_api_tokens SET last_used_at = :now WHERE id = :id"
            " AND (last_used_at IS NULL OR last_used_at < :since)"
        ),
        {"id": int(token_id), "now": now, "since": now - every},
    )
