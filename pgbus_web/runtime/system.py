"""System transitions: starting a run, and what the worker and its sweep
record (actor ``system``), each in its own short transaction under the
run's row lock. A step's callable runs between two transactions, holding
no lock: ``take_step`` marks it started, ``finish_step`` records how it
ended, unless the run moved on meanwhile (cancelled, or the sweep called
the step stalled): then the outcome is recorded as
``late_completion_ignored`` and nothing else changes.
"""

from __future__ import annotations

import json
import traceback
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.engine import Connection, Engine

from ..models import batches, signals, steps, workflow_rows
from ..models.text import truncate
from ..models.values import RawJson, json_kind, json_problem
from ..rules import states
from . import flow
from .clock import utcnow
from .definitions import FanOut, ReceivedSignal, Registry, Step, StepContext, Workflow
from .errors import ClassNotLoaded

SYSTEM = states.SYSTEM_ACTOR

# Caps on what a failure stores: the message as raised, and the end of the
# traceback (where the error happened) when it is long.
ERROR_MESSAGE_LIMIT = 2_000
BACKTRACE_LIMIT = 8_000

# The error class stored when a step's name is no longer in its definition.
STEP_NOT_DEFINED_ERROR = "pgbus_web.runtime.errors.UnknownStep"


def error_class_name(exc: BaseException) -> str:
    """``TimeoutError`` for builtins, ``smtplib.SMTPServerDisconnected`` otherwise."""
    kind = type(exc)
    if kind.__module__ == "builtins":
        return kind.__qualname__
    return f"{kind.__module__}.{kind.__qualname__}"


def backtrace(exc: BaseException) -> str:
    text = "".join(traceback.format_exception(exc))
    if len(text) <= BACKTRACE_LIMIT:
        return text
    return "…" + text[-(BACKTRACE_LIMIT - 1) :]


# --- start -------------------------------------------------------------------


def start(
    engine: Engine,
    definition: Workflow | str,
    arguments: Mapping[str, Any] | None = None,
    *,
    registry: Registry | None = None,
    subject_type: str | None = None,
    subject_id: str | int | None = None,
    idempotency_key: str | None = None,
    workflow_id: str | None = None,
    actor: str | None = None,
    now: datetime | None = None,
) -> dict[str, Any]:
    """Start a run of *definition* (or of the class registered under that
    name): the run row and its first step, in one transaction. With an
    idempotency key already used for this class, nothing is inserted and
    the existing run comes back. A second ongoing run for the same subject
    raises models.workflow_rows.SubjectAlreadyOngoing."""
    if isinstance(definition, str):
        found = registry.get(definition) if registry is not None else None
        if found is None:
            raise ClassNotLoaded(workflow_id or "-", "start", definition)
        definition = found
    now = now or utcnow()
    workflow_id = workflow_id or str(uuid.uuid4())
    first = definition.first_step
    with engine.begin() as conn:
        inserted = workflow_rows.insert_run(
            conn,
            {
                "workflow_id": workflow_id,
                "workflow_class": definition.name,
                "status": states.READY,
                "current_step": first.name,
                "arguments": json.loads(json.dumps(dict(arguments or {}))),
                "subject_type": subject_type,
                "subject_id": None if subject_id is None else str(subject_id),
                "idempotency_key": idempotency_key,
                "definition_digest": definition.digest,
                "started_at": now,
                "created_at": now,
                "updated_at": now,
            },
        )
        if not inserted:
            # Refused only for its key: the run that holds it.
            return flow.held(workflow_rows.find_by_idempotency_key(conn, definition.name, flow.held(idempotency_key)))
        run = flow.held(workflow_rows.find(conn, workflow_id))
        flow.record(
            conn,
            run,
            "started",
            actor=actor or states.APP_ACTOR,
            now=now,
            details={"definition_digest": definition.digest},
        )
        _, status = flow.schedule(conn, run, first, actor=actor or states.APP_ACTOR, now=now)
        if status != states.READY:
            _move(conn, run, states.READY, status)
        return flow.held(workflow_rows.find(conn, workflow_id))


def _move(conn: Connection, run: Mapping[str, Any], from_, to: str, **attrs: Any) -> None:
    """A system transition under the lock we hold: it must move the row."""
    if not flow.move(conn, run, from_, to, **attrs):
        raise RuntimeError(f"run {run['workflow_id']} changed under its row lock")


# --- after a step ended ------------------------------------------------------


def _advance(
    conn: Connection,
    run: Mapping[str, Any],
    definition: Workflow,
    step_name: str,
    *,
    now: datetime,
    start: bool = False,
) -> tuple[dict[str, Any], str] | None:
    """The step ended on a run that goes on: schedule the next step (its
    row and the run's new status come back), or complete the run after the
    last one. *start*: see flow.schedule."""
    try:
        following = definition.next_step(step_name)
    except KeyError:
        _move(conn, run, run["status"], states.PAUSED, paused_at=now)
        flow.record(
            conn,
            run,
            "paused",
            actor=SYSTEM,
            now=now,
            details={"error_class": STEP_NOT_DEFINED_ERROR, "step": step_name},
        )
        return None
    if following is None:
        _move(conn, run, run["status"], states.COMPLETED, finished_at=now)
        flow.record(conn, run, "finished", actor=SYSTEM, now=now, details={"status": states.COMPLETED})
        return None
    row, status = flow.schedule(conn, run, following, actor=SYSTEM, now=now, start=start)
    _move(conn, run, run["status"], status, current_step=following.name)
    return row, status


def _record_failure(
    conn: Connection,
    run: Mapping[str, Any],
    row: Mapping[str, Any],
    step: Step | None,
    *,
    error_class: str | None,
    message: str,
    trace: str | None,
    now: datetime,
) -> None:
    """The attempt failed: reattempt after the backoff while the budget
    lasts, else pause the run (or fail it, when the step says so)."""
    failed = steps.update_step(
        conn,
        row["id"],
        from_=(states.STEP_IN_PROGRESS, states.STEP_SCHEDULED),
        now=now,
        status=states.STEP_FAILED,
        finished_at=now,
        error_class=error_class,
        error_message=truncate(message, ERROR_MESSAGE_LIMIT),
        error_backtrace=trace,
    )
    flow.record(
        conn,
        run,
        "step_failed",
        actor=SYSTEM,
        now=now,
        step=failed,
        details={"error_class": error_class, "error_message": message},
    )
    flow.flush(conn)  # the streak reads the trail back
    streak = steps.failure_streak(conn, flow.held(failed))
    if step is not None and streak < step.max_attempts:
        retry_at = now + step.backoff.delay(streak)
        flow.schedule(conn, run, step, actor=SYSTEM, now=now, due_at=retry_at, event="step_reattempted")
        if run["status"] == states.RUNNING:
            _move(conn, run, states.RUNNING, states.READY)
        return
    if step is not None and step.on_failure == "fail":
        _move(conn, run, (states.RUNNING, states.PAUSED), states.FAILED, finished_at=now)
        flow.record(
            conn,
            run,
            "finished",
            actor=SYSTEM,
            now=now,
            step=failed,
            details={"status": states.FAILED, "error_class": error_class},
        )
        return
    if run["status"] == states.RUNNING:
        _move(conn, run, states.RUNNING, states.PAUSED, paused_at=now)
        flow.record(
            conn,
            run,
            "paused",
            actor=SYSTEM,
            now=now,
            step=failed,
            details={"error_class": error_class, "attempts": streak},
        )


# --- the worker's two transactions around a step -----------------------------


@dataclass(frozen=True)
class Taken:
    """A step the worker marked started and must now run."""

    run: dict[str, Any]
    step: dict[str, Any]
    definition: Workflow
    spec: Step
    signal: ReceivedSignal | None

    def context(self, now: datetime) -> StepContext:
        return StepContext(
            workflow_id=self.run["workflow_id"],
            workflow_class=self.run["workflow_class"],
            step_name=self.step["step_name"],
            attempt=self.step["attempt"],
            arguments=_arguments(self.run),
            signal=self.signal,
            now=now,
            subject_type=self.run.get("subject_type"),
            subject_id=self.run.get("subject_id"),
        )


def _arguments(run: Mapping[str, Any]) -> dict[str, Any]:
    """The run's arguments for its steps. Another writer may have stored
    something other than a JSON object (models.values); the step then fails
    with this error, the run pauses on it and the page shows the value,
    rather than the step running on arguments it was not given."""
    arguments = run.get("arguments")
    if not isinstance(arguments, dict):
        kind = "unreadable JSON" if isinstance(arguments, RawJson) else f"JSON {json_kind(arguments)}"
        raise TypeError(f"the run's arguments are stored as {kind}, not as a JSON object")
    return dict(arguments)


# take_step's answer when it handled a due step without running it (it went
# back to a wait, or its step is gone from the definition): look again.
HANDLED = "handled"


def take_step(engine: Engine, registry: Registry, *, now: datetime, worker_id: int | None = None) -> Taken | str | None:
    """Claim the oldest due step of a ready run (SKIP LOCKED: runs another
    worker holds are passed over) and mark it started, by *worker_id* (its
    row in pgbus_web_workers, recorded on the step). None when nothing is due."""
    with engine.begin() as conn:
        claimed = steps.claim_next(
            conn, now=now, classes=registry.names, run_columns=workflow_rows.SELECT_COLUMNS, worker_id=worker_id
        )
        if claimed is None:
            return None
        step = {"id": claimed.pop("step_id"), "step_name": claimed.pop("claimed_step_name")}
        claimed.pop("latest_by_writer")
        with flow.deferred(conn, claimed["workflow_id"]):
            # Claimed among the registry's classes: its definition is there.
            return _begin(conn, claimed, step, flow.held(registry.get(claimed["workflow_class"])), now=now)


def _begin(
    conn: Connection, run: dict[str, Any], row: dict[str, Any], definition: Workflow, *, now: datetime
) -> Taken | str:
    """Mark a due step of a ready run started (the run's lock held). A
    step that must wait first (its signal is not there, or its batch is
    open) goes back to its wait instead: HANDLED. *row* needs only id and
    step_name: it may have been read before the lock, so it is read again
    (or, in the common case, updated with a guard) under it."""
    spec = definition.get_step(row["step_name"])
    if spec is not None and not spec.wait_for:
        started = steps.start(conn, row["id"], now=now)
        if started is not None:
            return _started(conn, run, started, definition, spec, None, now=now)
    found = steps.find(conn, row["id"])
    if found is None or found["status"] != states.STEP_SCHEDULED:
        return HANDLED
    row = found
    if spec is None:
        _move(conn, run, states.READY, states.RUNNING)
        flow.flush(conn)
        running = flow.held(workflow_rows.find(conn, run["workflow_id"]))
        _record_failure(
            conn,
            running,
            row,
            None,
            error_class=STEP_NOT_DEFINED_ERROR,
            message=f"{definition.name} no longer declares step {row['step_name']!r}",
            trace=None,
            now=now,
        )
        return HANDLED
    # Only a wait_for step ever claims a signal.
    held = signals.held_by_step(conn, run["workflow_id"], row["step_name"]) if spec.wait_for else None
    if row.get("batch_id") or (spec.wait_for and held is None):
        _, status = flow.rewait(conn, run, row, spec, actor=SYSTEM, now=now)
        if status == states.WAITING:
            _move(conn, run, states.READY, states.WAITING)
            return HANDLED
        held = signals.held_by_step(conn, run["workflow_id"], row["step_name"])
    started = steps.update_step(
        conn, row["id"], from_=states.STEP_SCHEDULED, now=now, status=states.STEP_IN_PROGRESS, started_at=now
    )
    return _started(conn, run, flow.held(started), definition, spec, held, now=now)


def _started(
    conn: Connection,
    run: dict[str, Any],
    started: dict[str, Any],
    definition: Workflow,
    spec: Step,
    held: Mapping[str, Any] | None,
    *,
    now: datetime,
) -> Taken:
    _move(conn, run, states.READY, states.RUNNING)
    flow.record(conn, run, "step_started", actor=SYSTEM, now=now, step=started)
    signal = None
    if held is not None:
        signal = ReceivedSignal(
            id=held["id"], name=held["name"], payload=held["payload"], idempotency_key=held["idempotency_key"]
        )
    return Taken(run=run, step=started, definition=definition, spec=spec, signal=signal)


@dataclass(frozen=True)
class Outcome:
    """How a step's callable ended."""

    ok: bool
    result: Any = None
    error_class: str | None = None
    error_message: str | None = None
    backtrace: str | None = None


def execute(taken: Taken, *, now: datetime) -> Outcome:
    """Run the step's callable; any exception is the step's failure."""
    try:
        result = taken.spec.func(taken.context(now))
        if taken.spec.fan_out and not isinstance(result, FanOut):
            raise TypeError(f"fan_out step {taken.spec.name} returned {type(result).__name__}, not FanOut")
        return Outcome(ok=True, result=result)
    except Exception as exc:  # noqa: BLE001  (a step's failure, whatever it is, is recorded)
        return Outcome(ok=False, error_class=error_class_name(exc), error_message=str(exc), backtrace=backtrace(exc))


def _storable(result: Any) -> dict[str, Any] | None:
    """A step's return value as the JSON object the result column holds."""
    if result is None:
        return None
    value = result if isinstance(result, dict) else {"value": result}
    try:
        stored = json.loads(json.dumps(value))
    except (TypeError, ValueError, RecursionError):
        stored = None
    if stored is None or json_problem(stored) is not None:
        # Not JSON, or JSON jsonb refuses (NaN, a NUL, a lone surrogate).
        return {"repr": truncate(repr(result), ERROR_MESSAGE_LIMIT)}
    return stored


def finish_step(engine: Engine, taken: Taken, outcome: Outcome, *, now: datetime) -> str:
    """Record how the step ended; returns what happened: completed,
    fanned_out, failed, or late (the run moved on: ignored)."""
    return finish_and_continue(engine, taken, outcome, now=now, chain=False)[0]


def finish_and_continue(
    engine: Engine,
    taken: Taken,
    outcome: Outcome,
    *,
    now: datetime,
    chain: bool = True,
    worker_id: int | None = None,
) -> tuple[str, Taken | None]:
    """finish_step, and with *chain*, when the run's next step is due at
    once, mark it started (by *worker_id*, as take_step) in the same
    transaction and hand it back: one commit per step instead of two, with
    the same rows and events."""
    workflow_id = taken.run["workflow_id"]
    with engine.begin() as conn:
        run = workflow_rows.lock_for(conn, workflow_id, sets_latest=True, worker_id=worker_id)
        if run is None:
            return "late", None  # the run was deleted meanwhile: nothing to record it on
        with flow.deferred(conn, workflow_id):
            return _finish(conn, run, taken, outcome, now=now, chain=chain)


def _finish(
    conn: Connection, run: dict[str, Any], taken: Taken, outcome: Outcome, *, now: datetime, chain: bool
) -> tuple[str, Taken | None]:
    ongoing = run["status"] in (states.RUNNING, states.PAUSED)
    done = None
    if ongoing and outcome.ok and not taken.spec.fan_out:
        # The common case in one statement: the guard is the re-read.
        done = steps.update_step(
            conn,
            taken.step["id"],
            from_=states.STEP_IN_PROGRESS,
            now=now,
            status=states.STEP_COMPLETED,
            finished_at=now,
            result=_storable(outcome.result),
        )
    if done is None:
        row = steps.find(conn, taken.step["id"])
        if row is None or row["status"] != states.STEP_IN_PROGRESS or not ongoing:
            flow.record(
                conn,
                run,
                "late_completion_ignored",
                actor=SYSTEM,
                now=now,
                step=row or taken.step,
                details={
                    "outcome": "completed" if outcome.ok else "failed",
                    "run_status": run["status"],
                    "step_status": row["status"] if row else None,
                    "error_class": outcome.error_class,
                },
            )
            return "late", None
        if not outcome.ok:
            _record_failure(
                conn,
                run,
                row,
                taken.spec,
                error_class=outcome.error_class,
                message=outcome.error_message or "",
                trace=outcome.backtrace,
                now=now,
            )
            return "failed", None
        if taken.spec.fan_out:
            _open_fan_out(conn, run, row, outcome.result, now=now)
            return "fanned_out", None
        done = steps.update_step(
            conn,
            row["id"],
            from_=states.STEP_IN_PROGRESS,
            now=now,
            status=states.STEP_COMPLETED,
            finished_at=now,
            result=_storable(outcome.result),
        )
    done = flow.held(done)
    if taken.spec.wait_for:
        flow.consume_held(conn, run, done["step_name"], now=now)
    flow.record(conn, run, "step_completed", actor=SYSTEM, now=now, step=done)
    if run["status"] != states.RUNNING:
        return "completed", None
    scheduled = _advance(conn, run, taken.definition, done["step_name"], now=now, start=chain)
    if not chain or scheduled is None:
        return "completed", None
    following, status = scheduled
    ready = {**run, "status": states.READY, "current_step": following["step_name"]}
    if following["status"] == states.STEP_IN_PROGRESS:  # inserted started (flow.schedule)
        spec = flow.held(taken.definition.get_step(following["step_name"]))
        return "completed", _started(conn, ready, following, taken.definition, spec, None, now=now)
    if status != states.READY or following["status"] != states.STEP_SCHEDULED or following["scheduled_at"] > now:
        return "completed", None
    started = _begin(conn, ready, following, taken.definition, now=now)
    return "completed", started if isinstance(started, Taken) else None


# --- fan-out -----------------------------------------------------------------


def _open_fan_out(
    conn: Connection, run: Mapping[str, Any], row: Mapping[str, Any], fan_out: FanOut, *, now: datetime
) -> None:
    description = fan_out.description or f"{run['workflow_class']}#{row['step_name']}"
    batch = batches.insert_batch(
        conn, batch_id=str(uuid.uuid4()), description=description, total_jobs=max(int(fan_out.jobs), 0), now=now
    )
    waiting = steps.update_step(
        conn,
        row["id"],
        from_=states.STEP_IN_PROGRESS,
        now=now,
        status=states.STEP_WAITING,
        batch_id=batch["batch_id"],
        waiting_since=now,
    )
    flow.record(
        conn,
        run,
        "fan_out_opened",
        actor=SYSTEM,
        now=now,
        step=waiting,
        details={"batch_id": batch["batch_id"], "description": description, "total_jobs": batch["total_jobs"]},
    )
    if run["status"] == states.RUNNING:
        _move(conn, run, states.RUNNING, states.WAITING)


def wake_batches(engine: Engine, registry: Registry, *, now: datetime, limit: int = 100) -> int:
    """Steps whose batch finished complete, and their runs go on. Returns how many."""
    with engine.connect() as conn:
        candidates = steps.waiting_on_finished_batches(conn, classes=registry.names, limit=limit)
    woken = 0
    for candidate in candidates:
        with engine.begin() as conn:
            run = workflow_rows.lock_for(conn, candidate["workflow_id"])
            row = steps.find(conn, candidate["step_id"])
            if run is None or run["status"] != states.WAITING or row is None or row["status"] != states.STEP_WAITING:
                continue
            batch = batches.find(conn, row["batch_id"])
            if batch is None or batch["status"] != states.BATCH_FINISHED:
                continue
            counts = {key: batch[key] for key in ("total_jobs", "completed_jobs", "failed_jobs", "discarded_jobs")}
            done = steps.update_step(
                conn,
                row["id"],
                from_=states.STEP_WAITING,
                now=now,
                status=states.STEP_COMPLETED,
                finished_at=now,
                result={"batch_id": batch["batch_id"], **counts},
            )
            flow.record(
                conn,
                run,
                "fan_out_finished",
                actor=SYSTEM,
                now=now,
                step=done,
                details={"batch_id": batch["batch_id"], **counts},
            )
            flow.record(conn, run, "step_completed", actor=SYSTEM, now=now, step=done)
            # Among the registry's classes (waiting_on_finished_batches): its definition is there.
            _advance(conn, run, flow.held(registry.get(run["workflow_class"])), row["step_name"], now=now)
            woken += 1
    return woken


def advance_batches(engine: Engine, *, now: datetime, rng, max_jobs: int = 3, limit: int = 100) -> int:
    """Stand-in for the jobs of a fan-out (the demo has no job runner):
    count 1 to *max_jobs* more jobs of each processing batch as completed.
    Returns how many batches moved."""
    moved = 0
    with engine.begin() as conn:
        for batch_id in batches.processing_ids(conn, limit=limit):
            if batches.record_jobs(conn, batch_id, completed=rng.randint(1, max_jobs), now=now) is not None:
                moved += 1
    return moved


# --- the sweep ---------------------------------------------------------------


@dataclass(frozen=True)
class SweepResult:
    timed_out: int
    stalled: int


def _pause_on(
    conn: Connection,
    run: Mapping[str, Any],
    row: Mapping[str, Any],
    *,
    from_: str,
    error_class: str,
    message: str,
    event: str,
    details: dict[str, Any],
    now: datetime,
) -> None:
    failed = steps.update_step(
        conn,
        row["id"],
        from_=row["status"],
        now=now,
        status=states.STEP_FAILED,
        finished_at=now,
        error_class=error_class,
        error_message=message,
    )
    flow.record(conn, run, event, actor=SYSTEM, now=now, step=failed, details=details)
    _move(conn, run, from_, states.PAUSED, paused_at=now)
    flow.record(conn, run, "paused", actor=SYSTEM, now=now, step=failed, details={"error_class": error_class})


def sweep(engine: Engine, *, now: datetime, stall_threshold: timedelta, limit: int = 100) -> SweepResult:
    """Fail waits past their deadline (WaitTimedOut) and steps in progress
    longer than *stall_threshold* (StepStalled), pausing their runs."""
    with engine.connect() as conn:
        waits = steps.timed_out_waits(conn, now=now, limit=limit)
        stalls = steps.stalled(conn, started_before=now - stall_threshold, limit=limit)
    timed_out = stalled = 0
    for candidate in waits:
        with engine.begin() as conn:
            run = workflow_rows.lock_for(conn, candidate["workflow_id"])
            row = steps.find(conn, candidate["step_id"])
            if (
                run is None
                or run["status"] != states.WAITING
                or row is None
                or row["status"] != states.STEP_WAITING
                or row["timeout_at"] is None
                or row["timeout_at"] > now
            ):
                continue
            what = row["wait_for"] or row["batch_id"]
            _pause_on(
                conn,
                run,
                row,
                from_=states.WAITING,
                error_class=states.WAIT_TIMED_OUT_ERROR,
                message=f"waited for {what} since {flow.iso(row['waiting_since'])}; "
                f"the wait timed out at {flow.iso(row['timeout_at'])}",
                event="wait_timed_out",
                details={"signal": row["wait_for"], "timeout_at": flow.iso(row["timeout_at"])},
                now=now,
            )
            timed_out += 1
    for candidate in stalls:
        with engine.begin() as conn:
            run = workflow_rows.lock_for(conn, candidate["workflow_id"])
            row = steps.find(conn, candidate["step_id"])
            if (
                run is None
                or run["status"] != states.RUNNING
                or row is None
                or row["status"] != states.STEP_IN_PROGRESS
                or row["started_at"] >= now - stall_threshold
            ):
                continue
            _pause_on(
                conn,
                run,
                row,
                from_=states.RUNNING,
                error_class=states.STEP_STALLED_ERROR,
                message=f"in progress since {flow.iso(row['started_at'])}, longer than the "
                f"stall threshold of {int(stall_threshold.total_seconds())}s",
                event="stall_detected",
                details={
                    "started_at": flow.iso(row["started_at"]),
                    "threshold_seconds": int(stall_threshold.total_seconds()),
                },
                now=now,
            )
            stalled += 1
    return SweepResult(timed_out=timed_out, stalled=stalled)
