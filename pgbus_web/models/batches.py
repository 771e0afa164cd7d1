"""pgbus_batches: fan-out batches a step may wait on ("7 of 12 jobs done")."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from . import as_dict

COLUMNS = (
    "id, batch_id, description, total_jobs, completed_jobs, failed_jobs, "
    "discarded_jobs, status, created_at, finished_at"
)


def find(conn: Connection, batch_id: str) -> dict[str, Any] | None:
    row = conn.execute(
        sa.text(f"SELECT {COLUMNS} FROM pgbus_batches WHERE batch_id = :batch_id"),
        {"batch_id": batch_id},
    ).first()
    return as_dict(row)
