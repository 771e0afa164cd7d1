"""pgbus_web_operations: one verb on every run a filter matches, done in
chunks (runtime/operations.py holds the rules, docs/operations.md the
crash-safety argument).

Whoever holds an operation proves it with the heartbeat it last wrote (the
*fence*): every write of progress names it, so a process whose operation
was taken over (its heartbeat went stale) writes nothing more.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Mapping

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import Connection

from . import as_dict, as_dicts

COLUMNS = (
    "id, verb, filters, ceiling_id, params, reason, actor, status, total, moved, skipped, "
    "refused, cursor, heartbeat_at, created_at, started_at, finished_at, error"
)

_INSERT = sa.text(
    f"""
    INSERT INTO pgbus_web_operations
        (verb, filters, ceiling_id, params, reason, actor, total, created_at)
    VALUES (:verb, :filters, :ceiling_id, :params, :reason, :actor, :total, :now)
    RETURNING {COLUMNS}
    """
).bindparams(sa.bindparam("filters", type_=JSONB), sa.bindparam("params", type_=JSONB))


def insert(
    conn: Connection, *, verb: str, filters: Mapping[str, str], ceiling_id: int, params: Mapping[str, Any],
    reason: str, actor: str, total: int, now: datetime,
) -> dict[str, Any]:
    return as_dict(conn.execute(_INSERT, {
        "verb": verb, "filters": dict(filters), "ceiling_id": int(ceiling_id), "params": dict(params),
        "reason": reason, "actor": actor, "total": int(total), "now": now,
    }).first())


def find(conn: Connection, operation_id: int) -> dict[str, Any] | None:
    return as_dict(conn.execute(
        sa.text(f"SELECT {COLUMNS} FROM pgbus_web_operations WHERE id = :id"), {"id": int(operation_id)}
    ).first())


def recent(conn: Connection, *, limit: int = 50) -> list[dict[str, Any]]:
    """The newest operations first."""
    return as_dicts(conn.execute(
        sa.text(f"SELECT {COLUMNS} FROM pgbus_web_operations ORDER BY created_at DESC, id DESC LIMIT :limit"),
        {"limit": int(limit)},
    ))


def any_open(conn: Connection) -> bool:
    """True when an operation is queued or running (the serving process's
    cheap look before it tries a claim)."""
    return conn.execute(sa.text(
        "SELECT EXISTS (SELECT 1 FROM pgbus_web_operations WHERE status IN ('queued', 'running'))"
    )).scalar_one()


def outcome_totals(conn: Connection) -> dict[tuple[str, str], int]:
    """{(verb, outcome): runs} over every operation kept: the runs each
    verb moved, skipped and refused (the metrics' operation outcomes)."""
    rows = conn.execute(sa.text(
        "SELECT verb, COALESCE(sum(moved), 0), COALESCE(sum(skipped), 0), COALESCE(sum(refused), 0) "
        "FROM pgbus_web_operations GROUP BY verb"
    ))
    totals: dict[tuple[str, str], int] = {}
    for verb, moved, skipped, refused in rows:
        totals.update({(verb, "moved"): int(moved), (verb, "skipped"): int(skipped), (verb, "refused"): int(refused)})
    return totals


def status_counts(conn: Connection) -> dict[tuple[str, str], int]:
    """{(verb, status): operations}."""
    rows = conn.execute(sa.text("SELECT verb, status, count(*) FROM pgbus_web_operations GROUP BY verb, status"))
    return {(verb, status): int(count) for verb, status, count in rows}


def claim(
    conn: Connection, *, now: datetime, stale_before: datetime, operation_id: int | None = None
) -> dict[str, Any] | None:
    """Take the oldest queued operation, or a running one whose heartbeat
    is older than *stale_before* (its process died); with *operation_id*,
    that one only. SKIP LOCKED: two claimers never wait on each other, and
    never take the same one. The row comes back with its new heartbeat,
    the fence of every later write."""
    only = "AND id = :operation_id" if operation_id is not None else ""
    return as_dict(conn.execute(
        sa.text(
            f"""
            UPDATE pgbus_web_operations
            SET status = 'running', heartbeat_at = :now, started_at = COALESCE(started_at, :now)
            WHERE id = (
                SELECT id FROM pgbus_web_operations
                WHERE (status = 'queued' OR (status = 'running' AND heartbeat_at < :stale_before)) {only}
                ORDER BY id
                LIMIT 1
                FOR UPDATE SKIP LOCKED
            )
            RETURNING {COLUMNS}
            """
        ),
        {"now": now, "stale_before": stale_before, "operation_id": operation_id},
    ).first())


def progress(
    conn: Connection, operation_id: int, *, fence: datetime, now: datetime, cursor: int,
    moved: int, skipped: int, refused: int,
) -> dict[str, Any] | None:
    """Add one chunk's counts and move the cursor past it, with a new
    heartbeat; None when *fence* no longer holds (taken over): nothing
    written. A cancelled operation still gets the counts of the chunk that
    was in hand."""
    return as_dict(conn.execute(
        sa.text(
            f"""
            UPDATE pgbus_web_operations
            SET moved = moved + :moved, skipped = skipped + :skipped, refused = refused + :refused,
                cursor = GREATEST(cursor, :cursor), heartbeat_at = :now
            WHERE id = :id AND heartbeat_at = :fence AND status IN ('running', 'cancelled')
            RETURNING {COLUMNS}
            """
        ),
        {"id": int(operation_id), "fence": fence, "now": now, "cursor": int(cursor),
         "moved": int(moved), "skipped": int(skipped), "refused": int(refused)},
    ).first())


def finish(conn: Connection, operation_id: int, *, fence: datetime, now: datetime) -> dict[str, Any] | None:
    """Done. moved is counted again from the audit trail: the runs with an
    event of this operation, whoever wrote it (a holder that lost the
    operation may still commit runs of its chunk after the taker walked
    past them, and those no longer match the filter). The runs counted at
    preview that are neither moved nor counted otherwise had moved on
    before their turn: skipped."""
    return as_dict(conn.execute(
        sa.text(
            f"""
            WITH acted AS (
                SELECT count(DISTINCT e.workflow_id) AS runs FROM pgbus_workflow_events e
                WHERE e.details ? 'operation_id' AND e.details ->> 'operation_id' = :operation
            )
            UPDATE pgbus_web_operations
            SET status = 'done', finished_at = :now, heartbeat_at = :now, moved = acted.runs,
                skipped = skipped + GREATEST(total - acted.runs - skipped - refused, 0)
            FROM acted
            WHERE id = :id AND heartbeat_at = :fence AND status = 'running'
            RETURNING {COLUMNS}
            """
        ),
        {"id": int(operation_id), "fence": fence, "now": now, "operation": str(operation_id)},
    ).first())


def fail(conn: Connection, operation_id: int, *, fence: datetime, now: datetime, error: str) -> bool:
    return conn.execute(
        sa.text(
            "UPDATE pgbus_web_operations SET status = 'failed', finished_at = :now, error = :error "
            "WHERE id = :id AND heartbeat_at = :fence AND status = 'running'"
        ),
        {"id": int(operation_id), "fence": fence, "now": now, "error": error[:1000]},
    ).rowcount == 1


def release(conn: Connection, operation_id: int, *, fence: datetime) -> bool:
    """Give a running operation back to the queue (a stopping process):
    another process claims it at once instead of waiting for staleness."""
    return conn.execute(
        sa.text(
            "UPDATE pgbus_web_operations SET status = 'queued', heartbeat_at = NULL "
            "WHERE id = :id AND heartbeat_at = :fence AND status = 'running'"
        ),
        {"id": int(operation_id), "fence": fence},
    ).rowcount == 1


def cancel(conn: Connection, operation_id: int, *, now: datetime) -> dict[str, Any] | None:
    """queued or running -> cancelled; None when it was not open."""
    return as_dict(conn.execute(
        sa.text(
            f"""
            UPDATE pgbus_web_operations SET status = 'cancelled', finished_at = :now
            WHERE id = :id AND status IN ('queued', 'running')
            RETURNING {COLUMNS}
            """
        ),
        {"id": int(operation_id), "now": now},
    ).first())


def renew(conn: Connection, operation_id: int, *, fence: datetime, now: datetime) -> datetime | None:
    """A new heartbeat for a running operation whose holder still holds
    *fence* (a long chunk, so nobody takes it over meanwhile): the new
    fence, or None when it is no longer held."""
    return conn.execute(
        sa.text(
            "UPDATE pgbus_web_operations SET heartbeat_at = :now "
            "WHERE id = :id AND heartbeat_at = :fence AND status = 'running' RETURNING heartbeat_at"
        ),
        {"id": int(operation_id), "fence": fence, "now": now},
    ).scalar()
