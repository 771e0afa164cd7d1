"""Every verb's chunk path (runtime/chunks/, runtime/chunks/resume.py)
writes exactly what its per-run verb writes, run for run.

Twin runs of every kind an operation meets are seeded with the same
moments: one twin of each goes through the per-run verb, the other
through the chunk path (what the chunk hands back then through the
per-run verb, as the Runner does). Runs, step rows, events and signals
are compared column by column (ids as each run's own ordinals), and the
count tables' changes too. A control shows the comparison fails when any
column differs."""

from __future__ import annotations

import os
import signal as signals_
import subprocess
import sys
from datetime import timedelta

import pytest
import sqlalchemy as sa
from support.operation_support import wait_for_the_dead
from support.waiting import wait_until
from support.web_helpers import step

from pgbus_web.demo.workflows import REGISTRY
from pgbus_web.rules import run_filters as filters
from pgbus_web.rules import states
from pgbus_web.runtime import chunks, errors, operation_policy, operation_record, operation_runner, verbs
from pgbus_web.runtime.clock import utcnow

OPERATION = 77
ACTOR = "dashboard:alice"
REASON = "  incident 12: the gateway is back  "
NOW = utcnow().replace(microsecond=123456)
CREATED = NOW - timedelta(hours=6)
AT = (NOW + timedelta(hours=2)).isoformat()
SIGNAL = {"name": "shipment_confirmed", "payload": {"carrier": "dhl", "parcels": [1, 2]}}
THRESHOLDS = {"threshold": timedelta(minutes=5), "waiting_threshold": timedelta(hours=1)}


def ago(**delta):
    return NOW - timedelta(**delta)


def later(**delta):
    return NOW + timedelta(**delta)


# --- the kinds of runs --------------------------------------------------------


def universe(runs, twin: str) -> dict[str, str]:
    """One run of every kind the verbs meet, by name; every moment fixed, so
    twins differ only in their ids (and subjects)."""

    def make(status, *attempts, **columns):
        columns.setdefault("created_at", CREATED)
        return runs.make(status, *attempts, **columns)

    def paused_failed():
        return make(
            states.PAUSED,
            step("reserve_stock", "completed", finished_at=ago(hours=5)),
            step(
                "capture_payment",
                "failed",
                error_class="TimeoutError",
                error_message="no answer",
                started_at=ago(hours=4),
                finished_at=ago(hours=4),
            ),
            paused_at=ago(hours=4),
        )

    def ready_later():
        return make(states.READY, step("reserve_stock", "scheduled", scheduled_at=later(hours=3)))

    def waiting_shipment(**columns):
        return make(
            states.WAITING,
            step("reserve_stock", "completed", finished_at=ago(hours=5)),
            step("capture_payment", "completed", finished_at=ago(hours=5)),
            step("notify_vendors", "completed", finished_at=ago(hours=4)),
            step(
                "await_shipment",
                "waiting",
                wait_for="shipment_confirmed",
                waiting_since=ago(hours=4),
                timeout_at=later(days=2),
            ),
            **columns,
        )

    def completed(**columns):
        return make(
            states.COMPLETED,
            step("send_receipt", "completed", started_at=ago(hours=2), finished_at=ago(hours=2)),
            finished_at=ago(hours=2),
            **columns,
        )

    subject = ("Order", f"taken-{twin}")
    shared = ("Order", f"shared-{twin}")
    kinds = {
        "paused_failed": paused_failed(),
        "paused_between": make(
            states.PAUSED, step("reserve_stock", "completed", finished_at=ago(hours=5)), paused_at=ago(hours=5)
        ),
        "paused_fresh": make(states.PAUSED, paused_at=ago(hours=5)),
        "paused_pending": make(
            states.PAUSED, step("reserve_stock", "scheduled", scheduled_at=ago(minutes=30)), paused_at=ago(minutes=20)
        ),
        "paused_last_done": make(
            states.PAUSED, step("send_receipt", "completed", finished_at=ago(hours=1)), paused_at=ago(hours=1)
        ),
        "paused_lost_step": make(
            states.PAUSED, step("old_step", "completed", finished_at=ago(hours=1)), paused_at=ago(hours=1)
        ),
        "paused_before_wait": make(
            states.PAUSED,
            step("notify_vendors", "failed", error_class="IOError", finished_at=ago(hours=1)),
            paused_at=ago(hours=1),
        ),
        "onboarding_paused": make(
            states.PAUSED,
            step("create_account", "completed", finished_at=ago(hours=3)),
            step("send_welcome_email", "failed", error_class="SMTPError", finished_at=ago(hours=2)),
            workflow_class="OnboardingWorkflow",
            subject=False,
            paused_at=ago(hours=2),
        ),
        "ghost_paused": make(
            states.PAUSED,
            step("charge", "failed", finished_at=ago(hours=1)),
            workflow_class="GhostWorkflow",
            subject=False,
            paused_at=ago(hours=1),
        ),
        "ready_later": ready_later(),
        "ready_last": make(states.READY, step("send_receipt", "scheduled", scheduled_at=ago(minutes=1))),
        "ready_holding": make(
            states.READY,
            step("await_shipment", "scheduled", wait_for="shipment_confirmed", scheduled_at=ago(minutes=2)),
            signals_=[{"name": "shipment_confirmed", "payload": {"n": 1}, "now": ago(minutes=3), "claimed_by": 0}],
        ),
        "ready_not_scheduled": make(states.READY, step("reserve_stock", "completed", finished_at=ago(minutes=4))),
        "ghost_ready": make(
            states.READY,
            step("charge", "scheduled", scheduled_at=later(minutes=5)),
            workflow_class="GhostWorkflow",
            subject=False,
        ),
        "blocker": make(states.READY, step("reserve_stock", "scheduled", scheduled_at=later(hours=1)), subject=subject),
        "running": make(states.RUNNING, step("reserve_stock", "in_progress", started_at=ago(seconds=20))),
        "waiting_shipment": waiting_shipment(),
        "waiting_batch": make(
            states.WAITING,
            step("notify_vendors", "waiting", waiting_since=ago(hours=1)),
            batch={"batch_id": f"batch-{twin}", "total_jobs": 3},
        ),
        "waiting_pending_signal": waiting_shipment(
            signals_=[{"name": "shipment_confirmed", "payload": {"old": 1}, "now": ago(hours=1)}]
        ),
        "completed": completed(),
        "failed": make(
            states.FAILED,
            step("issue_refund", "failed", error_class="ValueError", finished_at=ago(hours=1)),
            workflow_class="RefundWorkflow",
            subject=False,
            finished_at=ago(hours=1),
        ),
        "cancelled": make(
            states.CANCELLED, step("reserve_stock", "cancelled", finished_at=ago(hours=1)), finished_at=ago(hours=1)
        ),
        "completed_subject_taken": completed(subject=subject),
        "same_subject_1": completed(subject=shared),
        "same_subject_2": completed(subject=shared),
        "ghost_completed": make(
            states.COMPLETED,
            step("charge", "completed", finished_at=ago(hours=1)),
            workflow_class="GhostWorkflow",
            subject=False,
            finished_at=ago(hours=1),
        ),
        # The same shapes again: held by another transaction during the
        # chunk, or already acted on by this operation before it.
        "held_paused": paused_failed(),
        "held_ready": ready_later(),
        "held_completed": completed(),
        "already_paused": paused_failed(),
        "already_ready": ready_later(),
        "already_waiting": waiting_shipment(),
        "already_completed": completed(),
    }
    with runs.engine.begin() as conn:  # a seeded claim's moment is the server's: fixed here
        conn.execute(
            sa.text(
                "UPDATE pgbus_workflow_signals SET claimed_at = :at WHERE claimed_at IS NOT NULL "
                "AND workflow_id = ANY(:ids)"
            ),
            {"at": ago(minutes=2), "ids": list(kinds.values())},
        )
    return kinds


SHAPE = {
    "held_paused": "paused_failed",
    "already_paused": "paused_failed",
    "held_ready": "ready_later",
    "already_ready": "ready_later",
    "held_completed": "completed",
    "already_completed": "completed",
    "already_waiting": "waiting_shipment",
}
HELD = ("held_paused", "held_ready", "held_completed")

# What each verb does to each kind it fits: (the per-run verb's outcome,
# who decides in the chunk path: "chunk" (moved there), "skipped" there, or
# "rest" (handed back to the per-run verb)). A kind missing is one whose
# status the verb does not fit: skipped. Held runs are handed back; runs
# already acted on count as moved. Read from runtime/verbs.py by hand.
M, C = "moved", "chunk"
RESUME = {
    "paused_failed": (M, C),
    "paused_between": (M, C),
    "paused_fresh": (M, C),
    "paused_pending": (M, "rest"),  # the pending step goes on where it was
    "paused_last_done": (M, "rest"),  # nothing left: the run finishes
    "paused_lost_step": ("refused", "rest"),
    "paused_before_wait": (M, C),
    "onboarding_paused": (M, C),
    "ghost_paused": ("refused", "rest"),
}
ONGOING = (
    "paused_failed",
    "paused_between",
    "paused_fresh",
    "paused_pending",
    "paused_last_done",
    "paused_lost_step",
    "paused_before_wait",
    "onboarding_paused",
    "ghost_paused",
    "ready_later",
    "ready_last",
    "ready_holding",
    "ready_not_scheduled",
    "ghost_ready",
    "blocker",
    "running",
    "waiting_shipment",
    "waiting_batch",
    "waiting_pending_signal",
)
DUE = {
    "ready_later": (M, C),
    "ready_last": (M, C),
    "ready_holding": (M, C),
    "ready_not_scheduled": ("skipped", "skipped"),  # its latest step is not scheduled
    "ghost_ready": (M, C),
    "blocker": (M, C),
}
EXPECTED = {
    "resume": RESUME,
    "resume_at": RESUME,
    "cancel": {name: (M, C) for name in ONGOING},
    "signal": {name: (M, C) for name in ONGOING},
    "pause": {name: (M, C) for name in ONGOING if not name.startswith(("paused", "onboarding", "ghost_paused"))},
    "run_now": DUE,
    "reschedule": DUE,
    "skip": {
        "paused_failed": (M, C),
        "paused_between": (M, C),
        "paused_fresh": (M, C),
        "paused_pending": (M, C),
        "paused_last_done": ("skipped", "skipped"),  # its last step already ended
        "paused_lost_step": ("refused", "rest"),
        "paused_before_wait": (M, "rest"),  # the next step waits for a signal
        "onboarding_paused": (M, C),  # the next step has a delay
        "ghost_paused": ("refused", "rest"),
        "ready_later": (M, C),
        "ready_last": (M, C),  # the run completes
        "ready_holding": (M, C),  # the signal it held is used up
        "ready_not_scheduled": (M, C),
        "ghost_ready": ("refused", "rest"),
        "blocker": (M, C),
        "waiting_shipment": (M, C),
        "waiting_batch": (M, "rest"),
        "waiting_pending_signal": (M, C),
    },
    "rerun": {
        "completed": (M, C),
        "failed": (M, C),
        "cancelled": (M, C),
        "completed_subject_taken": ("refused", "rest"),  # another ongoing run holds its subject
        "same_subject_1": (M, "rest"),
        "same_subject_2": ("refused", "rest"),  # the first of two moves
        "ghost_completed": ("refused", "rest"),
    },
}
PARAMS = {"resume_at": {"at": AT}, "reschedule": {"at": AT}, "signal": SIGNAL}


def expected_for(verb: str, name: str) -> tuple[str, str]:
    table = EXPECTED[verb]
    shape = SHAPE.get(name, name)
    outcome, path = table.get(shape, ("skipped", "skipped"))
    if name.startswith("held_"):  # whatever its status: the chunk cannot read it
        return (outcome, "rest")
    if shape not in table:
        return (outcome, path)
    if name.startswith("already_"):
        return (M, "already")
    return outcome, path


# --- the two paths ---------------------------------------------------------------


def operation(verb: str, params=None) -> dict:
    return {
        "id": OPERATION,
        "verb": verb,
        "params": params if params is not None else PARAMS.get(verb, {}),
        "actor": ACTOR,
        "reason": REASON,
    }


def per_run(engine, op, workflow_id) -> str:
    """The per-run verb as the Runner calls it (operation_runner._act, Runner._one), at NOW."""
    params = op["params"] or {}
    try:
        if op["verb"] == "signal":
            verbs.signal(
                engine,
                workflow_id,
                params.get("name"),
                params.get("payload"),
                operation_runner.signal_key(op["id"], workflow_id),
                actor=op["actor"],
                operation_id=op["id"],
                reason=op["reason"],
                now=NOW,
            )
        else:
            verbs.perform(
                engine,
                op["verb"],
                workflow_id,
                actor=op["actor"],
                reason=op["reason"],
                at=params.get("at"),
                from_step=params.get("from_step"),
                registry=REGISTRY,
                operation_id=op["id"],
                now=NOW,
            )
    except errors.AlreadyActed:
        return "moved"
    except (errors.WrongStatus, errors.RunNotFound):
        return "skipped"
    except errors.WorkflowError:
        return "refused"
    return "moved"


def chunk(engine, op, workflow_ids):
    return chunks.act(
        engine,
        op,
        workflow_ids,
        registry=REGISTRY,
        now=NOW,
        key_of=lambda workflow_id: operation_runner.signal_key(op["id"], workflow_id),
    )


def _rows(conn, table: str, workflow_id: str):
    return [
        dict(row)
        for row in conn.execute(
            sa.text(f"SELECT * FROM {table} WHERE workflow_id = :w ORDER BY id"), {"w": workflow_id}
        ).mappings()
    ]


def trail(conn, workflow_id: str) -> dict:
    """Every column of the run, its step rows, events and signals; ids as
    the run's own ordinals, its workflow_id as W. Left out: the run's id,
    subject_id (twins have their own) and updated_at (the server's clock:
    only whether it changed)."""
    run = _rows(conn, "pgbus_workflows", workflow_id)[0]
    step_rows = _rows(conn, "pgbus_workflow_steps", workflow_id)
    signal_rows = _rows(conn, "pgbus_workflow_signals", workflow_id)
    step_no = {row["id"]: f"step{n}" for n, row in enumerate(step_rows)}
    signal_no = {row["id"]: f"signal{n}" for n, row in enumerate(signal_rows)}

    def plain(value):
        if isinstance(value, str):
            return value.replace(workflow_id, "W")
        if isinstance(value, dict):
            out = {key: plain(item) for key, item in value.items()}
            if "signal_id" in out:
                out["signal_id"] = signal_no.get(value["signal_id"], "unknown")
            if "cancelled_steps" in out:
                out["cancelled_steps"] = [step_no.get(i, "unknown") for i in value["cancelled_steps"]]
            return out
        if isinstance(value, list):
            return [plain(item) for item in value]
        return value

    run.pop("id")
    run.pop("subject_id")
    run["updated_at"] = "changed" if run["updated_at"] != CREATED else "seeded"
    run["latest_step_id"] = step_no.get(run["latest_step_id"], run["latest_step_id"])
    for row in step_rows:
        row["id"] = step_no[row["id"]]
        row["batch_id"] = row["batch_id"] is not None
    for row in signal_rows:
        row["id"] = signal_no[row["id"]]
        row["claimed_by_step_id"] = step_no.get(row["claimed_by_step_id"], row["claimed_by_step_id"])
    event_rows = _rows(conn, "pgbus_workflow_events", workflow_id)
    for row in event_rows:
        row.pop("id")
        row["step_id"] = step_no.get(row["step_id"], row["step_id"])
    return {"run": plain(run), "steps": plain(step_rows), "events": plain(event_rows), "signals": plain(signal_rows)}


def trail_of(engine, workflow_id):
    with engine.connect() as conn:
        return trail(conn, workflow_id)


def counts(engine) -> dict:
    """Runs by (class, status) as the count tables hold them (totals + deltas)."""
    with engine.connect() as conn:
        rows = conn.execute(
            sa.text(
                "SELECT workflow_class, status, sum(runs) FROM (SELECT workflow_class, status, runs FROM "
                "pgbus_workflow_counts UNION ALL SELECT workflow_class, "
                "status, runs FROM pgbus_workflow_count_deltas) c "
                "GROUP BY 1, 2"
            )
        ).all()
    return {(klass, status): int(runs) for klass, status, runs in rows if runs}


def change(after: dict, before: dict) -> dict:
    keys = set(after) | set(before)
    return {key: after.get(key, 0) - before.get(key, 0) for key in keys if after.get(key, 0) != before.get(key, 0)}


def both_paths(engine, runs, op):
    """Seed the twins, act on one of each through the per-run verb and on
    the other through the chunk path; what each did by kind."""
    one_by_one, chunked = universe(runs, "a"), universe(runs, "b")
    for twin in (one_by_one, chunked):
        for name in twin:
            if name.startswith("already_"):
                per_run(engine, op, twin[name])
    before = {name: trail_of(engine, workflow_id) for name, workflow_id in chunked.items()}
    counted = [counts(engine)]
    outcomes = {name: per_run(engine, op, workflow_id) for name, workflow_id in one_by_one.items()}
    counted.append(counts(engine))
    names = {workflow_id: name for name, workflow_id in chunked.items()}
    with engine.connect() as holder, holder.begin():
        holder.execute(
            sa.text("SELECT 1 FROM pgbus_workflows WHERE workflow_id = ANY(:w) FOR UPDATE"),
            {"w": [chunked[name] for name in HELD]},
        )
        done = chunk(engine, op, list(chunked.values()))
    paths = {names[w]: C for w in done.moved} | {names[w]: "skipped" for w in done.skipped}
    paths |= {names[w]: "already" for w in done.already} | {names[w]: "rest" for w in done.rest}
    got = {names[w]: M for w in done.moved + done.already} | {names[w]: "skipped" for w in done.skipped}
    got |= {names[w]: per_run(engine, op, w) for w in done.rest}
    counted.append(counts(engine))
    return one_by_one, chunked, before, outcomes, got, paths, counted


VERBS = sorted(EXPECTED)


@pytest.mark.parametrize("verb", VERBS)
def test_the_chunk_path_writes_what_the_verb_writes_for_every_kind_of_run(engine, runs, verb):
    op = operation(verb)
    one_by_one, chunked, before, outcomes, got, paths, counted = both_paths(engine, runs, op)
    expected = {name: expected_for(verb, name) for name in chunked}
    assert paths == {name: path for name, (_, path) in expected.items()}
    assert outcomes == {name: outcome for name, (outcome, _) in expected.items()}
    assert got == outcomes
    for name in chunked:
        assert trail_of(engine, chunked[name]) == trail_of(engine, one_by_one[name]), name
    # The count tables moved the same way on both sides.
    assert change(counted[2], counted[1]) == change(counted[1], counted[0])
    # Control: the chunk path did act on the runs it says it moved, and
    # every verb's own event carries the operation's id.
    moved_here = [name for name, path in paths.items() if path == C]
    assert moved_here
    for name in moved_here:
        now = trail_of(engine, chunked[name])
        assert now != before[name], name
        own = [
            event
            for event in now["events"][len(before[name]["events"]) :]
            if event["details"].get("operation_id") == OPERATION
        ]
        assert own and all(e["actor"] == ACTOR for e in own), name
        assert own[0]["reason"] == REASON.strip(), name


def test_rerun_from_a_step_and_from_a_waiting_step(engine, runs):
    op = operation("rerun", {"from_step": "capture_payment"})
    one_by_one, chunked, _, outcomes, got, paths, _ = both_paths(engine, runs, op)
    assert got == outcomes
    assert paths["completed"] == C
    for name in chunked:
        assert trail_of(engine, chunked[name]) == trail_of(engine, one_by_one[name]), name
    # A step that waits for a signal: flow.schedule's signal rules, per run.
    waits = operation("rerun", {"from_step": "await_shipment"})
    a, b = universe(runs, "c")["failed"], universe(runs, "d")["completed"]
    done = chunk(engine, waits, [b])
    assert done.rest == [b] and per_run(engine, waits, b) == M and per_run(engine, waits, a) == "refused"


# --- the comparison can fail -------------------------------------------------------------

MUTATIONS = [
    "UPDATE pgbus_workflows SET status = 'paused' WHERE workflow_id = :w",
    "UPDATE pgbus_workflows SET current_step = 'x' WHERE workflow_id = :w",
    "UPDATE pgbus_workflows SET paused_at = :t WHERE workflow_id = :w",
    "UPDATE pgbus_workflows SET finished_at = :t WHERE workflow_id = :w",
    "UPDATE pgbus_workflows SET latest_step_status = 'failed' WHERE workflow_id = :w",
    "UPDATE pgbus_workflows SET latest_scheduled_at = :t WHERE workflow_id = :w",
    "UPDATE pgbus_workflows SET latest_step_id = NULL WHERE workflow_id = :w",
    "UPDATE pgbus_workflows SET updated_at = :created WHERE workflow_id = :w",
    "UPDATE pgbus_workflow_steps SET status = 'completed' WHERE workflow_id = :w AND status = 'scheduled'",
    "UPDATE pgbus_workflow_steps SET attempt = attempt + 1 WHERE workflow_id = :w",
    "UPDATE pgbus_workflow_steps SET scheduled_at = :t WHERE workflow_id = :w AND scheduled_at IS NOT NULL",
    "UPDATE pgbus_workflow_steps SET updated_at = :t WHERE workflow_id = :w",
    "UPDATE pgbus_workflow_steps SET created_at = :t WHERE workflow_id = :w",
    "UPDATE pgbus_workflow_steps SET wait_for = NULL WHERE workflow_id = :w",
    "UPDATE pgbus_workflow_steps SET finished_at = :t WHERE workflow_id = :w",
    "UPDATE pgbus_workflow_events SET actor = 'x' WHERE workflow_id = :w",
    "UPDATE pgbus_workflow_events SET reason = 'x' WHERE workflow_id = :w",
    "UPDATE pgbus_workflow_events SET details = details || '{\"operation_id\": 1}' WHERE workflow_id = :w",
    "UPDATE pgbus_workflow_events SET details = details - 'signal_id' WHERE workflow_id = :w",
    "UPDATE pgbus_workflow_events SET step_id = NULL WHERE workflow_id = :w",
    "UPDATE pgbus_workflow_events SET created_at = :t WHERE workflow_id = :w",
    "UPDATE pgbus_workflow_events SET event = 'finished' WHERE workflow_id = :w AND event = 'signal_claimed'",
    "UPDATE pgbus_workflow_signals SET status = 'consumed' WHERE workflow_id = :w",
    "UPDATE pgbus_workflow_signals SET claimed_at = :t WHERE workflow_id = :w",
    "UPDATE pgbus_workflow_signals SET payload = '{}' WHERE workflow_id = :w",
    "UPDATE pgbus_workflow_signals SET idempotency_key = 'x' WHERE workflow_id = :w",
    "UPDATE pgbus_workflow_signals SET claimed_by_step_id = NULL WHERE workflow_id = :w",
    "DELETE FROM pgbus_workflow_events WHERE id = (SELECT max(id) FROM pgbus_workflow_events WHERE workflow_id = :w)",
]


def test_the_comparison_fails_when_any_column_differs(engine, runs):
    op = operation("signal")
    a, b = universe(runs, "a")["waiting_shipment"], universe(runs, "b")["waiting_shipment"]
    per_run(engine, op, a)
    assert chunk(engine, op, [b]).moved == [b]
    with engine.connect() as conn:
        assert trail(conn, a) == trail(conn, b)
        conn.rollback()
        for mutation in MUTATIONS:
            with conn.begin() as transaction:
                conn.execute(sa.text("SET LOCAL session_replication_role = replica"))  # events are append-only
                changed = conn.execute(sa.text(mutation), {"w": b, "t": later(minutes=1), "created": CREATED})
                assert changed.rowcount >= 1, mutation
                assert trail(conn, a) != trail(conn, b), mutation
                transaction.rollback()
        assert trail(conn, a) == trail(conn, b)


# --- through the Runner ---------------------------------------------------------------------


@pytest.mark.parametrize("verb", ["cancel", "skip", "rerun", "signal", "run_now"])
@pytest.mark.parametrize("chunk_path", [True, False])
def test_an_operation_counts_the_same_on_both_paths(engine, runs, monkeypatch, verb, chunk_path):
    if not chunk_path:
        monkeypatch.setattr(chunks, "VERBS", ())
    kinds = universe(runs, "a")
    params = PARAMS.get(verb)
    created = operation_policy.create(
        engine,
        filters.parse({}),
        verb,
        params,
        reason=REASON,
        actor=ACTOR,
        expected=None,
        registry=REGISTRY,
        thresholds=THRESHOLDS,
    )
    runner = operation_runner.Runner(engine, REGISTRY, chunk=8)
    while runner.step() is not None:
        pass
    done = operation_record.find(engine, created["id"])
    tally = {"moved": 0, "skipped": 0, "refused": 0}
    for name in kinds:
        tally[expected_for(verb, SHAPE.get(name, name))[0]] += 1
    assert (done["status"], done["moved"], done["skipped"], done["refused"]) == (
        "done",
        tally["moved"],
        tally["skipped"],
        tally["refused"],
    )
    assert tally["moved"] > 0


# The child waits half a second before each progress write: on the chunk
# path inside the chunk's one transaction, before its commit (the kill
# lands there: the taker must find nothing of that chunk done); on the
# per-run path after the runs committed (the taker must find those runs
# acted on). The parent, polling on a busy machine, never sees the child
# finish every chunk before it kills it.
CHILD = """
import sys, time
from pgbus_web import db
from pgbus_web.demo.workflows import REGISTRY
from pgbus_web.models import operation_rows
from pgbus_web.runtime import chunks, operation_runner
if sys.argv[2] == "per-run":
    chunks.VERBS = ()
written = operation_rows.progress
def progress(*args, **kwargs):
    time.sleep(0.5)  # the behaviour: each chunk slowed, so the kill lands mid-operation
    return written(*args, **kwargs)
operation_rows.progress = progress
engine = db.create_engine(sys.argv[1])
runner = operation_runner.Runner(engine, REGISTRY, chunk=50)
while runner.step() is not None:
    pass
"""


@pytest.mark.scale
@pytest.mark.parametrize("verb, event, path", [("skip", "step_skipped", "chunk"), ("cancel", "cancelled", "per-run")])
def test_kill_minus_nine_mid_operation_then_takeover_acts_on_each_run_once(engine, runs, verb, event, path):
    # skip takes the chunk path (the kill lands inside a chunk's one
    # transaction, its progress included); cancel here goes run by run. The
    # taker's chunks do not line up with the dead process's.
    paused = [universe_one(runs) for _ in range(300)]
    created = operation_policy.create(
        engine,
        filters.parse({"status": "paused"}),
        verb,
        None,
        reason="r",
        actor="a",
        expected=300,
        registry=REGISTRY,
        thresholds=THRESHOLDS,
    )
    url = engine.url.render_as_string(hide_password=False)
    child = subprocess.Popen([sys.executable, "-c", CHILD, url, path])
    try:
        wait_until(
            lambda: acted_by(engine, event, created["id"]) >= 75,
            timeout=120,
            every=0.005,
            what="the child inside its second chunk",
        )
    finally:
        os.kill(child.pid, signals_.SIGKILL)
        child.wait(10)
    wait_for_the_dead(engine, created["id"])
    assert operation_record.find(engine, created["id"])["status"] == "running"
    assert 75 <= acted_by(engine, event, created["id"]) < 300
    taken_over = utcnow() + timedelta(minutes=5)
    runner = operation_runner.Runner(engine, REGISTRY, chunk=7, clock=lambda: taken_over)
    while runner.step() is not None:
        pass
    done = operation_record.find(engine, created["id"])
    with engine.connect() as conn:
        per_run_events = conn.execute(
            sa.text("SELECT workflow_id, count(*) FROM pgbus_workflow_events WHERE event = :e GROUP BY workflow_id"),
            {"e": event},
        ).all()
    assert sorted(w for w, _ in per_run_events) == sorted(paused) and {n for _, n in per_run_events} == {1}
    assert (done["status"], done["moved"], done["skipped"], done["refused"]) == ("done", 300, 0, 0)


def universe_one(runs):
    return runs.make(
        states.PAUSED,
        step("reserve_stock", "completed", finished_at=ago(hours=5)),
        step("capture_payment", "failed", finished_at=ago(hours=4)),
        paused_at=ago(hours=4),
    )


def acted_by(engine, event, operation_id) -> int:
    with engine.connect() as conn:
        return conn.execute(
            sa.text("SELECT count(*) FROM pgbus_workflow_events WHERE event = :e AND details ->> 'operation_id' = :o"),
            {"e": event, "o": str(operation_id)},
        ).scalar_one()
