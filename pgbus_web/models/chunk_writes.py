"""An operation's chunk in few statements (runtime/chunks, runtime/chunks/resume.py):
what the chunk reads under its locks in one statement, and each verb's
writes (step rows, runs, signals, audit events) in one statement of
data-modifying CTEs, each table written once.

The events are built here, from the rows the same statement wrote
(RETURNING), the per-run values the caller passes as arrays and the
operation's constants, rather than as a JSON document of every row made
in Python: the statement is the same whatever the chunk's size, and the
rows are the ones runtime/chunks/locked_runs.event would make (reason and
details capped as models/events caps them: the caller caps the constants).

Every statement names the rows it writes by ``= ANY`` of the ids of
their runs beside its join, so the planner reads them from an index rather
than hashing every run in a status to join them; never on the join's own
column: joined to a CTE the planner expects one row of, the index scan
then searched the whole array once per row (a second for 1,000 runs). A run the caller locked is written at most once
per statement; the caller checks the counts (a run that did not move rolls
the whole chunk back).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import Connection

from ..rules.columns import LATEST_OF_STEP, latest_assignments, step_fields_list
from . import STATES, as_dicts

# The latest step row's columns facts() reads (what the verbs decide from
# and what their events name).
LATEST = ("id", "step_name", "status", "attempt", "scheduled_at", "wait_for")

_FACTS = """
    SELECT m.workflow_id, a.acted IS NOT NULL AS acted,
           {latest}
           {taken}
    FROM unnest(CAST(:workflow_ids AS text[]), CAST(:classes AS text[]), CAST(:types AS text[]),
                CAST(:subjects AS text[])) AS m(workflow_id, workflow_class, subject_type, subject_id)
    -- One probe of the operation's events index per run. As an EXISTS the
    -- planner hashed every event of the operation once per chunk instead
    -- (its statistics, from before the operation, say it has few): a read
    -- that grew with each chunk, 100,000 entries by the hundredth.
    LEFT JOIN LATERAL (
        SELECT TRUE AS acted FROM pgbus_workflow_events e
        WHERE e.details ? 'operation_id' AND e.details ->> 'operation_id' = :operation_id
          AND e.workflow_id = m.workflow_id
        LIMIT 1
    ) a ON TRUE
    {latest_join}
"""
_LATEST_SELECT = ", ".join(f"l.{name} AS latest_{name}" for name in LATEST) + ","
_LATEST_JOIN = f"""
    LEFT JOIN LATERAL (
        SELECT {", ".join(LATEST)} FROM pgbus_workflow_steps
        WHERE workflow_id = m.workflow_id ORDER BY id DESC LIMIT 1
    ) l ON TRUE
"""
# Whether another ongoing run holds the run's class and subject (the
# one-ongoing-run-per-subject index, workflow_rows.SUBJECT_INDEX): one
# probe of that index per run.
_TAKEN = f"""
           (m.subject_type IS NOT NULL AND m.subject_id IS NOT NULL AND EXISTS (
               SELECT 1 FROM pgbus_workflows w
               WHERE w.workflow_class = m.workflow_class AND w.subject_type = m.subject_type
                 AND w.subject_id = m.subject_id AND w.workflow_id <> m.workflow_id
                 AND w.status IN {STATES.ONGOING})) AS taken
"""


def facts(
    conn: Connection,
    runs: Sequence[Mapping[str, Any]],
    operation_id: int,
    *,
    latest: bool = False,
    subjects: bool = False,
) -> dict[str, dict[str, Any]]:
    """For each of *runs* (locked by this transaction, in an earlier
    statement: the check sees what committed before the lock), in one
    statement: ``acted``, whether operation *operation_id* already wrote an
    event on it; with *latest*, ``latest``, its latest step row (LATEST
    columns) or None; with *subjects*, ``taken``, whether another ongoing
    run holds its class and subject."""
    if not runs:
        return {}
    statement = _FACTS.format(
        latest=_LATEST_SELECT if latest else "",
        taken=_TAKEN if subjects else "FALSE AS taken",
        latest_join=_LATEST_JOIN if latest else "",
    )
    rows = as_dicts(
        conn.execute(
            sa.text(statement),
            {
                "operation_id": str(operation_id),
                "workflow_ids": [run["workflow_id"] for run in runs],
                "classes": [run.get("workflow_class") for run in runs],
                "types": [run.get("subject_type") for run in runs],
                "subjects": [run.get("subject_id") for run in runs],
            },
        )
    )
    out = {}
    for row in rows:
        step = None
        if latest and row["latest_id"] is not None:
            step = {name: row[f"latest_{name}"] for name in LATEST}
            step["workflow_id"] = row["workflow_id"]
        out[row["workflow_id"]] = {"acted": row["acted"], "latest": step, "taken": row["taken"]}
    return out


# The run's latest_* columns from a step row the same statement wrote
# (alias s: id, step_name, status, error_class, scheduled_at, waiting_since,
# timeout_at), as the steps' trigger would copy them; the chunk declared
# that it keeps them itself (workflow_rows.LATEST_BY_WRITER).
_LATEST_FROM_ROW = latest_assignments("s")
_STEP_RETURNING = (
    "s.id, s.workflow_id, s.step_name, s.status, s.attempt, s.error_class, s.scheduled_at, "
    "s.waiting_since, s.timeout_at"
)
_EVENT_COLUMNS = "workflow_id, event, actor, reason, step_id, step_name, attempt, details, created_at"

# The first event of each run for schedule_and_move: the verb's own, with
# the operation's id (m: the caller's arrays).
_FIRST_EVENT = {
    # verbs._rerun: {"from_step", "was"}, no step.
    "rerun": """
        SELECT m.n, 1 AS k, m.workflow_id, 'rerun' AS event, CAST(:reason AS text) AS reason,
               CAST(NULL AS bigint) AS step_id, CAST(NULL AS text) AS step_name, CAST(NULL AS integer) AS attempt,
               jsonb_build_object('from_step', m.step_name_capped, 'was', m.was,
                                  'operation_id', CAST(:operation_id AS bigint)) AS details
        FROM m JOIN moved USING (workflow_id)
    """,
    # verbs._resume: {"action", "step", "at" when given}, the latest step row.
    "resumed": """
        SELECT m.n, 1 AS k, m.workflow_id, 'resumed' AS event, CAST(:reason AS text) AS reason,
               m.from_id AS step_id, m.from_name AS step_name, m.from_attempt AS attempt,
               jsonb_build_object('action', m.action, 'step', m.step_name_capped,
                                  'operation_id', CAST(:operation_id AS bigint))
               || CASE WHEN CAST(:at AS text) IS NULL THEN '{}'::jsonb
                       ELSE jsonb_build_object('at', CAST(:at AS text)) END AS details
        FROM m JOIN moved USING (workflow_id)
    """,
}

_SCHEDULE_AND_MOVE = """
WITH m AS (
    SELECT * FROM unnest(CAST(:workflow_ids AS text[]), CAST(:step_names AS text[]),
                         CAST(:step_names_capped AS text[]), CAST(:was AS text[]), CAST(:actions AS text[]),
                         CAST(:from_ids AS bigint[]), CAST(:from_names AS text[]), CAST(:from_attempts AS integer[]))
        WITH ORDINALITY AS m(workflow_id, step_name, step_name_capped, was, action, from_id, from_name,
                             from_attempt, n)
), scheduled AS (
    INSERT INTO pgbus_workflow_steps AS s
        (workflow_id, step_name, status, attempt, scheduled_at, created_at, updated_at)
    SELECT m.workflow_id, m.step_name, {STATES.STEP_SCHEDULED},
           (SELECT COALESCE(max(p.attempt), 0) + 1 FROM pgbus_workflow_steps p
            WHERE p.workflow_id = m.workflow_id AND p.step_name = m.step_name),
           :due, :now, :now
    FROM m ORDER BY m.n
    RETURNING {step_returning}
), moved AS (
    UPDATE pgbus_workflows w
    SET status = {STATES.READY}, updated_at = now(), current_step = s.step_name, paused_at = NULL,
        finished_at = CASE WHEN :clear_finished THEN NULL ELSE w.finished_at END,
        {latest}
    FROM scheduled s
    WHERE w.workflow_id = s.workflow_id AND w.id = ANY(CAST(:run_ids AS bigint[]))
      AND w.status = ANY(:from_statuses)
    RETURNING w.workflow_id
), trail AS (
    INSERT INTO pgbus_workflow_events ({event_columns})
    SELECT e.workflow_id, e.event, CAST(:actor AS text), e.reason, e.step_id, e.step_name, e.attempt, e.details,
           :now
    FROM (
        {first}
        UNION ALL
        SELECT m.n, 2 AS k, m.workflow_id, 'step_scheduled', NULL, s.id, s.step_name, s.attempt,
               jsonb_build_object('at', CAST(:due_iso AS text))
        FROM m JOIN scheduled s USING (workflow_id) JOIN moved USING (workflow_id)
    ) e
    ORDER BY e.n, e.k
)
SELECT s.id, s.workflow_id, s.step_name, s.attempt, s.scheduled_at,
       EXISTS (SELECT 1 FROM moved WHERE moved.workflow_id = s.workflow_id) AS moved
FROM scheduled s
"""


def schedule_and_move(
    conn: Connection,
    plans: Sequence[Mapping[str, Any]],
    *,
    first: str,
    from_: Iterable[str],
    due: datetime | None,
    due_iso: str | None,
    now: datetime,
    actor: str,
    reason: str | None,
    operation_id: int,
    at: str | None = None,
    clear_finished: bool = False,
) -> dict[str, dict[str, Any]]:
    """For each plan (workflow_id, run_id: the run's id; step_name, step_name_capped; for rerun
    ``was``; for resumed ``action`` and ``from``, the latest step row or
    None), in one statement: a new scheduled attempt of step_name due
    *due* (the next attempt number of that step), the run from a status in
    *from_* to ready on it (current_step, paused_at cleared, finished_at
    too with *clear_finished*, latest_* from the new row), and per run the
    *first* event ("rerun" or "resumed", with the operation's id) then
    "step_scheduled" (``{"at": due_iso}``). workflow_id -> the new row
    (id, step_name, attempt, scheduled_at) and whether the run moved."""
    if not plans:
        return {}
    statement = _SCHEDULE_AND_MOVE.format(
        step_returning=_STEP_RETURNING,
        latest=_LATEST_FROM_ROW,
        event_columns=_EVENT_COLUMNS,
        first=_FIRST_EVENT[first],
        STATES=STATES,
    )
    starts = [plan.get("from") for plan in plans]
    rows = as_dicts(
        conn.execute(
            sa.text(statement),
            {
                "workflow_ids": [plan["workflow_id"] for plan in plans],
                "run_ids": [int(plan["run_id"]) for plan in plans],
                "step_names": [plan["step_name"] for plan in plans],
                "step_names_capped": [plan["step_name_capped"] for plan in plans],
                "was": [plan.get("was") for plan in plans],
                "actions": [plan.get("action") for plan in plans],
                "from_ids": [start["id"] if start else None for start in starts],
                "from_names": [start["step_name"] if start else None for start in starts],
                "from_attempts": [start["attempt"] if start else None for start in starts],
                "due": due,
                "due_iso": due_iso,
                "now": now,
                "actor": actor,
                "reason": reason,
                "operation_id": int(operation_id),
                "at": at,
                "clear_finished": bool(clear_finished),
                "from_statuses": list(from_),
            },
        )
    )
    return {row["workflow_id"]: row for row in rows}


_DUE_AND_MOVE = """
WITH m AS (
    SELECT * FROM unnest(CAST(:workflow_ids AS text[]), CAST(:step_ids AS bigint[]), CAST(:was AS text[]))
        WITH ORDINALITY AS m(workflow_id, step_id, was, n)
), due AS (
    UPDATE pgbus_workflow_steps s SET scheduled_at = :due, updated_at = :now
    FROM m
    WHERE s.id = m.step_id AND s.workflow_id = ANY(CAST(:workflow_ids AS text[])) AND s.workflow_id = m.workflow_id
      AND s.status = {STATES.STEP_SCHEDULED}
    RETURNING {step_returning}, m.was, m.n
), moved AS (
    UPDATE pgbus_workflows w SET status = {STATES.READY}, updated_at = now(), {latest}
    FROM due s
    WHERE w.workflow_id = s.workflow_id AND w.id = ANY(CAST(:run_ids AS bigint[]))
      AND w.status = ANY(:from_statuses)
    RETURNING w.workflow_id, s.id AS step_id, s.step_name, s.attempt, s.was, s.n
), trail AS (
    -- From the one CTE that carries what each event names: a join of two
    -- CTEs (each planned as one row) was a nested loop of 1,000 x 1,000.
    INSERT INTO pgbus_workflow_events ({event_columns})
    SELECT moved.workflow_id, CAST(:event AS text), CAST(:actor AS text), CAST(:reason AS text), moved.step_id,
           moved.step_name, moved.attempt,
           jsonb_build_object('at', CAST(:due_iso AS text), 'was', moved.was,
                              'operation_id', CAST(:operation_id AS bigint)),
           :now
    FROM moved
    ORDER BY moved.n
)
SELECT (SELECT count(*) FROM due) AS due, (SELECT count(*) FROM moved) AS moved
"""


def due_and_move(
    conn: Connection,
    dues: Sequence[Mapping[str, Any]],
    *,
    event: str,
    from_: Iterable[str],
    due: datetime | None,
    due_iso: str | None,
    now: datetime,
    actor: str,
    reason: str | None,
    operation_id: int,
) -> tuple[int, int]:
    """run_now and reschedule in one statement: for each (workflow_id,
    step_id: its latest row, scheduled; was: that row's scheduled_at as
    the event says it), the row due *due*, the run from a status in
    *from_* to ready with latest_* from that row, and its *event* with
    ``{"at": due_iso, "was"}`` and the operation's id (each also names
    run_id, the run's id). (step rows made due, runs moved)."""
    if not dues:
        return 0, 0
    statement = _DUE_AND_MOVE.format(
        step_returning=_STEP_RETURNING, latest=_LATEST_FROM_ROW, event_columns=_EVENT_COLUMNS, STATES=STATES
    )
    row = conn.execute(
        sa.text(statement),
        {
            "workflow_ids": [item["workflow_id"] for item in dues],
            "run_ids": [int(item["run_id"]) for item in dues],
            "step_ids": [int(item["step_id"]) for item in dues],
            "was": [item["was"] for item in dues],
            "due": due,
            "due_iso": due_iso,
            "now": now,
            "event": event,
            "actor": actor,
            "reason": reason,
            "operation_id": int(operation_id),
            "from_statuses": list(from_),
        },
    ).one()
    return int(row.due), int(row.moved)


_SIGNAL_AND_MOVE = """
WITH m AS (
    SELECT * FROM unnest(CAST(:workflow_ids AS text[]), CAST(:keys AS text[]), CAST(:keys_capped AS text[]),
                         CAST(:claim_ids AS bigint[]))
        WITH ORDINALITY AS m(workflow_id, idempotency_key, key_capped, claim_id, n)
), stored AS (
    INSERT INTO pgbus_workflow_signals AS g
        (workflow_id, name, payload, idempotency_key, status, claimed_by_step_id, claimed_at, created_at)
    SELECT m.workflow_id, CAST(:name AS text), :payload, m.idempotency_key,
           CASE WHEN m.claim_id IS NULL THEN {STATES.SIGNAL_PENDING} ELSE {STATES.SIGNAL_CLAIMED} END, m.claim_id,
           CASE WHEN m.claim_id IS NULL THEN NULL ELSE CAST(:now AS timestamptz) END, :now
    FROM m ORDER BY m.n
    ON CONFLICT (workflow_id, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
    RETURNING g.id, g.workflow_id, g.claimed_by_step_id
), due AS (
    UPDATE pgbus_workflow_steps s SET status = {STATES.STEP_SCHEDULED}, scheduled_at = :now, updated_at = :now
    FROM stored g
    WHERE s.id = g.claimed_by_step_id AND s.workflow_id = ANY(CAST(:workflow_ids AS text[]))
      AND s.workflow_id = g.workflow_id AND s.status = {STATES.STEP_WAITING}
    RETURNING {step_returning}, g.id AS signal_id
), moved AS (
    UPDATE pgbus_workflows w SET status = {STATES.READY}, updated_at = now(), {latest}
    FROM due s
    WHERE w.workflow_id = s.workflow_id AND w.id = ANY(CAST(:run_ids AS bigint[]))
      AND w.status = ANY(:from_statuses)
    RETURNING w.workflow_id, s.id AS step_id, s.step_name, s.attempt, s.signal_id
), trail AS (
    -- The second event from the one CTE that carries what it names (a join
    -- of CTEs each planned as one row was a nested loop of 1,000 x 1,000);
    -- in the caller's order, which the signals' ids follow (stored in it).
    INSERT INTO pgbus_workflow_events ({event_columns})
    SELECT e.workflow_id, e.event, CAST(:actor AS text), e.reason, e.step_id, e.step_name, e.attempt, e.details,
           :now
    FROM (
        SELECT g.id AS signal_id, 1 AS k, m.workflow_id, 'signal_received' AS event,
               CAST(:reason AS text) AS reason,
               CAST(NULL AS bigint) AS step_id, CAST(NULL AS text) AS step_name, CAST(NULL AS integer) AS attempt,
               jsonb_build_object('signal', CAST(:name_capped AS text), 'signal_id', g.id,
                                  'idempotency_key', m.key_capped,
                                  'operation_id', CAST(:operation_id AS bigint)) AS details
        FROM m JOIN stored g USING (workflow_id)
        UNION ALL
        SELECT moved.signal_id, 2, moved.workflow_id, 'signal_claimed', NULL, moved.step_id, moved.step_name,
               moved.attempt, jsonb_build_object('signal', CAST(:name_capped AS text), 'signal_id', moved.signal_id)
        FROM moved
    ) e
    ORDER BY e.signal_id, e.k
)
SELECT g.workflow_id, g.claimed_by_step_id IS NOT NULL AS claiming,
       EXISTS (SELECT 1 FROM due WHERE due.workflow_id = g.workflow_id) AS due,
       EXISTS (SELECT 1 FROM moved WHERE moved.workflow_id = g.workflow_id) AS moved
FROM stored g
"""


def signal_and_move(
    conn: Connection,
    deliveries: Sequence[Mapping[str, Any]],
    *,
    name: str,
    name_capped: str,
    payload: Any,
    from_: Iterable[str],
    now: datetime,
    actor: str,
    reason: str | None,
    operation_id: int,
) -> list[dict[str, Any]]:
    """Signal *name* with *payload* to each delivery (workflow_id,
    idempotency_key and key_capped, claim_id: the waiting step row that
    claims it at once, or None), in one statement, as verbs.signal's
    deliver does: stored (claimed by that row when given; a key already
    stored stores nothing and writes nothing; run_id: the run's id), a "signal_received" event
    with the operation's id; for a claim the row due now, a
    "signal_claimed" event and the run from a status in *from_* to ready
    with latest_* from that row. The stored ones: workflow_id, whether it
    claims, whether its row was made due and its run moved."""
    if not deliveries:
        return []
    statement = _SIGNAL_AND_MOVE.format(
        step_returning=_STEP_RETURNING, latest=_LATEST_FROM_ROW, event_columns=_EVENT_COLUMNS, STATES=STATES
    )
    return as_dicts(
        conn.execute(
            sa.text(statement).bindparams(sa.bindparam("payload", type_=JSONB)),
            {
                "workflow_ids": [item["workflow_id"] for item in deliveries],
                "run_ids": [int(item["run_id"]) for item in deliveries],
                "keys": [item["idempotency_key"] for item in deliveries],
                "keys_capped": [item["key_capped"] for item in deliveries],
                "claim_ids": [item["claim_id"] for item in deliveries],
                "name": name,
                "name_capped": name_capped,
                "payload": payload,
                "now": now,
                "actor": actor,
                "reason": reason,
                "operation_id": int(operation_id),
                "from_statuses": list(from_),
            },
        )
    )


_CANCEL_AND_MOVE = """
WITH m AS (
    SELECT * FROM unnest(CAST(:workflow_ids AS text[]), CAST(:run_ids AS bigint[]), CAST(:was AS text[]))
        WITH ORDINALITY AS m(workflow_id, run_id, was, n)
), closed AS (
    UPDATE pgbus_workflow_steps s SET status = {STATES.STEP_CANCELLED}, finished_at = :now, updated_at = :now
    WHERE s.workflow_id = ANY(CAST(:workflow_ids AS text[])) AND s.status = ANY(:open)
    RETURNING s.id
), moved AS (
    -- Every part of one statement reads the rows as they were before it:
    -- the latest row is cancelled here exactly when it was open.
    UPDATE pgbus_workflows w
    SET status = {STATES.CANCELLED}, finished_at = :now, updated_at = now(),
        {latest_cancelled}
    FROM m LEFT JOIN LATERAL (
        SELECT {step_fields}
        FROM pgbus_workflow_steps WHERE workflow_id = m.workflow_id ORDER BY id DESC LIMIT 1
    ) l ON TRUE
    WHERE w.workflow_id = m.workflow_id AND w.id = ANY(CAST(:run_ids AS bigint[]))
      AND w.status = ANY(:from_statuses)
    RETURNING w.workflow_id, m.was, m.n
), trail AS (
    -- Each run's open rows read by its index (those closed cancels), not
    -- joined from another CTE (planned as one row: a nested loop of every
    -- row by every row).
    INSERT INTO pgbus_workflow_events ({event_columns})
    SELECT moved.workflow_id, CAST(:event AS text), CAST(:actor AS text), CAST(:reason AS text), o.last_id, o.last_name,
           o.last_attempt,
           jsonb_build_object('was', moved.was, 'cancelled_steps', o.ids,
                              'operation_id', CAST(:operation_id AS bigint)),
           :now
    FROM moved CROSS JOIN LATERAL (
        SELECT COALESCE(jsonb_agg(s.id ORDER BY s.id), '[]'::jsonb) AS ids,
               (array_agg(s.id ORDER BY s.id DESC))[1] AS last_id,
               (array_agg(s.step_name ORDER BY s.id DESC))[1] AS last_name,
               (array_agg(s.attempt ORDER BY s.id DESC))[1] AS last_attempt
        FROM pgbus_workflow_steps s WHERE s.workflow_id = moved.workflow_id AND s.status = ANY(:open)
    ) o
    ORDER BY moved.n
)
SELECT (SELECT count(*) FROM moved) AS moved, (SELECT count(*) FROM closed) AS closed,
       (SELECT count(*) FROM pgbus_workflow_steps s
        WHERE s.workflow_id = ANY(CAST(:workflow_ids AS text[])) AND s.status = ANY(:open)) AS open
"""


def cancel_and_move(
    conn: Connection,
    runs: Sequence[Mapping[str, Any]],
    *,
    from_: Iterable[str],
    open_: tuple[str, ...],
    now: datetime,
    actor: str,
    reason: str | None,
    operation_id: int,
) -> tuple[int, int, int]:
    """cancel in one statement: for each run (workflow_id, id, status: as
    locked), its step rows in a status of *open_* cancelled, the run from
    a status in *from_* to cancelled with latest_* from its latest row, and
    a "cancelled" event naming the last row it cancelled and all of them
    (``{"was", "cancelled_steps"}`` and the operation's id). (runs moved,
    rows cancelled, rows that were open): the caller checks that every run
    moved and that the rows the events name are the rows cancelled."""
    if not runs:
        return 0, 0, 0
    row = conn.execute(
        sa.text(_CANCEL_AND_MOVE_STATEMENT),
        {
            "workflow_ids": [run["workflow_id"] for run in runs],
            "run_ids": [int(run["id"]) for run in runs],
            "was": [run["status"] for run in runs],
            "event": "cancelled",
            "open": list(open_),
            "from_statuses": list(from_),
            "now": now,
            "actor": actor,
            "reason": reason,
            "operation_id": int(operation_id),
        },
    ).one()
    return int(row.moved), int(row.closed), int(row.open)


# latest_* from each run's latest row, cancelled here when it was open.
_LATEST_CANCELLED = ", ".join(
    f"{column} = CASE WHEN l.status = ANY(:open) THEN {STATES.STEP_CANCELLED} ELSE l.status END"
    if field == "status"
    else f"{column} = l.{field}"
    for column, field in LATEST_OF_STEP.items()
)
_CANCEL_AND_MOVE_STATEMENT = _CANCEL_AND_MOVE.format(
    event_columns=_EVENT_COLUMNS, latest_cancelled=_LATEST_CANCELLED, step_fields=step_fields_list(), STATES=STATES
)


_SKIP_AND_MOVE = """
WITH m AS (
    SELECT * FROM unnest(CAST(:workflow_ids AS text[]), CAST(:open_ids AS bigint[]), CAST(:names AS text[]),
                         CAST(:afters AS text[]), CAST(:dues AS timestamptz[]), CAST(:dues_iso AS text[]))
        WITH ORDINALITY AS m(workflow_id, open_id, name, after_name, due, due_iso, n)
), closed AS (
    UPDATE pgbus_workflow_steps s SET status = {STATES.STEP_SKIPPED}, finished_at = :now, updated_at = :now
    FROM m
    WHERE s.id = m.open_id AND s.workflow_id = ANY(CAST(:workflow_ids AS text[])) AND s.workflow_id = m.workflow_id
      AND s.status = ANY(:open)
    RETURNING {step_returning}
), made AS (
    -- The next attempt of each step counted from the rows before this
    -- statement (a run's two new rows are of two different steps).
    INSERT INTO pgbus_workflow_steps AS s
        (workflow_id, step_name, status, attempt, scheduled_at, finished_at, created_at, updated_at)
    SELECT r.workflow_id, r.step_name, r.status,
           (SELECT COALESCE(max(p.attempt), 0) + 1 FROM pgbus_workflow_steps p
            WHERE p.workflow_id = r.workflow_id AND p.step_name = r.step_name),
           r.scheduled_at, r.finished_at, :now, :now
    FROM (
        SELECT m.n, 1 AS k, m.workflow_id, m.name AS step_name, {STATES.STEP_SKIPPED} AS status,
               CAST(NULL AS timestamptz) AS scheduled_at, CAST(:now AS timestamptz) AS finished_at
        FROM m WHERE m.open_id IS NULL
        UNION ALL
        SELECT m.n, 2, m.workflow_id, m.after_name, {STATES.STEP_SCHEDULED}, m.due, NULL
        FROM m WHERE m.after_name IS NOT NULL
    ) r
    ORDER BY r.n, r.k
    RETURNING {step_returning}
), consumed AS (
    -- The signal each skipped step held (signals.held_by_step), used up.
    UPDATE pgbus_workflow_signals g SET status = {STATES.SIGNAL_CONSUMED}, consumed_at = :now
    FROM (
        SELECT DISTINCT ON (m.workflow_id, m.name) h.id
        FROM m JOIN pgbus_workflow_signals h ON h.workflow_id = m.workflow_id AND h.status = {STATES.SIGNAL_CLAIMED}
         AND h.claimed_by_step_id IN (
             SELECT id FROM pgbus_workflow_steps WHERE workflow_id = m.workflow_id AND step_name = m.name)
        ORDER BY m.workflow_id, m.name, h.id
    ) held
    WHERE g.id = held.id AND g.status = {STATES.SIGNAL_CLAIMED}
    RETURNING g.id
), facts AS (
    -- Each run's plan and the rows written for it, as one list to group:
    -- no join of CTEs (planned as one row each, a join of two was a nested
    -- loop of every row by every row).
    SELECT m.workflow_id, m.n, m.due_iso, NULL AS role, {no_row} FROM m
    UNION ALL SELECT s.workflow_id, NULL, NULL, 'k', {row_columns} FROM closed s
    UNION ALL SELECT s.workflow_id, NULL, NULL, CASE WHEN s.status = {STATES.STEP_SKIPPED} THEN 'k' ELSE 'a' END,
                     {row_columns}
    FROM made s
), per_run AS (
    -- k: the run's skipped row; a: the row scheduled after it, if any.
    SELECT f.workflow_id, max(f.n) AS n, max(f.due_iso) AS due_iso,
           {per_role}
    FROM facts f GROUP BY f.workflow_id
), moved AS (
    -- After the last step the run completes; otherwise it is ready on the
    -- step scheduled. latest_* from the newer of the run's rows written.
    UPDATE pgbus_workflows w
    SET status = CASE WHEN p.a_id IS NULL THEN {STATES.COMPLETED} ELSE {STATES.READY} END,
        current_step = CASE WHEN p.a_id IS NULL THEN w.current_step ELSE p.a_step_name END,
        finished_at = CASE WHEN p.a_id IS NULL THEN CAST(:now AS timestamptz) ELSE w.finished_at END,
        paused_at = NULL, updated_at = now(),
        {latest_from_roles}
    FROM per_run p
    WHERE w.workflow_id = p.workflow_id AND w.id = ANY(CAST(:run_ids AS bigint[]))
      AND w.status = ANY(:from_statuses)
    RETURNING p.*
), trail AS (
    -- From the one CTE that carries what every event names (no join of
    -- CTEs planned as one row each).
    INSERT INTO pgbus_workflow_events ({event_columns})
    SELECT e.workflow_id, e.event, CAST(:actor AS text), e.reason, e.step_id, e.step_name, e.attempt, e.details,
           :now
    FROM (
        SELECT p.n, 1 AS k, p.workflow_id, 'step_skipped' AS event, CAST(:reason AS text) AS reason,
               p.k_id AS step_id, p.k_step_name AS step_name, p.k_attempt AS attempt,
               jsonb_build_object('operation_id', CAST(:operation_id AS bigint)) AS details
        FROM moved p
        UNION ALL
        SELECT p.n, 2, p.workflow_id,
               CASE WHEN p.a_id IS NULL THEN 'finished' ELSE 'step_scheduled' END, NULL,
               p.a_id, p.a_step_name, p.a_attempt,
               CASE WHEN p.a_id IS NULL
                    THEN jsonb_build_object('status', {STATES.COMPLETED}, 'operation_id', CAST(:operation_id AS bigint))
                    ELSE jsonb_build_object('at', p.due_iso) END
        FROM moved p
    ) e
    ORDER BY e.n, e.k
)
SELECT (SELECT count(*) FROM moved) AS moved, (SELECT count(*) FROM closed) AS closed,
       (SELECT count(*) FROM made) AS made
"""


def skip_and_move(
    conn: Connection,
    plans: Sequence[Mapping[str, Any]],
    *,
    from_: Iterable[str],
    open_: tuple[str, ...],
    now: datetime,
    actor: str,
    reason: str | None,
    operation_id: int,
) -> tuple[int, int, int]:
    """skip in one statement, for each plan (workflow_id, run_id; open_id:
    its open latest row to skip, or None to write a skipped row of
    ``name``; after: the step scheduled next, due ``due`` (``due_iso`` as
    the event says it), or None when the run completes): the rows, the
    signal each skipped step held used up, the run moved (from a status in
    *from_*), and its events: "step_skipped" with the operation's id, then
    "step_scheduled" ``{"at"}`` or "finished" ``{"status": "completed"}``.
    Plans come in the runs' id order, the events' order. (runs moved, open
    rows skipped, rows inserted): the caller checks them."""
    if not plans:
        return 0, 0, 0
    row = conn.execute(
        sa.text(_SKIP_AND_MOVE_STATEMENT),
        {
            "workflow_ids": [plan["workflow_id"] for plan in plans],
            "run_ids": [int(plan["run_id"]) for plan in plans],
            "open_ids": [plan["open_id"] for plan in plans],
            "names": [plan["name"] for plan in plans],
            "afters": [plan["after"] for plan in plans],
            "dues": [plan["due"] for plan in plans],
            "dues_iso": [plan["due_iso"] for plan in plans],
            "open": list(open_),
            "from_statuses": list(from_),
            "now": now,
            "actor": actor,
            "reason": reason,
            "operation_id": int(operation_id),
        },
    ).one()
    return int(row.moved), int(row.closed), int(row.made)


# The step rows' columns skip_and_move carries per role (k, a), and the
# run's latest_* from the newer of its rows: a when there is one.
_ROW_COLUMNS = ("id", "step_name", "status", "attempt", "error_class", "scheduled_at", "waiting_since", "timeout_at")
_ROW_TYPES = {
    "id": "bigint",
    "step_name": "text",
    "status": "text",
    "attempt": "integer",
    "error_class": "text",
    "scheduled_at": "timestamptz",
    "waiting_since": "timestamptz",
    "timeout_at": "timestamptz",
}
_SKIP_AND_MOVE_STATEMENT = _SKIP_AND_MOVE.format(
    STATES=STATES,
    step_returning=_STEP_RETURNING,
    event_columns=_EVENT_COLUMNS,
    no_row=", ".join(f"CAST(NULL AS {_ROW_TYPES[name]}) AS {name}" for name in _ROW_COLUMNS),
    row_columns=", ".join(f"s.{name}" for name in _ROW_COLUMNS),
    per_role=",\n           ".join(
        f"max(f.{name}) FILTER (WHERE f.role = '{role}') AS {role}_{name}"
        for role in ("k", "a")
        for name in _ROW_COLUMNS
    ),
    latest_from_roles=", ".join(
        f"{column} = CASE WHEN p.a_id IS NULL THEN p.k_{name} ELSE p.a_{name} END"
        for column, name in LATEST_OF_STEP.items()
    ),
)
