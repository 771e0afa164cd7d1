"""The one table of outside verbs: from which statuses each may start,
whether it needs the run's definition loaded in this process, and the
fields an operator gives it. The runtime's checks, the run page's forms,
the bulk actions (and any other door onto the verbs) all read it here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from . import states

# Fields an operator may give a verb (a form's inputs, a command's options).
REASON = "reason"
AT = "at"
FROM_STEP = "from_step"
SIGNAL_NAME = "name"
PAYLOAD = "payload"
IDEMPOTENCY_KEY = "idempotency_key"

# The verb that sends a signal (its fields are the signal's, not a reason).
SIGNAL = "signal"


@dataclass(frozen=True)
class Verb:
    name: str
    # The run statuses it may start from.
    from_statuses: tuple[str, ...]
    # Needs the run's step list, i.e. its definition registered here:
    # resume, resume_at and rerun cannot find the step to schedule without
    # it, and skip would find no next step and wrongly finish the run (the
    # reference's CLASS_ACTIONS).
    needs_class: bool
    # What the operator gives it, besides who they are.
    fields: tuple[str, ...]

    def allows(self, status: str | None) -> bool:
        return status in self.from_statuses


# In the order a run's buttons are shown: each status's verbs keep this order.
TABLE: tuple[Verb, ...] = (
    Verb("resume", (states.PAUSED,), True, (REASON,)),
    Verb("resume_at", (states.PAUSED,), True, (AT, REASON)),
    Verb("run_now", (states.READY,), False, (REASON,)),
    Verb("reschedule", (states.READY,), False, (AT, REASON)),
    Verb("skip", (states.PAUSED, states.READY, states.WAITING), True, (REASON,)),
    Verb("pause", (states.READY, states.WAITING, states.RUNNING), False, (REASON,)),
    Verb("cancel", states.ONGOING, False, (REASON,)),
    Verb(SIGNAL, states.ONGOING, False, (SIGNAL_NAME, PAYLOAD, IDEMPOTENCY_KEY)),
    Verb("rerun", states.TERMINAL, True, (FROM_STEP, REASON)),
)
BY_NAME: dict[str, Verb] = {verb.name: verb for verb in TABLE}
# The verbs that need the run's definition loaded here.
CLASS_VERBS: tuple[str, ...] = tuple(verb.name for verb in TABLE if verb.needs_class)


def get(name: str) -> Verb | None:
    return BY_NAME.get(name)


def allowed(status: str | None, class_loaded: bool) -> tuple[str, ...]:
    """The verbs a run in *status* allows now, in button order; without the
    class verbs when its definition is not registered here."""
    return tuple(verb.name for verb in TABLE if verb.allows(status) and (class_loaded or not verb.needs_class))


def fitting(statuses: Iterable[str]) -> tuple[str, ...]:
    """The verbs that may start from at least one of *statuses*, in button
    order: what an action on many runs of those statuses can do."""
    present = set(statuses)
    return tuple(verb.name for verb in TABLE if present.intersection(verb.from_statuses))


def available_actions(run: Mapping[str, Any], class_loaded: bool) -> tuple[str, ...]:
    """The verbs allowed on *run* now (the reference's available_actions)."""
    return allowed(run.get("status"), class_loaded)


# The verbs that start work on a run (a step scheduled or woken): an
# operation of one of them may have a ceiling of runs in flight. pause and
# cancel stop work and take none.
STARTS_WORK = tuple(verb.name for verb in TABLE if verb.name not in ("pause", "cancel"))
