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


@cache
def _step_outcomes_sql(rules: tuple[stuck.Rule, ...]) -> sa.TextClause:
    """The statement of step_outcomes for *rules* (as _outcomes_sql)."""
    reasons = "\n                 ".join(stuck.reason_sql(rules))
    return sa.text(
        f"""
        SELECT w.status, stuck.reason, a.stuck_step,
               COALESCE(COALESCE(w.latest_step_name, w.current_step) = a.stuck_step, false) AS at_step,
               count(*) AS runs
        FROM (
            SELECT e.workflow_id,
                   COALESCE(
                       CAST(:filter_step AS text),
                       (array_agg(e.step_name ORDER BY e.id) FILTER (WHERE e.step_name IS NOT NULL))[1]
                   ) AS stuck_step
            FROM pgbus_workflow_events e
            WHERE e.details ? 'operation_id' AND e.details ->> 'operation_id' = :operation
            GROUP BY e.workflow_id
        ) a
        JOIN pgbus_workflows w ON w.workflow_id = a.workflow_id
        CROSS JOIN LATERAL (
            SELECT CASE
                     {reasons}
                   END AS reason
        ) stuck
        WHERE a.stuck_step IS NOT NULL
        GROUP BY w.status, stuck.reason, a.stuck_step, at_step
        """
    )


def step_outcomes(
    conn: Connection,
    operation_id: int,
    *,
    filter_step: str | None,
    threshold: timedelta,
    waiting_threshold: timedelta | None,
    now: datetime,
) -> dict[tuple[str, str | None, str, bool], int]:
    """{(status, stuck reason or None, the step that was stuck, whether the
    run is at that step now): runs} over the runs operation *operation_id*
    acted on, as they are now. The step that was stuck is *filter_step*
    (the operation's filter's step: the run's step when the chunk acted,
    as it reads the filter again), else the first step the operation's
    events on the run name; a run with neither is left out."""
    binds = stuck.params(now, threshold, waiting_threshold)
    rows = conn.execute(
        _step_outcomes_sql(stuck.rules_for(binds)),
        {"operation": str(int(operation_id)), "filter_step": filter_step, **binds},
    )
    return {(status, reason, step, bool(at_step)): int(runs) for status, reason, step, at_step, runs in rows}
