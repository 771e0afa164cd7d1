"""pgbus_workflow_steps: one row per step attempt; a run's latest row is its highest id."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import Connection

from ..rules import states
from ..rules.limits import ATTEMPT_MAX, ID_MAX
from . import STATES, as_dict, as_dicts
from .worker_heartbeats import CURRENT_WORKER_SQL, WORKER_SETTING
from .workflow_rows import LATEST_BY_WRITER

COLUMNS = (
    "id, workflow_id, step_name, status, attempt, scheduled_at, started_at, finished_at, "
    "wait_for, waiting_since, timeout_at, batch_id, error_class, error_message, "
    "error_backtrace, result, created_at, updated_at"
)


def latest(conn: Connection, workflow_id: str) -> dict[str, Any] | None:
    """The run's latest step row (its highest id), or None before its first step."""
    row = conn.execute(
        sa.text(
            f"SELECT {COLUMNS} FROM pgbus_workflow_steps WHERE workflow_id = :workflow_id ORDER BY id DESC LIMIT 1"
        ),
        {"workflow_id": workflow_id},
    ).first()
    return as_dict(row)


def latest_of(conn: Connection, workflow_ids: list[str]) -> dict[str, dict[str, Any]]:
    """latest() of many runs in one statement: workflow_id -> its latest
    step row (runs without a step are left out)."""
    if not workflow_ids:
        return {}
    rows = conn.execute(
        sa.text(
            f"""
            SELECT s.* FROM unnest(CAST(:workflow_ids AS text[])) AS r(workflow_id)
            CROSS JOIN LATERAL (
                SELECT {COLUMNS} FROM pgbus_workflow_steps
                WHERE workflow_id = r.workflow_id ORDER BY id DESC LIMIT 1
            ) s
            """
        ),
        {"workflow_ids": list(workflow_ids)},
    )
    return {row["workflow_id"]: row for row in as_dicts(rows)}


def for_run(
    conn: Connection, workflow_id: str, *, limit: int | None = None, before_id: int | None = None
) -> list[dict[str, Any]]:
    """The run's attempts in the order they were created: every one, or
    the newest *limit* (below *before_id* when given), read newest first
    through pgbus_workflow_steps_latest so a long history costs no more."""
    if limit is None and before_id is None:
        every = conn.execute(
            sa.text(f"SELECT {COLUMNS} FROM pgbus_workflow_steps WHERE workflow_id = :workflow_id ORDER BY id"),
            {"workflow_id": workflow_id},
        )
        return as_dicts(every)
    rows = as_dicts(
        conn.execute(
            sa.text(
                f"SELECT {COLUMNS} FROM pgbus_workflow_steps WHERE workflow_id = :workflow_id "
                "AND id < :before_id ORDER BY id DESC LIMIT :limit"
            ),
            {"workflow_id": workflow_id, "before_id": before_id if before_id is not None else ID_MAX, "limit": limit},
        )
    )
    rows.reverse()
    return rows


def names_for_run(conn: Connection, workflow_id: str) -> list[dict[str, Any]]:
    """Each step the run has attempted, in the order it first met it: its
    name, how many attempts (``attempts``) and its latest attempt (``latest``)."""
    rows = conn.execute(
        sa.text(
            f"""
            SELECT * FROM (
                SELECT DISTINCT ON (step_name) {COLUMNS},
                       count(*) OVER (PARTITION BY step_name) AS attempts,
                       min(id) OVER (PARTITION BY step_name) AS first_id
                FROM pgbus_workflow_steps WHERE workflow_id = :workflow_id
                ORDER BY step_name, id DESC
            ) named
            ORDER BY first_id
            """
        ),
        {"workflow_id": workflow_id},
    )
    named = []
    for row in as_dicts(rows):
        attempts = row.pop("attempts")
        row.pop("first_id")
        named.append({"name": row["step_name"], "attempts": attempts, "latest": row})
    return named


def find_many(conn: Connection, workflow_id: str, ids: Iterable[Any]) -> dict[int, dict[str, Any]]:
    """{id: step row} of the given step ids that exist in the run."""
    ids = sorted({int(i) for i in ids if i is not None})
    if not ids:
        return {}
    rows = conn.execute(
        sa.text(f"SELECT {COLUMNS} FROM pgbus_workflow_steps WHERE id = ANY(:ids) AND workflow_id = :workflow_id"),
        {"ids": ids, "workflow_id": workflow_id},
    )
    return {row["id"]: row for row in as_dicts(rows)}


# --- Written by the runtime (verbs, worker, sweep) ---------------------------

# Columns the runtime may set on a step row; other names are refused rather
# than spliced into SQL.
WRITABLE = (
    "status",
    "attempt",
    "scheduled_at",
    "started_at",
    "finished_at",
    "wait_for",
    "waiting_since",
    "timeout_at",
    "batch_id",
    "error_class",
    "error_message",
    "error_backtrace",
    "result",
)


def for_batch(conn: Connection, batch_id: str, *, limit: int = 100) -> list[dict[str, Any]]:
    """The step attempts that waited or wait on the batch, newest first, at
    most *limit*, each with its run's class and status (run_class,
    run_status): who waits for it. By the steps' batch index."""
    rows = conn.execute(
        sa.text(
            """
            SELECT s.id, s.workflow_id, s.step_name, s.status, s.attempt, s.waiting_since,
                   s.timeout_at, s.finished_at, s.created_at,
                   w.workflow_class AS run_class, w.status AS run_status
            FROM pgbus_workflow_steps s
            JOIN pgbus_workflows w ON w.workflow_id = s.workflow_id
            WHERE s.batch_id = :batch_id
            ORDER BY s.id DESC
            LIMIT :limit
            """
        ),
        {"batch_id": batch_id, "limit": int(limit)},
    )
    return as_dicts(rows)


def _writable(given: Iterable[str]) -> list[str]:
    names = list(given)
    unknown = [name for name in names if name not in WRITABLE]
    if unknown:
        raise ValueError(f"not a writable pgbus_workflow_steps column: {', '.join(unknown)}")
    return names


def _with_result_type(statement: sa.TextClause, names: list[str]) -> sa.TextClause:
    if "result" in names:
        statement = statement.bindparams(sa.bindparam("result", type_=JSONB))
    return statement


# insert_step(attempt=NEXT_ATTEMPT): the attempt number is counted in the
# INSERT itself (see next_attempt), saving the writer a round trip.
NEXT_ATTEMPT = object()
_NEXT_ATTEMPT_SQL = (
    "(SELECT COALESCE(max(attempt), 0) + 1 FROM pgbus_workflow_steps "
    "WHERE workflow_id = :workflow_id AND step_name = :step_name)"
)
# PostgreSQL's numeric_value_out_of_range.
_OUT_OF_RANGE = "22003"


class AttemptOverflow(Exception):
    """A new attempt of a step whose counter is at the column's end
    (ATTEMPT_MAX): its row cannot be written. The statement failed, so
    the caller's transaction must roll back."""

    def __init__(self, workflow_id: str, step_name: str) -> None:
        self.workflow_id = workflow_id
        self.step_name = step_name
        super().__init__(f"step {step_name} of run {workflow_id} is at attempt {ATTEMPT_MAX}, the column's end")


def _held(attrs: Mapping[str, Any]) -> bool:
    """Whether *attrs* mark a step in progress: the row then records which
    worker did it, the worker id its transaction declared
    (models/worker_heartbeats.WORKER_SETTING), NULL for none."""
    return bool(attrs.get("status") == states.STEP_IN_PROGRESS)


def insert_step(conn: Connection, *, workflow_id: str, step_name: str, now: datetime, **attrs: Any) -> dict[str, Any]:
    """Insert one step attempt (created_at = updated_at = *now*) and return it."""
    names = _writable(attrs)
    placeholders = [
        _NEXT_ATTEMPT_SQL if name == "attempt" and attrs[name] is NEXT_ATTEMPT else ":" + name for name in names
    ]
    if attrs.get("attempt") is NEXT_ATTEMPT:
        attrs = {name: value for name, value in attrs.items() if name != "attempt"}
    held = ["worker_id"] if _held(attrs) else []
    columns = ", ".join(["workflow_id", "step_name", "created_at", "updated_at", *names, *held])
    values = ", ".join(
        [":workflow_id", ":step_name", ":now", ":now", *placeholders, *[CURRENT_WORKER_SQL for _ in held]]
    )
    statement = _with_result_type(
        sa.text(f"INSERT INTO pgbus_workflow_steps ({columns}) VALUES ({values}) RETURNING {COLUMNS}"),
        names,
    )
    try:
        row = conn.execute(statement, {"workflow_id": workflow_id, "step_name": step_name, "now": now, **attrs}).one()
    except sa.exc.DataError as problem:
        # The one integer this INSERT counts is the attempt (NEXT_ATTEMPT):
        # out of range means the step's counter is at the column's end.
        if "attempt" in names and getattr(problem.orig, "sqlstate", None) == _OUT_OF_RANGE:
            raise AttemptOverflow(workflow_id, step_name) from None
        raise
    return as_dict(row)


def update_step(
    conn: Connection, step_id: int, *, from_: str | Iterable[str], now: datetime, **attrs: Any
) -> dict[str, Any] | None:
    """Guarded change of one step row: the updated row when its status was
    in *from_*, None otherwise (someone else moved it first)."""
    from_statuses = [from_] if isinstance(from_, str) else list(from_)
    names = _writable(attrs)
    assignments = "".join(f", {name} = :{name}" for name in names)
    if _held(attrs):
        assignments += f", worker_id = {CURRENT_WORKER_SQL}"
    statement = _with_result_type(
        sa.text(
            f"UPDATE pgbus_workflow_steps SET updated_at = :now{assignments} "
            "WHERE id = :id AND status = ANY(:from_statuses) "
            f"RETURNING {COLUMNS}"
        ),
        names,
    )
    row = conn.execute(statement, {"id": step_id, "now": now, "from_statuses": from_statuses, **attrs}).first()
    return as_dict(row)


def start(conn: Connection, step_id: int, *, now: datetime) -> dict[str, Any] | None:
    """A scheduled step outside any batch -> in progress (the worker's
    common case, one statement); None when the row is not that any more
    (the caller then reads it and decides)."""
    row = conn.execute(
        sa.text(
            f"UPDATE pgbus_workflow_steps SET status = {STATES.STEP_IN_PROGRESS}, started_at = :now, "
            "updated_at = :now, "
            f"worker_id = {CURRENT_WORKER_SQL} "
            f"WHERE id = :id AND status = {STATES.STEP_SCHEDULED} AND batch_id IS NULL RETURNING {COLUMNS}"
        ),
        {"id": step_id, "now": now},
    ).first()
    return as_dict(row)


def find(conn: Connection, step_id: int) -> dict[str, Any] | None:
    row = conn.execute(sa.text(f"SELECT {COLUMNS} FROM pgbus_workflow_steps WHERE id = :id"), {"id": step_id}).first()
    return as_dict(row)


def cancel_open(conn: Connection, workflow_id: str, *, now: datetime) -> list[dict[str, Any]]:
    """Every open attempt of the run (scheduled, waiting, in progress) ->
    cancelled; the rows as they are now."""
    rows = conn.execute(
        sa.text(
            f"""
            UPDATE pgbus_workflow_steps
            SET status = {STATES.STEP_CANCELLED}, finished_at = :now, updated_at = :now
            WHERE workflow_id = :workflow_id
              AND status IN {STATES.STEP_OPEN}
            RETURNING {COLUMNS}
            """
        ),
        {"workflow_id": workflow_id, "now": now},
    )
    return sorted(as_dicts(rows), key=lambda step: step["id"])


def next_attempt(conn: Connection, workflow_id: str, step_name: str) -> int:
    """The attempt number a new row of *step_name* gets: one counter per
    step per run, so "capture_payment #4" names one row in the trail.
    AttemptOverflow when the counter is at the column's end."""
    # Counted as bigint, so that the end of the integer column is refused
    # here, not by the database's "integer out of range".
    attempt = conn.execute(
        sa.text(
            "SELECT COALESCE(max(attempt), 0)::bigint + 1 FROM pgbus_workflow_steps "
            "WHERE workflow_id = :workflow_id AND step_name = :step_name"
        ),
        {"workflow_id": workflow_id, "step_name": step_name},
    ).scalar_one()
    if attempt > ATTEMPT_MAX:
        raise AttemptOverflow(workflow_id, step_name)
    counted: int = attempt
    return counted


def failure_streak(conn: Connection, step: dict[str, Any]) -> int:
    """How many attempts of the step have failed in a row, up to and
    including *step*: what its retry budget is counted against. The count
    starts over after an attempt that did not fail, and at a row that a
    person or the app scheduled (a start, an operator's retry, a rerun):
    only the worker's own reattempts use up the budget."""
    streak: int = conn.execute(
        sa.text(
            f"""
            SELECT count(*) FROM pgbus_workflow_steps s
            WHERE s.workflow_id = :workflow_id AND s.step_name = :step_name
              AND s.id <= :id AND s.status = {STATES.STEP_FAILED}
              AND s.id > COALESCE((
                  SELECT max(id) FROM pgbus_workflow_steps
                  WHERE workflow_id = :workflow_id AND step_name = :step_name
                    AND id < :id AND status <> {STATES.STEP_FAILED}), 0)
              AND s.id >= COALESCE((
                  SELECT max(step_id) FROM pgbus_workflow_events
                  WHERE workflow_id = :workflow_id AND step_name = :step_name
                    AND step_id <= :id AND actor <> :system_actor
                    AND event IN ('step_scheduled', 'step_waiting')), 0)
            """
        ),
        {
            "workflow_id": step["workflow_id"],
            "step_name": step["step_name"],
            "id": step["id"],
            "system_actor": "system",
        },
    ).scalar_one()
    return streak


def claim_due(conn: Connection, *, now: datetime, classes: Iterable[str], limit: int = 1) -> list[dict[str, Any]]:
    """Due steps of ready runs of *classes* (those whose definitions the
    worker has), oldest due first, their RUN rows locked with
    SKIP LOCKED: a run another worker (or an operator's verb) holds is
    passed over, never waited on. The run is locked rather than the step so
    that workers take locks in the verbs' order (run first), which cannot
    deadlock. The caller re-reads the step under that lock."""
    rows = conn.execute(
        sa.text(
            f"""
            SELECT s.id AS step_id, w.workflow_id
            FROM pgbus_workflow_steps s
            JOIN pgbus_workflows w ON w.workflow_id = s.workflow_id
            WHERE s.status = {STATES.STEP_SCHEDULED} AND s.scheduled_at <= :now AND w.status = {STATES.READY}
              AND w.workflow_class = ANY(:classes)
            ORDER BY s.scheduled_at, s.id
            LIMIT :limit
            FOR UPDATE OF w SKIP LOCKED
            """
        ),
        {"now": now, "classes": list(classes), "limit": int(limit)},
    )
    return as_dicts(rows)


def claim_next(
    conn: Connection, *, now: datetime, classes: Iterable[str], run_columns: str, worker_id: int | None = None
) -> dict[str, Any] | None:
    """The worker's claim: as claim_due for one step, returning the locked
    run's *run_columns* (models.workflow_rows.SELECT_COLUMNS) with step_id and
    step_name, and telling the latest_* trigger that this transaction sets
    its runs' latest step columns itself (models.workflow_rows.LATEST_BY_WRITER).
    The run's columns are read after its lock (re-checked), so they need no
    second read; the step's are not, and the caller's guarded update of the
    step is its re-read. *worker_id* (the claiming worker's row) is
    declared for the transaction, so the step it starts records it."""
    row = conn.execute(
        sa.text(
            f"""
            SELECT s.id AS step_id, s.step_name AS claimed_step_name,
                   set_config('{LATEST_BY_WRITER}', 'on', true) AS latest_by_writer,
                   set_config('{WORKER_SETTING}', :worker_id, true) AS worker_declared,
                   {", ".join("w." + column.strip() for column in run_columns.split(","))}
            FROM pgbus_workflow_steps s
            JOIN pgbus_workflows w ON w.workflow_id = s.workflow_id
            WHERE s.status = {STATES.STEP_SCHEDULED} AND s.scheduled_at <= :now AND w.status = {STATES.READY}
              AND w.workflow_class = ANY(:classes)
            ORDER BY s.scheduled_at, s.id
            LIMIT 1
            FOR UPDATE OF w SKIP LOCKED
            """
        ),
        {"now": now, "classes": list(classes), "worker_id": "" if worker_id is None else str(int(worker_id))},
    ).first()
    claimed = as_dict(row)
    if claimed is not None:
        claimed.pop("worker_declared")
    return claimed


def timed_out_waits(conn: Connection, *, now: datetime, limit: int = 100) -> list[dict[str, Any]]:
    """Waiting steps whose deadline passed: (step_id, workflow_id), oldest deadline first."""
    rows = conn.execute(
        sa.text(
            f"""
            SELECT id AS step_id, workflow_id FROM pgbus_workflow_steps
            WHERE status = {STATES.STEP_WAITING} AND timeout_at IS NOT NULL AND timeout_at <= :now
            ORDER BY timeout_at
            LIMIT :limit
            """
        ),
        {"now": now, "limit": int(limit)},
    )
    return as_dicts(rows)


def stalled(conn: Connection, *, started_before: datetime, limit: int = 100) -> list[dict[str, Any]]:
    """Steps in progress since before *started_before*: (step_id, workflow_id)."""
    rows = conn.execute(
        sa.text(
            f"""
            SELECT id AS step_id, workflow_id FROM pgbus_workflow_steps
            WHERE status = {STATES.STEP_IN_PROGRESS} AND started_at < :started_before
            ORDER BY started_at
            LIMIT :limit
            """
        ),
        {"started_before": started_before, "limit": int(limit)},
    )
    return as_dicts(rows)


def waiting_on_finished_batches(conn: Connection, *, classes: Iterable[str], limit: int = 100) -> list[dict[str, Any]]:
    """Steps of waiting runs of *classes* whose batch has finished: (step_id, workflow_id)."""
    rows = conn.execute(
        sa.text(
            f"""
            SELECT s.id AS step_id, s.workflow_id
            FROM pgbus_workflow_steps s
            JOIN pgbus_batches b ON b.batch_id = s.batch_id
            JOIN pgbus_workflows w ON w.workflow_id = s.workflow_id
            WHERE s.status = {STATES.STEP_WAITING} AND b.status = {STATES.BATCH_FINISHED}
              AND w.status = {STATES.WAITING} AND w.workflow_class = ANY(:classes)
            ORDER BY b.finished_at, s.id
            LIMIT :limit
            """
        ),
        {"classes": list(classes), "limit": int(limit)},
    )
    return as_dicts(rows)


# --- The dashboard's pages -------------------------------------------------


def duration_percentiles(
    conn: Connection, workflow_class: str, *, created_from: datetime, run_limit: int
) -> dict[str, Any]:
    """How long each step of one class takes, over the newest *run_limit*
    runs of that class started since *created_from*: per step, the attempts
    that ran (started and finished), how many of them failed, and the
    median and 95th percentile of their run time in seconds, steps in the
    order they first appear. ``{"runs": <runs read>, "steps": [...]}``;
    runs == run_limit means older runs of the range were left out.

    Bounded by runs rather than read in full: percentiles cannot be summed
    from parts, and every attempt of a month of a busy class is millions
    of rows, where the newest few thousand runs tell the same story."""
    rows = as_dicts(
        conn.execute(
            sa.text(
                f"""
                WITH recent AS (
                    SELECT workflow_id FROM pgbus_workflows
                    WHERE workflow_class = :workflow_class AND created_at >= :created_from
                    ORDER BY created_at DESC
                    LIMIT :run_limit
                )
                SELECT (SELECT count(*) FROM recent) AS runs,
                       s.step_name,
                       count(*) AS attempts,
                       count(*) FILTER (WHERE s.status = {STATES.STEP_FAILED}) AS failed,
                       percentile_cont(0.5) WITHIN GROUP (ORDER BY s.seconds) AS median_seconds,
                       percentile_cont(0.95) WITHIN GROUP (ORDER BY s.seconds) AS p95_seconds
                FROM recent
                CROSS JOIN LATERAL (
                    SELECT id, step_name, status,
                           EXTRACT(EPOCH FROM finished_at - started_at) AS seconds
                    FROM pgbus_workflow_steps
                    WHERE workflow_id = recent.workflow_id
                      AND started_at IS NOT NULL AND finished_at IS NOT NULL
                      -- An attempt stamped at ±infinity has no run time to count.
                      AND isfinite(started_at) AND isfinite(finished_at)
                    -- OFFSET 0 keeps this a per-run index lookup: joined
                    -- flat, the planner hashes the whole steps table.
                    OFFSET 0
                ) s
                GROUP BY s.step_name
                ORDER BY min(s.id)
                """
            ),
            {"workflow_class": workflow_class, "created_from": created_from, "run_limit": int(run_limit)},
        )
    )
    runs = rows[0]["runs"] if rows else 0
    for row in rows:
        del row["runs"]
    return {"runs": runs, "steps": rows}
