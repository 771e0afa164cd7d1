"""pgbus_workflow_events: the append-only audit trail.

One row per transition and per operator action, written inside the
transaction of the transition it records. The table refuses UPDATEs (a
trigger, see schema/v1.sql); rows go only with their run.

Actors: ``app`` (an outside verb called without one), ``system`` (the
worker and its sweep), or what the caller passes (``dashboard:<name>``).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import Connection

from ..rules import states
from ..rules.limits import ID_MAX, REASON_LIMIT
from . import among, as_dicts
from .text import truncate

# A cap so that one long detail cannot bloat the trail (a reason's is
# rules.limits.REASON_LIMIT).
DETAIL_LIMIT = 1_000
# A latest step row that is due or started (its run not yet moved on).
_DUE_OR_STARTED = among((states.STEP_SCHEDULED, states.STEP_IN_PROGRESS))

_INSERT = sa.text(
    """
    INSERT INTO pgbus_workflow_events
        (workflow_id, event, actor, reason, step_id, step_name, attempt, details, created_at)
    VALUES
        (:workflow_id, :event, :actor, :reason, :step_id, :step_name, :attempt, :details,
         COALESCE(:created_at, now()))
    RETURNING id
    """
).bindparams(sa.bindparam("details", type_=JSONB))

_FOR_RUN = sa.text(
    """
    SELECT id, workflow_id, event, actor, reason, step_id, step_name, attempt, details, created_at
    FROM pgbus_workflow_events
    WHERE workflow_id = :workflow_id
    ORDER BY id
    """
)


def cap(details: Mapping[str, Any] | None) -> dict[str, Any]:
    """Details with every string value capped at DETAIL_LIMIT characters."""
    return {
        str(key): truncate(value, DETAIL_LIMIT) if isinstance(value, str) else value
        for key, value in (details or {}).items()
    }


def _row(
    *,
    workflow_id: str,
    event: str,
    actor: str,
    reason: str | None = None,
    step: Mapping[str, Any] | None = None,
    details: Mapping[str, Any] | None = None,
    created_at: datetime | None = None,
) -> dict[str, Any]:
    if event not in states.EVENTS:
        raise ValueError(f"unknown workflow event {event!r}")
    return {
        "workflow_id": workflow_id,
        "event": event,
        "actor": str(actor),
        "reason": truncate(str(reason), REASON_LIMIT) if reason else None,
        "step_id": step["id"] if step else None,
        "step_name": step["step_name"] if step else None,
        "attempt": step["attempt"] if step else None,
        "details": cap(details),
        "created_at": created_at,
    }


def record(conn: Connection, **fields: Any) -> int:
    """Append one event; *step* is the step row it concerns (id, step_name, attempt).
    Fields: workflow_id, event, actor, reason, step, details, created_at."""
    event_id: int = conn.execute(_INSERT, _row(**fields)).scalar_one()
    return event_id


def row(**fields: Any) -> dict[str, Any]:
    """One event as record_many takes it, checked and capped as record does."""
    return _row(**fields)


# Many events in one statement, ids in the order given (the order the
# trail shows). One JSON array bind: the statement is the same whatever
# the number of rows.
_INSERT_MANY = sa.text(
    """
    INSERT INTO pgbus_workflow_events
        (workflow_id, event, actor, reason, step_id, step_name, attempt, details, created_at)
    SELECT e.workflow_id, e.event, e.actor, e.reason, e.step_id, e.step_name, e.attempt, e.details,
           COALESCE(e.created_at, now())
    FROM ROWS FROM (jsonb_to_recordset(:rows) AS (
        workflow_id text, event text, actor text, reason text, step_id bigint, step_name text,
        attempt integer, details jsonb, created_at timestamptz))
        WITH ORDINALITY AS e(workflow_id, event, actor, reason, step_id, step_name, attempt,
                             details, created_at, n)
    ORDER BY e.n
    """
).bindparams(sa.bindparam("rows", type_=JSONB))


def record_many(conn: Connection, rows: list[Mapping[str, Any]]) -> None:
    """Append *rows* (from row()) in one statement."""
    if not rows:
        return
    conn.execute(
        _INSERT_MANY,
        {
            "rows": [
                {**r, "created_at": r["created_at"].isoformat() if r["created_at"] is not None else None} for r in rows
            ]
        },
    )


# Operation ids are compared as text: the expression the index
# pgbus_workflow_events_operation holds (schema/v2.sql).
_OPERATION_ACTED = sa.text(
    """
    SELECT EXISTS (
        SELECT 1 FROM pgbus_workflow_events
        WHERE details ? 'operation_id' AND details ->> 'operation_id' = :operation_id
          AND workflow_id = :workflow_id
    )
    """
)


def operation_acted(conn: Connection, workflow_id: str, operation_id: int) -> bool:
    """True when operation *operation_id* already wrote an event on this run."""
    acted: bool = conn.execute(
        _OPERATION_ACTED, {"workflow_id": workflow_id, "operation_id": str(operation_id)}
    ).scalar_one()
    return acted


def for_run(conn: Connection, workflow_id: str) -> list[dict[str, Any]]:
    """All of a run's events, oldest first."""
    return as_dicts(conn.execute(_FOR_RUN, {"workflow_id": workflow_id}))


# The newest events below a cursor, read newest first through
# pgbus_workflow_events_run, each with the run's count of events: an
# uncorrelated subquery, which the server runs once per statement.
_NEWEST_FOR_RUN = sa.text(
    """
    SELECT id, workflow_id, event, actor, reason, step_id, step_name, attempt, details, created_at,
           (SELECT count(*) FROM pgbus_workflow_events WHERE workflow_id = :workflow_id) AS run_total
    FROM pgbus_workflow_events
    WHERE workflow_id = :workflow_id AND id < :before_id
    ORDER BY id DESC
    LIMIT :limit
    """
)


def newest_for_run(
    conn: Connection, workflow_id: str, *, limit: int, before_id: int | None = None
) -> tuple[list[dict[str, Any]], int]:
    """A run's newest *limit* events (below *before_id* when given), oldest
    first, and how many events the run has in all: one statement where a
    page of them is found, which is every run page but an empty window."""
    rows = as_dicts(
        conn.execute(
            _NEWEST_FOR_RUN,
            {"workflow_id": workflow_id, "before_id": before_id if before_id is not None else ID_MAX, "limit": limit},
        )
    )
    if rows:
        total = rows[0]["run_total"]
        for row in rows:
            del row["run_total"]
    else:
        # No row carried the count: none at all, or none below the cursor.
        total = count_for_run(conn, workflow_id) if before_id is not None else 0
    rows.reverse()
    return rows, total


def count_for_run(conn: Connection, workflow_id: str) -> int:
    """How many events the run has."""
    found: int = conn.execute(
        sa.text("SELECT count(*) FROM pgbus_workflow_events WHERE workflow_id = :workflow_id"),
        {"workflow_id": workflow_id},
    ).scalar_one()
    return found


def operation_acted_among(conn: Connection, workflow_ids: list[str], operation_id: int) -> set[str]:
    """Those of *workflow_ids* operation *operation_id* already wrote an event on."""
    if not workflow_ids:
        return set()
    return set(
        conn.execute(
            sa.text(
                """
            SELECT DISTINCT workflow_id FROM pgbus_workflow_events
            WHERE details ? 'operation_id' AND details ->> 'operation_id' = :operation_id
              AND workflow_id = ANY(:workflow_ids)
            """
            ),
            {"workflow_ids": list(workflow_ids), "operation_id": str(operation_id)},
        ).scalars()
    )


# A step row counts as the one an operation's act left when it was written
# no later than the act's event plus this (the row and the event are
# written in one transaction, their moments read from two clocks).
ACT_SLACK_SECONDS = 1


def operation_in_flight(conn: Connection, operation_id: int) -> int:
    """Runs operation *operation_id* acted on whose step the act scheduled
    has not settled: the run's latest step is still scheduled or in
    progress and was written by the act (no later than its event, give or
    take ACT_SLACK_SECONDS). A run that went on to a next step is settled.
    Reads the operation's events by index pgbus_workflow_events_operation."""
    return int(
        conn.execute(
            sa.text(
                f"""
            SELECT count(*) FROM (
                SELECT e.workflow_id, max(e.created_at) AS acted_at FROM pgbus_workflow_events e
                WHERE e.details ? 'operation_id' AND e.details ->> 'operation_id' = :operation_id
                GROUP BY e.workflow_id
            ) acted
            JOIN pgbus_workflows w ON w.workflow_id = acted.workflow_id
            JOIN pgbus_workflow_steps s ON s.id = w.latest_step_id
            WHERE w.latest_step_status IN {_DUE_OR_STARTED}
              AND s.created_at <= acted.acted_at + make_interval(secs => :slack)
            """
            ),
            {"operation_id": str(operation_id), "slack": ACT_SLACK_SECONDS},
        ).scalar_one()
    )
