"""The runs that need a person: each stuck run's reason by rules/stuck.py,
counted, grouped into the needs-attention groups and walked by a bulk
action; and the failed runs' groups beside them.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any, Mapping

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..rules import stuck
from . import as_dicts

# Default page size of attention groups, and of a bulk action's walk.
ATTENTION_GROUP_LIMIT = 200
ATTENTION_IDS_LIMIT = 500


def _now() -> datetime:
    return datetime.now(timezone.utc)


# Each paused or ready run (and, when waiting_before is given, each waiting
# run) with its latest step's facts and why it is stuck (NULL when it is
# not), by the rules of rules/stuck.py; "since" is when the run got stuck:
# paused_at, the overdue step's scheduled_at, or the waiting step's
# waiting_since.
# The latest step's facts are the run's latest_* columns (a trigger on the
# steps table keeps them), so the whole query reads pgbus_workflows_stuck
# only, instead of looking up the latest step of every such run. The
# needs-attention queries and the index's reason filter both read the same
# rules, so a group's count and its "N runs" list agree, and neither looks
# a run's steps up.
def _stuck_runs_sql(rules: tuple[stuck.Rule, ...], *, by_class: bool) -> str:
    since = "\n                 ".join(stuck.since_sql(rules, "stuck_reason.reason"))
    reasons = "\n                     ".join(stuck.reason_sql(rules))
    class_filter = "AND w.workflow_class = :workflow_class" if by_class else ""
    return f"""
        SELECT w.id, w.workflow_id, w.workflow_class,
               COALESCE(w.latest_step_name, w.current_step) AS step_name,
               w.latest_error_class AS error_class, stuck_reason.reason,
               CASE
                 {since}
               END AS since
        FROM pgbus_workflows w
        CROSS JOIN LATERAL (
            SELECT CASE
                     {reasons}
                   END AS reason
        ) stuck_reason
        WHERE w.status IN ({stuck.statuses_sql(rules)}) {class_filter}
    """


def _stuck_binds(threshold: timedelta, now: datetime | None, waiting_threshold: timedelta | None):
    return stuck.params(now or _now(), threshold, waiting_threshold)


def stuck_reason_counts(
    conn: Connection,
    *,
    threshold: timedelta,
    now: datetime | None = None,
    waiting_threshold: timedelta | None = None,
    workflow_class: str | None = None,
) -> dict[tuple[str, str], int]:
    """{(workflow_class, reason): runs} for the ongoing runs that need a person."""
    summary = stuck_reason_summary(conn, threshold=threshold, now=now, waiting_threshold=waiting_threshold,
                                   workflow_class=workflow_class)
    return {key: runs for key, (runs, _) in summary.items()}


def stuck_reason_summary(
    conn: Connection,
    *,
    threshold: timedelta,
    now: datetime | None = None,
    waiting_threshold: timedelta | None = None,
    workflow_class: str | None = None,
) -> dict[tuple[str, str], tuple[int, datetime | None]]:
    """{(workflow_class, reason): (runs, when the oldest got stuck)}: the
    stuck runs counted, with the oldest "since" (the metrics' oldest-stuck
    age; None when no run of the pair has one)."""
    binds = _stuck_binds(threshold, now, waiting_threshold)
    if workflow_class is not None:
        binds["workflow_class"] = workflow_class
    inner = _stuck_runs_sql(stuck.rules_for(binds), by_class=workflow_class is not None)
    rows = conn.execute(
        sa.text(
            f"""
            SELECT stuck.workflow_class, stuck.reason, count(*) AS runs, min(stuck.since) AS oldest
            FROM ({inner}) stuck
            WHERE stuck.reason IS NOT NULL
            GROUP BY stuck.workflow_class, stuck.reason
            """
        ),
        binds,
    )
    return {(klass, reason): (runs, oldest) for klass, reason, runs, oldest in rows}


def attention_groups(
    conn: Connection,
    *,
    threshold: timedelta,
    now: datetime | None = None,
    waiting_threshold: timedelta | None = None,
    limit: int = ATTENTION_GROUP_LIMIT,
    workflow_class: str | None = None,
) -> list[dict[str, Any]]:
    """The stuck runs grouped by (class, step, reason, error class), biggest
    group first, at most *limit* groups, each with when its runs got stuck
    (first_seen_at, last_seen_at) and its newest error message."""
    binds = _stuck_binds(threshold, now, waiting_threshold)
    binds["limit"] = int(limit)
    if workflow_class is not None:
        binds["workflow_class"] = workflow_class
    inner = _stuck_runs_sql(stuck.rules_for(binds), by_class=workflow_class is not None)
    # The newest error message is read for each group's newest run only,
    # after grouping: carrying every stuck run's message through the
    # grouping would read each of their step rows from the table, where the
    # rest comes from the stuck-runs index alone (docs/performance.md).
    # The newest run is the greatest (since, id), a missing since counting
    # as oldest: one max() per group rather than an ordered array of every
    # run in it, which lets the grouping skip a sort by since.
    rows = conn.execute(
        sa.text(
            f"""
            SELECT grouped.workflow_class, grouped.step_name, grouped.reason, grouped.error_class,
                   grouped.count, grouped.first_seen_at, grouped.last_seen_at,
                   (SELECT error_message FROM pgbus_workflow_steps
                    WHERE workflow_id = (SELECT workflow_id FROM pgbus_workflows
                                         WHERE id = grouped.newest_id)
                    ORDER BY id DESC
                    LIMIT 1) AS error_message
            FROM (
                SELECT stuck.workflow_class, stuck.step_name, stuck.reason, stuck.error_class,
                       count(*) AS count,
                       min(stuck.since) AS first_seen_at, max(stuck.since) AS last_seen_at,
                       CAST((max(ARRAY[COALESCE(EXTRACT(EPOCH FROM stuck.since), '-Infinity'),
                                       stuck.id]))[2] AS bigint) AS newest_id
                FROM ({inner}) stuck
                WHERE stuck.reason IS NOT NULL
                GROUP BY stuck.workflow_class, stuck.step_name, stuck.reason, stuck.error_class
                ORDER BY count DESC, last_seen_at DESC NULLS LAST, stuck.workflow_class
                LIMIT :limit
            ) grouped
            ORDER BY grouped.count DESC, grouped.last_seen_at DESC NULLS LAST, grouped.workflow_class
            """
        ),
        binds,
    )
    return as_dicts(rows)


def failed_groups(conn: Connection, *, limit: int = ATTENTION_GROUP_LIMIT) -> list[dict[str, Any]]:
    """The failed runs (terminal: no needs-attention group has them) grouped
    by (class, step, error class) of their latest step, biggest first, at
    most *limit* groups, each with its count and its newest failure
    (last_failed_at). Read from the failed-runs index alone (schema v3)."""
    rows = conn.execute(
        sa.text(
            """
            SELECT w.workflow_class, COALESCE(w.latest_step_name, w.current_step) AS step_name,
                   w.latest_error_class AS error_class, count(*) AS count,
                   max(w.finished_at) AS last_failed_at
            FROM pgbus_workflows w
            WHERE w.status = 'failed'
            GROUP BY 1, 2, 3
            ORDER BY count DESC, last_failed_at DESC NULLS LAST, 1, 2, 3
            LIMIT :limit
            """
        ),
        {"limit": int(limit)},
    )
    return as_dicts(rows)


def attention_ids(
    conn: Connection,
    group: Mapping[str, Any],
    *,
    threshold: timedelta,
    now: datetime | None = None,
    waiting_threshold: timedelta | None = None,
    limit: int = ATTENTION_IDS_LIMIT,
) -> list[str]:
    """The workflow_ids of one attention group (workflow_class, step_name,
    reason, error_class; a None error_class matches runs without one),
    oldest stuck first, at most *limit*: what a bulk action walks."""
    binds = _stuck_binds(threshold, now, waiting_threshold)
    binds.update(
        workflow_class=group["workflow_class"],
        step_name=group["step_name"],
        reason=group["reason"],
        error_class=group.get("error_class"),
        limit=int(limit),
    )
    inner = _stuck_runs_sql(stuck.rules_for(binds), by_class=True)
    rows = conn.execute(
        sa.text(
            f"""
            SELECT stuck.workflow_id
            FROM ({inner}) stuck
            WHERE stuck.step_name = :step_name AND stuck.reason = :reason
              AND stuck.error_class IS NOT DISTINCT FROM CAST(:error_class AS text)
            ORDER BY stuck.since NULLS LAST, stuck.id
            LIMIT :limit
            """
        ),
        binds,
    )
    return [workflow_id for (workflow_id,) in rows]
