"""The runs counted by class and status: read from the counts schema/v3.sql's
triggers keep (pgbus_workflow_counts and its deltas), checked against
count(*), refilled, folded and added to.
"""

from __future__ import annotations

from datetime import datetime
from typing import Mapping

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
    rows = conn.execute(
        sa.text(_KEPT_COUNTS.format(where=where)), {"workflow_class": workflow_class}
    )
    return {(klass, status): int(runs) for klass, status, runs in rows}


def counted_status_counts(conn: Connection) -> dict[tuple[str, str], int]:
    """status_counts as count(*) over the runs themselves: what the kept
    counts must equal (db check, the tests)."""
    rows = conn.execute(
        sa.text(
            "SELECT workflow_class, status, count(*) AS runs "
            "FROM pgbus_workflows GROUP BY workflow_class, status"
        )
    )
    return {(klass, status): runs for klass, status, runs in rows}


def count_mismatches(conn: Connection) -> dict[tuple[str, str], tuple[int, int]]:
    """{(class, status): (kept, counted)} where the kept counts differ from
    count(*), both read in one snapshot. Changes nothing."""
    conn.execute(sa.text("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY"))
    kept, counted = status_counts(conn), counted_status_counts(conn)
    return {
        key: (kept.get(key, 0), counted.get(key, 0))
        for key in sorted(set(kept) | set(counted))
        if kept.get(key, 0) != counted.get(key, 0)
    }


def repair_counts(conn: Connection) -> int:
    """Refill the kept counts from count(*); the number of (class, status)
    pairs that were wrong (nothing is written when none was). In the caller's transaction: the deltas table is
    locked first, which waits for every transaction that has written a
    delta and holds off the next ones (their runs' writes wait at their
    trigger) until this commits, so what is counted and what is kept match."""
    conn.execute(sa.text("LOCK TABLE pgbus_workflow_count_deltas IN EXCLUSIVE MODE"))
    kept, counted = status_counts(conn), counted_status_counts(conn)
    wrong = sum(1 for key in set(kept) | set(counted) if kept.get(key, 0) != counted.get(key, 0))
    if not wrong:
        return 0
    conn.execute(sa.text("DELETE FROM pgbus_workflow_count_deltas"))
    conn.execute(sa.text("DELETE FROM pgbus_workflow_counts"))
    conn.execute(
        sa.text(
            "INSERT INTO pgbus_workflow_counts (workflow_class, status, runs) "
            "SELECT workflow_class, status, count(*) FROM pgbus_workflows "
            "GROUP BY workflow_class, status"
        )
    )
    return wrong


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


def count_runs(conn: Connection) -> int:
    """Every run, from the kept counts."""
    return sum(status_counts(conn).values())


def class_status_counts(
    conn: Connection, workflow_class: str, *, created_from: datetime | None = None
) -> dict[str, int]:
    """{status: runs} of one class, over the runs created since *created_from*
    (every run when None: the kept counts)."""
    if created_from is None:
        return {status: runs for (_, status), runs in status_counts(conn, workflow_class).items()}
    rows = conn.execute(
        sa.text(
            """
            SELECT status, count(*) AS runs FROM pgbus_workflows
            WHERE workflow_class = :workflow_class AND created_at >= :created_from
            GROUP BY status
            """
        ),
        {"workflow_class": workflow_class, "created_from": created_from},
    )
    return {status: runs for status, runs in rows}


def class_exists(conn: Connection, workflow_class: str) -> bool:
    """True when at least one run of *workflow_class* exists (the kept counts)."""
    return bool(status_counts(conn, workflow_class))
