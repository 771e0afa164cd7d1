"""pgbus_web_workers: one row per worker or serving process, its heartbeat
(runtime/heartbeat.py writes it, core/worker_reads.py reads it).

A row is alive while its heartbeat is newer than the cutoff the reader
passes (now - worker_gone_after); gone when it is older and the process
never said it stopped; stopped when it did (stopped_at). Which runs a
worker holds: the steps in progress whose worker_id is its id
(pgbus_workflow_steps, schema's partial index on it).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..rules import states
from . import as_dict, as_dicts, quoted

KINDS = ("worker", "serve")
STATES = ("alive", "gone", "stopped")
# A step a worker holds.
_IN_PROGRESS = quoted(states.STEP_IN_PROGRESS)
COLUMNS = "id, kind, host, pid, started_at, heartbeat_at, steps_done, operation_id, stopped_at"

# What a row is, read against a cutoff: one CASE, read by every query here.
STATE_SQL = "CASE WHEN stopped_at IS NOT NULL THEN 'stopped' WHEN heartbeat_at >= :cutoff THEN 'alive' ELSE 'gone' END"
# The transaction-local setting the worker's claim sets, read by the
# statements that mark a step in progress (models/steps.py).
WORKER_SETTING = "pgbus_web.worker_id"
# The worker id the current transaction declared, or NULL.
CURRENT_WORKER_SQL = f"NULLIF(current_setting('{WORKER_SETTING}', true), '')::bigint"


def register(conn: Connection, *, kind: str, host: str | None, pid: int | None, now: datetime) -> dict[str, Any]:
    """A new row for a process starting now; the row."""
    return as_dict(
        conn.execute(
            sa.text(
                "INSERT INTO pgbus_web_workers (kind, host, pid, started_at, heartbeat_at) "
                f"VALUES (:kind, :host, :pid, :now, :now) RETURNING {COLUMNS}"
            ),
            {"kind": kind, "host": host, "pid": pid, "now": now},
        ).one()
    )


def beat(
    conn: Connection,
    worker_id: int,
    *,
    kind: str,
    host: str | None,
    pid: int | None,
    started_at: datetime,
    now: datetime,
    steps_done: int,
    operation_id: int | None,
) -> None:
    """The heartbeat: one UPSERT. The row comes back if it was pruned
    meanwhile (the process was taken for gone, then woke up)."""
    conn.execute(
        sa.text(
            "INSERT INTO pgbus_web_workers (id, kind, host, pid, started_at, heartbeat_at, steps_done, operation_id)"
            " VALUES (:id, :kind, :host, :pid, :started_at, :now, :steps_done, :operation_id)"
            " ON CONFLICT (id) DO UPDATE SET heartbeat_at = EXCLUDED.heartbeat_at,"
            " steps_done = EXCLUDED.steps_done, operation_id = EXCLUDED.operation_id, stopped_at = NULL"
        ),
        {
            "id": int(worker_id),
            "kind": kind,
            "host": host,
            "pid": pid,
            "started_at": started_at,
            "now": now,
            "steps_done": int(steps_done),
            "operation_id": operation_id,
        },
    )


def stop(conn: Connection, worker_id: int, *, now: datetime, steps_done: int) -> None:
    """A clean stop: the row is kept, marked stopped, holding no operation."""
    conn.execute(
        sa.text(
            "UPDATE pgbus_web_workers SET stopped_at = :now, heartbeat_at = :now, steps_done = :steps_done,"
            " operation_id = NULL WHERE id = :id"
        ),
        {"id": int(worker_id), "now": now, "steps_done": int(steps_done)},
    )


def prune(conn: Connection, *, heard_before: datetime) -> int:
    """Delete the rows last heard of before *heard_before* (gone or
    stopped long ago); how many."""
    return conn.execute(
        sa.text("DELETE FROM pgbus_web_workers WHERE heartbeat_at < :before"), {"before": heard_before}
    ).rowcount


def listing(conn: Connection, *, cutoff: datetime, limit: int) -> list[dict[str, Any]]:
    """Up to *limit* rows with their ``state`` against *cutoff* and the
    number of steps each holds in progress (``holding``): the alive first,
    then the gone, then the stopped, each newest heartbeat first."""
    rows = conn.execute(
        sa.text(
            f"""
            SELECT {COLUMNS}, {STATE_SQL} AS state,
                   (SELECT count(*) FROM pgbus_workflow_steps s
                     WHERE s.status = {_IN_PROGRESS} AND s.worker_id = k.id) AS holding
            FROM pgbus_web_workers k
            ORDER BY CASE WHEN stopped_at IS NOT NULL THEN 2 WHEN heartbeat_at >= :cutoff THEN 0 ELSE 1 END,
                     heartbeat_at DESC, id DESC
            LIMIT :limit
            """
        ),
        {"cutoff": cutoff, "limit": int(limit)},
    )
    return as_dicts(rows)


def state_counts(conn: Connection, *, cutoff: datetime) -> dict[tuple[str, str], int]:
    """{(kind, state): rows}, the states of STATE_SQL."""
    rows = conn.execute(
        sa.text(f"SELECT kind, {STATE_SQL} AS state, count(*) AS n FROM pgbus_web_workers GROUP BY 1, 2"),
        {"cutoff": cutoff},
    )
    return {(row.kind, row.state): int(row.n) for row in rows}


def gone_holding(conn: Connection, *, cutoff: datetime, recent: datetime, run_limit: int) -> list[dict[str, Any]]:
    """The gone rows that still hold a step in progress, or that were last
    heard of after *recent*, each with the first *run_limit* run ids it
    holds (``runs``, oldest step first) and how many it holds
    (``holding``). One that holds nothing and fell silent before *recent*
    is old news: the Workers page lists it, the index no longer does."""
    rows = conn.execute(
        sa.text(
            f"""
            SELECT {COLUMNS}, h.holding, h.runs
            FROM pgbus_web_workers k
            CROSS JOIN LATERAL (
                SELECT count(*) AS holding,
                       (array_agg(s.workflow_id ORDER BY s.id))[1:CAST(:run_limit AS integer)] AS runs
                FROM pgbus_workflow_steps s
                WHERE s.status = {_IN_PROGRESS} AND s.worker_id = k.id
            ) h
            WHERE k.stopped_at IS NULL AND k.heartbeat_at < :cutoff AND (h.holding > 0 OR k.heartbeat_at >= :recent)
            ORDER BY k.heartbeat_at, k.id
            """
        ),
        {"cutoff": cutoff, "recent": recent, "run_limit": int(run_limit)},
    )
    return as_dicts(rows)


def find(conn: Connection, worker_id: int) -> dict[str, Any] | None:
    return as_dict(
        conn.execute(sa.text(f"SELECT {COLUMNS} FROM pgbus_web_workers WHERE id = :id"), {"id": int(worker_id)}).first()
    )


# What a live refresh must notice: which rows are gone or alive at :cutoff
# (a worker that falls silent changes no other table). A scalar subquery,
# read with the change marker (models/changes.marker_with).
MARKER_SQL = f"SELECT coalesce(string_agg(id::text || ':' || {STATE_SQL}, ',' ORDER BY id), '') FROM pgbus_web_workers"
