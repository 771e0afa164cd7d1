"""pgbus_web_access_log: sign-ins, failed sign-ins, sign-outs, sessions
ended by an admin, tokens made, revoked and first used from a new address
(core/access_log.py writes and reads it)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from . import as_dicts

COLUMNS = "id, at, kind, subject, actor, address, detail"


def insert(
    conn: Connection,
    *,
    at: datetime,
    kind: str,
    subject: str,
    actor: str | None = None,
    address: str | None = None,
    detail: str | None = None,
) -> None:
    conn.execute(
        sa.text(
            "INSERT INTO pgbus_web_access_log (at, kind, subject, actor, address, detail)"
            " VALUES (:at, :kind, :subject, :actor, :address, :detail)"
        ),
        {"at": at, "kind": kind, "subject": subject, "actor": actor, "address": address, "detail": detail},
    )


def insert_new_address(conn: Connection, *, at: datetime, subject: str, address: str) -> bool:
    """A token's first use from *address*: written unless a line already
    says so (two processes racing may both write one; the log only loses
    nothing). True when written."""
    return (
        conn.execute(
            sa.text(
                "INSERT INTO pgbus_web_access_log (at, kind, subject, address)"
                " SELECT :at, 'token_new_address', :subject, :address"
                " WHERE NOT EXISTS (SELECT 1 FROM pgbus_web_access_log WHERE kind = 'token_new_address'"
                "                   AND subject = :subject AND address = :address)"
            ),
            {"at": at, "subject": subject, "address": address},
        ).rowcount
        > 0
    )


def latest(conn: Connection, *, limit: int) -> list[dict[str, Any]]:
    return as_dicts(
        conn.execute(
            sa.text(f"SELECT {COLUMNS} FROM pgbus_web_access_log ORDER BY at DESC, id DESC LIMIT :limit"),
            {"limit": int(limit)},
        )
    )


def count_before(conn: Connection, before: datetime) -> int:
    return int(
        conn.execute(
            sa.text("SELECT count(*) FROM pgbus_web_access_log WHERE at < :before"), {"before": before}
        ).scalar_one()
    )


def delete_before(conn: Connection, before: datetime, *, batch: int) -> int:
    """Delete up to *batch* lines older than *before*, oldest first."""
    return conn.execute(
        sa.text(
            "DELETE FROM pgbus_web_access_log WHERE id IN (SELECT id FROM pgbus_web_access_log"
            " WHERE at < :before ORDER BY at LIMIT :batch)"
        ),
        {"before": before, "batch": int(batch)},
    ).rowcount
