"""Moves shared by the verbs and the worker, inside a caller's transaction
that already holds the run's row lock.

None of these change the run's status: each returns the status the run
should move to, and the caller makes that one guarded transition.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar, overload

from sqlalchemy.engine import Connection

from ..models import events, signals, steps, workflow_rows
from ..rules import states
from .definitions import Step


def record(
    conn: Connection,
    run: Mapping[str, Any],
    event: str,
    *,
    actor: str,
    now: datetime,
    step: Mapping[str, Any] | None = None,
    reason: str | None = None,
    details: Mapping[str, Any] | None = None,
) -> None:
    fields = dict(
        workflow_id=run["workflow_id"],
        event=event,
        actor=actor,
        reason=reason,
        step=step,
        details=details,
        created_at=now,
    )
    pending = conn.info.get(_PENDING)
    if pending is not None:
        pending.events.append(events.row(**fields))
        pending.runs.setdefault(run["workflow_id"], None)
    else:
        events.record(conn, **fields)


# --- deferred writes -----------------------------------------------------------
#
# The worker's transactions move a run through several statuses and write
# several events per step (ready -> running, completed / scheduled /
# started). Inside deferred(), those are collected and written at the end
# in two statements: the run's one row version (its last status, guarded by
# its first, with its latest_* columns, so the latest_* trigger is told to
# skip: models.workflow_rows.LATEST_BY_WRITER) and every event in one INSERT,
# in the order recorded. The caller holds the run's lock throughout, and
# nothing in between reads the run's row or these events back.

_PENDING = "pgbus_web.pending_writes"


@dataclass
class _Move:
    from_: Any
    to: str
    attrs: dict[str, Any] = field(default_factory=dict)


@dataclass
class _Pending:
    events: list[dict[str, Any]] = field(default_factory=list)
    # workflow_id -> its combined move, or None: steps or events written, no move.
    runs: dict[str, _Move | None] = field(default_factory=dict)


def move(conn: Connection, run: Mapping[str, Any], from_, to: str, **attrs: Any) -> bool:
    """A guarded status change of a run whose lock the caller holds: now,
    or inside deferred() at its end, combined with the run's other moves
    (the first one's guard, the last one's status). False when it did not
    move (at once only; a deferred move that fails raises at the end)."""
    pending = conn.info.get(_PENDING)
    if pending is None:
        return workflow_rows.transition(conn, run["workflow_id"], from_=from_, to=to, **attrs) == 1
    earlier = pending.runs.get(run["workflow_id"])
    if earlier is None:
        pending.runs[run["workflow_id"]] = _Move(from_, to, dict(attrs))
    else:
        earlier.to = to
        earlier.attrs.update(attrs)
    return True


def flush(conn: Connection) -> None:
    """Write what deferred() collected so far (reads that need it call this first)."""
    pending = conn.info.get(_PENDING)
    if pending is None:
        return
    for workflow_id, moved in pending.runs.items():
        if moved is None:
            workflow_rows.sync_latest(conn, workflow_id)
        elif (
            workflow_rows.transition(conn, workflow_id, from_=moved.from_, to=moved.to, sync_latest=True, **moved.attrs)
            != 1
        ):
            raise RuntimeError(f"run {workflow_id} changed under its row lock")
    events.record_many(conn, pending.events)
    pending.events.clear()
    # The runs stay listed: a later step write needs their latest_* again.
    pending.runs = dict.fromkeys(pending.runs)


@contextmanager
def deferred(conn: Connection, workflow_id: str | None = None) -> Iterator[None]:
    """Collect run moves and events until the block ends, then write them
    (not when it raises: the transaction is rolled back anyway). The
    caller declares LATEST_BY_WRITER in its transaction (lock_for(...,
    sets_latest=True) or steps.claim_next) before writing any step;
    *workflow_id* names a run whose steps may be written without a move
    or an event."""
    pending = _Pending()
    if workflow_id is not None:
        pending.runs[workflow_id] = None
    conn.info[_PENDING] = pending
    try:
        yield
        flush(conn)
    finally:
        conn.info.pop(_PENDING, None)


_T = TypeVar("_T")


def held(value: _T | None) -> _T:
    """*value*, read or written under the run's lock, which keeps it there:
    a guarded step update of a row this transaction locked, the run it
    locked, the step a plan names."""
    if value is None:
        raise LookupError("a row the run's lock holds is missing")
    return value


@overload
def iso(moment: datetime) -> str: ...
@overload
def iso(moment: datetime | None) -> str | None: ...
def iso(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment is not None else None


def claim_signal(
    conn: Connection,
    run: Mapping[str, Any],
    step: Mapping[str, Any],
    signal: Mapping[str, Any],
    *,
    actor: str,
    now: datetime,
) -> None:
    signals.claim(conn, signal["id"], step_id=step["id"], now=now)
    record(
        conn,
        run,
        "signal_claimed",
        actor=actor,
        now=now,
        step=step,
        details={"signal": signal["name"], "signal_id": signal["id"]},
    )


def schedule(
    conn: Connection,
    run: Mapping[str, Any],
    step: Step,
    *,
    actor: str,
    now: datetime,
    due_at: datetime | None = None,
    event: str = "step_scheduled",
    reason: str | None = None,
    start: bool = False,
) -> tuple[dict[str, Any], str]:
    """Insert a new attempt of *step*; returns (row, the run's next status).

    *start* (the worker's chain, which starts a step due now in the same
    transaction): a step due now that waits for nothing is inserted already
    in progress, the row an insert then a start would leave, in one write;
    the caller records its start (the row's status tells it).

    Due at *due_at*, else after the step's delay, else now. A ``wait_for``
    step due now starts waiting at once, unless it already holds a signal
    (an earlier attempt claimed one) or a pending one can be claimed now:
    then it is due now and runs with that signal.
    """
    workflow_id = run["workflow_id"]
    attempt = steps.NEXT_ATTEMPT
    due = due_at if due_at is not None else (now + step.delay if step.delay else now)
    if step.wait_for and due <= now and signals.held_by_step(conn, workflow_id, step.name) is None:
        pending = signals.pending_for(conn, workflow_id, step.wait_for)
        if not pending:
            row = steps.insert_step(
                conn,
                workflow_id=workflow_id,
                step_name=step.name,
                now=now,
                status=states.STEP_WAITING,
                attempt=attempt,
                scheduled_at=now,
                wait_for=step.wait_for,
                waiting_since=now,
                timeout_at=now + step.wait_timeout if step.wait_timeout else None,
            )
            record(conn, run, "step_waiting", actor=actor, now=now, step=row, reason=reason, details=_wait_details(row))
            return row, states.WAITING
        row = steps.insert_step(
            conn,
            workflow_id=workflow_id,
            step_name=step.name,
            now=now,
            status=states.STEP_SCHEDULED,
            attempt=attempt,
            scheduled_at=now,
            wait_for=step.wait_for,
        )
        record(conn, run, event, actor=actor, now=now, step=row, reason=reason, details={"at": iso(now)})
        claim_signal(conn, run, row, pending[0], actor=actor, now=now)
        return row, states.READY
    started: dict[str, Any] = {"status": states.STEP_SCHEDULED}
    if start and due <= now and not step.wait_for:
        started = {"status": states.STEP_IN_PROGRESS, "started_at": now}
    row = steps.insert_step(
        conn,
        workflow_id=workflow_id,
        step_name=step.name,
        now=now,
        attempt=attempt,
        scheduled_at=due,
        wait_for=step.wait_for,
        **started,
    )
    record(conn, run, event, actor=actor, now=now, step=row, reason=reason, details=scheduled_details(due))
    return row, states.READY


def plain_schedule(step: Step) -> bool:
    """schedule() of *step* is one scheduled row and its event, whatever the
    signals: a step without wait_for (runtime/chunks/resume.py does many
    such at once)."""
    return not step.wait_for


def scheduled_details(due: datetime) -> dict[str, Any]:
    return {"at": iso(due)}


def _wait_details(row: Mapping[str, Any]) -> dict[str, Any]:
    details: dict[str, Any] = {}
    if row.get("wait_for"):
        details["signal"] = row["wait_for"]
    if row.get("batch_id"):
        details["batch_id"] = row["batch_id"]
    if row.get("timeout_at"):
        details["timeout_at"] = iso(row["timeout_at"])
    return details


def rewait(
    conn: Connection,
    run: Mapping[str, Any],
    row: Mapping[str, Any],
    step: Step | None,
    *,
    actor: str,
    now: datetime,
) -> tuple[dict[str, Any], str]:
    """An existing step row that waits (a signal or a batch) goes back to
    waiting, or, for a signal already pending, claims it and is due now.
    Returns (row, the run's next status)."""
    wait_for = row.get("wait_for") or (step.wait_for if step else None)
    if wait_for and not row.get("batch_id"):
        if signals.held_by_step(conn, run["workflow_id"], row["step_name"]) is not None:
            return _due_now(conn, row, now), states.READY
        pending = signals.pending_for(conn, run["workflow_id"], wait_for)
        if pending:
            updated = _due_now(conn, row, now)
            claim_signal(conn, run, updated, pending[0], actor=actor, now=now)
            return updated, states.READY
    if row["status"] == states.STEP_WAITING:
        return dict(row), states.WAITING
    timeout = step.wait_timeout if step is not None and wait_for else None
    updated = held(
        steps.update_step(
            conn,
            row["id"],
            from_=states.STEP_SCHEDULED,
            now=now,
            status=states.STEP_WAITING,
            waiting_since=now,
            timeout_at=now + timeout if timeout else row.get("timeout_at"),
            wait_for=wait_for,
        )
    )
    record(conn, run, "step_waiting", actor=actor, now=now, step=updated, details=_wait_details(updated))
    return updated, states.WAITING


def _due_now(conn: Connection, row: Mapping[str, Any], now: datetime) -> dict[str, Any]:
    return held(
        steps.update_step(
            conn,
            row["id"],
            from_=(states.STEP_SCHEDULED, states.STEP_WAITING),
            now=now,
            status=states.STEP_SCHEDULED,
            scheduled_at=now,
        )
    )


def consume_held(conn: Connection, run: Mapping[str, Any], step_name: str, *, now: datetime) -> None:
    """A step ended (completed or skipped): the signal it claimed is used up."""
    held = signals.held_by_step(conn, run["workflow_id"], step_name)
    if held is not None:
        signals.consume(conn, held["id"], now=now)
