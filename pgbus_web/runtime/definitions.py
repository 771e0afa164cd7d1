"""Workflow definitions: plain Python declaring a workflow's ordered steps.

A definition is a name (the ``workflow_class`` stored on every run) and an
ordered list of steps. Each step is a callable taking a ``StepContext`` and
options saying how the runtime treats it::

    order = Workflow("OrderWorkflow", [
        Step("reserve_stock", reserve_stock),
        Step("capture_payment", capture, retries=2, backoff=Backoff(timedelta(seconds=30))),
        Step("notify_vendors", notify_vendors, fan_out=True),
        Step("await_shipment", ship, wait_for="shipment_confirmed", wait_timeout=timedelta(days=3)),
        Step("send_receipt", send_receipt),
    ])

or, step by step, with the decorator::

    onboarding = Workflow("OnboardingWorkflow")

    @onboarding.step(retries=1)
    def send_welcome_email(ctx): ...

A ``Registry`` maps class names to definitions; the worker, the verbs that
need a step list and the dashboard look definitions up there.
"""

from __future__ import annotations

import hashlib
import importlib
import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

# What a step does when it runs out of attempts.
ON_FAILURE_PAUSE = "pause"  # the run pauses on the error until someone acts
ON_FAILURE_FAIL = "fail"  # the run ends as failed
ON_FAILURE = (ON_FAILURE_PAUSE, ON_FAILURE_FAIL)


class DefinitionError(ValueError):
    """A workflow definition that cannot run (bad option, duplicate step)."""


@dataclass(frozen=True)
class Backoff:
    """Delay before attempt n+1 after attempt n failed: ``base * factor**(n-1)``,
    capped at ``max``. factor=1 gives a fixed delay."""

    base: timedelta = timedelta(seconds=1)
    factor: float = 2.0
    max: timedelta | None = timedelta(hours=1)

    def delay(self, failed_attempt: int) -> timedelta:
        seconds = self.base.total_seconds() * (self.factor ** max(failed_attempt - 1, 0))
        if self.max is not None:
            seconds = min(seconds, self.max.total_seconds())
        return timedelta(seconds=seconds)


DEFAULT_BACKOFF = Backoff()


@dataclass(frozen=True)
class FanOut:
    """What a ``fan_out`` step returns: open a batch of *jobs* jobs and wait
    for it. The description defaults to ``<workflow_class>#<step_name>``."""

    jobs: int
    description: str | None = None


@dataclass(frozen=True)
class ReceivedSignal:
    """The signal a ``wait_for`` step was woken by (or holds from an earlier attempt)."""

    id: int
    name: str
    payload: dict[str, Any]
    idempotency_key: str | None = None


@dataclass(frozen=True)
class StepContext:
    """What a step callable gets."""

    workflow_id: str
    workflow_class: str
    step_name: str
    attempt: int
    arguments: dict[str, Any]
    signal: ReceivedSignal | None
    now: datetime
    subject_type: str | None = None
    subject_id: str | None = None


StepCallable = Callable[[StepContext], Any]


@dataclass(frozen=True)
class Step:
    """One step of a workflow and how the runtime treats it.

    retries       further attempts after a failure (0: one attempt only)
    backoff       delay before each further attempt
    delay         a timer: the step is due this long after it is scheduled
    wait_for      the signal name the step waits for before it runs
    wait_timeout  how long that wait may last (None: forever)
    fan_out       the callable returns a FanOut; the step waits for its batch
    on_failure    "pause" (default) or "fail" once out of attempts
    """

    name: str
    func: StepCallable
    retries: int = 0
    backoff: Backoff = DEFAULT_BACKOFF
    delay: timedelta | None = None
    wait_for: str | None = None
    wait_timeout: timedelta | None = None
    fan_out: bool = False
    on_failure: str = ON_FAILURE_PAUSE

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise DefinitionError("a step needs a non-empty name")
        if not callable(self.func):
            raise DefinitionError(f"step {self.name!r}: func is not callable")
        if not isinstance(self.retries, int) or self.retries < 0:
            raise DefinitionError(f"step {self.name!r}: retries must be an int >= 0")
        if self.on_failure not in ON_FAILURE:
            raise DefinitionError(f"step {self.name!r}: on_failure must be one of {', '.join(ON_FAILURE)}")
        for option in ("delay", "wait_timeout"):
            value = getattr(self, option)
            if value is not None and (not isinstance(value, timedelta) or value <= timedelta(0)):
                raise DefinitionError(f"step {self.name!r}: {option} must be a positive timedelta")
        if self.wait_timeout is not None and self.wait_for is None:
            raise DefinitionError(f"step {self.name!r}: wait_timeout needs wait_for")
        if self.wait_for is not None and self.fan_out:
            raise DefinitionError(f"step {self.name!r}: a step waits for a signal or a batch, not both")

    @property
    def max_attempts(self) -> int:
        return self.retries + 1


class Workflow:
    """A workflow definition: its class name and its ordered steps."""

    def __init__(self, name: str, steps: Iterable[Step] = ()) -> None:
        if not isinstance(name, str) or not name.strip():
            raise DefinitionError("a workflow needs a non-empty name")
        self.name = name
        self._steps: list[Step] = []
        for step in steps:
            self.add(step)

    def __repr__(self) -> str:
        return f"Workflow({self.name!r}, steps={list(self.step_names)!r})"

    def add(self, step: Step) -> Step:
        if any(existing.name == step.name for existing in self._steps):
            raise DefinitionError(f"{self.name}: step {step.name!r} is declared twice")
        self._steps.append(step)
        return step

    def step(self, name: str | None = None, **options: Any) -> Callable[[StepCallable], StepCallable]:
        """Decorator: declare the function as the next step (named after it by default)."""

        def register(func: StepCallable) -> StepCallable:
            self.add(Step(name or func.__name__, func, **options))
            return func

        return register

    @property
    def steps(self) -> tuple[Step, ...]:
        return tuple(self._steps)

    @property
    def step_names(self) -> tuple[str, ...]:
        return tuple(step.name for step in self._steps)

    @property
    def first_step(self) -> Step:
        if not self._steps:
            raise DefinitionError(f"{self.name} declares no steps")
        return self._steps[0]

    def get_step(self, name: str) -> Step | None:
        return next((step for step in self._steps if step.name == name), None)

    def has_step(self, name: str) -> bool:
        return self.get_step(name) is not None

    def next_step(self, name: str) -> Step | None:
        """The step after *name*, None after the last one. KeyError when
        *name* is not a step of this workflow."""
        names = self.step_names
        if name not in names:
            raise KeyError(name)
        index = names.index(name)
        return self._steps[index + 1] if index + 1 < len(self._steps) else None

    @property
    def digest(self) -> str:
        """A digest of the step list: it changes when a step is added,
        removed, renamed or moved. A run stores the digest it started on, so
        the dashboard can tell when a definition changed under a run."""
        text = json.dumps(list(self.step_names), separators=(",", ":"))
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


class Registry:
    """``workflow_class`` name -> definition."""

    def __init__(self, definitions: Iterable[Workflow] = ()) -> None:
        self._definitions: dict[str, Workflow] = {}
        for definition in definitions:
            self.register(definition)

    def register(self, definition: Workflow) -> Workflow:
        if not isinstance(definition, Workflow):
            raise DefinitionError(f"not a workflow definition: {definition!r}")
        if not definition.steps:
            raise DefinitionError(f"{definition.name} declares no steps")
        if definition.name in self._definitions:
            raise DefinitionError(f"{definition.name} is registered twice")
        self._definitions[definition.name] = definition
        return definition

    def get(self, name: str | None) -> Workflow | None:
        """The definition registered under *name*, None when unknown."""
        if name is None:
            return None
        return self._definitions.get(name)

    def __getitem__(self, name: str) -> Workflow:
        """The definition registered under *name*; KeyError when unknown."""
        return self._definitions[name]

    def __contains__(self, name: object) -> bool:
        return name in self._definitions

    def __iter__(self) -> Iterator[Workflow]:
        return iter(self._definitions.values())

    def __len__(self) -> int:
        return len(self._definitions)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._definitions)

    def digests(self) -> Mapping[str, str]:
        """{class name: digest}, what the dashboard compares runs against."""
        return {name: definition.digest for name, definition in self._definitions.items()}


# The name a definitions module exposes its registry under.
REGISTRY_ATTRIBUTE = "REGISTRY"


def load_registry(module_name: str) -> Registry:
    """The Registry that the module *module_name* exposes as REGISTRY;
    DefinitionError saying what is wrong otherwise."""
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise DefinitionError(f"cannot import definitions module {module_name!r}: {exc}") from None
    registry = getattr(module, REGISTRY_ATTRIBUTE, None)
    if not isinstance(registry, Registry):
        raise DefinitionError(
            f"{module_name} has no {REGISTRY_ATTRIBUTE} (a pgbus_web.runtime.Registry of workflow definitions)"
        )
    if not len(registry):
        raise DefinitionError(f"{module_name}.{REGISTRY_ATTRIBUTE} registers no workflow")
    return registry
