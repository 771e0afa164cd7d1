"""pgbus_workflow_activity: runs started, completed and failed per class
and hour, and the worker's hourly snapshot of stuck runs (schema: the
version that adds insights over time; docs/insights.md).

The triggers append deltas, folded now and then into the hourly rows; a
read sums both, so it sees every committed write. A series reads at most
24 hourly rows or 30 days of them (720) per class: its cost does not grow
with the number of runs.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..rules import states
from . import STATES, among, as_dicts

# The runs' ends the rollup counts.
ENDED = among((states.COMPLETED, states.FAILED))

# Buckets a series has: (its width, how many).
BUCKETS = {"hour": (timedelta(hours=1), 24), "day": (timedelta(days=1), 30)}


def series(conn: Connection, workflow_class: str, *, bucket: str, now: datetime) -> list[dict[str, Any]]:
    """The last *bucket*'s count of buckets up to *now* (the current one
    included), oldest first, each ``start`` with started, completed and
    failed (0 for none) and stuck (the largest snapshot in it, None when
    none was taken). Days are UTC days."""
    width, count = BUCKETS[bucket]
    rows = conn.execute(
        sa.text(
            """
            WITH buckets AS (
                SELECT generate_series(
                    date_trunc(:bucket, CAST(:now AS timestamptz), 'UTC') - CAST(:span AS interval),
                    date_trunc(:bucket, CAST(:now AS timestamptz), 'UTC'),
                    CAST(:width AS interval)) AS start
            ),
            hours AS (
                SELECT hour, started, completed, failed, stuck FROM pgbus_workflow_activity
                WHERE workflow_class = :workflow_class AND hour >= (SELECT min(start) FROM buckets)
                UNION ALL
                SELECT hour, started, completed, failed, NULL FROM pgbus_workflow_activity_deltas
                WHERE workflow_class = :workflow_class AND hour >= (SELECT min(start) FROM buckets)
            )
            SELECT b.start,
                   coalesce(sum(h.started), 0) AS started,
                   coalesce(sum(h.completed), 0) AS completed,
                   coalesce(sum(h.failed), 0) AS failed,
                   max(h.stuck) AS stuck
            FROM buckets b
            LEFT JOIN hours h ON date_trunc(:bucket, h.hour, 'UTC') = b.start
            GROUP BY b.start
            ORDER BY b.start
            """
        ),
        {
            "workflow_class": workflow_class,
            "bucket": bucket,
            "now": now,
            "span": f"{(count - 1) * int(width.total_seconds())} seconds",
            "width": f"{int(width.total_seconds())} seconds",
        },
    )
    found = as_dicts(rows)
    for row in found:
        for name in ("started", "completed", "failed"):
            row[name] = int(row[name])
        row["stuck"] = int(row["stuck"]) if row["stuck"] is not None else None
    return found


def record_stuck(conn: Connection, counts: dict[str, int], *, hour: datetime) -> None:
    """The stuck runs per class at *hour* (its start): the snapshot of the
    hour, replacing an earlier one of the same hour."""
    if not counts:
        return
    conn.execute(
        sa.text(
            "INSERT INTO pgbus_workflow_activity (workflow_class, hour, stuck)"
            " SELECT c, CAST(:hour AS timestamptz), n FROM unnest(CAST(:classes AS text[]), CAST(:counts AS bigint[]))"
            " AS t(c, n) ON CONFLICT (workflow_class, hour) DO UPDATE SET stuck = EXCLUDED.stuck"
        ),
        {"hour": hour, "classes": list(counts), "counts": [int(n) for n in counts.values()]},
    )


def kept(conn: Connection, workflow_class: str, *, since: datetime) -> dict[datetime, tuple[int, int, int]]:
    """{hour: (started, completed, failed)} as the rollup has them (folded
    rows and deltas), every hour with any count."""
    rows = conn.execute(
        sa.text(
            """
            SELECT hour, sum(started) AS started, sum(completed) AS completed, sum(failed) AS failed FROM (
                SELECT hour, started, completed, failed FROM pgbus_workflow_activity
                WHERE workflow_class = :workflow_class
                UNION ALL
                SELECT hour, started, completed, failed FROM pgbus_workflow_activity_deltas
                WHERE workflow_class = :workflow_class
            ) AS kept
            WHERE hour >= :since
            GROUP BY hour
            HAVING sum(started) + sum(completed) + sum(failed) > 0
            """
        ),
        {"workflow_class": workflow_class, "since": since},
    )
    return {row.hour: (int(row.started), int(row.completed), int(row.failed)) for row in rows}


def add_runs(conn: Connection, workflow_ids: Iterable[str] | None) -> None:
    """Count the runs *workflow_ids* (written while the triggers did not
    fire: the seeder; None for every run) into the rollup as their insert
    would have: a start at created_at's hour, an end at updated_at's for
    one already ended. Then fold (when the fold lock is free)."""
    ids = None if workflow_ids is None else list(workflow_ids)
    if ids == []:
        return
    conn.execute(
        sa.text(
            f"""
            INSERT INTO pgbus_workflow_activity_deltas (workflow_class, hour, started, completed, failed)
            SELECT workflow_class, date_trunc('hour', created_at, 'UTC'), count(*), 0, 0
            FROM pgbus_workflows
            WHERE (CAST(:ids AS text[]) IS NULL OR workflow_id = ANY(CAST(:ids AS text[])))
            GROUP BY 1, 2
            UNION ALL
            SELECT workflow_class, date_trunc('hour', updated_at, 'UTC'), 0,
                   count(*) FILTER (WHERE status = {STATES.COMPLETED}),
                   count(*) FILTER (WHERE status = {STATES.FAILED})
            FROM pgbus_workflows
            WHERE (CAST(:ids AS text[]) IS NULL OR workflow_id = ANY(CAST(:ids AS text[])))
              AND status IN {ENDED}
            GROUP BY 1, 2
            """
        ),
        {"ids": ids},
    )
    fold(conn)


def fold(conn: Connection) -> None:
    """Fold the deltas now (when the fold lock is free)."""
    conn.execute(sa.text("SELECT pgbus_workflow_activity_fold()"))
