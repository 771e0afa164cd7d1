"""pgbus_web_api_tokens: the JSON API's bearer tokens, stored as the
SHA-256 of the token (core/tokens.py makes and checks them)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from . import as_dict, as_dicts

COLUMNS = "id, name, role, created_at, last_used_at, revoked_at, expires_at, read_only, last_used_from, revoked_by"


def insert(
    conn: Connection,
    *,
    name: str,
    role: str,
    token_sha256: str,
    now: datetime,
    expires_at: datetime | None = None,
    read_only: bool = False,
) -> dict[str, Any]:
    return as_dict(
        conn.execute(
            sa.text(
                f"INSERT INTO pgbus_web_api_tokens (name, role, token_sha256, created_at, expires_at, read_only)"
                f" VALUES (:name, :role, :digest, :now, :expires_at, :read_only) RETURNING {COLUMNS}"
            ),
            {
                "name": name,
                "role": role,
                "digest": token_sha256,
                "now": now,
                "expires_at": expires_at,
                "read_only": bool(read_only),
            },
        ).one()
    )


def live_by_name(conn: Connection, name: str) -> dict[str, Any] | None:
    return as_dict(
        conn.execute(
            sa.text(f"SELECT {COLUMNS} FROM pgbus_web_api_tokens WHERE name = :name AND revoked_at IS NULL"),
            {"name": name},
        ).first()
    )


def by_digest(conn: Connection, token_sha256: str) -> dict[str, Any] | None:
    """The token with this digest, revoked or not."""
    return as_dict(
        conn.execute(
            sa.text(f"SELECT {COLUMNS} FROM pgbus_web_api_tokens WHERE token_sha256 = :digest"),
            {"digest": token_sha256},
        ).first()
    )


def all_tokens(conn: Connection) -> list[dict[str, Any]]:
    return as_dicts(conn.execute(sa.text(f"SELECT {COLUMNS} FROM pgbus_web_api_tokens ORDER BY name, id")))


def live_tokens(conn: Connection, *, now: datetime) -> list[dict[str, Any]]:
    """The tokens neither revoked nor expired at *now*."""
    return as_dicts(
        conn.execute(
            sa.text(
                f"SELECT {COLUMNS} FROM pgbus_web_api_tokens WHERE revoked_at IS NULL"
                " AND (expires_at IS NULL OR expires_at > :now) ORDER BY name, id"
            ),
            {"now": now},
        )
    )


def revoke(conn: Connection, name: str, *, now: datetime, by: str | None = None) -> int:
    return conn.execute(
        sa.text(
            "UPDATE pgbus_web_api_tokens SET revoked_at = :now, revoked_by = :by"
            " WHERE name = :name AND revoked_at IS NULL"
        ),
        {"name": name, "now": now, "by": by},
    ).rowcount


def touch(conn: Connection, token_id: int, *, now: datetime, every: timedelta, address: str | None = None) -> None:
    """Record a use (and from where), unless one from the same address was
    recorded less than *every* ago (a script polling each second writes
    once a minute, not each second)."""
    conn.execute(
        sa.text(
            "UPDATE pgbus_web_api_tokens SET last_used_at = :now,"
            " last_used_from = coalesce(:address, last_used_from) WHERE id = :id"
            " AND (last_used_at IS NULL OR last_used_at < :since"
            "      OR last_used_from IS DISTINCT FROM coalesce(:address, last_used_from))"
        ),
        {"id": int(token_id), "now": now, "since": now - every, "address": address},
    )
