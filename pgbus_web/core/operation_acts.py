"""Operations as every door asks for them, under the policy: preview,
start, approve, pause, go on, cancel and pace, each for a proven
principal. The runtime (runtime/operation_*.py) does them; this module
decides whether the principal may, with the policy's rules (thresholds,
approval, highest rate) read here, once, for every door.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from sqlalchemy.engine import Engine

from ..rules import roles, states
from ..rules.approval import Approval
from ..rules.run_filters import RunFilters
from ..runtime import operation_policy, operation_preview, operation_record
from ..runtime.clock import utcnow
from . import permissions, policy, redacting
from .permissions import Principal
from .settings import Settings


class RateAbovePolicy(operation_record.OperationError):
    """A rate above the policy's max_rate."""

    code = "rate_above_policy"

    def __init__(self, rate: float, highest: float) -> None:
        self.rate = rate
        self.highest = highest
        super().__init__(f"the policy allows at most {highest:g} runs a second; {rate:g} was asked")


def approval(
    engine: Engine,
    settings: Settings | None = None,
    *,
    threshold: int | None = None,
    verbs: tuple[str, ...] | None = None,
) -> Approval:
    """The policy's approval rule, tightened by *settings*' own and by a
    command's *threshold*/*verbs* (an option adds waits, never removes one)."""
    rule = policy.current(engine).approval
    if settings is not None:
        rule = rule.tightened(settings.approval_threshold, settings.approval_verbs)
    return rule.tightened(threshold, verbs)


def _permit(principal: Principal, kept: policy.Policy) -> Callable[[operation_preview.Preview], None]:
    def permit(shown: operation_preview.Preview) -> None:
        permissions.require_all(principal, shown.verb, shown.classes, kept)

    return permit


def preview(
    engine: Engine,
    settings: Settings,
    principal: Principal,
    run_filters: RunFilters,
    verb: str,
    params: Mapping[str, Any] | None = None,
    *,
    now: datetime | None = None,
) -> operation_preview.Preview:
    """What *verb* on every run *run_filters* matches would do now;
    NotPermitted naming the first class *principal* may not use it on."""
    kept = policy.current(engine)
    # A count of the runs holding a redacted value tells the value (docs/redaction.md).
    redacting.require_search(run_filters, principal, kept)
    shown = operation_preview.preview(
        engine, run_filters, verb, params, registry=settings.registry, thresholds=kept.thresholds(), now=now
    )
    _permit(principal, kept)(shown)
    return shown


def _rate(kept: policy.Policy, rate: float | None) -> float | None:
    if kept.max_rate is None:
        return rate
    if rate is None:
        return kept.max_rate
    if rate > kept.max_rate:
        raise RateAbovePolicy(rate, kept.max_rate)
    return rate


def start(
    engine: Engine,
    settings: Settings,
    principal: Principal,
    run_filters: RunFilters,
    verb: str,
    params: Mapping[str, Any] | None,
    *,
    reason: str | None,
    expected: int | None,
    rate: float | None = None,
    max_in_flight: int | None = None,
    now: datetime | None = None,
    approval_threshold: int | None = None,
    approval_verbs: tuple[str, ...] | None = None,
) -> dict[str, Any]:
    """Store the operation for *principal*: queued, or awaiting approval
    when the policy's rule (tightened by this process's or the command's
    own) says so. Nothing is written when anything is refused."""
    kept = policy.current(engine)
    redacting.require_search(run_filters, principal, kept)
    rule = approval(engine, settings, threshold=approval_threshold, verbs=approval_verbs)
    return operation_policy.create(
        engine,
        run_filters,
        verb,
        params,
        reason=reason,
        actor=principal.actor,
        expected=expected,
        registry=settings.registry,
        thresholds=kept.thresholds(),
        now=now,
        rate=_rate(kept, rate),
        max_in_flight=max_in_flight,
        approval=rule,
        requested_by=principal.key,
        permit=_permit(principal, kept),
    )


def _find(engine: Engine, operation_id: int) -> dict[str, Any]:
    return operation_record.find(engine, operation_id)


def _classes(operation: Mapping[str, Any]) -> list[str] | None:
    """The classes the operation reaches (stored when it was asked for);
    None for an operation stored before they were."""
    found = (operation.get("params") or {}).get("classes")
    return list(found) if isinstance(found, list) else None


def _require_on(principal: Principal, power: str, operation: Mapping[str, Any], kept: policy.Policy) -> None:
    classes = _classes(operation)
    if classes is None:
        permissions.require(principal, power, None, kept)
    else:
        permissions.require_all(principal, power, classes, kept)


def _steer(engine: Engine, principal: Principal, operation_id: int) -> None:
    """Pausing, resuming, pacing or cancelling an operation: for whoever
    may use its verb on every class it reaches."""
    operation = _find(engine, operation_id)
    _require_on(principal, operation["verb"], operation, policy.current(engine))


def _asked_by(operation: Mapping[str, Any], principal: Principal) -> bool:
    """Did *principal* ask for *operation*: the same actor, or the same
    proven principal through another door (its key; an operation stored
    before keys were kept has its actor)."""
    return bool(
        operation["actor"] == principal.actor or (operation.get("requested_by") or operation["actor"]) == principal.key
    )


def _allowed(principal: Principal, power: str, operation: Mapping[str, Any], kept: policy.Policy) -> bool:
    try:
        _require_on(principal, power, operation, kept)
    except permissions.NotPermitted:
        return False
    return True


def may_approve(engine: Engine, principal: Principal, operation: Mapping[str, Any]) -> bool:
    """Would approve() take *principal*'s approval of *operation* now?"""
    return (
        operation["status"] == states.OPERATION_AWAITING_APPROVAL
        and not principal.break_glass
        and not _asked_by(operation, principal)
        and _allowed(principal, roles.APPROVE, operation, policy.current(engine))
    )


def may_steer(engine: Engine, principal: Principal, operation: Mapping[str, Any]) -> bool:
    """May *principal* pause, resume, pace or cancel *operation*?"""
    return _allowed(principal, operation["verb"], operation, policy.current(engine))


def approve(
    engine: Engine, principal: Principal, operation_id: int, *, reason: str | None = None, now: datetime | None = None
) -> dict[str, Any]:
    """Approve another principal's operation: *principal* must hold the
    approve power on every class it reaches, and never be break-glass."""
    operation = _find(engine, operation_id)
    kept = policy.current(engine)
    if principal.break_glass:
        raise permissions.NotPermitted(principal, roles.APPROVE)
    if operation["status"] == states.OPERATION_AWAITING_APPROVAL and _asked_by(operation, principal):
        raise operation_record.OwnApproval(operation)
    _require_on(principal, roles.APPROVE, operation, kept)
    return operation_policy.approve(
        engine, operation_id, actor=principal.actor, approver=principal.key, reason=reason, now=now or utcnow()
    )


def pause(
    engine: Engine, principal: Principal, operation_id: int, *, reason: str | None = None, now: datetime | None = None
) -> dict[str, Any]:
    _steer(engine, principal, operation_id)
    return operation_record.pause(engine, operation_id, actor=principal.actor, reason=reason, now=now or utcnow())


def go_on(
    engine: Engine, principal: Principal, operation_id: int, *, reason: str | None = None, now: datetime | None = None
) -> dict[str, Any]:
    _steer(engine, principal, operation_id)
    return operation_record.go_on(engine, operation_id, actor=principal.actor, reason=reason, now=now or utcnow())


def cancel(
    engine: Engine, principal: Principal, operation_id: int, *, reason: str | None = None, now: datetime | None = None
) -> dict[str, Any]:
    _steer(engine, principal, operation_id)
    return operation_record.cancel(engine, operation_id, actor=principal.actor, reason=reason, now=now or utcnow())


def set_pace(engine: Engine, principal: Principal, operation_id: int, changes: Mapping[str, Any]) -> dict[str, Any]:
    _steer(engine, principal, operation_id)
    kept = policy.current(engine)
    if "rate" in changes:
        changes = {**changes, "rate": _rate(kept, changes["rate"])}
    return operation_policy.set_pace(engine, operation_id, changes)
