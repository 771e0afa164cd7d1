"""The rules an operation is stored, approved and paced under
(docs/operations.md):

- create(): the preview, checked against the count the operator was shown
  and the runs the verb fits, then stored as a queued operation with a
  ceiling (the highest run id now): runs created later are never swept
  in; when the approval rule asks for it, it waits as awaiting_approval.
- approve(): a different operator than the one who asked for it.
- set_pace(): its rate and ceiling of runs in flight, the ceiling only on
  a verb that starts work.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any, cast

from sqlalchemy.engine import Engine

from ..models import operation_rows
from ..rules import run_filters as index_filters
from ..rules import states, verb_table
from ..rules.approval import Approval
from ..rules.stuck import Thresholds
from .clock import utcnow
from .operation_preview import preview
from .operation_record import (
    CeilingNotForVerb,
    CountChanged,
    NotAwaitingApproval,
    NothingFits,
    OperationError,
    OperationNotFound,
    OwnApproval,
    PaceEnded,
    changed_or_refused,
    check,
    stored_reason,
)


def _seconds(value: timedelta) -> float:
    return value.total_seconds()


def create(
    engine: Engine,
    run_filters: index_filters.RunFilters,
    verb: str,
    params: Mapping[str, Any] | None,
    *,
    reason: str | None,
    actor: str,
    expected: int | None,
    registry=None,
    thresholds: Thresholds,
    now: datetime | None = None,
    rate: float | None = None,
    max_in_flight: int | None = None,
    approval: Approval | None = None,
    requested_by: str | None = None,
    permit=None,
) -> dict[str, Any]:
    """Store a queued operation: *verb* on every run *run_filters* matches,
    up to the highest run id now, at *rate* runs per second and
    *max_in_flight* runs started and unsettled at most (None: no limit).
    *expected* is the count the operator was shown: another count now
    raises CountChanged with the fresh preview (None: no check, for callers
    that just showed it). When *approval* asks for it, the operation waits
    as awaiting_approval for a different operator. Nothing is written
    when anything is refused."""
    now = now or utcnow()
    found, stored, text = check(verb, params, reason, now=now)
    if max_in_flight is not None and found.name not in verb_table.STARTS_WORK:
        raise CeilingNotForVerb(found.name)
    shown = preview(engine, run_filters, verb, params, registry=registry, thresholds=thresholds, now=now)
    if permit is not None:
        permit(shown)  # raises when the requester may not act on one of its classes
    if expected is not None and int(expected) != shown.total:
        raise CountChanged(int(expected), shown)
    if shown.fits == 0:
        raise NothingFits(shown)
    stored["thresholds"] = {name: _seconds(value) for name, value in cast(Mapping[str, timedelta], thresholds).items()}
    # The classes it reaches: an approver must be allowed to approve each.
    stored["classes"] = sorted(shown.classes)
    with engine.begin() as conn:
        status = (
            states.OPERATION_AWAITING_APPROVAL
            if approval is not None and approval.needed(shown.verb, shown.fits)
            else states.OPERATION_QUEUED
        )
        return operation_rows.insert(
            conn,
            verb=shown.verb,
            filters=shown.query,
            ceiling_id=shown.ceiling_id,
            params=stored,
            reason=text,
            actor=actor,
            total=shown.total,
            now=now,
            status=status,
            rate=rate,
            max_in_flight=max_in_flight,
            requested_by=requested_by,
        )


def approve(
    engine: Engine,
    operation_id: int,
    *,
    actor: str,
    now: datetime | None = None,
    approver: str | None = None,
    reason: str | None = None,
) -> dict[str, Any]:
    """awaiting_approval -> queued, approved by *actor*, who must not be
    the one who asked for it (OwnApproval): neither the same actor nor the
    same principal (*approver*, its key, against the requester's)."""
    key = approver or actor

    def refused(current: Mapping[str, Any]) -> OperationError:
        if current["status"] == states.OPERATION_AWAITING_APPROVAL and (
            current["actor"] == actor or (current.get("requested_by") or current["actor"]) == key
        ):
            return OwnApproval(current)
        return NotAwaitingApproval(current)

    return changed_or_refused(
        engine,
        operation_id,
        lambda conn: operation_rows.approve(
            conn, operation_id, now=now or utcnow(), actor=actor, key=key, reason=stored_reason(reason)
        ),
        refused,
    )


def set_pace(engine: Engine, operation_id: int, changes: Mapping[str, Any]) -> dict[str, Any]:
    """Change rate and/or max_in_flight (*changes*, checked by
    checks.parse_pace; None clears one) of an operation that has not ended;
    the process doing it reads them at its next chunk."""
    changes = {name: value for name, value in changes.items() if name in ("rate", "max_in_flight")}
    with engine.connect() as conn:
        current = operation_rows.find(conn, operation_id)
    if current is None:
        raise OperationNotFound(operation_id)
    if changes.get("max_in_flight") is not None and current["verb"] not in verb_table.STARTS_WORK:
        raise CeilingNotForVerb(current["verb"])
    if not changes:
        return current
    return changed_or_refused(
        engine, operation_id, lambda conn: operation_rows.set_pace(conn, operation_id, changes), PaceEnded
    )
