"""The runs counted by class and status: read from the counts schema/v3.sql's
triggers keep (pgbus_workflow_counts and its deltas), folded and added to
(checked against count(*) and refilled by models/recount.py). The same triggers keep them per
hour of created_at too (pgbus_workflow_hour_counts, the schema version
that adds it; docs/insights.md): a class's counts over a range of
created_at sum its full hours from there.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

# The exact counts per (class, status) that schema/v3.sql's triggers keep:
# the folded totals plus the deltas not folded yet. A few dozen rows
# whatever the history; every count by class and status reads them.
_KEPT_COUNTS = """
    SELECT workflow_class, status, sum(runs) AS runs
    FROM (
        SELECT workflow_class, status, runs FROM pgbus_workflow_counts {where}
        UNION ALL
        SELECT workflow_class, status, runs FROM pgbus_workflow_count_deltas {where}
    ) kept
    GROUP BY workflow_class, status
    HAVING sum(runs) <> 0
"""


def status_counts(conn: Connection, workflow_class: str | None = None) -> dict[tuple[str, str], int]:
    """{(workflow_class, status): runs} over every run (of *workflow_class*
    when given), from the kept counts: one small read, exact."""
    where = "WHERE workflow_class = :workflow_class" if workflow_class is not None else ""
    rows = conn.execute(sa.text(_KEPT_COUNTS.format(where=where)), {"workflow_class": workflow_class})
    return {(klass, status): int(runs) for klass, status, runs in rows}


def hour_counts(conn: Connection) -> dict[tuple[str, str, datetime], int]:
    """{(workflow_class, status, hour): runs} as the kept hourly counts have
    them (folded rows and the deltas that carry an hour), every nonzero one."""
    rows = conn.execute(
        sa.text(
            """
            SELECT workflow_class, status, hour, sum(runs) AS runs FROM (
                SELECT workflow_class, status, hour, runs FROM pgbus_workflow_hour_counts
                UNION ALL
                SELECT workflow_class, status, hour, runs FROM pgbus_workflow_count_deltas
                WHERE hour IS NOT NULL
            ) kept
            GROUP BY workflow_class, status, hour
            HAVING sum(runs) <> 0
            """
        )
    )
    return {(klass, status, hour): int(runs) for klass, status, hour, runs in rows}


def fold_counts(conn: Connection) -> None:
    """Fold the committed deltas into the totals now (when no other fold
    runs): after a bulk load that wrote many deltas with triggers off."""
    conn.execute(sa.text("SELECT pgbus_workflow_counts_fold()"))


def add_counts(conn: Connection, counts: Mapping[tuple[str, str], int]) -> None:
    """Add *counts* to the kept counts: for runs written while the triggers
    did not fire (the seeder's bulk load as a superuser)."""
    if counts:
        conn.execute(
            sa.text(
                "INSERT INTO pgbus_workflow_count_deltas (workflow_class, status, runs) "
                "SELECT * FROM unnest(CAST(:classes AS text[]), CAST(:statuses AS text[]), "
                "CAST(:runs AS bigint[]))"
            ),
            {
                "classes": [klass for klass, _ in counts],
                "statuses": [status for _, status in counts],
                "runs": list(counts.values()),
            },
        )


def add_hours(conn: Connection, workflow_ids: Iterable[str] | None) -> None:
    """Count the runs *workflow_ids* (None for every run) into the kept
    hourly counts, for runs written while the triggers did not fire (the
    seeder's bulk load; add_counts adds their totals)."""
    ids = None if workflow_ids is None else list(workflow_ids)
    if ids == []:
        return
    conn.execute(
        sa.text(
            """
            INSERT INTO pgbus_workflow_hour_counts AS h (workflow_class, hour, status, runs)
            SELECT workflow_class, date_trunc('hour', created_at, 'UTC'), status, count(*)
            FROM pgbus_workflows
            WHERE (CAST(:ids AS text[]) IS NULL OR workflow_id = ANY(CAST(:ids AS text[])))
            GROUP BY 1, 2, 3
            ORDER BY 1, 2, 3
            ON CONFLICT (workflow_class, hour, status) DO UPDATE SET runs = h.runs + EXCLUDED.runs
            """
        ),
        {"ids": ids},
    )


def add_hour_counts(conn: Connection, counts: Mapping[tuple[str, str, datetime], int]) -> None:
    """Add {(class, status, hour): runs} to the kept hourly counts (runs
    written while the triggers did not fire, counted by their writer)."""
    if counts:
        conn.execute(
            sa.text(
                """
                INSERT INTO pgbus_workflow_hour_counts AS h (workflow_class, hour, status, runs)
                SELECT c, date_trunc('hour', t, 'UTC'), s, sum(n)
                FROM unnest(CAST(:classes AS text[]), CAST(:statuses AS text[]),
                            CAST(:hours AS timestamptz[]), CAST(:runs AS bigint[])) AS u(c, s, t, n)
                GROUP BY 1, 2, 3
                ORDER BY 1, 2, 3
                ON CONFLICT (workflow_class, hour, status) DO UPDATE SET runs = h.runs + EXCLUDED.runs
                """
            ),
            {
                "classes": [klass for klass, _, _ in counts],
                "statuses": [status for _, status, _ in counts],
                "hours": [hour for _, _, hour in counts],
                "runs": list(counts.values()),
            },
        )


def count_runs(conn: Connection) -> int:
    """Every run, from the kept counts."""
    return sum(status_counts(conn).values())


HOUR = timedelta(hours=1)


def _hour_floor(moment: datetime) -> datetime:
    return moment.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


def _hour_ceil(moment: datetime) -> datetime:
    floor = _hour_floor(moment)
    return floor if floor == moment else floor + HOUR


# The runs of one class created in [:start, :end) counted from the index
# pgbus_workflows_class_created alone: a range within one hour at most.
_COUNTED_PART = """
    SELECT status, count(*) AS runs FROM pgbus_workflows
    WHERE workflow_class = :workflow_class AND created_at >= :start AND created_at < :end
    GROUP BY status
"""

# The kept counts of one class's full hours in [:start, :end) (:end NULL
# for no end): the folded rows and the deltas that carry an hour.
_KEPT_HOURS = """
    SELECT status, sum(runs) AS runs FROM (
        SELECT status, runs FROM pgbus_workflow_hour_counts
        WHERE workflow_class = :workflow_class AND hour >= :start
          AND (CAST(:end AS timestamptz) IS NULL OR hour < :end)
        UNION ALL
        SELECT status, runs FROM pgbus_workflow_count_deltas
        WHERE workflow_class = :workflow_class AND hour >= :start
          AND (CAST(:end AS timestamptz) IS NULL OR hour < :end)
    ) kept
    GROUP BY status
"""


def _add(into: dict[str, int], rows: Iterable[Any]) -> None:
    for status, runs in rows:
        into[status] = into.get(status, 0) + int(runs)


def kept_hours_status_counts(
    conn: Connection, workflow_class: str, *, start: datetime, end: datetime | None = None
) -> dict[str, int]:
    """{status: runs} of one class summed over the kept hours that start in
    [start, end): whole hours only, a partial hour not counted apart."""
    found: dict[str, int] = {}
    _add(found, conn.execute(sa.text(_KEPT_HOURS), {"workflow_class": workflow_class, "start": start, "end": end}))
    return {status: runs for status, runs in found.items() if runs}


def class_status_counts(
    conn: Connection,
    workflow_class: str,
    *,
    created_from: datetime | None = None,
    created_to: datetime | None = None,
) -> dict[str, int]:
    """{status: runs} of one class, over the runs created since *created_from*
    (and before *created_to* when given; every run when both are None: the
    kept counts). Exact: the full hours of the range are summed from the
    kept hourly counts (a few rows per hour, whatever the number of runs),
    its partial first and last hours counted from the index."""
    if created_from is None and created_to is None:
        return {status: runs for (_, status), runs in status_counts(conn, workflow_class).items()}
    if created_from is None:
        created_from = datetime(1, 1, 1, tzinfo=UTC) + HOUR
    found: dict[str, int] = {}
    first_full = _hour_ceil(created_from)
    last_full = None if created_to is None else _hour_floor(created_to)
    binds = {"workflow_class": workflow_class}
    if created_to is not None and last_full is not None and last_full <= first_full:
        # Within one hour or across one boundary: no full hour in between.
        if created_to > created_from:
            _add(found, conn.execute(sa.text(_COUNTED_PART), {**binds, "start": created_from, "end": created_to}))
    else:
        if created_from < first_full:
            _add(found, conn.execute(sa.text(_COUNTED_PART), {**binds, "start": created_from, "end": first_full}))
        _add(found, conn.execute(sa.text(_KEPT_HOURS), {**binds, "start": first_full, "end": last_full}))
        if created_to is not None and last_full is not None and last_full < created_to:
            _add(found, conn.execute(sa.text(_COUNTED_PART), {**binds, "start": last_full, "end": created_to}))
    return {status: runs for status, runs in found.items() if runs}


def class_exists(conn: Connection, workflow_class: str) -> bool:
    """True when at least one run of *workflow_class* exists (the kept counts)."""
    return bool(status_counts(conn, workflow_class))
