"""What resume will do for a paused run.

The dashboard labels its Resume button from the plan ("Retry
capture_payment", "Continue with notify_vendors"), so the plan and the
resume verb share this one function.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..rules import states
from .definitions import Workflow

RETRY = "retry"  # a new attempt of the step that failed
CONTINUE = "continue"  # the step after the last one that ended
FINISH = "finish"  # no step left: the run completes
RESUME = "resume"  # the step left pending (scheduled, waiting, in progress) goes on
PLAN_ACTIONS = (RETRY, CONTINUE, FINISH, RESUME)


@dataclass(frozen=True)
class ActionPlan:
    action: str  # one of PLAN_ACTIONS
    step: str | None  # the step it concerns; None for FINISH


def plan_for(run: Mapping[str, Any], latest: Mapping[str, Any] | None, definition: Workflow) -> ActionPlan:
    """The plan from the run's latest step row. Raises KeyError when
    continuing needs a step the definition no longer declares."""
    if latest is None:
        return ActionPlan(CONTINUE, definition.first_step.name)
    status = latest["status"]
    if status in (states.STEP_FAILED, states.STEP_CANCELLED):
        return ActionPlan(RETRY, latest["step_name"])
    if status in states.STEP_OPEN:
        return ActionPlan(RESUME, latest["step_name"])
    following = definition.next_step(latest["step_name"])
    if following is None:
        return ActionPlan(FINISH, None)
    return ActionPlan(CONTINUE, following.name)


def plan_of(run: Mapping[str, Any], latest: Mapping[str, Any] | None, definition: Workflow | None) -> ActionPlan | None:
    """What resume would do now, from the run and its latest step row;
    None when the run is not paused, its definition is not registered, or
    the definition no longer declares the step the run would go on from."""
    if run.get("status") != states.PAUSED or definition is None:
        return None
    try:
        return plan_for(run, latest, definition)
    except KeyError:
        return None
