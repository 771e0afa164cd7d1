"""How fast an operation acts on many runs, for every verb, beside the
set-based floor; what it costs the dashboard meanwhile; and how long the
preview of a huge filter takes.

    python bench/operations.py [--database-url postgresql://...] [--matching 100000] [--total 1000000]
        [--verbs cancel,skip,...] [--preview-runs 1000000]

Without --database-url an embedded PostgreSQL is started in a temporary
directory. The benchmark makes its own database (``pgbus_bench_operations_``
and a suffix of its own, so two runs on one server never meet; dropped
after the run) and seeds, by set-based SQL, --matching runs for
each verb in the state it acts on (each verb's runs of their own class, a
copy of OrderWorkflow's definition, so one filter matches exactly them),
and background runs up to --total (bench/bulk_runs.py's MIXED shape, of the
other demo classes). Then:

1. the index's runs fragment (``GET /workflows?status=paused`` as htmx asks
   for #pgbus-runs) idle: p50/p95 of 40 requests; and again before each
   verb, BEFORE (100) requests five a second, as during the operation
   (the machine's load moves in minutes: each verb is compared with the
   idle just before it);
2. for each verb: the floor, the same state change as one set-based UPDATE
   of the verb's runs plus one INSERT of an audit event per run, committed
   (then undone, untimed: the same rows, as they were); for run_now,
   reschedule (whose runs stay ready while their scheduled step rows move),
   signal (a signal, a step row and a second event a run), skip (two step
   rows and a second event a run) and cancel (the run's open step rows
   cancelled, and the run's copy of its latest step's status), a second,
   "whole" floor that also writes those rows in the same statement (the
   targets are read against it there, the first printed beside it); then one
   separate process does the verb on them as one operation (a Runner, its
   default chunks): runs/s and the ratio to the floor, with the runs
   fragment timed meanwhile, five requests a second (p95 during, and its
   ratio to idle);
3. with --preview-runs, the preview of ``status=paused`` over that many
   paused runs (seeded up to that many first): median of 5, after one warm-up.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bulk_runs  # noqa: E402  (bench/bulk_runs.py)
import scratch

from pgbus_web import db, defaults, schema
from pgbus_web.demo.workflows import ORDER_WORKFLOW, REGISTRY
from pgbus_web.models import workflow_rows
from pgbus_web.rules import run_filters as filters
from pgbus_web.runtime import operation_policy, operation_preview, operation_record, operation_runner
from pgbus_web.runtime.definitions import Registry, Workflow

BENCH_DATABASE = "pgbus_bench_operations"
# During an operation the fragment is asked for five times a second: a few
# operators' pages refreshing, not a load of its own that takes a core
# from the operation on a small machine.
FRAGMENT_EVERY = 0.2
# The requests timed just before each verb: the p95 of 40 was their
# second slowest, and moved between 4 and 11 ms from one verb to the next
# on a quiet machine; of 100, the sixth.
BEFORE = 100
THRESHOLDS = {"threshold": defaults.STALL_THRESHOLD, "waiting_threshold": defaults.WAITING_THRESHOLD}

RUNNER = """
import sys, time
from pgbus_web import db
from pgbus_web.demo.workflows import ORDER_WORKFLOW, REGISTRY
from pgbus_web.runtime import operation_runner
from pgbus_web.runtime.definitions import Registry, Workflow
registry = Registry([*REGISTRY,
                     *(Workflow(name, ORDER_WORKFLOW.steps) for name in sys.argv[3].split(","))])
engine = db.create_engine(sys.argv[1])
runner = operation_runner.Runner(engine, registry, chunk=int(sys.argv[4]) or None)
started = time.monotonic()
while runner.step(int(sys.argv[2])) is not None:
    pass
print(time.monotonic() - started, flush=True)
"""


def fragment_times(client, count: int, stop=None, every: float = 0.0) -> list[float]:
    """*count* timings of the runs fragment (until *stop*), one started
    every *every* seconds at most (0: back to back)."""
    times = []
    for _ in range(count):
        if stop is not None and stop():
            break
        started = time.perf_counter()
        response = client.get("/workflows?status=paused", headers={"HX-Request": "true", "HX-Target": "pgbus-runs"})
        assert response.status_code == 200
        times.append(time.perf_counter() - started)
        time.sleep(max(every - times[-1], 0))
    return times


def p95(values: list[float]) -> float:
    return sorted(values)[max(int(len(values) * 0.95) - 1, 0)] if values else float("nan")


@dataclass(frozen=True)
class VerbCase:
    """A verb, the state of the runs it acts on (status, one step row of
    *step* in *step_status*), its fields, and the floor's status change."""

    verb: str
    status: str
    step: str
    step_status: str
    to: str  # the status the floor's UPDATE writes
    event: str  # the event the floor's INSERT writes
    params: dict = field(default_factory=dict)
    # A verb whose change is as much other rows' as the runs' (run_now and
    # reschedule: the scheduled step rows, the runs stay ready; signal: the
    # signal, the step that claims it, two events; skip: two step rows, two
    # events; cancel: the open step rows): a second floor that writes those
    # rows too (WHOLE_FLOORS).
    whole_floor: bool = False

    @property
    def workflow_class(self) -> str:
        return "Bench" + "".join(part.title() for part in self.verb.split("_")) + "Workflow"


def _later(**delta) -> str:
    return (datetime.now(UTC) + timedelta(**delta)).isoformat()


CASES = (
    VerbCase("resume", "paused", "capture_payment", "failed", "ready", "resumed"),
    VerbCase("resume_at", "paused", "capture_payment", "failed", "ready", "resumed", {"at": "+1d"}),
    VerbCase("cancel", "ready", "reserve_stock", "scheduled", "cancelled", "cancelled", whole_floor=True),
    VerbCase("pause", "ready", "reserve_stock", "scheduled", "paused", "paused"),
    VerbCase("run_now", "ready", "reserve_stock", "scheduled", "ready", "run_now", whole_floor=True),
    VerbCase(
        "reschedule", "ready", "reserve_stock", "scheduled", "ready", "rescheduled", {"at": "+1d"}, whole_floor=True
    ),
    VerbCase("skip", "paused", "capture_payment", "failed", "ready", "step_skipped", whole_floor=True),
    VerbCase("rerun", "failed", "capture_payment", "failed", "ready", "rerun"),
    VerbCase(
        "signal",
        "waiting",
        "await_shipment",
        "waiting",
        "ready",
        "signal_received",
        {"name": "shipment_confirmed", "payload": {"carrier": "bench"}},
        whole_floor=True,
    ),
)

SEED_RUNS = """
INSERT INTO pgbus_workflows (workflow_id, workflow_class, definition_digest, status, current_step,
                             subject_type, subject_id, started_at, paused_at, finished_at, created_at, updated_at)
SELECT gen_random_uuid()::text, :workflow_class, :digest, :status, :step, 'Order', :workflow_class || '-' || g,
       moment, CASE WHEN :status = 'paused' THEN moment END,
       CASE WHEN :status IN ('completed', 'failed', 'cancelled') THEN moment END, moment, moment
FROM generate_series(1, CAST(:count AS bigint)) AS g,
     LATERAL (SELECT now() - make_interval(secs => CAST(:count AS bigint) - g) AS moment) AS spread
"""
SEED_STEPS = """
INSERT INTO pgbus_workflow_steps (workflow_id, step_name, status, attempt, scheduled_at, wait_for, waiting_since,
                                  finished_at, error_class, error_message, created_at, updated_at)
SELECT workflow_id, :step, :step_status, 1,
       CASE WHEN :step_status = 'scheduled' THEN now() + interval '1 hour' ELSE created_at END,
       CASE WHEN :step_status = 'waiting' THEN 'shipment_confirmed' END,
       CASE WHEN :step_status = 'waiting' THEN created_at END,
       CASE WHEN :step_status = 'failed' THEN created_at END,
       CASE WHEN :step_status = 'failed' THEN 'TimeoutError' END,
       CASE WHEN :step_status = 'failed' THEN 'gateway timeout' END,
       created_at, created_at
FROM pgbus_workflows WHERE workflow_class = :workflow_class ORDER BY id
"""
FLOOR = """
WITH moved AS (
    UPDATE pgbus_workflows SET status = :to, updated_at = now()
    WHERE workflow_class = :workflow_class AND status = :status
    RETURNING workflow_id
)
INSERT INTO pgbus_workflow_events (workflow_id, event, actor, reason, details, created_at)
SELECT workflow_id, :event, 'bench', 'bench', jsonb_build_object('operation_id', 0), now() FROM moved
"""

# The floor of a verb whose change is as much other rows' as the runs':
# the same UPDATE of the runs and INSERT of their events, and in the same
# statement the rows the verb must write besides. run_now and reschedule:
# each run's scheduled step row due now. signal: a claimed signal per run,
# its waiting step row due now, and a second event.
FLOOR_STEPS = """
WITH moved AS (
    UPDATE pgbus_workflows SET status = :to, updated_at = now()
    WHERE workflow_class = :workflow_class AND status = :status
    RETURNING workflow_id
), due AS (
    UPDATE pgbus_workflow_steps s SET scheduled_at = now(), updated_at = now()
    FROM moved WHERE s.workflow_id = moved.workflow_id AND s.status = 'scheduled'
)
INSERT INTO pgbus_workflow_events (workflow_id, event, actor, reason, details, created_at)
SELECT workflow_id, :event, 'bench', 'bench', jsonb_build_object('operation_id', 0), now() FROM moved
"""
UNDO_FLOOR_STEPS = """
UPDATE pgbus_workflow_steps s SET scheduled_at = now() + interval '1 hour'
FROM pgbus_workflows w
WHERE s.workflow_id = w.workflow_id AND w.workflow_class = :workflow_class AND s.status = 'scheduled'
"""
FLOOR_SIGNAL = """
WITH moved AS (
    UPDATE pgbus_workflows SET status = :to, updated_at = now()
    WHERE workflow_class = :workflow_class AND status = :status
    RETURNING workflow_id
), due AS (
    UPDATE pgbus_workflow_steps s SET status = 'scheduled', scheduled_at = now(), updated_at = now()
    FROM moved WHERE s.workflow_id = moved.workflow_id AND s.status = 'waiting'
    RETURNING s.id, s.workflow_id
), stored AS (
    INSERT INTO pgbus_workflow_signals (workflow_id, name, payload, idempotency_key, status, claimed_by_step_id,
                                        claimed_at, created_at)
    SELECT workflow_id, 'shipment_confirmed', '{"carrier": "bench"}', 'bench:' || workflow_id, 'claimed', id,
           now(), now()
    FROM due
)
INSERT INTO pgbus_workflow_events (workflow_id, event, actor, reason, details, created_at)
SELECT workflow_id, event, 'bench', 'bench', jsonb_build_object('operation_id', 0), now()
FROM moved, (VALUES (1, :event), (2, 'signal_claimed')) AS e(n, event)
ORDER BY workflow_id, n
"""
UNDO_FLOOR_SIGNAL = """
WITH gone AS (
    DELETE FROM pgbus_workflow_signals g USING pgbus_workflows w
    WHERE g.workflow_id = w.workflow_id AND w.workflow_class = :workflow_class AND g.idempotency_key LIKE 'bench:%'
)
UPDATE pgbus_workflow_steps s SET status = 'waiting', scheduled_at = s.created_at
FROM pgbus_workflows w
WHERE s.workflow_id = w.workflow_id AND w.workflow_class = :workflow_class AND s.status = 'scheduled'
"""
# skip: a skipped row of the failed step, the next step's row scheduled
# now, and a second event (step_scheduled) besides step_skipped.
FLOOR_SKIP = """
WITH moved AS (
    UPDATE pgbus_workflows SET status = :to, current_step = :next_step, paused_at = NULL, updated_at = now()
    WHERE workflow_class = :workflow_class AND status = :status
    RETURNING workflow_id
), written AS (
    INSERT INTO pgbus_workflow_steps (workflow_id, step_name, status, attempt, scheduled_at, finished_at,
                                      created_at, updated_at)
    SELECT workflow_id, step_name, status, attempt, scheduled_at, finished_at, now(), now()
    FROM moved, (VALUES (1, :step, 'skipped', 2, NULL::timestamptz, now()),
                        (2, :next_step, 'scheduled', 1, now(), NULL::timestamptz))
                AS r(n, step_name, status, attempt, scheduled_at, finished_at)
    ORDER BY workflow_id, n
)
INSERT INTO pgbus_workflow_events (workflow_id, event, actor, reason, details, created_at)
SELECT workflow_id, event, 'bench', 'bench', jsonb_build_object('operation_id', 0), now()
FROM moved, (VALUES (1, :event), (2, 'step_scheduled')) AS e(n, event)
ORDER BY workflow_id, n
"""
UNDO_FLOOR_SKIP = """
WITH gone AS (
    DELETE FROM pgbus_workflow_steps s USING pgbus_workflows w
    WHERE s.workflow_id = w.workflow_id AND w.workflow_class = :workflow_class
      AND s.status IN ('skipped', 'scheduled')
)
UPDATE pgbus_workflows SET current_step = :step, paused_at = created_at WHERE workflow_class = :workflow_class
"""
# cancel: the run's open step rows cancelled too, and its copy of its
# latest step's status (the verb keeps latest_* itself, as here).
FLOOR_CANCEL = """
WITH moved AS (
    UPDATE pgbus_workflows SET status = :to, finished_at = now(), latest_step_status = 'cancelled',
                               updated_at = now()
    WHERE workflow_class = :workflow_class AND status = :status
    RETURNING workflow_id
), closed AS (
    UPDATE pgbus_workflow_steps s SET status = 'cancelled', finished_at = now(), updated_at = now()
    FROM moved WHERE s.workflow_id = moved.workflow_id AND s.status IN ('scheduled', 'waiting', 'in_progress')
)
INSERT INTO pgbus_workflow_events (workflow_id, event, actor, reason, details, created_at)
SELECT workflow_id, :event, 'bench', 'bench', jsonb_build_object('operation_id', 0), now() FROM moved
"""
UNDO_FLOOR_CANCEL = """
WITH reopened AS (
    UPDATE pgbus_workflow_steps s SET status = 'scheduled', finished_at = NULL
    FROM pgbus_workflows w
    WHERE s.workflow_id = w.workflow_id AND w.workflow_class = :workflow_class AND s.status = 'cancelled'
)
UPDATE pgbus_workflows SET finished_at = NULL, latest_step_status = 'scheduled' WHERE workflow_class = :workflow_class
"""
WHOLE_FLOORS = {
    "run_now": (FLOOR_STEPS, UNDO_FLOOR_STEPS),
    "reschedule": (FLOOR_STEPS, UNDO_FLOOR_STEPS),
    "signal": (FLOOR_SIGNAL, UNDO_FLOOR_SIGNAL),
    "skip": (FLOOR_SKIP, UNDO_FLOOR_SKIP),
    "cancel": (FLOOR_CANCEL, UNDO_FLOOR_CANCEL),
}


def seed_case(bench_url: str, case: VerbCase, count: int) -> None:
    engine = db.create_engine(bench_url, db.UNBOUNDED_STATEMENTS, pool_size=1, max_overflow=0)
    try:
        binds = {
            "workflow_class": case.workflow_class,
            "digest": REGISTRY.get("OrderWorkflow").digest,
            "status": case.status,
            "step": case.step,
            "step_status": case.step_status,
            "count": count,
        }
        with engine.begin() as conn:
            conn.execute(sa.text(SEED_RUNS), binds)
            conn.execute(sa.text(SEED_STEPS), binds)
    finally:
        engine.dispose()


UNDO_FLOOR = """
WITH gone AS (
    DELETE FROM pgbus_workflow_events e USING pgbus_workflows w
    WHERE e.workflow_id = w.workflow_id AND w.workflow_class = :workflow_class AND e.actor = 'bench'
)
UPDATE pgbus_workflows SET status = :status WHERE workflow_class = :workflow_class AND status = :to
"""


def floor(engine, case: VerbCase, *, whole: bool = False) -> tuple[int, float]:
    """The floor on the verb's runs, committed (a commit's WAL flush is
    part of the cost), then undone untimed: (runs, seconds). *whole*: the
    floor that also writes the other rows the verb must write
    (WHOLE_FLOORS)."""
    binds = {
        "to": case.to,
        "event": case.event,
        "status": case.status,
        "workflow_class": case.workflow_class,
        "step": case.step,
        "next_step": REGISTRY.get("OrderWorkflow").next_step(case.step).name,
    }
    statement, undo = WHOLE_FLOORS[case.verb] if whole else (FLOOR, None)
    started = time.perf_counter()
    with engine.begin() as conn:
        if whole:  # the verb's chunk keeps latest_* itself, so the floor does
            conn.execute(sa.text(f"SELECT set_config('{workflow_rows.LATEST_BY_WRITER}', 'on', true)"))
        written = conn.execute(sa.text(statement), binds).rowcount
    elapsed = time.perf_counter() - started
    if whole and case.verb in ("signal", "skip"):
        written //= 2  # two events a run
    with engine.begin() as conn:
        if undo:
            conn.execute(sa.text(undo), binds)
        conn.execute(sa.text(UNDO_FLOOR), binds)
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.exec_driver_sql("VACUUM pgbus_workflows")
        conn.exec_driver_sql("VACUUM pgbus_workflow_events")
    return written, elapsed


def bench(bench_url: str, matching: int, total: int, verbs: list[str], preview_runs: int, chunk: int) -> None:
    cases = [case for case in CASES if case.verb in verbs]
    engine = db.create_engine(bench_url, db.UNBOUNDED_STATEMENTS)
    try:
        schema.install(engine)
        started = time.monotonic()
        for case in cases:
            seed_case(bench_url, case, matching)
        background = max(total - matching * len(cases), 0)
        if background:
            bulk_runs.insert(bench_url, background, BACKGROUND)
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.exec_driver_sql("VACUUM ANALYZE")
        print(
            f"seeded {matching} runs for each of {len(cases)} verbs and {background} others "
            f"({matching * len(cases) + background} runs) in {time.monotonic() - started:.0f}s"
        )
        registry = Registry([*REGISTRY, *(Workflow(case.workflow_class, ORDER_WORKFLOW.steps) for case in cases)])

        from pgbus_web.app import create_app

        app = create_app({"database": db.Database(engine), "registry": registry, "run_operations": False})
        client = app.test_client()
        fragment_times(client, 5)
        idle = fragment_times(client, 40)
        print(f"runs fragment idle: p50 {statistics.median(idle) * 1000:.1f} ms, p95 {p95(idle) * 1000:.1f} ms")
        rows = []
        for case in cases:
            run_filters = filters.parse({"workflow_class": case.workflow_class, "status": case.status})
            params = {key: (_later(days=1) if value == "+1d" else value) for key, value in case.params.items()}
            before = fragment_times(client, BEFORE, every=FRAGMENT_EVERY)
            written, floor_seconds = floor(engine, case)
            steps_rate = None
            if case.whole_floor:
                steps_written, steps_seconds = floor(engine, case, whole=True)
                steps_rate = steps_written / steps_seconds
            operation = operation_policy.create(
                engine,
                run_filters,
                case.verb,
                params,
                reason="bench",
                actor="bench",
                expected=None,
                registry=registry,
                thresholds=THRESHOLDS,
            )
            runner = subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    RUNNER,
                    bench_url,
                    str(operation["id"]),
                    ",".join(c.workflow_class for c in cases),
                    str(chunk),
                ],
                stdout=subprocess.PIPE,
                text=True,
            )
            during = fragment_times(
                client, 100_000, stop=lambda runner=runner: runner.poll() is not None, every=FRAGMENT_EVERY
            )
            elapsed = float(runner.communicate()[0].strip())
            done = operation_record.find(engine, operation["id"])
            rate, floor_rate = done["moved"] / elapsed, written / floor_seconds
            rows.append((case.verb, done, rate, floor_rate, p95(during) / p95(before), p95(during), steps_rate))
            with_steps = (
                f"; floor with the verb's other rows {steps_rate:.0f} runs/s: {rate / steps_rate:.2f}x"
                if steps_rate
                else ""
            )
            print(
                f"{case.verb}: {done['status']}, moved {done['moved']} skipped {done['skipped']} refused "
                f"{done['refused']} of {done['total']}: {rate:.0f} runs/s; floor {floor_rate:.0f} runs/s "
                f"({written} runs in {floor_seconds:.2f}s): {rate / floor_rate:.2f}x{with_steps}; runs fragment p95 "
                f"{p95(during) * 1000:.0f} ms during ({len(during)} requests; p50 "
                f"{statistics.median(during) * 1000:.1f} ms, slowest {max(during) * 1000:.0f} ms), "
                f"{p95(during) / p95(before):.2f}x idle just before ({p95(before) * 1000:.0f} ms; p50 "
                f"{statistics.median(before) * 1000:.1f} ms)",
                flush=True,
            )
        print(
            f"\n{matching} matching runs of {matching * len(cases) + background}, chunks of "
            f"{chunk or operation_runner.CHUNK_PATH}; "
            f"fragment idle p95 {p95(idle) * 1000:.0f} ms"
        )
        print(
            f"{'verb':<11} {'runs/s':>7} {'floor':>7} {'ratio':>6} {'whole':>7} {'ratio':>6} {'p95 x':>6}"
            "  targets (>= 0.5x, <= 2x; against the whole floor where there is one)"
        )
        for verb, _done, rate, floor_rate, slowdown, _, steps_rate in rows:
            fair = rate / (steps_rate or floor_rate)
            met = "met" if fair >= 0.5 and slowdown <= 2 else "NOT met"
            steps = f"{steps_rate:>7.0f} {rate / steps_rate:>5.2f}x" if steps_rate else f"{'':>7} {'':>6}"
            ratio = rate / floor_rate
            print(f"{verb:<11} {rate:>7.0f} {floor_rate:>7.0f} {ratio:>5.2f}x {steps} {slowdown:>5.2f}x  {met}")

        if preview_runs:
            with engine.connect() as conn:
                paused = conn.execute(
                    sa.text("SELECT count(*) FROM pgbus_workflows WHERE status = 'paused'")
                ).scalar_one()
            if preview_runs > paused:
                started = time.monotonic()
                bulk_runs.insert(bench_url, preview_runs - paused, bulk_runs.PAUSED_AFTER_FAILURE)
                print(f"seeded {preview_runs - paused} more paused runs in {time.monotonic() - started:.1f}s")
            run_filters = filters.parse({"status": "paused"})
            operation_preview.preview(engine, run_filters, "resume", registry=REGISTRY, thresholds=THRESHOLDS)
            times = []
            for _ in range(5):
                started = time.perf_counter()
                shown = operation_preview.preview(
                    engine, run_filters, "resume", registry=REGISTRY, thresholds=THRESHOLDS
                )
                times.append(time.perf_counter() - started)
            print(
                f"preview of status=paused over {shown.total} runs: median {statistics.median(times) * 1000:.0f} ms,"
                f" slowest {max(times) * 1000:.0f} ms (target < 1 s "
                f"{'met' if max(times) < 1 else 'NOT met'})"
            )
    finally:
        engine.dispose()


# The runs besides the verbs' own: every status, of the classes the verbs' filters leave out.
BACKGROUND = bulk_runs.Shape(
    classes=("RefundWorkflow", "OnboardingWorkflow"),
    subject_types=("Refund", "User"),
    statuses=bulk_runs.MIXED.statuses,
    steps=bulk_runs.MIXED.steps,
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url")
    parser.add_argument("--matching", type=int, default=100_000, help="runs each verb acts on")
    parser.add_argument("--total", type=int, default=1_000_000, help="runs in the database")
    parser.add_argument("--verbs", default=",".join(case.verb for case in CASES))
    parser.add_argument("--preview-runs", type=int, default=0, help="also time the preview over this many")
    parser.add_argument(
        "--chunk",
        type=int,
        default=0,
        help="runs per chunk (the Runner's; 0: its default, CHUNK_PATH for a verb with a chunk path)",
    )
    args = parser.parse_args()
    verbs = [verb.strip() for verb in args.verbs.split(",") if verb.strip()]
    unknown = sorted(set(verbs) - {case.verb for case in CASES})
    if unknown:
        parser.error(f"unknown verbs: {', '.join(unknown)}")

    with (
        scratch.server(args.database_url) as url,
        scratch.scratch_database(url, f"{BENCH_DATABASE}_{uuid.uuid4().hex[:8]}") as bench_url,
    ):
        bench(bench_url, args.matching, args.total, verbs, args.preview_runs, args.chunk)


if __name__ == "__main__":
    main()
