"""The paused and failed runs counted by group key, as the triggers of
the schema version that adds them keep them (pgbus_workflow_attention_counts and its deltas): read,
folded and added to (checked against count(*) and refilled by models/recount.py).

A key is ``[workflow_class, status, step, latest_error_class,
latest_step_status]`` (the step being ``COALESCE(latest_step_name,
current_step)``), a text array; its group's moments are read from
``pgbus_workflows_attention_moments`` by ``MOMENT_PROBES``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..rules import states
from . import STATES, among

# The statuses whose runs are counted: a paused run's stuck reason does not
# depend on the clock, and the failed runs have their own groups.
STATUSES = (states.PAUSED, states.FAILED)
# The positions in a key (SQL arrays count from 1).
CLASS, STATUS, STEP, ERROR_CLASS, STEP_STATUS = 1, 2, 3, 4, 5


def key_sql(alias: str) -> str:
    """The key of run *alias*, as the triggers and the moments index write it."""
    return (
        f"ARRAY[{alias}.workflow_class, {alias}.status, COALESCE({alias}.latest_step_name, "
        f"{alias}.current_step), {alias}.latest_error_class, {alias}.latest_step_status]"
    )


def moment_sql(alias: str) -> str:
    """The moment a run of *alias* is ordered by in its group: when it was
    paused, or when it failed (the moments index's second column)."""
    return f"(CASE WHEN {alias}.status = {STATES.FAILED} THEN {alias}.finished_at ELSE {alias}.paused_at END)"


# STATUSES as an IN list.
IN_STATUSES = among(STATUSES)

# The kept counts by key: the folded totals plus the deltas not folded yet.
# A few dozen rows whatever the history.
KEPT = """
    SELECT key, CAST(sum(runs) AS bigint) AS runs
    FROM (
        SELECT key, runs FROM pgbus_workflow_attention_counts {where}
        UNION ALL
        SELECT key, runs FROM pgbus_workflow_attention_deltas {where}
    ) kept
    GROUP BY key
    HAVING sum(runs) <> 0
"""


def kept_sql(*, by_class: bool) -> str:
    """KEPT, of the class bound as ``:workflow_class`` when *by_class*."""
    return KEPT.format(where=f"WHERE key[{CLASS}] = :workflow_class" if by_class else "")


def _probe(order: str, extra: str = "") -> str:
    return f"""
        SELECT {moment_sql("r")} AS since, r.id
        FROM pgbus_workflows r
        WHERE {key_sql("r")} = {{key}} AND r.status IN {IN_STATUSES} {extra}
        ORDER BY {order}
        LIMIT 1
    """


# The two reads of one key's runs, each one probe of the moments index:
# the earliest moment (NULLs skipped), and the newest run (the greatest
# moment, a NULL counting as oldest, then the greatest id).
# (NULLS FIRST as the index has them, or the planner sorts instead of reading
# the index in order.)
FIRST_PROBE = _probe(f"{moment_sql('r')} NULLS FIRST, r.id", f"AND {moment_sql('r')} IS NOT NULL")
NEWEST_PROBE = _probe(f"{moment_sql('r')} DESC NULLS LAST, r.id DESC")


def kept(conn: Connection) -> dict[tuple[Any, ...], int]:
    """{key (a tuple): runs} as kept."""
    rows = conn.execute(sa.text(kept_sql(by_class=False)))
    return {tuple(key): int(runs) for key, runs in rows}


def fold(conn: Connection) -> None:
    """Fold the committed deltas into the totals now (when no other fold runs)."""
    conn.execute(sa.text("SELECT pgbus_workflow_attention_fold()"))


def add(conn: Connection, counts: Mapping[tuple[Any, ...], int]) -> None:
    """Add *counts* ({key: runs}) to the kept counts: for runs written
    while the triggers did not fire (a seeder's bulk load)."""
    counts = {key: runs for key, runs in counts.items() if runs and key[STATUS - 1] in STATUSES}
    if not counts:
        return
    # One array of keys' fields each, rebuilt into the keys server-side.
    fields = list(zip(*counts, strict=True))
    conn.execute(
        sa.text(
            "INSERT INTO pgbus_workflow_attention_deltas (key, runs) "
            "SELECT ARRAY[c, s, t, e, p], n FROM unnest(CAST(:c AS text[]), CAST(:s AS text[]), "
            "CAST(:t AS text[]), CAST(:e AS text[]), CAST(:p AS text[]), CAST(:n AS bigint[])) "
            "AS k (c, s, t, e, p, n)"
        ),
        {
            "c": list(fields[0]),
            "s": list(fields[1]),
            "t": list(fields[2]),
            "e": list(fields[3]),
            "p": list(fields[4]),
            "n": list(counts.values()),
        },
    )


def add_runs(conn: Connection, workflow_ids: Iterable[str]) -> None:
    """Count the runs *workflow_ids* (written while the triggers did not
    fire) into the kept counts, read back by their workflow_id key."""
    ids = list(workflow_ids)
    if ids:
        conn.execute(
            sa.text(
                f"INSERT INTO pgbus_workflow_attention_deltas (key, runs) "
                f"SELECT {key_sql('w')}, count(*) FROM pgbus_workflows w "
                f"WHERE w.workflow_id = ANY(CAST(:ids AS text[])) AND w.status IN {IN_STATUSES} "
                f"GROUP BY 1"
            ),
            {"ids": ids},
        )
