"""What became of the runs an operation acted on: how many are in each
status now, and why the ongoing ones among them need a person again (the
stuck reasons of rules/stuck.py), in one statement. The runs are the ones
the index's ``operation`` filter lists (the audit events carrying the
operation's id), and a reason is the one the index's ``reason`` filter
decides, so each count is exactly the list its link opens.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from functools import cache

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..rules import stuck


@cache
def _outcomes_sql(rules: tuple[stuck.Rule, ...]) -> sa.TextClause:
    """The statement for *rules* (those whose cutoffs are given: without a
    waiting threshold no run is waiting_overdue, as on the index)."""
    reasons = "\n                 ".join(stuck.reason_sql(rules))
    return sa.text(
        f"""
        SELECT w.status, stuck.reason, count(*) AS runs
        FROM pgbus_workflows w
        CROSS JOIN LATERAL (
            SELECT CASE
                     {reasons}
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
    conn: Connection,
    operation_id: int,
    *,
    threshold: timedelta,
    waiting_threshold: timedelta | None,
    now: datetime,
) -> dict[tuple[str, str | None], int]:
    """{(status, stuck reason or None): runs} over the runs operation
    *operation_id* acted on, as they are now."""
    binds = stuck.params(now, threshold, waiting_threshold)
    rows = conn.execute(_outcomes_sql(stuck.rules_for(binds)), {"operation": str(int(operation_id)), **binds})
    return {(status, reason): int(runs) for status, reason, runs in rows}
