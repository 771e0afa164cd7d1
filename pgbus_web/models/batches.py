"""pgbus_batches: fan-out batches a step may wait on ("7 of 12 jobs done")."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from . import as_dict, as_dicts

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


# --- Written by the runtime (fan-out steps) ----------------------------------


def insert_batch(
    conn: Connection, *, batch_id: str, description: str | None, total_jobs: int, now: datetime
) -> dict[str, Any]:
    """Open a batch; one without jobs is finished at once."""
    row = conn.execute(
        sa.text(
            f"""
            INSERT INTO pgbus_batches (batch_id, description, total_jobs, status, created_at, finished_at)
            VALUES (:batch_id, :description, :total_jobs,
                    CASE WHEN :total_jobs = 0 THEN 'finished' ELSE 'processing' END,
                    :now, CASE WHEN :total_jobs = 0 THEN CAST(:now AS timestamptz) END)
            RETURNING {COLUMNS}
            """
        ),
        {"batch_id": batch_id, "description": description, "total_jobs": int(total_jobs), "now": now},
    ).one()
    return as_dict(row)


def record_jobs(
    conn: Connection, batch_id: str, *, completed: int = 0, failed: int = 0, now: datetime
) -> dict[str, Any] | None:
    """Count jobs of a processing batch as done (never past total_jobs); the
    batch finishes when every job is counted. The batch as it is now, or
    None when it is not processing."""
    row = conn.execute(
        sa.text(
            f"""
            WITH counted AS (
                SELECT id,
                       LEAST(completed_jobs + :completed,
                             total_jobs - failed_jobs - discarded_jobs) AS completed_jobs,
                       LEAST(failed_jobs + :failed,
                             total_jobs - LEAST(completed_jobs + :completed,
                                                total_jobs - failed_jobs - discarded_jobs)
                                        - discarded_jobs) AS failed_jobs
                FROM pgbus_batches
                WHERE batch_id = :batch_id AND status = 'processing'
                FOR UPDATE
            )
            UPDATE pgbus_batches b
            SET completed_jobs = counted.completed_jobs,
                failed_jobs = counted.failed_jobs,
                status = CASE WHEN counted.completed_jobs + counted.failed_jobs + b.discarded_jobs >= b.total_jobs
                              THEN 'finished' ELSE b.status END,
                finished_at = CASE WHEN counted.completed_jobs + counted.failed_jobs + b.discarded_jobs >= b.total_jobs
                                   THEN CAST(:now AS timestamptz) ELSE b.finished_at END
            FROM counted
            WHERE b.id = counted.id
            RETURNING {", ".join("b." + column.strip() for column in COLUMNS.split(","))}
            """
        ),
        {"batch_id": batch_id, "completed": int(completed), "failed": int(failed), "now": now},
    ).first()
    return as_dict(row)


def processing_ids(conn: Connection, *, limit: int = 100) -> list[str]:
    """Batches still processing, oldest first."""
    rows = conn.execute(
        sa.text("SELECT batch_id FROM pgbus_batches WHERE status = 'processing' ORDER BY created_at, id LIMIT :limit"),
        {"limit": int(limit)},
    )
    return [batch_id for (batch_id,) in rows]


def find_many(conn: Connection, batch_ids: Iterable[Any]) -> dict[str, dict[str, Any]]:
    """{batch_id: batch} for the given ids (unknown ids are left out)."""
    ids = sorted({str(batch_id) for batch_id in batch_ids if batch_id is not None})
    if not ids:
        return {}
    rows = conn.execute(
        sa.text(f"SELECT {COLUMNS} FROM pgbus_batches WHERE batch_id = ANY(:batch_ids)"),
        {"batch_ids": ids},
    )
    return {row["batch_id"]: row for row in as_dicts(rows)}
