"""The workflow runtime: definitions, the outside verbs, the action plan,
signals, the system transitions and the worker (see docs/runtime.md)."""

from .definitions import (  # noqa: F401
    Backoff,
    FanOut,
    ReceivedSignal,
    Registry,
    Step,
    StepContext,
    Workflow,
)
from .errors import WorkflowError  # noqa: F401
