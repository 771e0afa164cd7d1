"""The outside verbs: what an operator (dashboard, CLI, API) may do to a run.

Each verb is one transaction on the primary: the run's row locked, its
status checked, one guarded status change, its step rows and its audit
events with actor and reason. A verb on a run in the wrong status raises
WrongStatus (naming the status) and writes nothing; of two callers acting
at once, the second waits on the row lock, then finds the status moved and
gets that error.

Every verb takes the engine first, then the run's workflow_id, and keyword
options: ``actor`` (default "app"), ``reason``, ``at`` (an aware datetime or
an ISO 8601 string with a zone, in the future), ``from_step``, ``registry``
(the definitions, needed by resume, resume_at, skip and rerun), ``now``
(tests pass it) and ``operation_id`` (an operation acting on many runs,
runtime/operation_runner.py: its id goes into every audit event the verb writes,
and a run that operation already acted on raises AlreadyActed under the
row lock, so a chunk done again after a crash acts on nobody twice). Each
returns the run's row as it is after the verb.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError

from ..models import events, signals, steps, workflow_rows
from ..models.values import json_problem
from ..rules import states, verb_table
from . import flow
from .clock import parse_future, utcnow
from .definitions import Registry, Workflow
from .errors import (
    AlreadyActed,
    AttemptsUsedUp,
    ClassNotLoaded,
    InvalidPayload,
    InvalidSignalName,
    RunFinished,
    RunNotFound,
    SubjectBusy,
    UnknownStep,
    UnknownVerb,
    WorkflowError,
    WrongStatus,
)
from .plan import CONTINUE, FINISH, RETRY, plan_for

# Where each verb may start from (the verb table's from_statuses).
FROM = {verb.name: verb.from_statuses for verb in verb_table.TABLE}


def _reason(reason: str | None) -> str | None:
    reason = (reason or "").strip()
    return reason or None


class _Verb:
    """One verb's transaction: the locked run, and helpers that keep the
    verb's name, actor and time at hand."""

    def __init__(
        self,
        conn: Connection,
        run: dict[str, Any],
        verb: str,
        actor: str,
        now: datetime,
        operation_id: int | None = None,
    ):
        self.conn = conn
        self.run = run
        self.verb = verb
        self.actor = actor
        self.now = now
        self.operation_id = operation_id

    @property
    def workflow_id(self) -> str:
        return self.run["workflow_id"]

    def definition(self, registry: Registry | None) -> Workflow:
        definition = registry.get(self.run["workflow_class"]) if registry is not None else None
        if definition is None:
            raise ClassNotLoaded(self.workflow_id, self.verb, self.run["workflow_class"])
        return definition

    def step(self, definition: Workflow, name: str):
        step = definition.get_step(name)
        if step is None:
            raise UnknownStep(self.workflow_id, definition.name, name, definition.step_names)
        return step

    def event(self, event: str, *, step=None, reason=None, details=None) -> None:
        if self.operation_id is not None:
            details = {**(details or {}), "operation_id": self.operation_id}
        flow.record(
            self.conn, self.run, event, actor=self.actor, now=self.now, step=step, reason=reason, details=details
        )

    def move(self, to: str, **attrs: Any) -> None:
        """The verb's one guarded status change; anything but one row moved
        means the run changed under us, and the whole verb rolls back."""
        moved = workflow_rows.transition(self.conn, self.workflow_id, from_=FROM[self.verb], to=to, **attrs)
        if moved != 1:
            current = workflow_rows.find(self.conn, self.workflow_id)
            raise WrongStatus(self.workflow_id, self.verb, current["status"] if current else "gone", FROM[self.verb])


def _run_verb(
    engine: Engine,
    workflow_id: str,
    verb: str,
    actor: str | None,
    now: datetime | None,
    body: Callable[[_Verb], None],
    operation_id: int | None = None,
) -> dict[str, Any]:
    now = now or utcnow()
    with engine.begin() as conn:
        run = workflow_rows.lock_for(conn, workflow_id)
        if run is None:
            raise RunNotFound(workflow_id)
        # Under the row lock, so that of two processes doing one operation's
        # chunk (a takeover while the first still runs) only one acts.
        if operation_id is not None and events.operation_acted(conn, workflow_id, operation_id):
            raise AlreadyActed(workflow_id, operation_id)
        if run["status"] not in FROM[verb]:
            if verb == "signal":
                raise RunFinished(workflow_id, verb, run["status"])
            raise WrongStatus(workflow_id, verb, run["status"], FROM[verb])
        try:
            body(_Verb(conn, run, verb, actor or states.APP_ACTOR, now, operation_id))
        except steps.AttemptOverflow as problem:
            # Raised out of the transaction: everything the verb wrote rolls back.
            raise AttemptsUsedUp(workflow_id, verb, problem.step_name) from None
        return flow.held(workflow_rows.find(conn, workflow_id))


def _finish(v: _Verb, *, reason: str | None = None, **extra: Any) -> None:
    v.move(states.COMPLETED, finished_at=v.now, paused_at=None, **extra)
    v.event("finished", reason=reason, details={"status": states.COMPLETED})


def _go_on(v: _Verb, definition: Workflow, after: str) -> None:
    """Schedule the step after *after*, or complete the run after the last step."""
    following = definition.next_step(after)
    if following is None:
        _finish(v)
        return
    _, status = flow.schedule(v.conn, v.run, following, actor=v.actor, now=v.now)
    v.move(status, current_step=following.name, paused_at=None)


# --- resume, resume_at -------------------------------------------------------


def resume_details(plan, at: datetime | None) -> dict[str, Any]:
    """The details of a "resumed" event (also written by runtime/chunks/resume.py)."""
    details = {"action": plan.action, "step": plan.step}
    if at is not None:
        details["at"] = flow.iso(at)
    return details


def _resume(v: _Verb, registry: Registry | None, reason: str | None, at: datetime | None) -> None:
    definition = v.definition(registry)
    latest = steps.latest(v.conn, v.workflow_id)
    try:
        plan = plan_for(v.run, latest, definition)
    except KeyError:
        raise UnknownStep(
            v.workflow_id, definition.name, flow.held(latest)["step_name"], definition.step_names
        ) from None
    v.event("resumed", reason=reason, step=latest, details=resume_details(plan, at))
    if plan.action == FINISH:
        _finish(v)
        return
    if plan.action in (RETRY, CONTINUE):
        step = v.step(definition, flow.held(plan.step))
        row, status = flow.schedule(v.conn, v.run, step, actor=v.actor, now=v.now, due_at=at or v.now)
        v.move(status, current_step=step.name, paused_at=None)
        return
    # RESUME: the pending row goes on where it was.
    latest = flow.held(latest)
    if latest["status"] == states.STEP_IN_PROGRESS:
        v.move(states.RUNNING, paused_at=None)
        return
    if at is not None:
        # A step waiting on a signal or a batch becomes due at *at*; when it
        # runs it goes back to its wait, unless its signal is there by then.
        steps.update_step(
            v.conn,
            latest["id"],
            from_=(states.STEP_SCHEDULED, states.STEP_WAITING),
            now=v.now,
            status=states.STEP_SCHEDULED,
            scheduled_at=at,
        )
        v.move(states.READY, paused_at=None)
        return
    if latest["status"] == states.STEP_SCHEDULED:
        v.move(states.READY, paused_at=None)  # due when it was due: a timer keeps its time
        return
    row, status = flow.rewait(v.conn, v.run, latest, definition.get_step(latest["step_name"]), actor=v.actor, now=v.now)
    v.move(status, paused_at=None)


def resume(
    engine: Engine,
    workflow_id: str,
    *,
    reason: str | None = None,
    actor: str | None = None,
    registry: Registry | None = None,
    now: datetime | None = None,
    operation_id: int | None = None,
) -> dict[str, Any]:
    """paused -> by the action plan: retry the failed step (due now),
    continue with the next step, finish the run, or let the pending step go on."""
    return _run_verb(
        engine, workflow_id, "resume", actor, now, lambda v: _resume(v, registry, _reason(reason), None), operation_id
    )


def resume_at(
    engine: Engine,
    workflow_id: str,
    *,
    at: datetime | str | None,
    reason: str | None = None,
    actor: str | None = None,
    registry: Registry | None = None,
    now: datetime | None = None,
    operation_id: int | None = None,
) -> dict[str, Any]:
    """As resume, with the step due at *at* (which must be in the future)."""
    now = now or utcnow()
    when = parse_future(at, now=now, workflow_id=workflow_id)
    return _run_verb(
        engine,
        workflow_id,
        "resume_at",
        actor,
        now,
        lambda v: _resume(v, registry, _reason(reason), when),
        operation_id,
    )


# --- run_now, reschedule -----------------------------------------------------


def _due_step(v: _Verb) -> dict[str, Any]:
    latest = steps.latest(v.conn, v.workflow_id)
    if latest is None or latest["status"] != states.STEP_SCHEDULED:
        raise WrongStatus(v.workflow_id, v.verb, v.run["status"], FROM[v.verb])
    return latest


def _set_due(v: _Verb, event: str, at: datetime, reason: str | None) -> None:
    latest = _due_step(v)
    row = steps.update_step(v.conn, latest["id"], from_=states.STEP_SCHEDULED, now=v.now, scheduled_at=at)
    v.move(states.READY)
    v.event(event, step=row, reason=reason, details={"at": flow.iso(at), "was": flow.iso(latest["scheduled_at"])})


def run_now(
    engine: Engine,
    workflow_id: str,
    *,
    reason: str | None = None,
    actor: str | None = None,
    now: datetime | None = None,
    operation_id: int | None = None,
) -> dict[str, Any]:
    """ready -> ready with its step due now."""
    return _run_verb(
        engine,
        workflow_id,
        "run_now",
        actor,
        now,
        lambda v: _set_due(v, "run_now", v.now, _reason(reason)),
        operation_id,
    )


def reschedule(
    engine: Engine,
    workflow_id: str,
    *,
    at: datetime | str | None,
    reason: str | None = None,
    actor: str | None = None,
    now: datetime | None = None,
    operation_id: int | None = None,
) -> dict[str, Any]:
    """ready -> ready with its step due at *at* (in the future)."""
    now = now or utcnow()
    when = parse_future(at, now=now, workflow_id=workflow_id)
    return _run_verb(
        engine,
        workflow_id,
        "reschedule",
        actor,
        now,
        lambda v: _set_due(v, "rescheduled", when, _reason(reason)),
        operation_id,
    )


# --- skip --------------------------------------------------------------------


def _skip(v: _Verb, registry: Registry | None, reason: str | None) -> None:
    definition = v.definition(registry)
    latest = steps.latest(v.conn, v.workflow_id)
    if latest is not None and latest["status"] in states.STEP_OPEN:
        skipped = steps.update_step(
            v.conn, latest["id"], from_=states.STEP_OPEN, now=v.now, status=states.STEP_SKIPPED, finished_at=v.now
        )
    else:
        # Paused on a failure (the failed row stays as it ran), or between
        # steps: a skipped row records the step resume would have run.
        if latest is None:
            name = definition.first_step.name
        elif latest["status"] in (states.STEP_FAILED, states.STEP_CANCELLED):
            name = latest["step_name"]
        else:
            following = _following(v, definition, latest["step_name"])
            if following is None:
                raise WrongStatus(
                    v.workflow_id,
                    v.verb,
                    v.run["status"],
                    FROM[v.verb],
                    message=f"cannot skip run {v.workflow_id}: its last step already ended",
                )
            name = following.name
        v.step(definition, name)
        skipped = steps.insert_step(
            v.conn,
            workflow_id=v.workflow_id,
            step_name=name,
            now=v.now,
            status=states.STEP_SKIPPED,
            attempt=steps.next_attempt(v.conn, v.workflow_id, name),
            finished_at=v.now,
        )
    skipped = flow.held(skipped)
    flow.consume_held(v.conn, v.run, skipped["step_name"], now=v.now)
    v.event("step_skipped", step=skipped, reason=reason)
    _following(v, definition, skipped["step_name"])  # a step the definition lost cannot be skipped past
    _go_on(v, definition, skipped["step_name"])


def _following(v: _Verb, definition: Workflow, name: str):
    try:
        return definition.next_step(name)
    except KeyError:
        raise UnknownStep(v.workflow_id, definition.name, name, definition.step_names) from None


def skip(
    engine: Engine,
    workflow_id: str,
    *,
    reason: str | None = None,
    actor: str | None = None,
    registry: Registry | None = None,
    now: datetime | None = None,
    operation_id: int | None = None,
) -> dict[str, Any]:
    """paused, ready or waiting -> the current step skipped; the next one
    scheduled, or the run completed after the last step."""
    return _run_verb(
        engine, workflow_id, "skip", actor, now, lambda v: _skip(v, registry, _reason(reason)), operation_id
    )


# --- rerun -------------------------------------------------------------------


def _rerun(v: _Verb, registry: Registry | None, from_step: str | None, reason: str | None) -> None:
    definition = v.definition(registry)
    name = (from_step or "").strip() or definition.first_step.name
    step = v.step(definition, name)
    v.event("rerun", reason=reason, details={"from_step": name, "was": v.run["status"]})
    row, status = flow.schedule(v.conn, v.run, step, actor=v.actor, now=v.now, due_at=v.now)
    try:
        # A savepoint, so that the subject rule's refusal leaves the
        # transaction usable long enough to raise our own error.
        with v.conn.begin_nested():
            v.move(status, current_step=name, finished_at=None, paused_at=None)
    except IntegrityError as exc:
        constraint = getattr(getattr(exc.orig, "diag", None), "constraint_name", None)
        if constraint != workflow_rows.SUBJECT_INDEX:
            raise
        raise SubjectBusy(v.workflow_id, v.run["workflow_class"], v.run["subject_type"], v.run["subject_id"]) from None


def rerun(
    engine: Engine,
    workflow_id: str,
    *,
    from_step: str | None = None,
    reason: str | None = None,
    actor: str | None = None,
    registry: Registry | None = None,
    now: datetime | None = None,
    operation_id: int | None = None,
) -> dict[str, Any]:
    """completed, failed or cancelled -> ready with a new attempt of
    *from_step* (default: the first step), due now."""
    return _run_verb(
        engine,
        workflow_id,
        "rerun",
        actor,
        now,
        lambda v: _rerun(v, registry, from_step, _reason(reason)),
        operation_id,
    )


# --- cancel, pause -----------------------------------------------------------


def _cancel(v: _Verb, reason: str | None) -> None:
    cancelled = steps.cancel_open(v.conn, v.workflow_id, now=v.now)
    v.move(states.CANCELLED, finished_at=v.now)
    v.event(
        "cancelled",
        reason=reason,
        step=cancelled[-1] if cancelled else None,
        details={"was": v.run["status"], "cancelled_steps": [step["id"] for step in cancelled]},
    )


def cancel(
    engine: Engine,
    workflow_id: str,
    *,
    reason: str | None = None,
    actor: str | None = None,
    now: datetime | None = None,
    operation_id: int | None = None,
) -> dict[str, Any]:
    """Any ongoing status -> cancelled; its open step rows cancelled. A step
    running at that moment finishes, but its result is ignored."""
    return _run_verb(engine, workflow_id, "cancel", actor, now, lambda v: _cancel(v, _reason(reason)), operation_id)


def _pause(v: _Verb, reason: str | None) -> None:
    v.move(states.PAUSED, paused_at=v.now)
    v.event("paused", reason=reason, step=steps.latest(v.conn, v.workflow_id), details={"was": v.run["status"]})


def pause(
    engine: Engine,
    workflow_id: str,
    *,
    reason: str | None = None,
    actor: str | None = None,
    now: datetime | None = None,
    operation_id: int | None = None,
) -> dict[str, Any]:
    """ready, waiting or running -> paused: nothing new is scheduled until resumed."""
    return _run_verb(engine, workflow_id, "pause", actor, now, lambda v: _pause(v, _reason(reason)), operation_id)


# --- signal ------------------------------------------------------------------


@dataclass(frozen=True)
class SignalResult:
    signal: dict[str, Any]  # the stored signal (on a duplicate: the one stored first)
    duplicate: bool  # True: a signal with this idempotency key was already stored
    run: dict[str, Any] = field(default_factory=dict)  # the run after the signal


def _payload(payload: Any, workflow_id: str | None) -> dict[str, Any]:
    if payload is None or (isinstance(payload, str) and not payload.strip()):
        return {}
    if isinstance(payload, (str, bytes)):
        try:
            payload = json.loads(payload)
        except ValueError as exc:
            detail = exc.msg  # type: ignore[attr-defined]  # a JSONDecodeError's; bytes not UTF-8 fail here, as before
            raise InvalidPayload(f"not JSON ({detail})", workflow_id=workflow_id) from None
    if not isinstance(payload, Mapping):
        raise InvalidPayload(f"got a JSON {type(payload).__name__}", workflow_id=workflow_id)
    # What jsonb refuses (NaN, a NUL, a lone surrogate) is refused here,
    # before the transaction, rather than failing inside it.
    problem = json_problem(dict(payload))
    if problem is not None:
        raise InvalidPayload(
            f"it holds what jsonb cannot store ({problem[0]} {problem[1]})".rstrip(), workflow_id=workflow_id
        )
    try:
        return json.loads(json.dumps(dict(payload)))
    except (TypeError, ValueError, RecursionError) as exc:
        raise InvalidPayload(str(exc), workflow_id=workflow_id) from None


def signal(
    engine: Engine,
    workflow_id: str,
    name: str,
    payload: Any = None,
    idempotency_key: str | None = None,
    *,
    actor: str | None = None,
    now: datetime | None = None,
    operation_id: int | None = None,
    reason: str | None = None,
) -> SignalResult:
    """Deliver signal *name* to an ongoing run (*reason*, when given, goes
    on its audit event: an operation's or a script's why). It is stored pending; a
    step waiting for *name* claims it and becomes due now (the run goes
    from waiting to ready). A repeated *idempotency_key* stores nothing and
    does nothing: the result says duplicate. *payload*: a dict, or a JSON
    string holding an object."""
    if not isinstance(name, str) or not name.strip():
        raise InvalidSignalName(name, workflow_id=workflow_id)
    name = name.strip()
    body = _payload(payload, workflow_id)
    key = (idempotency_key or "").strip() or None
    result: dict[str, Any] = {}

    def deliver(v: _Verb) -> None:
        stored = signals.insert_signal(
            v.conn, workflow_id=v.workflow_id, name=name, payload=body, idempotency_key=key, now=v.now
        )
        if stored is None:
            # A duplicate has a key: the key is what it repeats.
            result.update(signal=signals.find_by_key(v.conn, v.workflow_id, flow.held(key)), duplicate=True)
            return
        result.update(signal=stored, duplicate=False)
        v.event(
            "signal_received",
            reason=_reason(reason),
            details={"signal": name, "signal_id": stored["id"], "idempotency_key": key},
        )
        if v.run["status"] != states.WAITING:
            return  # stays pending: a paused run claims it when resumed, a later step when it waits
        latest = steps.latest(v.conn, v.workflow_id)
        if latest is None or latest["status"] != states.STEP_WAITING or latest["wait_for"] != name:
            return
        due = steps.update_step(
            v.conn, latest["id"], from_=states.STEP_WAITING, now=v.now, status=states.STEP_SCHEDULED, scheduled_at=v.now
        )
        flow.claim_signal(v.conn, v.run, flow.held(due), stored, actor=v.actor, now=v.now)
        v.move(states.READY)
        result["signal"] = next(s for s in signals.for_run(v.conn, v.workflow_id) if s["id"] == stored["id"])

    run = _run_verb(engine, workflow_id, "signal", actor, now, deliver, operation_id)
    return SignalResult(signal=result["signal"], duplicate=result["duplicate"], run=run)


# --- by name, and in bulk ----------------------------------------------------

# The verbs POST /workflows/<workflow_id>/<verb> accepts (signals have their own route).
VERBS: dict[str, Callable[..., dict[str, Any]]] = {
    "resume": resume,
    "resume_at": resume_at,
    "run_now": run_now,
    "skip": skip,
    "rerun": rerun,
    "cancel": cancel,
    "pause": pause,
    "reschedule": reschedule,
}

# The keyword options each verb takes besides actor and now: its fields,
# and the registry when it needs the run's definition.
OPTIONS = {
    name: verb_table.BY_NAME[name].fields + (("registry",) if verb_table.BY_NAME[name].needs_class else ())
    for name in VERBS
}


def perform(
    engine: Engine,
    verb: str,
    workflow_id: str,
    *,
    actor: str | None = None,
    now: datetime | None = None,
    operation_id: int | None = None,
    **options: Any,
) -> dict[str, Any]:
    """Call *verb* by name with the options it takes out of *options*
    (reason, at, from_step, registry); the others are ignored, so a form's
    fields can be passed as they come."""
    function = VERBS.get(verb)
    if function is None:
        raise UnknownVerb(verb)
    taken = {name: options.get(name) for name in OPTIONS[verb]}
    return function(engine, workflow_id, actor=actor, now=now, operation_id=operation_id, **taken)


@dataclass
class BulkResult:
    moved: int = 0  # runs the verb moved
    moved_on: int = 0  # runs already in another status (or gone): nothing done
    errors: list[tuple[str, WorkflowError]] = field(default_factory=list)  # refused for another reason


def bulk(
    engine: Engine,
    verb: str,
    workflow_ids: Iterable[str],
    *,
    actor: str | None = None,
    now: datetime | None = None,
    **options: Any,
) -> BulkResult:
    """*verb* on each run, each in its own transaction: one run that moved
    on (or fails) does not stop or undo the others."""
    if verb not in VERBS:
        raise UnknownVerb(verb)
    result = BulkResult()
    for workflow_id in workflow_ids:
        try:
            perform(engine, verb, workflow_id, actor=actor, now=now, **options)
        except (WrongStatus, RunNotFound):
            result.moved_on += 1
        except WorkflowError as exc:
            result.errors.append((workflow_id, exc))
        else:
            result.moved += 1
    return result


# The payload check signal() applies, for callers that check first (operations).
parse_payload = _payload
