"""pgbus_workflow_steps: one row per step attempt; a run's latest row is its highest id."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from . import as_dict, as_dicts

COLUMNS = (
    "id, workflow_id, step_name, status, attempt, scheduled_at, started_at, finished_at, "
    "wait_for, waiting_since, timeout_at, batch_id, error_class, error_message, "
    "error_backtrace, result, created_at, updated_at"
)


def latest(conn: Connection, workflow_id: str) -> dict[str, Any] | None:
    """The run's latest step row (its highest id), or None before its first step."""
    row = conn.execute(
        sa.text(
            f"SELECT {COLUMNS} FROM pgbus_workflow_steps WHERE workflow_id = :workflow_id "
            "ORDER BY id DESC LIMIT 1"
        ),
        {"workflow_id": workflow_id},
    ).first()
    return as_dict(row)


def for_run(conn: Connection, workflow_id: str) -> list[dict[str, Any]]:
    """Every attempt of every step of the run, in the order they were created."""
    rows = conn.execute(
        sa.text(f"SELECT {COLUMNS} FROM pgbus_workflow_steps WHERE workflow_id = :workflow_id ORDER BY id"),
        {"workflow_id": workflow_id},
    )
    return as_dicts(rows)
