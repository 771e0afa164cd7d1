"""The reads of operations every door shows: the recent ones, one by id
(none past a bigserial's range: such an id names no operation), and what
became of the runs one acted on."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from sqlalchemy.engine import Connection, Engine

from ..models import operation_outcomes, operation_rows
from ..rules import states
from ..rules.limits import ID_MAX
from .page_reads import thresholds
from .settings import Settings


def recent(conn: Connection, limit: int = operation_rows.RECENT) -> list[dict[str, Any]]:
    """The newest *limit* operations (the recent ones every door lists:
    models.operation_rows.RECENT), newest first."""
    return operation_rows.recent(conn, limit=limit)


def find(conn: Connection, operation_id: int) -> dict[str, Any] | None:
    """Operation *operation_id*, or None."""
    if not 0 < operation_id <= ID_MAX:
        return None
    return operation_rows.find(conn, operation_id)


def outcomes(
    conn: Connection, settings: Settings, operation_id: int, now: datetime
) -> dict[tuple[str, str | None], int]:
    """{(status, stuck reason or None): runs} of the runs the operation
    acted on, as they are now, by the settings' stuck thresholds."""
    return operation_outcomes.outcomes(conn, operation_id, now=now, **thresholds(conn))


# What became of an operation's runs, in the order every door says it:
# each group lists run statuses (a link filters the operation's runs by
# status) or stuck reasons (by reason).
OUTCOME_GROUPS = (
    ("completed", "status", (states.COMPLETED,)),
    ("failed", "status", (states.FAILED, states.CANCELLED)),
    ("stuck", "reason", states.STUCK_REASONS),
    ("moving", "status", (states.RUNNING, states.READY, states.WAITING)),
)
# "Mostly failing again": of the runs an operation set going that have
# settled (completed, failed, or stuck again by an error: paused by one or
# stalled), more than FAILING_SHARE failed or got stuck again, once at
# least FAILING_MIN_SETTLED have settled (a handful says nothing yet).
# cancel and pause mean their runs to stop: never said of them.
FAILING_SHARE = 0.5
FAILING_MIN_SETTLED = 10
STOPPING_VERBS = ("cancel", "pause")
_FAILING_STATUSES = (states.FAILED,)
_FAILING_REASONS = (states.PAUSED_ERROR, states.STALLED)


# What became of the runs an operation acted on, told by the step that was
# stuck (docs/operations.md, "The step that was stuck"), in the order every
# door says it: got past it (completed, or moved on to a later step and
# running, ready or waiting there), stuck at it again (failed, paused or
# stuck there), failed elsewhere (failed or paused at another step), and
# still at it without being stuck (a retry not yet done). A cancelled run
# is in none.
STEP_KINDS = ("past", "again", "elsewhere", "at_step")
_STOPPED_THERE = (states.FAILED, states.PAUSED)


@dataclass(frozen=True)
class StepOutcome:
    """The runs an operation acted on, by what became of the step that was
    stuck: the step (or steps) by name, and how many runs of each kind."""

    steps: tuple[str, ...]
    counts: dict[str, int]

    @property
    def total(self) -> int:
        return sum(self.counts.values())


def step_kind(status: str, reason: str | None, at_step: bool) -> str | None:
    """Which of STEP_KINDS a run is, by its status and stuck reason now and
    whether it is at the step that was stuck (None: a cancelled run)."""
    if status == states.COMPLETED:
        return "past"
    if status == states.CANCELLED:
        return None
    if at_step:
        return "again" if status in _STOPPED_THERE or reason is not None else "at_step"
    return "elsewhere" if status in _STOPPED_THERE else "past"


def step_outcome_of(verb: str, counts: Mapping[tuple[str, str | None, str, bool], int]) -> StepOutcome | None:
    """*counts* ({(status, reason, step that was stuck, at it now): runs},
    models.operation_outcomes.step_outcomes) by STEP_KINDS; None for cancel
    and pause (they mean their runs to stop) and where no run's step is known."""
    if verb in STOPPING_VERBS or not counts:
        return None
    kinds = dict.fromkeys(STEP_KINDS, 0)
    for (status, reason, _step, at_step), runs in counts.items():
        kind = step_kind(status, reason, at_step)
        if kind is not None:
            kinds[kind] += runs
    steps = tuple(sorted({step for (_status, _reason, step, _at) in counts}))
    return StepOutcome(steps=steps, counts=kinds)


@dataclass(frozen=True)
class Outcome:
    """What became of the runs an operation acted on, as they are now."""

    # Each {"kind", "total", "parts": [{"filter": {name: value}, "value", "count"}], "overlap"};
    # parts only where runs are.
    groups: list[dict[str, Any]]
    # The runs that settled (completed or failing again), and those failing again.
    settled: int
    failing: int
    # The rule above: say at the top that this operation's runs mostly fail again.
    mostly_failing: bool
    # By the step that was stuck (step_outcome_of); None where it says nothing.
    step: StepOutcome | None = None


def outcome_of(verb: str, counts: Mapping[tuple[str, str | None], int]) -> Outcome:
    """*counts* ({(status, stuck reason or None): runs}, outcomes()) as the
    groups every door shows, and the rule on failing again. Paused runs
    are all stuck, so they are told by reason only; a ready or waiting run
    stuck again is in its status's count and in its reason's (``overlap``)."""
    by_status: dict[str, int] = {}
    by_reason: dict[str, int] = {}
    for (status, reason), runs in counts.items():
        by_status[status] = by_status.get(status, 0) + runs
        if reason is not None:
            by_reason[reason] = by_reason.get(reason, 0) + runs
    overlap = any(by_reason.get(reason) for reason in (states.OVERDUE, states.WAITING_OVERDUE))
    groups = []
    for kind, filter_name, values in OUTCOME_GROUPS:
        found = by_status if filter_name == "status" else by_reason
        parts: list[dict[str, Any]] = [
            {"filter": {filter_name: value}, "value": value, "count": found[value]}
            for value in values
            if found.get(value)
        ]
        groups.append(
            {
                "kind": kind,
                "total": sum(part["count"] for part in parts),
                "parts": parts,
                "overlap": overlap and kind == "moving",
            }
        )
    failing = sum(by_status.get(status, 0) for status in _FAILING_STATUSES) + sum(
        by_reason.get(reason, 0) for reason in _FAILING_REASONS
    )
    settled = by_status.get(states.COMPLETED, 0) + failing
    mostly = verb not in STOPPING_VERBS and settled >= FAILING_MIN_SETTLED and failing > settled * FAILING_SHARE
    return Outcome(groups=groups, settled=settled, failing=failing, mostly_failing=mostly)


def step_outcomes(
    conn: Connection, operation: Mapping[str, Any], now: datetime
) -> dict[tuple[str, str | None, str, bool], int]:
    """{(status, stuck reason or None, the step that was stuck, at it now):
    runs} of the runs *operation* acted on: the step that was stuck is its
    filter's step, else the step its event on the run names."""
    filters = operation.get("filters") or {}
    step = filters.get("step") if isinstance(filters, Mapping) else None
    return operation_outcomes.step_outcomes(conn, operation["id"], filter_step=step, now=now, **thresholds(conn))


def outcome(conn: Connection, settings: Settings, operation: Mapping[str, Any], now: datetime) -> Outcome:
    """What became of the runs *operation* acted on (outcome_of, and by the
    step that was stuck, step_outcome_of): the one read every door shows."""
    found = outcome_of(operation["verb"], outcomes(conn, settings, operation["id"], now))
    if operation["verb"] in STOPPING_VERBS:
        return found
    return replace(found, step=step_outcome_of(operation["verb"], step_outcomes(conn, operation, now)))


def with_outcome(
    engine: Engine, settings: Settings, operation_id: int, now: datetime
) -> tuple[dict[str, Any], Outcome] | None:
    """Operation *operation_id* and what became of its runs (the command
    line's ``operations show`` and the end of ``bulk``), or None."""
    with engine.connect() as conn:
        found = find(conn, operation_id)
        if found is None:
            return None
        return found, outcome(conn, settings, found, now)
