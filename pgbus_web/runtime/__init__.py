"""The workflow runtime: definitions, the outside verbs, the action plan,
signals, the system transitions and the worker (see docs/runtime.md)."""

from .definitions import (  # noqa: F401  (what a definitions module imports from here)
    Backoff,
    FanOut,
    ReceivedSignal,
    Registry,
    Step,
    StepContext,
    Workflow,
)
from .errors import WorkflowError  # noqa: F401  (what a step may raise, imported from here)
