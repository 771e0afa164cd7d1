"""Upkeep of pgbus_workflows: pruning old terminal runs, and the runs'
latest_* columns checked and repaired against their steps.
"""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..rules.columns import latest_assignments, latest_list, step_fields_list
from . import STATES


def count_stale(conn: Connection, *, before: datetime) -> int:
    """How many runs pruning at *before* would remove."""
    found: int = conn.execute(
        sa.text(f"SELECT count(*) FROM pgbus_workflows WHERE status IN {STATES.TERMINAL} AND updated_at < :before"),
        {"before": before},
    ).scalar_one()
    return found


def delete_stale(conn: Connection, *, before: datetime, limit: int = 1000) -> int:
    """Delete up to *limit* stale runs; their steps, events and signals go with them."""
    # The outer test again: a run moved on (a rerun) between the subquery's
    # snapshot and the row lock is re-checked on its new version and kept.
    return conn.execute(
        sa.text(
            f"""
            DELETE FROM pgbus_workflows
            WHERE id IN (
                SELECT id FROM pgbus_workflows
                WHERE status IN {STATES.TERMINAL} AND updated_at < :before
                ORDER BY updated_at
                LIMIT :limit
            )
            AND status IN {STATES.TERMINAL} AND updated_at < :before
            """
        ),
        {"before": before, "limit": int(limit)},
    ).rowcount


# --- The latest_* columns against the steps ------------------------------------

# A run's latest_* columns against the columns of its latest step row they
# copy (rules/columns; schema/v2.sql keeps them equal on every write while
# triggers fire).
_LATEST_STEP = f"""
    LEFT JOIN LATERAL (
        SELECT {step_fields_list()}
        FROM pgbus_workflow_steps
        WHERE workflow_id = w.workflow_id
        ORDER BY id DESC
        LIMIT 1
    ) s ON TRUE
"""
_LATEST_DIFFERS = f"({latest_list('w')}) IS DISTINCT FROM ({step_fields_list('s')})"


def next_batch(conn: Connection, *, after_id: int, size: int) -> tuple[int, int] | None:
    """The next batch of at most *size* runs with ids above *after_id*, as
    (its last id, its runs): the batch is after_id < id <= last id. None past
    the last run."""
    last_id, runs = conn.execute(
        sa.text(
            "SELECT max(id), count(*) FROM (SELECT id FROM pgbus_workflows WHERE id > :after_id "
            "ORDER BY id LIMIT :size) batch"
        ),
        {"after_id": int(after_id), "size": int(size)},
    ).one()
    return None if last_id is None else (last_id, runs)


def latest_mismatches(conn: Connection, *, after_id: int, last_id: int, limit: int) -> tuple[int, list[str]]:
    """Over the runs with after_id < id <= last_id: how many carry latest_*
    columns other than their latest step row's (all NULL for a run without
    steps), and up to *limit* of their workflow_ids, lowest id first."""
    wrong, examples = conn.execute(
        sa.text(
            f"""
            SELECT count(*), (array_agg(w.workflow_id ORDER BY w.id))[1:CAST(:limit AS integer)]
            FROM pgbus_workflows w
            {_LATEST_STEP}
            WHERE w.id > :after_id AND w.id <= :last_id AND {_LATEST_DIFFERS}
            """
        ),
        {"after_id": int(after_id), "last_id": int(last_id), "limit": int(limit)},
    ).one()
    return wrong, list(examples or [])


def repair_latest(conn: Connection, *, after_id: int, last_id: int) -> int:
    """Set the latest_* columns of the runs with after_id < id <= last_id that
    disagree with their latest step row; the number of runs fixed.

    Two statements in the caller's transaction: the wrong runs are locked
    first, then read again and written with a fresh snapshot, so a step
    written meanwhile by a transaction that held one of them (its trigger
    updates the run) is seen rather than overwritten with older facts."""
    ids = (
        conn.execute(
            sa.text(
                f"""
            SELECT w.id FROM pgbus_workflows w
            {_LATEST_STEP}
            WHERE w.id > :after_id AND w.id <= :last_id AND {_LATEST_DIFFERS}
            FOR UPDATE OF w
            """
            ),
            {"after_id": int(after_id), "last_id": int(last_id)},
        )
        .scalars()
        .all()
    )
    if not ids:
        return 0
    assignments = latest_assignments("truth")
    return conn.execute(
        sa.text(
            f"""
            UPDATE pgbus_workflows target SET {assignments}
            FROM (
                SELECT w.id AS run_id, s.*
                FROM pgbus_workflows w
                {_LATEST_STEP}
                WHERE w.id = ANY(:ids) AND {_LATEST_DIFFERS}
            ) truth
            WHERE target.id = truth.run_id
            """
        ),
        {"ids": list(ids)},
    ).rowcount
