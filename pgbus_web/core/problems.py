"""Every refusal in one place: what the runtime, a form, a filter or a
lock action refused, as the HTTP status and the operator's sentence (and
the form field to show it beside, when a field is at fault). Every door
reads it: the pages (the run routes, the Locks routes, the error
handlers), the API (api/problems.py: the status and the sentence as a
problem), the command line (exit_code: 2 for the caller's input) and MCP
(the sentence as the tool error's text). docs/refusals.md lists it.
Nothing here draws a page (answers.py does).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass

from ..i18n import t
from ..locks import lock_acts
from ..rules import roles, states
from ..rules.run_filters import FilterError
from ..runtime import errors, operation_record
from . import checks
from .compare import CompareRefused
from .operation_acts import RateAbovePolicy
from .permissions import NotPermitted
from .policy import PolicyError
from .redacting import SearchRefused
from .sessions import SessionNotFound, TokenNotFound
from .words import verb_labels

log = logging.getLogger(__name__)

# The statuses of a refusal of the caller's input (what was sent cannot
# be used, whatever the runs' state): sent again unchanged, it is refused
# again. 404 and 409 are about what is stored now.
INPUT_STATUSES = (400, 413, 415, 422)
# The command line's exit codes: a refusal of its input, of anything else.
EXIT_INPUT, EXIT_REFUSED = 2, 1


@dataclass(frozen=True)
class Refusal:
    status: int
    message: str
    # The form field at fault, to show the message beside it (None: the
    # whole form, or no form).
    field: str | None = None
    # The title of a page that shows the refusal alone.
    title_key: str = "pgbus.web.errors.bad_request_title"

    @property
    def title(self) -> str:
        return t(self.title_key)


def printable(value: str) -> str:
    """*value* to show back in a message: a NUL (which no stored id or
    class can hold) as the replacement character."""
    return value.replace("\x00", "\ufffd")


def already(status: str) -> str:
    """'This run is already <status>': what the loser of a race reads."""
    return {
        states.READY: t("pgbus.workflows.forms.already.ready"),
        states.RUNNING: t("pgbus.workflows.forms.already.running"),
        states.WAITING: t("pgbus.workflows.forms.already.waiting"),
        states.PAUSED: t("pgbus.workflows.forms.already.paused"),
        states.COMPLETED: t("pgbus.workflows.forms.already.completed"),
        states.FAILED: t("pgbus.workflows.forms.already.failed"),
        states.CANCELLED: t("pgbus.workflows.forms.already.cancelled"),
    }.get(status) or t("pgbus.workflows.forms.already.other", status=status)


def run_not_found(workflow_id: str) -> Refusal:
    return Refusal(
        404,
        t("pgbus.workflows.show.not_found", workflow_id=printable(workflow_id)),
        title_key="pgbus.workflows.show.not_found_title",
    )


def class_not_found(workflow_class: str) -> Refusal:
    return Refusal(
        404,
        t("pgbus.workflows.insights.not_found", workflow_class=printable(workflow_class)),
        title_key="pgbus.workflows.insights.not_found_title",
    )


def batch_not_found(batch_id: str) -> Refusal:
    return Refusal(
        404,
        t("pgbus.batches.not_found", batch_id=printable(batch_id)),
        title_key="pgbus.batches.not_found_title",
    )


def unknown_verb(verb: str) -> Refusal:
    return Refusal(
        404,
        t("pgbus.workflows.forms.errors.unknown_verb", verb=verb[:50]),
        title_key="pgbus.web.errors.not_found_title",
    )


def _time(problem: errors.InvalidTime) -> str:
    if problem.problem == errors.InvalidTime.MISSING:
        return t("pgbus.workflows.forms.errors.time_missing")
    if problem.problem == errors.InvalidTime.PAST:
        return t("pgbus.workflows.forms.errors.time_past", value=str(problem.value))
    return t("pgbus.workflows.forms.errors.time_unreadable", value=str(problem.value))


def _workflow(problem: errors.WorkflowError, verb: str | None, workflow_id: str | None) -> Refusal:
    label = verb_labels.verb_label(verb) if verb else ""
    if isinstance(problem, errors.RunNotFound):
        return run_not_found(workflow_id or problem.workflow_id or "")
    if isinstance(problem, errors.WrongStatus):
        if problem.status == "gone":
            return run_not_found(workflow_id or problem.workflow_id or "")
        if problem.status in problem.allowed:
            # Allowed from this status, refused for another reason (say,
            # skipping past the last step): "already" would not be true.
            return Refusal(409, t("pgbus.workflows.forms.errors.not_now", action=label))
        return Refusal(409, already(problem.status))
    if isinstance(problem, errors.InvalidTime):
        return Refusal(422, _time(problem), field="at")
    if isinstance(problem, errors.UnknownStep):
        message = t("pgbus.workflows.forms.errors.unknown_step", step=problem.step, steps=", ".join(problem.known))
        return Refusal(422, message, field="from_step") if verb == "rerun" else Refusal(409, message)
    if isinstance(problem, errors.ClassNotLoaded):
        return Refusal(
            409, t("pgbus.workflows.forms.errors.class_not_loaded", action=label, workflow_class=problem.workflow_class)
        )
    if isinstance(problem, errors.AttemptsUsedUp):
        return Refusal(409, t("pgbus.workflows.forms.errors.attempts_used_up", step=problem.step, action=label))
    if isinstance(problem, errors.SubjectBusy):
        return Refusal(
            409,
            t(
                "pgbus.workflows.forms.errors.subject_busy",
                workflow_class=problem.workflow_class,
                subject=f"{problem.subject_type} {problem.subject_id}",
            ),
        )
    if isinstance(problem, errors.InvalidSignalName):
        return Refusal(422, t("pgbus.workflows.forms.errors.signal_name_missing"), field="name")
    if isinstance(problem, errors.UnknownVerb):
        return Refusal(
            422, t("pgbus.workflows.forms.errors.unknown_verb", verb=printable(problem.verb)[:50]), field="verb"
        )
    if isinstance(problem, errors.InvalidPayload):
        return Refusal(422, t("pgbus.workflows.forms.errors.payload_not_json", detail=problem.detail), field="payload")
    log.warning("pgbus-web: %s on %s refused: %s", verb, workflow_id, problem)
    return Refusal(409, t("pgbus.workflows.forms.errors.refused", action=label, detail=str(problem)))


def _lock(problem: lock_acts.LockActionError) -> Refusal:
    if isinstance(problem, lock_acts.LockNotFound):
        return Refusal(404, t("pgbus.locks.errors.not_found", lock_key=problem.lock_key))
    if isinstance(problem, lock_acts.QueueNotFound):
        return Refusal(404, t("pgbus.locks.errors.queue_not_found", queue=problem.queue_name))
    if isinstance(problem, lock_acts.MessageNotFound):
        return Refusal(409, t("pgbus.locks.errors.message_not_found", msg_id=problem.msg_id, queue=problem.queue_name))
    return Refusal(400, str(problem))


def operation_not_found(operation_id: object) -> Refusal:
    return Refusal(
        404,
        t("pgbus.operations.errors.not_found", operation_id=printable(str(operation_id))[:50]),
        title_key="pgbus.web.errors.not_found_title",
    )


def _operation_in(
    problem: operation_record.NotPausable | operation_record.NotPaused | operation_record.NotAwaitingApproval,
) -> dict[str, object]:
    """The values of a refusal of an operation's state: its id and its
    status in words."""
    return {"operation_id": problem.operation["id"], "status": t(f"pgbus.operations.statuses.{problem.status}")}


def _operation(problem: operation_record.OperationError) -> Refusal:
    if isinstance(problem, operation_record.ReasonMissing):
        return Refusal(422, t("pgbus.operations.errors.reason_missing"), field="reason")
    if isinstance(problem, operation_record.NothingFits):
        return Refusal(
            422,
            t(
                "pgbus.operations.errors.nothing_fits",
                action=verb_labels.verb_label(problem.preview.verb),
                total=problem.preview.total,
            ),
        )
    if isinstance(problem, operation_record.CountChanged):
        return Refusal(
            409, t("pgbus.operations.errors.count_changed", expected=problem.expected, total=problem.preview.total)
        )
    if isinstance(problem, operation_record.OperationNotFound):
        return operation_not_found(problem.operation_id)
    if isinstance(problem, operation_record.NotCancellable):
        return Refusal(
            409, t("pgbus.operations.errors.not_cancellable", status=t(f"pgbus.operations.statuses.{problem.status}"))
        )
    if isinstance(problem, operation_record.NotPausable):
        return Refusal(409, t("pgbus.operations.errors.not_pausable", **_operation_in(problem)))
    if isinstance(problem, operation_record.NotPaused):
        return Refusal(409, t("pgbus.operations.errors.not_paused", **_operation_in(problem)))
    if isinstance(problem, operation_record.NotAwaitingApproval):
        return Refusal(409, t("pgbus.operations.errors.not_awaiting_approval", **_operation_in(problem)))
    if isinstance(problem, operation_record.OwnApproval):
        return Refusal(
            403,
            t(
                "pgbus.operations.errors.own_approval",
                operation_id=problem.operation["id"],
                actor=problem.operation["actor"],
            ),
            title_key="pgbus.web.errors.forbidden_title",
        )
    if isinstance(problem, operation_record.PaceEnded):
        return Refusal(
            409,
            t(
                "pgbus.operations.errors.pace_ended",
                operation_id=problem.operation["id"],
                status=t(f"pgbus.operations.statuses.{problem.status}"),
            ),
        )
    if isinstance(problem, operation_record.CeilingNotForVerb):
        return Refusal(
            422,
            t("pgbus.operations.errors.ceiling_not_for_verb", action=verb_labels.verb_label(problem.verb)),
            field="max_in_flight",
        )
    return Refusal(400, str(problem))


def power_label(power: str) -> str:
    """A power's name as the pages say it: a verb's label, or approve,
    reveal, change the policy."""
    if power in roles.RUN_VERBS:
        return verb_labels.verb_label(power)
    return t(f"pgbus.policy.powers.{power}")


def _not_permitted(problem: NotPermitted) -> Refusal:
    forbidden = "pgbus.web.errors.forbidden_title"
    if problem.principal.break_glass and problem.power == roles.APPROVE:
        return Refusal(403, t("pgbus.policy.errors.break_glass_approve"), title_key=forbidden)
    if problem.workflow_class is None:
        return Refusal(
            403,
            t("pgbus.policy.errors.not_permitted_any", actor=problem.actor, action=power_label(problem.power)),
            title_key=forbidden,
        )
    return Refusal(
        403,
        t(
            "pgbus.policy.errors.not_permitted",
            actor=problem.actor,
            action=power_label(problem.power),
            workflow_class=printable(problem.workflow_class),
        ),
        title_key=forbidden,
    )


def token_refused(reason: str) -> Refusal:
    """A bearer token (the API's, or a command's --token) refused: 401,
    saying whether it expired (core/tokens.refused)."""
    if reason == "expired":
        return Refusal(401, t("pgbus.api.errors.expired_token"))
    return Refusal(401, t("pgbus.api.errors.bad_token"))


def session_name_missing() -> Refusal:
    """Ending every session of a person, with no person named."""
    return Refusal(422, t("pgbus.sessions.errors.name_missing"), field="name")


def _policy(problem: PolicyError) -> Refusal:
    """A policy change refused: 409 when the rule changed under the
    caller, 422 for a value the rule cannot take."""
    status = 409 if problem.kind == "changed_under" else 422
    values = {name: printable(str(value)) for name, value in problem.values.items()}
    return Refusal(
        status,
        t(f"pgbus.policy.errors.{problem.kind}", **values),
        field="reason" if problem.kind == "reason_missing" else "value",
    )


def _compare(problem: CompareRefused) -> Refusal:
    """A comparison of two runs refused (core/compare.py)."""
    value = printable(problem.value)
    if problem.reason == CompareRefused.NOT_FOUND:
        return run_not_found(problem.value)
    if problem.reason == CompareRefused.SAME:
        return Refusal(422, t("pgbus.workflows.compare.errors.same", workflow_id=value))
    key = {
        CompareRefused.MISSING: "pgbus.workflows.compare.errors.missing",
        CompareRefused.UNKNOWN: "pgbus.workflows.compare.errors.unknown",
        CompareRefused.REPEATED: "pgbus.workflows.compare.errors.repeated",
        CompareRefused.AMBIGUOUS: "pgbus.workflows.compare.errors.ambiguous",
    }.get(problem.reason, "pgbus.workflows.compare.errors.malformed")
    return Refusal(400, t(key, name=printable(problem.name or "")[:50], value=value))


# --- what a door refuses before the core is asked --------------------------------

FORBIDDEN_TITLE = "pgbus.web.errors.forbidden_title"
NOT_FOUND_TITLE = "pgbus.web.errors.not_found_title"


def forbidden() -> Refusal:
    """A caller who may not act (or not see) asked to."""
    return Refusal(403, t("pgbus.workflows.forms.errors.forbidden"), title_key=FORBIDDEN_TITLE)


def csrf_refused() -> Refusal:
    """A page's form without its CSRF token (or with a stale one)."""
    return Refusal(400, t("pgbus.workflows.forms.errors.csrf"))


def api_csrf_refused() -> Refusal:
    """A request to the API, with a session's cookie, without its CSRF token."""
    return Refusal(400, t("pgbus.api.errors.csrf"))


def too_large(max_kib: int) -> Refusal:
    """A body longer than *max_kib* KiB."""
    return Refusal(
        413,
        t("pgbus.workflows.forms.errors.too_large", max=max_kib),
        title_key="pgbus.workflows.forms.errors.too_large_title",
    )


def sign_in_required() -> Refusal:
    return Refusal(401, t("pgbus.web.auth.required"))


def http_refusal(status: int) -> Refusal:
    """An API request no view took (no such address, a method it does not
    take, any other of Werkzeug's refusals)."""
    if status == 404:
        return Refusal(404, t("pgbus.api.errors.not_found"), title_key=NOT_FOUND_TITLE)
    if status == 405:
        return Refusal(405, t("pgbus.api.errors.method"))
    return Refusal(status, t("pgbus.api.errors.http", status=status))


def page_refusal(status: int) -> Refusal | None:
    """A page's 403, 404 or 405 (None: Werkzeug's own answer stays)."""
    found = {
        403: (FORBIDDEN_TITLE, "pgbus.web.errors.forbidden"),
        404: (NOT_FOUND_TITLE, "pgbus.web.errors.not_found"),
        405: ("pgbus.web.errors.method_title", "pgbus.web.errors.method"),
    }.get(status)
    if found is None:
        return None
    title, message = found
    return Refusal(status, t(message), title_key=title)


def database_unavailable(*, too_slow: bool) -> Refusal:
    """The database is away, or answered too slowly (said apart: "not
    answering" would send the operator looking for an outage)."""
    if too_slow:
        return Refusal(503, t("pgbus.web.errors.too_slow"), title_key="pgbus.web.errors.too_slow_title")
    return Refusal(503, t("pgbus.web.errors.unavailable"), title_key="pgbus.web.errors.unavailable_title")


def server_error() -> Refusal:
    """Anything a view did not expect (the log keeps the traceback)."""
    return Refusal(500, t("pgbus.web.errors.server"), title_key="pgbus.web.errors.server_title")


def body_not_json_type() -> Refusal:
    return Refusal(415, t("pgbus.api.errors.not_json_type"))


def body_not_json(detail: str) -> Refusal:
    return Refusal(400, t("pgbus.api.errors.not_json", detail=detail))


def body_not_object() -> Refusal:
    return Refusal(422, t("pgbus.api.errors.not_object"))


def unstorable(value: str) -> Refusal:
    """A value jsonb cannot store (its first 40 characters shown)."""
    return Refusal(422, t("pgbus.api.errors.unstorable", value=value[:40]))


def unknown_field(name: str, known: Iterable[str]) -> Refusal:
    """A field (or a tool's argument) that is not one of *known*."""
    return Refusal(
        422, t("pgbus.api.errors.unknown_field", field=name[:50], known=", ".join(known) or "-"), field=name[:50]
    )


def wrong_type(name: str, kind: str, *, field: str | None = None) -> Refusal:
    """Field *name* sent as another JSON type than *kind*."""
    return Refusal(422, t("pgbus.api.errors.wrong_type", field=name, kind=kind), field=field or name)


def value_missing() -> Refusal:
    """A policy rule's change without its value."""
    return Refusal(422, t("pgbus.policy.errors.value_missing"), field="value")


def field_missing(name: str) -> Refusal:
    """A lock action's form without field *name*."""
    return Refusal(400, t("pgbus.locks.errors.missing", name=name), field=name)


def bad_message_id(value: str) -> Refusal:
    return Refusal(400, t("pgbus.locks.errors.bad_message_id", value=value), field="msg_id")


def bad_window_cursor(name: str, value: str) -> Refusal:
    """A run page's window cursor that is not a run's event id."""
    return Refusal(400, t("pgbus.workflows.show.window.bad_cursor", name=name, value=printable(value)))


def bad_choice(name: str, value: str, allowed: Iterable[str]) -> Refusal:
    """Filter *name* given a value that is none of *allowed*."""
    return Refusal(
        400,
        t("pgbus.workflows.filters.errors.choice", name=name, value=printable(value), allowed=", ".join(allowed)),
    )


def not_offered(verb: str, reason: str) -> Refusal:
    """A needs-attention group's button its stuck *reason* does not offer."""
    return Refusal(
        422,
        t(
            "pgbus.workflows.bulk.not_offered",
            action=verb_labels.bulk_label(verb),
            reason=t(f"pgbus.workflows.attention.reasons.{reason}"),
        ),
    )


def exit_code(refusal: Refusal) -> int:
    """The command line's exit code for *refusal*."""
    return EXIT_INPUT if refusal.status in INPUT_STATUSES else EXIT_REFUSED


def is_input(problem: Exception) -> bool:
    """True when *problem* is one of the refusal table's and refuses the
    caller's input (INPUT_STATUSES)."""
    try:
        return refusal(problem).status in INPUT_STATUSES
    except TypeError:
        return False


def refusal(problem: Exception, *, verb: str | None = None, workflow_id: str | None = None) -> Refusal:
    """The status and sentence for *problem*, refused before anything was
    written. *verb* and *workflow_id* name what was asked, for the words."""
    if isinstance(problem, errors.WorkflowError):
        return _workflow(problem, verb, workflow_id)
    if isinstance(problem, NotPermitted):
        return _not_permitted(problem)
    if isinstance(problem, PolicyError):
        return _policy(problem)
    if isinstance(problem, RateAbovePolicy):
        return Refusal(
            422,
            t("pgbus.policy.errors.rate_above", rate=f"{problem.rate:g}", highest=f"{problem.highest:g}"),
            field="rate",
        )
    if isinstance(problem, operation_record.OperationError):
        return _operation(problem)
    if isinstance(problem, checks.FormError):
        return Refusal(problem.status, problem.message, field=problem.field)
    if isinstance(problem, SearchRefused):
        # A refusal of what was asked, not a wrong spelling: 400 and exit
        # 2 like any filter, in the sentence that names the filter.
        return Refusal(400, str(problem), title_key="pgbus.web.errors.forbidden_title")
    if isinstance(problem, FilterError):
        return Refusal(400, str(problem))
    if isinstance(problem, lock_acts.LockActionError):
        return _lock(problem)
    if isinstance(problem, CompareRefused):
        return _compare(problem)
    if isinstance(problem, SessionNotFound):
        return Refusal(
            404,
            t("pgbus.sessions.errors.no_session", session_id=printable(problem.session_id)),
            title_key="pgbus.web.errors.not_found_title",
        )
    if isinstance(problem, TokenNotFound):
        return Refusal(
            404,
            t("pgbus.sessions.errors.no_token", name=printable(problem.name)),
            title_key="pgbus.web.errors.not_found_title",
        )
    raise TypeError(f"not a refusal: {problem!r}")
