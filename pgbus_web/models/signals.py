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
    "id, workflow_id, name, payload, idempotency_key, status, "
    "claimed_by_step_id, claimed_at, consumed_at, created_at"
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
            f"SELECT {COLUMNS} FROM pgbus_workflow_signals "
            "WHERE workflow_id = :workflow_id AND idempotency_key = :key"
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


def insert_many(conn: Connection, rows: list[dict[str, Any]], *, now: datetime) -> dict[str, dict[str, Any]]:
    """insert_signal() of many in one statement (one per run: workflow_id,
    name, payload, idempotency_key, and claimed_by_step_id for one a step
    claims at once: stored claimed then, as insert then claim leave it);
    workflow_id -> the stored signal. A run whose (workflow_id,
    idempotency_key) is already stored is left out: nothing inserted."""
    if not rows:
        return {}
    stored = conn.execute(
        sa.text(
            f"""
            INSERT INTO pgbus_workflow_signals
                (workflow_id, name, payload, idempotency_key, status, claimed_by_step_id, claimed_at, created_at)
            SELECT r.workflow_id, r.name, r.payload, r.idempotency_key,
                   CASE WHEN r.claimed_by_step_id IS NULL THEN 'pending' ELSE 'claimed' END,
                   r.claimed_by_step_id, CASE WHEN r.claimed_by_step_id IS NULL THEN NULL ELSE :now END, :now
            FROM ROWS FROM (jsonb_to_recordset(:rows) AS (
                workflow_id text, name text, payload jsonb, idempotency_key text, claimed_by_step_id bigint))
                WITH ORDINALITY AS r(workflow_id, name, payload, idempotency_key, claimed_by_step_id, n)
            ORDER BY r.n
            ON CONFLICT (workflow_id, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
            RETURNING {COLUMNS}
            """
        ).bindparams(sa.bindparam("rows", type_=JSONB)),
        {"now": now, "rows": [
            {"workflow_id": row["workflow_id"], "name": row["name"], "payload": row.get("payload") or {},
             "idempotency_key": row.get("idempotency_key"), "claimed_by_step_id": row.get("claimed_by_step_id")}
            for row in rows
        ]},
    )
    return {row["workflow_id"]: row for row in as_dicts(stored)}


def consume_held_many(conn: Connection, pairs: list[tuple[str, str]], *, now: datetime) -> int:
    """For each (workflow_id, step_name), the signal held_by_step() finds
    -> consumed, in one statement; how many moved."""
    if not pairs:
        return 0
    return conn.execute(
        sa.text(
            """
            UPDATE pgbus_workflow_signals g SET status = 'consumed', consumed_at = :now
            FROM (
                SELECT DISTINCT ON (p.workflow_id, p.step_name) s.id
                FROM unnest(CAST(:workflow_ids AS text[]), CAST(:step_names AS text[])) AS p(workflow_id, step_name)
                JOIN pgbus_workflow_signals s ON s.workflow_id = p.workflow_id AND s.status = 'claimed'
                 AND s.claimed_by_step_id IN (
                     SELECT id FROM pgbus_workflow_steps
                     WHERE workflow_id = p.workflow_id AND step_name = p.step_name)
                ORDER BY p.workflow_id, p.step_name, s.id
            ) held
            WHERE g.id = held.id AND g.status = 'claimed'
            """
        ),
        {"workflow_ids": [pair[0] for pair in pairs], "step_names": [pair[1] for pair in pairs], "now": now},
    ).rowcount
