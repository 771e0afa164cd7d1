"""The API's writes: an outside verb or a signal on one run, starting
(previewing without ``confirmed``, creating with it) and cancelling an
operation. Each reads its JSON body (body.py) into the pages' own form
parsers (core/checks.py), calls the same runtime function as the page's
action, and answers what core/problems.py would say, as a problem: the
same checks, statuses and audit events as the pages. The time zone of an
``at`` without an offset is UTC."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import UTC
from typing import Any

from flask import Response, url_for

from ..core import acts, checks, operation_acts, page_reads, permissions, policy, policy_changes, problems
from ..core import checks as forms
from ..core import representations as rep
from ..core.words import done, results
from ..plumbing.state import state
from ..rules import run_filters, verb_table
from ..runtime import errors, operation_record, verbs
from ..runtime.clock import utcnow
from . import body, guard, reads
from .answers import json_answer
from .problems import from_refusal, problem

log = logging.getLogger(__name__)

# The body fields of each verb: the verb table's, each a string.
VERB_FIELDS = {name: {field: body.STRING for field in verb_table.BY_NAME[name].fields} for name in verbs.VERBS}
SIGNAL_FIELDS = {
    verb_table.SIGNAL_NAME: body.STRING,
    verb_table.PAYLOAD: body.OBJECT,
    verb_table.IDEMPOTENCY_KEY: body.STRING,
}
OPERATION_FIELDS = {
    "verb": body.STRING,
    "filters": body.OBJECT,
    "reason": body.STRING,
    verb_table.AT: body.STRING,
    verb_table.FROM_STEP: body.STRING,
    verb_table.SIGNAL_NAME: body.STRING,
    verb_table.PAYLOAD: body.OBJECT,
    "expected": body.INTEGER,
    "confirmed": body.BOOLEAN,
    "rate": body.NUMBER,
    "max_in_flight": body.INTEGER,
}
# What each verb's operation takes: the fields of every operation and the
# verb's own (the verb table's; a signal's idempotency key is one run's,
# never a group's). Another verb's field is refused as an unknown one,
# never silently dropped. (max_in_flight on a verb that starts no work is
# the runtime's CeilingNotForVerb, in its own words, at every door.)
OPERATION_COMMON = ("verb", "filters", "reason", "expected", "confirmed", "rate", "max_in_flight")
OPERATION_FIELDS_OF = {
    verb.name: {
        name: kind for name, kind in OPERATION_FIELDS.items() if name in OPERATION_COMMON or name in verb.fields
    }
    for verb in verb_table.TABLE
}
# PATCH /operations/<id>: the pace (null removes a limit).
PACE_FIELDS = {"rate": body.NUMBER, "max_in_flight": body.INTEGER}
# Approving, pausing, resuming or cancelling an operation: why, optionally.
WHY_FIELDS = {"reason": body.STRING}


def _refused(refused: body.BodyError) -> Response:
    return problem(refused.status, refused.message, field=refused.field)


def _after(workflow_id: str, message: str, run: dict[str, Any] | None, **extra: Any) -> Response:
    """The answer once the change committed: the message and the run as it
    is now. A failure reading it back still answers success (run: null):
    the change is made, and a retry would be refused."""
    detail = None
    try:
        with state().database.primary.connect() as conn:
            detail = reads.run_detail(conn, workflow_id, run=run)
    except Exception:  # noqa: BLE001 - committed; the read-back is a courtesy
        log.exception("pgbus-web: reading run %r back after an API write failed", workflow_id)
    return json_answer({"message": message, **extra, "run": detail})


def _find(workflow_id: str) -> dict[str, Any] | None:
    with state().database.primary.connect() as conn:
        return page_reads.find_run(conn, workflow_id)


def run_verb(workflow_id: str, verb: str) -> Response:
    """POST /runs/<workflow_id>/<verb>."""
    if verb not in verbs.VERBS:
        return from_refusal(problems.unknown_verb(verb))
    try:
        given = body.read(VERB_FIELDS[verb])
    except body.BodyError as refused:
        return _refused(refused)
    run = _find(workflow_id)
    if run is None:
        return from_refusal(problems.run_not_found(workflow_id))
    definition = page_reads.definition_of(state().settings, run["workflow_class"])
    try:
        options = forms.parse_verb(
            verb,
            body.as_form(given),
            tz=UTC,
            now=utcnow(),
            step_names=tuple(definition.step_names) if definition is not None else (),
        )
        acts.permit_class(state().database.primary, guard.principal(), verb, run["workflow_class"])
        after = verbs.perform(
            state().database.primary,
            verb,
            workflow_id,
            actor=guard.actor(),
            registry=state().settings.registry,
            **options.options(),
        )
    except (forms.FormError, errors.WorkflowError, permissions.NotPermitted) as refused:
        return from_refusal(problems.refusal(refused, verb=verb, workflow_id=workflow_id))
    return _after(workflow_id, done.verb_done(verb, run, after, options.at), after)


def send_signal(workflow_id: str) -> Response:
    """POST /runs/<workflow_id>/signals."""
    try:
        given = body.read(SIGNAL_FIELDS)
    except body.BodyError as refused:
        return _refused(refused)
    run = _find(workflow_id)
    if run is None:
        return from_refusal(problems.run_not_found(workflow_id))
    try:
        signal = forms.parse_signal(body.as_form(given))
        acts.permit_class(state().database.primary, guard.principal(), verb_table.SIGNAL, run["workflow_class"])
        result = verbs.signal(
            state().database.primary,
            workflow_id,
            signal.name,
            signal.payload,
            signal.idempotency_key,
            actor=guard.actor(),
        )
    except (forms.FormError, errors.WorkflowError, permissions.NotPermitted) as refused:
        return from_refusal(problems.refusal(refused, verb=verb_table.SIGNAL, workflow_id=workflow_id))
    message, _ = done.signal_done(result, signal.name, signal.idempotency_key)
    return _after(
        workflow_id, message, result.run or None, duplicate=result.duplicate, signal=rep.signal(result.signal)
    )


def _filters(given: dict[str, Any]) -> run_filters.RunFilters:
    raw = given.get("filters") or {}
    for name, value in raw.items():
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            raise body.refused(problems.wrong_type(f"filters.{name[:50]}", body.STRING, field="filters"))
    try:
        return run_filters.parse_strict(raw)
    except run_filters.FilterError as refused:
        raise body.BodyError(422, str(refused), field="filters") from None


def start_operation() -> Response:
    """POST /operations: without ``confirmed`` the preview (200); with it
    (and ``reason``, and the ``expected`` count the caller was shown, when
    it wants that checked) the operation created (201)."""
    now = utcnow()
    try:
        # "filters": null would read as no filter at all: every run.
        given = body.read(OPERATION_FIELDS, not_null=("filters",))
        if given.get("verb") in OPERATION_FIELDS_OF:
            given = body.read(OPERATION_FIELDS_OF[given["verb"]], not_null=("filters",))
        filters = _filters(given)
        parsed = forms.parse_operation(
            body.as_form({k: v for k, v in given.items() if k != "filters"}),
            tz=UTC,
            now=now,
            verbs=operation_record.VERBS,
        )
    except body.BodyError as refused:
        return _refused(refused)
    except forms.FormError as refused:
        return from_refusal(problems.refusal(refused))
    settings = state().settings
    engine = state().database.primary
    who = guard.principal()
    stuck = reads.stuck_of(now)
    try:
        if not parsed.confirmed:
            # The preview refuses what the start would: a ceiling on a verb
            # that starts no work.
            if parsed.pace.get("max_in_flight") is not None and parsed.verb not in verb_table.STARTS_WORK:
                raise operation_record.CeilingNotForVerb(parsed.verb)
            shown = operation_acts.preview(engine, settings, who, filters, parsed.verb, parsed.params, now=now)
            # The pace asked for and whether it will wait for approval, as the page's preview says.
            return json_answer(
                {
                    "preview": {
                        **rep.preview(shown, stuck_of=stuck),
                        "rate": parsed.pace.get("rate"),
                        "max_in_flight": parsed.pace.get("max_in_flight"),
                        "needs_approval": operation_acts.approval(engine, settings).needed(shown.verb, shown.fits),
                    }
                }
            )
        created = operation_acts.start(
            engine,
            settings,
            who,
            filters,
            parsed.verb,
            parsed.params,
            reason=parsed.reason,
            expected=parsed.expected,
            now=now,
            **parsed.pace,
        )
    except operation_record.CountChanged as refused:
        return from_refusal(problems.refusal(refused), preview=rep.preview(refused.preview, stuck_of=stuck))
    except (errors.WorkflowError, operation_record.OperationError, permissions.NotPermitted) as refused:
        return from_refusal(problems.refusal(refused, verb=parsed.verb))
    location = url_for("pgbus_api.operation", operation_id=created["id"])
    return json_answer(
        {"message": results.operation_created(created), "operation": rep.operation(created)},
        201,
        {"Location": location},
    )


def cancel_operation(operation_id: int) -> Response:
    """POST /operations/<id>/cancel, with an optional ``reason``."""
    return _reasoned_change(operation_id, operation_acts.cancel, results.operation_cancelled)


def _reasoned_change(operation_id: int, act, said):
    """_operation_change with a body of a reason alone: *act*(engine,
    principal, id, reason=...) decides."""
    return _operation_change(
        operation_id,
        WHY_FIELDS,
        lambda engine, op, given: act(engine, guard.principal(), op, reason=given.get("reason")),
        said,
    )


def _operation_change(operation_id: int, fields: Mapping[str, str], change, said, *, nulls: bool = False):
    """A change of operation *operation_id*: its body (*fields*) read,
    *change*(engine, id, given) decides, the answer is the message
    (*said*(the operation), results.py's sentence) and the operation as
    it is now."""
    try:
        given = body.read(fields, nulls=nulls)
    except body.BodyError as refused:
        return _refused(refused)
    try:
        # The reason's own checks before the operation's state: a field
        # that cannot be used is refused whatever the operation is doing.
        if "reason" in given:
            checks.reason(body.as_form(given))
    except checks.FormError as refused:
        return from_refusal(problems.refusal(refused))
    try:
        checks.operation_id(operation_id)
    except operation_record.OperationNotFound as refused:
        return from_refusal(problems.refusal(refused))
    try:
        changed = change(state().database.primary, operation_id, given)
    except (operation_record.OperationError, checks.FormError, permissions.NotPermitted) as refused:
        return from_refusal(problems.refusal(refused))
    return json_answer({"message": said(changed), "operation": rep.operation(changed)})


def pause_operation(operation_id: int) -> Response:
    """POST /operations/<id>/pause."""
    return _reasoned_change(operation_id, operation_acts.pause, results.operation_paused)


def resume_operation(operation_id: int) -> Response:
    """POST /operations/<id>/resume: a paused operation goes on."""
    return _reasoned_change(operation_id, operation_acts.go_on, results.operation_resumed)


def approve_operation(operation_id: int) -> Response:
    """POST /operations/<id>/approve: by a caller other than its requester."""
    return _reasoned_change(operation_id, operation_acts.approve, results.operation_approved)


def pace_operation(operation_id: int) -> Response:
    """PATCH /operations/<id> (and POST /operations/<id>/pace): rate and
    max_in_flight; null removes that limit."""

    def change(engine, op, given):
        form = {name: "" if value is None else str(value) for name, value in given.items()}
        return operation_acts.set_pace(engine, guard.principal(), op, checks.parse_pace(form))

    return _operation_change(operation_id, PACE_FIELDS, change, results.operation_paced, nulls=True)


POLICY_FIELDS = {"value": body.ANY, "reason": body.STRING, "version": body.INTEGER}


def set_policy_rule(key: str) -> Response:
    """PUT /policy/<key>: one rule's new value, with a reason (and the
    version read, to be told when it changed since)."""
    try:
        given = body.read(POLICY_FIELDS, nulls=True)
    except body.BodyError as refused:
        return _refused(refused)
    if "value" not in given:
        return from_refusal(problems.value_missing())
    try:
        made = policy_changes.change(
            state().database.primary,
            guard.principal(),
            key,
            given["value"],
            reason=given.get("reason"),
            expected_version=given.get("version"),
        )
    except (policy.PolicyError, permissions.NotPermitted) as refused:
        return from_refusal(problems.refusal(refused))
    return json_answer({"message": results.policy_changed(made["key"]), "change": rep.policy_change(made)})
