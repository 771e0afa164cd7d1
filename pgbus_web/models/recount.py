"""The reference recounts: every count the triggers keep, and every
needs-attention answer the pages read from what is kept, counted again from
the runs themselves (count(*) over pgbus_workflows and its candidates).

They are full reads, never a page's: ``pgbus-web db check`` compares the
kept counts with them (``count_mismatches``, ``attention_mismatches``),
``db repair`` refills the kept counts from them (``repair_counts``,
``repair_attention``), and the tests hold each kept read to its recount
(the hourly activity and the step durations' histograms included).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, date, datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..rules import stuck
from . import STATES, as_dicts, attention_counts, workflow_activity, workflow_attention, workflow_counts

# --- The runs by class and status (workflow_counts) -------------------------------


def status_counts(conn: Connection) -> dict[tuple[str, str], int]:
    """workflow_counts.status_counts as count(*) over the runs themselves:
    what the kept counts must equal."""
    rows = conn.execute(
        sa.text("SELECT workflow_class, status, count(*) AS runs FROM pgbus_workflows GROUP BY workflow_class, status")
    )
    return {(klass, status): runs for klass, status, runs in rows}


def hour_counts(conn: Connection) -> dict[tuple[str, str, datetime], int]:
    """workflow_counts.hour_counts as count(*) over the runs themselves."""
    rows = conn.execute(
        sa.text(
            "SELECT workflow_class, status, date_trunc('hour', created_at, 'UTC') AS hour, count(*) "
            "FROM pgbus_workflows GROUP BY 1, 2, 3"
        )
    )
    return {(klass, status, hour): runs for klass, status, hour, runs in rows}


def _differing(kept: Mapping[Any, int], counted: Mapping[Any, int]) -> list[Any]:
    return [key for key in sorted(set(kept) | set(counted)) if kept.get(key, 0) != counted.get(key, 0)]


def count_mismatches(conn: Connection) -> dict[tuple[str, str], tuple[int, int]]:
    """{(class, status): (kept, counted)} where the kept counts differ from
    count(*), both read in one snapshot; an hour whose kept count differs
    is named as (class, "status at hour"). Changes nothing."""
    conn.execute(sa.text("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY"))
    kept, counted = workflow_counts.status_counts(conn), status_counts(conn)
    found = {key: (kept.get(key, 0), counted.get(key, 0)) for key in _differing(kept, counted)}
    kept_hours, counted_hours = workflow_counts.hour_counts(conn), hour_counts(conn)
    for klass, status, hour in _differing(kept_hours, counted_hours):
        key = (klass, status, hour)
        found[(klass, f"{status} at {hour.astimezone(UTC):%Y-%m-%d %H:00} UTC")] = (
            kept_hours.get(key, 0),
            counted_hours.get(key, 0),
        )
    return found


def repair_counts(conn: Connection) -> int:
    """Refill the kept counts from count(*); the number of (class, status)
    pairs that were wrong (nothing is written when none was). In the caller's transaction: the deltas table is
    locked first, which waits for every transaction that has written a
    delta and holds off the next ones (their runs' writes wait at their
    trigger) until this commits, so what is counted and what is kept match."""
    conn.execute(sa.text("LOCK TABLE pgbus_workflow_count_deltas IN EXCLUSIVE MODE"))
    kept, counted = workflow_counts.status_counts(conn), status_counts(conn)
    wrong = len(_differing(kept, counted)) + len(_differing(workflow_counts.hour_counts(conn), hour_counts(conn)))
    if not wrong:
        return 0
    conn.execute(sa.text("DELETE FROM pgbus_workflow_count_deltas"))
    conn.execute(sa.text("DELETE FROM pgbus_workflow_counts"))
    conn.execute(sa.text("DELETE FROM pgbus_workflow_hour_counts"))
    conn.execute(
        sa.text(
            "INSERT INTO pgbus_workflow_counts (workflow_class, status, runs) "
            "SELECT workflow_class, status, count(*) FROM pgbus_workflows "
            "GROUP BY workflow_class, status"
        )
    )
    conn.execute(
        sa.text(
            "INSERT INTO pgbus_workflow_hour_counts (workflow_class, hour, status, runs) "
            "SELECT workflow_class, date_trunc('hour', created_at, 'UTC'), status, count(*) "
            "FROM pgbus_workflows GROUP BY 1, 2, 3"
        )
    )
    return wrong


# --- The paused and failed runs by group key (attention_counts) -----------------


def attention_key_counts(conn: Connection) -> dict[tuple[Any, ...], int]:
    """attention_counts.kept as count(*) over the runs themselves: what it
    must equal."""
    rows = conn.execute(
        sa.text(
            f"SELECT {attention_counts.key_sql('w')} AS key, count(*) FROM pgbus_workflows w "
            f"WHERE w.status IN {attention_counts.IN_STATUSES} GROUP BY 1"
        )
    )
    return {tuple(key): runs for key, runs in rows}


def attention_mismatches(conn: Connection) -> dict[tuple[Any, ...], tuple[int, int]]:
    """{key: (kept, counted)} where they differ, both read in one snapshot
    (the caller's transaction, made repeatable read here). Changes nothing."""
    conn.execute(sa.text("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY"))
    return differences(attention_counts.kept(conn), attention_key_counts(conn))


def differences(
    have: Mapping[tuple[Any, ...], int], want: Mapping[tuple[Any, ...], int]
) -> dict[tuple[Any, ...], tuple[int, int]]:
    keys = sorted(set(have) | set(want), key=lambda key: tuple("" if v is None else v for v in key))
    return {key: (have.get(key, 0), want.get(key, 0)) for key in keys if have.get(key, 0) != want.get(key, 0)}


def repair_attention(conn: Connection) -> int:
    """Refill the kept counts from count(*); how many keys were wrong
    (nothing is written when none was). The deltas table is locked first,
    which waits for every transaction that wrote a delta and holds the next
    ones at their trigger until the caller commits."""
    conn.execute(sa.text("LOCK TABLE pgbus_workflow_attention_deltas IN EXCLUSIVE MODE"))
    wrong = len(differences(attention_counts.kept(conn), attention_key_counts(conn)))
    if not wrong:
        return 0
    conn.execute(sa.text("DELETE FROM pgbus_workflow_attention_deltas"))
    conn.execute(sa.text("DELETE FROM pgbus_workflow_attention_counts"))
    conn.execute(
        sa.text(
            f"INSERT INTO pgbus_workflow_attention_counts (key, runs) "
            f"SELECT {attention_counts.key_sql('w')}, count(*) FROM pgbus_workflows w "
            f"WHERE w.status IN {attention_counts.IN_STATUSES} GROUP BY 1"
        )
    )
    return wrong


# --- The needs-attention answers (workflow_attention) ---------------------------


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
    binds = workflow_attention.stuck_binds(threshold, now, waiting_threshold)
    if workflow_class is not None:
        binds["workflow_class"] = workflow_class
    inner = workflow_attention.stuck_runs_sql(stuck.rules_for(binds), by_class=workflow_class is not None)
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
    limit: int = workflow_attention.ATTENTION_GROUP_LIMIT,
    workflow_class: str | None = None,
) -> list[dict[str, Any]]:
    """The stuck runs grouped by (class, step, reason, error class), biggest
    group first, at most *limit* groups, each with when its runs got stuck
    (first_seen_at, last_seen_at) and its newest error message."""
    binds = workflow_attention.stuck_binds(threshold, now, waiting_threshold)
    binds["limit"] = int(limit)
    if workflow_class is not None:
        binds["workflow_class"] = workflow_class
    inner = workflow_attention.stuck_runs_sql(stuck.rules_for(binds), by_class=workflow_class is not None)
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


def failed_groups(conn: Connection, *, limit: int = workflow_attention.ATTENTION_GROUP_LIMIT) -> list[dict[str, Any]]:
    """The failed runs (terminal: no needs-attention group has them) grouped
    by (class, step, error class) of their latest step, biggest first, at
    most *limit* groups, each with its count and its newest failure
    (last_failed_at). Read from the failed-runs index alone (schema v3)."""
    rows = conn.execute(
        sa.text(
            f"""
            SELECT w.workflow_class, COALESCE(w.latest_step_name, w.current_step) AS step_name,
                   w.latest_error_class AS error_class, count(*) AS count,
                   max(w.finished_at) AS last_failed_at
            FROM pgbus_workflows w
            WHERE w.status = {STATES.FAILED}
            GROUP BY 1, 2, 3
            ORDER BY count DESC, last_failed_at DESC NULLS LAST, 1, 2, 3
            LIMIT :limit
            """
        ),
        {"limit": int(limit)},
    )
    return as_dicts(rows)


# --- Runs started, completed and failed per hour (workflow_activity) -------------


def activity_hours(conn: Connection, workflow_class: str, *, since: datetime) -> dict[datetime, tuple[int, int, int]]:
    """{hour: (started, completed, failed)} counted from the runs themselves
    (every hour with any), as the rollup keeps them for runs that ended
    once: what models/workflow_activity.kept must equal."""
    rows = conn.execute(
        sa.text(
            f"""
            SELECT hour, sum(started) AS started, sum(completed) AS completed, sum(failed) AS failed FROM (
                SELECT date_trunc('hour', created_at, 'UTC') AS hour, 1 AS started, 0 AS completed, 0 AS failed
                FROM pgbus_workflows WHERE workflow_class = :workflow_class
                UNION ALL
                SELECT date_trunc('hour', updated_at, 'UTC'), 0, (status = {STATES.COMPLETED})::int,
                       (status = {STATES.FAILED})::int
                FROM pgbus_workflows WHERE workflow_class = :workflow_class AND status IN {workflow_activity.ENDED}
            ) AS history
            WHERE hour >= :since
            GROUP BY hour
            """
        ),
        {"workflow_class": workflow_class, "since": since},
    )
    return {row.hour: (int(row.started), int(row.completed), int(row.failed)) for row in rows}


# --- Step durations per day (step_durations) ------------------------------------


def step_duration_days(
    conn: Connection, workflow_class: str, *, since: date
) -> dict[tuple[date, str], tuple[int, float, float]]:
    """{(day, step): (attempts, median, p95)} computed exactly from the
    steps there are (``percentile_cont`` over the same attempts, negative
    run times as 0): what models/step_durations' kept histograms must come
    within their bound of (step_durations.within_bound)."""
    rows = conn.execute(
        sa.text(
            """
            SELECT (s.finished_at AT TIME ZONE 'UTC')::date AS day, s.step_name, count(*) AS attempts,
                   percentile_cont(0.5) WITHIN GROUP (ORDER BY s.seconds) AS median_seconds,
                   percentile_cont(0.95) WITHIN GROUP (ORDER BY s.seconds) AS p95_seconds
            FROM (
                SELECT s.step_name, s.finished_at,
                       greatest(0, EXTRACT(EPOCH FROM s.finished_at - s.started_at)::float8) AS seconds
                FROM pgbus_workflow_steps s JOIN pgbus_workflows w ON w.workflow_id = s.workflow_id
                WHERE w.workflow_class = :workflow_class
                  AND s.started_at IS NOT NULL AND s.finished_at IS NOT NULL
                  AND isfinite(s.started_at) AND isfinite(s.finished_at)
            ) AS s
            WHERE (s.finished_at AT TIME ZONE 'UTC')::date >= :since
            GROUP BY 1, 2
            """
        ),
        {"workflow_class": workflow_class, "since": since},
    )
    return {
        (row.day, row.step_name): (int(row.attempts), float(row.median_seconds), float(row.p95_seconds)) for row in rows
    }
