"""``pgbus-web seed --history N``: N finished runs of the demo workflows
written by set-based SQL (generate_series), so a database of ten million
runs takes minutes rather than hours. Each run went through its
definition's steps one attempt each, as the runtime writes them (a step
row per attempt, ``step_scheduled``, ``step_started`` and
``step_completed`` events, ``started`` and ``finished``); 94 % completed,
3 % failed on their last step and 3 % were cancelled by an operator before
it started. Fan-out and signal steps are recorded as plain completed steps
(no batch or signal rows). The runs lie before the last 31 days, oldest
first, so the ordinary seed's recent runs keep the pages' foreground.

The rows are written with the triggers off when the role may (as the
ordinary seed, demo/seed.py), so they carry what the triggers would have
written: the latest_* columns, the kept counts and the change marker.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from datetime import datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from ..models import STATES, attention_counts, changes, workflow_counts, workflow_rows
from ..progress import bar as progress_bar
from ..rules.columns import latest_list
from . import workflows as demo
from .seed import _may_skip_row_checks, check_schema
from .stories import UTC

# Runs per transaction.
CHUNK_RUNS = 100_000
# Which class each run of a cycle of ten is: half orders, 3 in 10
# onboardings, 2 in 10 refunds, as the ordinary seed.
CYCLE = (demo.ORDER,) * 5 + (demo.ONBOARDING,) * 3 + (demo.REFUND,) * 2
# Seconds between a run's steps; the runs are spread over HISTORY_SPAN,
# ending HISTORY_END before now.
STEP_SECONDS = 4
HISTORY_SPAN = timedelta(days=365)
HISTORY_END = timedelta(days=31)


@dataclass
class HistoryResult:
    runs: int
    steps: int = 0
    events: int = 0
    seconds: float = 0.0


def _plan() -> dict[str, list]:
    """The cycle's steps as columns: position, step number, class, digest,
    step name, the class's step count and the steps before it in the cycle."""
    plan: dict[str, list] = {key: [] for key in ("p", "k", "klass", "digest", "name", "steps", "before")}
    before = 0
    for position, klass in enumerate(CYCLE):
        definition = demo.REGISTRY[klass]
        names = list(definition.step_names)
        for number, name in enumerate(names):
            for key, value in zip(
                plan, (position, number, klass, definition.digest, name, len(names), before), strict=True
            ):
                plan[key].append(value)
        before += len(names)
    return plan


def _sql(text: str) -> str:
    """*text* with ``{step}`` the seconds a step takes, ``{latest}`` the
    runs' latest_* columns (rules/columns), ``{key}`` a run's key of the
    needs-attention counts and ``{STATES.NAME}`` a status
    (models.STATES); its other braces (JSON) as written."""
    text = text.replace("{step}", str(STEP_SECONDS)).replace("{latest}", latest_list())
    text = text.replace("{key}", attention_counts.key_sql("pgbus_workflows"))
    return re.sub(r"\{STATES\.(\w+)\}", lambda name: getattr(STATES, name.group(1)), text)


_PLAN_TABLE = """
    CREATE TEMPORARY TABLE pgbus_history_plan ON COMMIT DROP AS
    SELECT * FROM unnest(CAST(:p AS int[]), CAST(:k AS int[]), CAST(:klass AS text[]),
                         CAST(:digest AS text[]), CAST(:name AS text[]), CAST(:steps AS int[]),
                         CAST(:before AS int[]))
           AS plan (p, k, workflow_class, digest, step_name, steps, before_steps)
"""

# Each run of the chunk: its number n, its place i in the chunk, its
# position in the cycle, its outcome, its first moment t0 and its first
# step's id.
_RUNS = """
    WITH numbered AS (
        SELECT n, n - :first AS i FROM generate_series(CAST(:first AS bigint), CAST(:last AS bigint)) n
    ),
    run AS (
        SELECT n, i, CAST(i % 10 AS int) AS p,
               -- uuid-shaped and rising with n: each chunk's index entries go
               -- to the right edge of the workflow_id indexes, not at random.
               '00000000-0000-4000-8000-' || lpad(to_hex(n), 12, '0') AS workflow_id,
               CASE WHEN (n * 7919) % 100 < 94 THEN {STATES.COMPLETED}
                    WHEN (n * 7919) % 100 < 97 THEN {STATES.FAILED} ELSE {STATES.CANCELLED} END AS status,
               CAST(:oldest AS timestamptz) + (n - :numbered_from) * CAST(:spacing AS interval) AS t0,
               :step_base + (i / 10) * :cycle_steps AS step_base
        FROM numbered
    )
"""

_INSERT_RUNS = _sql(
    _RUNS
    + """,
    inserted AS (
        INSERT INTO pgbus_workflows (
            workflow_id, workflow_class, status, current_step, arguments, definition_digest,
            started_at, finished_at, created_at, updated_at,
            {latest})
        SELECT run.workflow_id, plan.workflow_class, run.status, plan.step_name,
               jsonb_build_object('history', run.n), plan.digest,
               run.t0, run.t0 + plan.steps * interval '{step} seconds',
               run.t0, run.t0 + plan.steps * interval '{step} seconds',
               run.step_base + plan.before_steps + plan.k, plan.step_name,
               CASE run.status WHEN {STATES.FAILED} THEN {STATES.STEP_FAILED}
                               WHEN {STATES.CANCELLED} THEN {STATES.STEP_CANCELLED} ELSE {STATES.STEP_COMPLETED} END,
               CASE WHEN run.status = {STATES.FAILED} THEN 'GatewayError' END,
               run.t0 + plan.k * interval '{step} seconds', NULL, NULL
        FROM run JOIN pgbus_history_plan plan ON plan.p = run.p AND plan.k = plan.steps - 1
        ORDER BY run.n
        -- The key of the needs-attention counts (attention_counts.key_sql).
        RETURNING workflow_class, status, {key} AS key,
                  date_trunc('hour', created_at, 'UTC') AS hour
    )
    SELECT workflow_class, status, key, hour, count(*) FROM inserted GROUP BY workflow_class, status, key, hour
"""
)

_STEPS = """,
    step AS (
        SELECT run.n, run.workflow_id, run.status AS run_status, run.t0, plan.k, plan.step_name,
               plan.k = plan.steps - 1 AS last, run.step_base + plan.before_steps + plan.k AS id,
               run.t0 + plan.k * interval '{step} seconds' AS scheduled_at
        FROM run JOIN pgbus_history_plan plan ON plan.p = run.p
    )
"""

_INSERT_STEPS = _sql(
    _RUNS
    + _STEPS
    + """
    INSERT INTO pgbus_workflow_steps (
        id, workflow_id, step_name, status, attempt, scheduled_at, started_at, finished_at,
        error_class, error_message, result, created_at, updated_at)
    SELECT id, workflow_id, step_name,
           CASE WHEN last AND run_status = {STATES.FAILED} THEN {STATES.STEP_FAILED}
                WHEN last AND run_status = {STATES.CANCELLED} THEN {STATES.STEP_CANCELLED}
                ELSE {STATES.STEP_COMPLETED} END,
           1, scheduled_at,
           CASE WHEN last AND run_status = {STATES.CANCELLED} THEN NULL ELSE scheduled_at + interval '1 second' END,
           scheduled_at + interval '3 seconds',
           CASE WHEN last AND run_status = {STATES.FAILED} THEN 'GatewayError' END,
           CASE WHEN last AND run_status = {STATES.FAILED} THEN 'card declined by the gateway' END,
           CASE WHEN last AND run_status <> {STATES.COMPLETED} THEN NULL ELSE '{"ok": true}'::jsonb END,
           scheduled_at, scheduled_at + interval '3 seconds'
    FROM step
    ORDER BY id
"""
)

# Each step's events, then the run's first and last, in the order of time.
_INSERT_EVENTS = _sql(
    _RUNS
    + _STEPS
    + """
    INSERT INTO pgbus_workflow_events
        (workflow_id, event, actor, reason, step_id, step_name, attempt, details, created_at)
    SELECT workflow_id, event, actor, reason, step_id, step_name, attempt, details, created_at
    FROM (
        SELECT n, 0 AS k, 0 AS seq, run.workflow_id, 'started' AS event, 'app' AS actor, NULL AS reason,
               NULL::bigint AS step_id, NULL AS step_name, NULL::int AS attempt,
               jsonb_build_object('definition_digest', plan.digest) AS details, run.t0 AS created_at
        FROM run JOIN pgbus_history_plan plan ON plan.p = run.p AND plan.k = 0
        UNION ALL
        SELECT n, k, seq, workflow_id, event, actor, reason, id, step_name, 1, details, at
        FROM step
        CROSS JOIN LATERAL (VALUES
            (1, 'step_scheduled', 'system', NULL, jsonb_build_object('at', scheduled_at), scheduled_at),
            (2, CASE WHEN last AND run_status = {STATES.CANCELLED} THEN {STATES.CANCELLED} ELSE 'step_started' END,
                CASE WHEN last AND run_status = {STATES.CANCELLED} THEN 'dashboard:ops' ELSE 'system' END,
                CASE WHEN last AND run_status = {STATES.CANCELLED} THEN 'no longer needed' END,
                '{}'::jsonb, scheduled_at + interval '1 second'),
            (3, CASE WHEN last AND run_status = {STATES.FAILED} THEN 'step_failed' ELSE 'step_completed' END,
                'system', NULL,
                CASE WHEN last AND run_status = {STATES.FAILED}
                     THEN '{"error_class": "GatewayError", "error_message": "card declined by the gateway"}'::jsonb
                     ELSE '{}'::jsonb END,
                scheduled_at + interval '3 seconds'),
            (4, CASE WHEN last AND run_status <> {STATES.CANCELLED} THEN 'finished' END, 'system', NULL,
                CASE WHEN run_status = {STATES.FAILED} THEN '{"status": "failed", "error_class": "GatewayError"}'::jsonb
                     ELSE '{"status": "completed"}'::jsonb END,
                scheduled_at + interval '3 seconds')
        ) AS e (seq, event, actor, reason, details, at)
        WHERE e.event IS NOT NULL AND NOT (e.seq = 3 AND last AND run_status = {STATES.CANCELLED})
    ) events
    ORDER BY n, k, seq
"""
)


def _reserve_step_ids(engine: Engine, count: int) -> int:
    """The first of *count* step ids taken from the sequence at once (the
    table locked meanwhile: no other insert takes one inside the block)."""
    with engine.begin() as conn:
        conn.exec_driver_sql("LOCK TABLE pgbus_workflow_steps IN SHARE ROW EXCLUSIVE MODE")
        first = conn.execute(
            sa.text("SELECT nextval(pg_get_serial_sequence('pgbus_workflow_steps', 'id'))")
        ).scalar_one()
        conn.execute(
            sa.text("SELECT setval(pg_get_serial_sequence('pgbus_workflow_steps', 'id'), :last)"),
            {"last": first + count - 1},
        )
    return first


def seed_history(
    engine: Engine,
    *,
    runs: int,
    now: datetime | None = None,
    progress: bool = False,
    chunk_size: int = CHUNK_RUNS,
    events: bool = True,
) -> HistoryResult:
    """Add *runs* finished runs before the last HISTORY_END, by set-based SQL.
    Without *events* the runs get their steps but no events: a history of
    ten million runs then fits a small disk (its events would be most of
    it), at the price of run pages without a timeline for those runs."""
    if isinstance(runs, bool) or not isinstance(runs, int) or runs < 1:
        raise ValueError(f"runs must be a positive whole number, not {runs!r}")
    check_schema(engine)
    started = time.monotonic()
    now = now or datetime.now(UTC)
    plan = _plan()
    cycle_steps = plan["before"][-1] + plan["steps"][-1]
    with engine.connect() as conn:
        first_number = workflow_rows.highest_id(conn) + 1
    skip_triggers = _may_skip_row_checks(engine)
    oldest = now - HISTORY_END - HISTORY_SPAN
    spacing = HISTORY_SPAN / runs
    result = HistoryResult(runs=runs)
    with progress_bar(total=runs, unit="run", disable=not progress, desc="History") as bar:
        for chunk_first in range(first_number, first_number + runs, chunk_size):
            chunk_last = min(chunk_first + chunk_size, first_number + runs) - 1
            size = chunk_last - chunk_first + 1
            step_ids = -(-size // 10) * cycle_steps
            binds = {
                "first": chunk_first,
                "last": chunk_last,
                "numbered_from": first_number,
                "oldest": oldest,
                "spacing": spacing,
                "step_base": _reserve_step_ids(engine, step_ids),
                "cycle_steps": cycle_steps,
            }
            with engine.begin() as conn:
                conn.exec_driver_sql("SET LOCAL synchronous_commit = off")
                if skip_triggers:
                    conn.exec_driver_sql("SET LOCAL session_replication_role = replica")
                conn.execute(sa.text(_PLAN_TABLE), plan)
                counts = conn.execute(sa.text(_INSERT_RUNS), binds).all()
                result.steps += conn.execute(sa.text(_INSERT_STEPS), binds).rowcount
                if events:
                    result.events += conn.execute(sa.text(_INSERT_EVENTS), binds).rowcount
                if skip_triggers:
                    by_status: dict[tuple[str, str], int] = {}
                    by_hour: dict[tuple[str, str, datetime], int] = {}
                    by_key: dict[tuple, int] = {}
                    for klass, status, key, hour, written in counts:
                        by_status[(klass, status)] = by_status.get((klass, status), 0) + written
                        by_hour[(klass, status, hour)] = by_hour.get((klass, status, hour), 0) + written
                        by_key[tuple(key)] = by_key.get(tuple(key), 0) + written
                    workflow_counts.add_counts(conn, by_status)
                    workflow_counts.add_hour_counts(conn, by_hour)
                    attention_counts.add(conn, by_key)
                    changes.mark(conn)
            bar.update(size)
    with engine.begin() as conn:
        workflow_counts.fold_counts(conn)
        attention_counts.fold(conn)
    result.seconds = time.monotonic() - started
    return result
