"""What the runtime raises when a verb cannot act.

Every error is a ``WorkflowError`` and carries the values a message needs
(the run, its status, the verb, the step...), so the web layer can answer
with a translated sentence and a status code without parsing text. Raising
one always means nothing was written: the verb's transaction rolls back.
"""

from __future__ import annotations

from typing import Any


class WorkflowError(Exception):
    """Base of every runtime error. ``code`` names the kind, for the web."""

    code = "workflow_error"

    def __init__(self, message: str, *, workflow_id: str | None = None) -> None:
        super().__init__(message)
        self.workflow_id = workflow_id


class RunNotFound(WorkflowError):
    """No run has this workflow_id."""

    code = "run_not_found"

    def __init__(self, workflow_id: str) -> None:
        super().__init__(f"no workflow run {workflow_id!r}", workflow_id=workflow_id)


class WrongStatus(WorkflowError):
    """The verb is not allowed in the run's current status (another caller
    may have acted first). ``status`` is the run's status now."""

    code = "wrong_status"

    def __init__(
        self,
        workflow_id: str,
        verb: str,
        status: str,
        allowed: tuple[str, ...] = (),
        message: str | None = None,
    ) -> None:
        self.verb = verb
        self.status = status
        self.allowed = tuple(allowed)
        super().__init__(
            message
            or f"cannot {verb} run {workflow_id}: it is {status}"
            + (f" (allowed from: {', '.join(self.allowed)})" if self.allowed else ""),
            workflow_id=workflow_id,
        )


class RunFinished(WrongStatus):
    """A signal sent to a run that already ended."""

    code = "run_finished"

    def __init__(self, workflow_id: str, verb: str, status: str) -> None:
        super().__init__(
            workflow_id, verb, status, message=f"cannot {verb} run {workflow_id}: it already ended ({status})"
        )


class ClassNotLoaded(WorkflowError):
    """The verb needs the run's step list, and its definition is not
    registered in this process."""

    code = "class_not_loaded"

    def __init__(self, workflow_id: str, verb: str, workflow_class: str) -> None:
        self.verb = verb
        self.workflow_class = workflow_class
        super().__init__(
            f"cannot {verb} run {workflow_id}: workflow class {workflow_class} is not registered here",
            workflow_id=workflow_id,
        )


class UnknownStep(WorkflowError):
    """A step name the run's definition does not declare (rerun's
    from_step, or the step a resume would need)."""

    code = "unknown_step"

    def __init__(self, workflow_id: str, workflow_class: str, step: str, known: tuple[str, ...]) -> None:
        self.workflow_class = workflow_class
        self.step = step
        self.known = tuple(known)
        super().__init__(
            f"{workflow_class} has no step {step!r} (steps: {', '.join(self.known)})",
            workflow_id=workflow_id,
        )


class InvalidTime(WorkflowError):
    """A time that is unparseable, without a time zone, or not in the future."""

    code = "invalid_time"

    # Why the time was refused.
    UNPARSEABLE = "unparseable"
    NAIVE = "naive"
    PAST = "past"
    MISSING = "missing"

    def __init__(self, value: Any, problem: str, *, workflow_id: str | None = None) -> None:
        self.value = value
        self.problem = problem
        messages = {
            self.UNPARSEABLE: f"cannot read {value!r} as a time (ISO 8601 with a zone, e.g. 2030-01-31T14:05:00Z)",
            self.NAIVE: f"the time {value!r} has no time zone",
            self.PAST: f"the time {value!r} is not in the future",
            self.MISSING: "a time is required",
        }
        super().__init__(messages.get(problem, f"invalid time {value!r}"), workflow_id=workflow_id)


class InvalidPayload(WorkflowError):
    """A signal payload that is not a JSON object."""

    code = "invalid_payload"

    def __init__(self, detail: str, *, workflow_id: str | None = None) -> None:
        self.detail = detail
        super().__init__(f"the signal payload must be a JSON object: {detail}", workflow_id=workflow_id)


class InvalidSignalName(WorkflowError):
    """A signal without a usable name."""

    code = "invalid_signal_name"

    def __init__(self, name: Any, *, workflow_id: str | None = None) -> None:
        self.name = name
        super().__init__(f"a signal needs a non-empty name, got {name!r}", workflow_id=workflow_id)


class UnknownVerb(WorkflowError):
    """A verb name that is not one of the outside verbs."""

    code = "unknown_verb"

    def __init__(self, verb: str) -> None:
        self.verb = verb
        super().__init__(f"unknown workflow verb {verb!r}")


class SubjectBusy(WorkflowError):
    """Rerunning would make a second ongoing run for the same subject."""

    code = "subject_busy"

    def __init__(self, workflow_id: str, workflow_class: str, subject_type: str, subject_id: str) -> None:
        self.workflow_class = workflow_class
        self.subject_type = subject_type
        self.subject_id = subject_id
        super().__init__(
            f"cannot rerun {workflow_id}: {workflow_class} already has an ongoing run for {subject_type} {subject_id}",
            workflow_id=workflow_id,
        )


class AttemptsUsedUp(WorkflowError):
    """The verb would add an attempt of a step whose stored attempt number
    is the highest the column holds (rules.limits.ATTEMPT_MAX)."""

    code = "attempts_used_up"

    def __init__(self, workflow_id: str, verb: str, step: str) -> None:
        self.verb = verb
        self.step = step
        super().__init__(
            f"cannot {verb} run {workflow_id}: step {step} is at its highest attempt number; nothing was changed",
            workflow_id=workflow_id,
        )


class AlreadyActed(WorkflowError):
    """An operation's verb on a run that operation already acted on (its
    chunk is being done again after a crash or a takeover)."""

    code = "already_acted"

    def __init__(self, workflow_id: str, operation_id: int) -> None:
        self.operation_id = operation_id
        super().__init__(f"operation {operation_id} already acted on run {workflow_id}", workflow_id=workflow_id)
