"""pgbus_workflow_signals: signals delivered to a run.

pending (stored, no step has taken it), claimed (a step waiting for its name
took it and runs with it), consumed (that step ended). Written only under
the run's row lock. A payload reads back as stored, even when another
writer stored something other than an object.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import Connection

from . import as_dict, as_dicts

COLUMNS = (
    "id, workflow_id, name, payload, idempotency_key, status, claimed_by_step_id, claimed_at, consumed_at, created_at"
)

_INSERT = sa.text(
    f"""
    INSERT INTO pgbus_workflow_signals
        (workflow_id, name, payload, idempotency_key, status, created_at)
    VALUES (:workflow_id, :name, :payload, :idempotency_key, 'pending', COALESCE(:now, now()))
    ON CONFLICT (workflow_id, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
    RETURNING {COLUMNS}
    """
).bindparams(sa.bindparam("payload", type_=JSONB))


def insert_signal(
    conn: Connection,
    *,
    workflow_id: str,
    name: str,
    payload: dict[str, Any] | None,
    idempotency_key: str | None = None,
    now: datetime | None = None,
) -> dict[str, Any] | None:
    """Store a pending signal and return it; None when a signal with the same
    (workflow_id, idempotency_key) is already stored (nothing inserted)."""
    row = conn.execute(
        _INSERT,
        {
            "workflow_id": workflow_id,
            "name": name,
            "payload": payload or {},
            "idempotency_key": idempotency_key,
            "now": now,
        },
    ).first()
    return as_dict(row)


def find_by_key(conn: Connection, workflow_id: str, idempotency_key: str) -> dict[str, Any] | None:
    row = conn.execute(
        sa.text(
            f"SELECT {COLUMNS} FROM pgbus_workflow_signals WHERE workflow_id = :workflow_id AND idempotency_key = :key"
        ),
        {"workflow_id": workflow_id, "key": idempotency_key},
    ).first()
    return as_dict(row)


def pending_for(conn: Connection, workflow_id: str, name: str | None = None) -> list[dict[str, Any]]:
    """A run's pending signals (only *name*'s when given), oldest first."""
    rows = conn.execute(
        sa.text(
            f"""
            SELECT {COLUMNS} FROM pgbus_workflow_signals
            WHERE workflow_id = :workflow_id AND status = 'pending'
              AND (CAST(:name AS text) IS NULL OR name = :name)
            ORDER BY id
            """
        ),
        {"workflow_id": workflow_id, "name": name},
    )
    return as_dicts(rows)


def held_by_step(conn: Connection, workflow_id: str, step_name: str) -> dict[str, Any] | None:
    """The signal an earlier attempt of *step_name* claimed and did not
    consume: a reattempt, or a resume after a failure, runs with it."""
    row = conn.execute(
        sa.text(
            f"""
            SELECT {COLUMNS} FROM pgbus_workflow_signals
            WHERE workflow_id = :workflow_id AND status = 'claimed'
              AND claimed_by_step_id IN (
                  SELECT id FROM pgbus_workflow_steps
                  WHERE workflow_id = :workflow_id AND step_name = :step_name)
            ORDER BY id
            LIMIT 1
            """
        ),
        {"workflow_id": workflow_id, "step_name": step_name},
    ).first()
    return as_dict(row)


def claim(conn: Connection, signal_id: int, *, step_id: int, now: datetime | None = None) -> int:
    """pending -> claimed by *step_id*; the number of rows moved (0 or 1)."""
    return conn.execute(
        sa.text(
            """
            UPDATE pgbus_workflow_signals
            SET status = 'claimed', claimed_by_step_id = :step_id, claimed_at = COALESCE(:now, now())
            WHERE id = :id AND status = 'pending'
            """
        ),
        {"id": signal_id, "step_id": step_id, "now": now},
    ).rowcount


def consume(conn: Connection, signal_id: int, *, now: datetime | None = None) -> int:
    """claimed -> consumed; the number of rows moved (0 or 1)."""
    return conn.execute(
        sa.text(
            """
            UPDATE pgbus_workflow_signals
            SET status = 'consumed', consumed_at = COALESCE(:now, now())
            WHERE id = :id AND status = 'claimed'
            """
        ),
        {"id": signal_id, "now": now},
    ).rowcount


def for_run(conn: Connection, workflow_id: str) -> list[dict[str, Any]]:
    """A run's signals, oldest first."""
    rows = conn.execute(
        sa.text(f"SELECT {COLUMNS} FROM pgbus_workflow_signals WHERE workflow_id = :workflow_id ORDER BY id"),
        {"workflow_id": workflow_id},
    )
    return as_dicts(rows)
