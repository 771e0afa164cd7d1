"""What became of the runs an operation acted on: how many are in each
status now, and why the ongoing ones among them need a person again (the
stuck reasons of STUCK_RULES), in one statement. The runs are the ones
the index's ``operation`` filter lists (the audit events carrying the
operation's id), and a reason is the one the index's ``reason`` filter
decides, so each count is exactly the list its link opens.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..rules import states
from .workflows import STUCK_RULES

_REASONS = "\n                 ".join(
    f"WHEN w.status = '{status}' AND {rule} THEN '{reason}'" for reason, (status, rule) in STUCK_RULES.items()
)

_OUTCOMES = sa.text(
    f"""
    SELECT w.status, stuck.reason, count(*) AS runs
    FROM pgbus_workflows w
    CROSS JOIN LATERAL (
        SELECT CASE
                 {_REASONS}
               END AS reason
    ) stuck
    WHERE w.workflow_id IN (
        SELECT e.workflow_id FROM pgbus_workflow_events e
        WHERE e.details ? 'operation_id' AND e.details ->> 'operation_id' = :operation
    )
    GROUP BY w.status, stuck.reason
    """
)


def outcomes(
    conn: Connection, operation_id: int, *, threshold: timedelta, waiting_threshold: timedelta, now: datetime,
) -> dict[tuple[str, str | None], int]:
    """{(status, stuck reason or None): runs} over the runs operation
    *operation_id* acted on, as they are now."""
    rows = conn.execute(_OUTCOMES, {
        "operation": str(int(operation_id)),
        "stalled_error": states.STEP_STALLED_ERROR,
        "overdue_before": now - threshold,
        "waiting_before": now - waiting_threshold,
    })
    return {(status, reason): int(runs) for status, reason, runs in rows}
