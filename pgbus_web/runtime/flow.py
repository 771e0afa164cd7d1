"""Moves shared by the verbs and the worker, inside a caller's transaction
that already holds the run's row lock.

None of these change the run's status: each returns the status the run
should move to, and the caller makes that one guarded transition.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Mapping

from sqlalchemy.engine import Connection

from .. import states
from ..models import events, signals, steps
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
) -> int:
    return events.record(
        conn,
        workflow_id=run["workflow_id"],
        event=event,
        actor=actor,
        reason=reason,
        step=step,
        details=details,
        created_at=now,
    )


def iso(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment is not None else None


def claim_signal(
    conn: Connection, run: Mapping[str, Any], step: Mapping[str, Any], signal: Mapping[str, Any], *, actor: str, now: datetime
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
) -> tuple[dict[str, Any], str]:
    """Insert a new attempt of *step*; returns (row, the run's next status).

    Due at *due_at*, else after the step's delay, else now. A ``wait_for``
    step due now starts waiting at once, unless it already holds a signal
    (an earlier attempt claimed one) or a pending one can be claimed now:
    then it is due now and runs with that signal.
    """
    workflow_id = run["workflow_id"]
    attempt = steps.next_attempt(conn, workflow_id, step.name)
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
            record(conn, run, "step_waiting", actor=actor, now=now, step=row, reason=reason,
                   details=_wait_details(row))
            return row, states.WAITING
        row = steps.insert_step(
            conn, workflow_id=workflow_id, step_name=step.name, now=now,
            status=states.STEP_SCHEDULED, attempt=attempt, scheduled_at=now, wait_for=step.wait_for,
        )
        record(conn, run, event, actor=actor, now=now, step=row, reason=reason, details={"at": iso(now)})
        claim_signal(conn, run, row, pending[0], actor=actor, now=now)
        return row, states.READY
    row = steps.insert_step(
        conn, workflow_id=workflow_id, step_name=step.name, now=now,
        status=states.STEP_SCHEDULED, attempt=attempt, scheduled_at=due, wait_for=step.wait_for,
    )
    record(conn, run, event, actor=actor, now=now, step=row, reason=reason, details=scheduled_details(due))
    return row, states.READY


def plain_schedule(step: Step) -> bool:
    """schedule() of *step* is one scheduled row and its event, whatever the
    signals: a step without wait_for (runtime/chunk_resume.py does many
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
    updated = steps.update_step(
        conn,
        row["id"],
        from_=states.STEP_SCHEDULED,
        now=now,
        status=states.STEP_WAITING,
        waiting_since=now,
        timeout_at=now + timeout if timeout else row.get("timeout_at"),
        wait_for=wait_for,
    )
    record(conn, run, "step_waiting", actor=actor, now=now, step=updated, details=_wait_details(updated))
    return updated, states.WAITING


def _due_now(conn: Connection, row: Mapping[str, Any], now: datetime) -> dict[str, Any]:
    return steps.update_step(
        conn,
        row["id"],
        from_=(states.STEP_SCHEDULED, states.STEP_WAITING),
        now=now,
        status=states.STEP_SCHEDULED,
        scheduled_at=now,
    )


def consume_held(conn: Connection, run: Mapping[str, Any], step_name: str, *, now: datetime) -> None:
    """A step ended (completed or skipped): the signal it claimed is used up."""
    held = signals.held_by_step(conn, run["workflow_id"], step_name)
    if held is not None:
        signals.consume(conn, held["id"], now=now)
