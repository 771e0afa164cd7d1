"""pgbus_workflow_step_durations: how long each step of each class took,
per UTC day, as a histogram with fixed log-spaced buckets (schema: the
version that adds step durations per day; docs/insights.md).

The triggers on pgbus_workflow_steps append deltas, folded now and then
into the kept rows; a read sums both. The median and 95th percentile of a
step's day are read from its buckets the way ``percentile_cont`` reads
sorted values (interpolating between the two attempts around the rank),
each attempt taken at its bucket's geometric middle: within
``RELATIVE_ERROR`` of the exact figure plus ``ABSOLUTE_ERROR``. A read
of 30 days touches the rows of those days only, whatever the number of
steps behind them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

# Bucket b >= 1 holds run times in [2^((b-1)/8), 2^(b/8)) milliseconds;
# bucket 0 those under 1 ms (a negative one counts as 0).
BUCKETS_PER_DOUBLING = 8
# A bucket's geometric middle is within this fraction of any value in it.
RELATIVE_ERROR = 2 ** (1 / (2 * BUCKETS_PER_DOUBLING)) - 1
# Bucket 0 is read as 0: within 1 ms of any value in it.
ABSOLUTE_ERROR = 0.001
# 2^54 ms (570,000 years) is longer than any two timestamps can be apart:
# a bucket beyond it (a hand-written row) is read as this one, so no row
# can overflow the arithmetic or the page's duration text.
LAST_BUCKET = 54 * BUCKETS_PER_DOUBLING
# The days a page shows.
DAYS = 30


def bucket_of(seconds: float) -> int:
    """The bucket the schema's pgbus_step_duration_bucket gives a run time."""
    milliseconds = seconds * 1000
    if milliseconds < 1:
        return 0
    return math.floor(BUCKETS_PER_DOUBLING * math.log2(milliseconds)) + 1


def representative(bucket: int) -> float:
    """The run time, in seconds, every attempt of *bucket* is taken to have."""
    bucket = min(int(bucket), LAST_BUCKET)
    if bucket <= 0:
        return 0.0
    return 2 ** ((bucket - 0.5) / BUCKETS_PER_DOUBLING) / 1000


def percentile(histogram: list[tuple[int, int]], fraction: float) -> float | None:
    """The *fraction* percentile of the attempts in *histogram* ([(bucket,
    attempts)], any order), as ``percentile_cont`` would give it from the
    attempts' bucket values; None for no attempts."""
    counted = sorted((bucket, attempts) for bucket, attempts in histogram if attempts > 0)
    total = sum(attempts for _, attempts in counted)
    if total == 0:
        return None
    rank = fraction * (total - 1)
    low, high = math.floor(rank), math.ceil(rank)
    share = rank - low

    def value_at(index: int) -> float:
        seen = 0
        for bucket, attempts in counted:
            seen += attempts
            if index < seen:
                return representative(bucket)
        return representative(counted[-1][0])

    below = value_at(low)
    return below + share * (value_at(high) - below)


def _utc_day(moment: datetime) -> date:
    return moment.astimezone(UTC).date()


# The kept rows of a class's days, summed with the deltas not yet folded.
_KEPT = """
    SELECT day, step_name, bucket, sum(attempts) AS attempts FROM (
        SELECT day, step_name, bucket, attempts FROM pgbus_workflow_step_durations
        WHERE workflow_class = :workflow_class AND day >= :since
        UNION ALL
        SELECT day, step_name, bucket, attempts FROM pgbus_workflow_step_duration_deltas
        WHERE workflow_class = :workflow_class AND day >= :since
    ) AS rows
    GROUP BY day, step_name, bucket
    HAVING sum(attempts) > 0
"""
# The percentiles' ranks, in float8 as ``percentile`` computes them.
FRACTIONS = {"median": 0.5, "p95": 0.95}


def histograms(conn: Connection, workflow_class: str, *, since: date) -> dict[tuple[date, str], list[tuple[int, int]]]:
    """{(day, step): [(bucket, attempts)]} as kept (folded rows and
    deltas) from the UTC day *since* on; buckets with no attempts left out."""
    rows = conn.execute(
        sa.text(f"{_KEPT} ORDER BY day, step_name, bucket"),
        {"workflow_class": workflow_class, "since": since},
    )
    found: dict[tuple[date, str], list[tuple[int, int]]] = {}
    for row in rows:
        found.setdefault((row.day, row.step_name), []).append((int(row.bucket), int(row.attempts)))
    return found


def per_day(conn: Connection, workflow_class: str, *, now: datetime, days: int = DAYS) -> list[dict[str, Any]]:
    """The last *days* UTC days up to *now*'s, newest first, those with any
    attempt: each ``{"day" (its start, UTC), "steps": [{"step_name", "attempts",
    "median_seconds", "p95_seconds"}]}``, steps by name.

    The server walks each (day, step)'s buckets in order and answers, per
    percentile, only the two buckets around its rank: one row per day and
    step, not one per bucket. The figures are ``percentile``'s over
    ``histograms``' rows (a test compares them)."""
    picks = ",\n".join(
        f"min(bucket) FILTER (WHERE upto > floor({fraction}::float8 * (total - 1))) AS {name}_low,\n"
        f"min(bucket) FILTER (WHERE upto > ceil({fraction}::float8 * (total - 1))) AS {name}_high"
        for name, fraction in FRACTIONS.items()
    )
    rows = conn.execute(
        sa.text(
            f"""
            WITH kept AS ({_KEPT}),
            ranked AS (
                -- In float8, as percentile() counts (exact below 2^53).
                SELECT day, step_name, bucket,
                       sum(attempts::float8) OVER (PARTITION BY day, step_name ORDER BY bucket) AS upto,
                       sum(attempts::float8) OVER (PARTITION BY day, step_name) AS total
                FROM kept
            )
            -- Grouped in the order the windows left the rows (no sort of
            -- every bucket row); only the picked rows are sorted.
            SELECT * FROM (
                SELECT day, step_name, max(total) AS attempts,
                       {picks}
                FROM ranked
                GROUP BY day, step_name
            ) AS picked
            ORDER BY day DESC, step_name
            """
        ),
        {"workflow_class": workflow_class, "since": _utc_day(now) - timedelta(days=days - 1)},
    )
    by_day: dict[date, list[dict[str, Any]]] = {}
    for row in rows:
        attempts = int(row.attempts)
        found = {"step_name": row.step_name, "attempts": attempts}
        for name, fraction in FRACTIONS.items():
            rank = fraction * (attempts - 1)
            below = representative(getattr(row, f"{name}_low"))
            above = representative(getattr(row, f"{name}_high"))
            found[f"{name}_seconds"] = below + (rank - math.floor(rank)) * (above - below)
        by_day.setdefault(row.day, []).append(found)
    return [{"day": datetime.combine(day, time(), UTC), "steps": steps} for day, steps in by_day.items()]


def within_bound(kept: float, exact: float) -> bool:
    """Whether a kept percentile is as near the exact one as documented."""
    return abs(kept - exact) <= RELATIVE_ERROR * abs(exact) + ABSOLUTE_ERROR + 1e-9


def add_runs(conn: Connection, workflow_ids: Iterable[str] | None) -> None:
    """Count the finished attempts of the runs *workflow_ids* (written
    while the triggers did not fire: the seeder; None for every run) into
    the kept histograms, then fold them (when the fold lock is free)."""
    ids = None if workflow_ids is None else list(workflow_ids)
    if ids == []:
        return
    conn.execute(
        sa.text(
            """
            INSERT INTO pgbus_workflow_step_duration_deltas (workflow_class, step_name, day, bucket, attempts)
            SELECT w.workflow_class, s.step_name, (s.finished_at AT TIME ZONE 'UTC')::date,
                   pgbus_step_duration_bucket(EXTRACT(EPOCH FROM s.finished_at - s.started_at)::float8), count(*)
            FROM pgbus_workflow_steps s
            JOIN pgbus_workflows w ON w.workflow_id = s.workflow_id
            WHERE (CAST(:ids AS text[]) IS NULL OR s.workflow_id = ANY(CAST(:ids AS text[])))
              AND s.started_at IS NOT NULL AND s.finished_at IS NOT NULL
              AND isfinite(s.started_at) AND isfinite(s.finished_at)
            GROUP BY 1, 2, 3, 4
            """
        ),
        {"ids": ids},
    )
    fold(conn)


def fold(conn: Connection) -> None:
    """Fold the deltas now (when the fold lock is free)."""
    conn.execute(sa.text("SELECT pgbus_workflow_step_durations_fold()"))
