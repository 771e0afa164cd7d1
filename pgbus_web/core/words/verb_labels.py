"""What the action areas offer: the run page's forms (one per verb the run
allows now, plus Send signal) and the bulk buttons of a needs-attention
group. Labels, confirm questions and field defaults are decided here; the
partials _run_actions.html and _group_actions.html only lay them out.
No I/O: everything comes from the run (with its latest step), its
definition and the group row.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, tzinfo
from typing import Any

from babel.lists import format_list

from ...i18n import current_locale, t, tn
from ...models.values import is_infinite
from ...rules import states, verb_table
from ...runtime.plan import plan_of
from .. import checks as forms
from . import timefmt
from .verb_words import WORDS, R

# The signal form's name in the action area (its route is /signals).
SIGNAL = verb_table.SIGNAL
# Verbs whose form asks the browser to confirm first: they end or drop work.
CONFIRMED_VERBS = ("skip", "cancel")
# The verbs shown as the primary button when offered (what an operator
# most often wants for a run in that status).
PRIMARY_VERBS = ("resume", "run_now", "rerun")

# Bulk verbs by stuck reason, in button order. "retry" is resume on a run
# that failed (the action plan retries the step); it reads better for a
# group stuck on an error.
BULK_BY_REASON: dict[str, tuple[str, ...]] = {
    states.STALLED: ("retry", "skip", "cancel"),
    states.PAUSED_ERROR: ("retry", "skip", "cancel"),
    states.PAUSED_MANUAL: ("resume", "skip", "cancel"),
    states.OVERDUE: ("skip", "cancel"),
    states.WAITING_OVERDUE: ("skip", "cancel"),
}
# The runtime verb each bulk verb applies to every run of the group.
BULK_VERBS = {"resume": "resume", "retry": "resume", "skip": "skip", "cancel": "cancel"}
# Bulk verbs that need the class's definition loaded here.
BULK_CLASS_VERBS = tuple(verb for verb, runtime in BULK_VERBS.items() if runtime in verb_table.CLASS_VERBS)


@dataclass
class RunAction:
    """One form of the run page's action area."""

    verb: str
    label: str
    fields: tuple[str, ...]
    confirm: str | None = None
    primary: bool = False
    danger: bool = False
    values: dict[str, str] = field(default_factory=dict)  # what the fields show
    errors: dict[str, str] = field(default_factory=dict)  # field -> message
    open: bool = False  # shown unfolded: it was just refused
    step_names: tuple[str, ...] = ()  # rerun's choice
    min_at: str | None = None  # the earliest time a time field takes
    max_at: str | None = None  # and the latest (checks.MAX_AHEAD from now)


# The action plan's other ways of resuming, named on the run page's button.
PLAN_WITH_STEP = {
    "retry": WORDS["retry"].with_step,
    "resume": WORDS["resume"].with_step,
    "continue": f"{R}.continue",
    "finish": f"{R}.finish",
}
# The stuck reasons whose runs are paused on an error (their bulk button is
# Retry): a resume operation on a filter of one of them is a retry.
RETRY_REASONS = tuple(reason for reason, verbs in BULK_BY_REASON.items() if "retry" in verbs)


def verb_label(verb: str) -> str:
    return t(WORDS[verb].label)


def operation_verb(verb: str, filters: Mapping[str, Any] | None = None) -> str:
    """The verb an operation is named by: resume on runs paused on an
    error (the filter's stuck reason) is retry, as the group's button said."""
    if verb == "resume" and isinstance(filters, Mapping) and filters.get("reason") in RETRY_REASONS:
        return "retry"
    return verb


def operation_label(verb: str, filters: Mapping[str, Any] | None) -> str:
    """An operation's verb as every place names it: the index's "Act on
    all" menu, the dialog it opens, the operation's page. *filters* has
    no default: the menu once drew its labels without them and said
    Resume where the dialog said Retry."""
    return verb_label(operation_verb(verb, filters))


def with_step_label(action: str, step: str) -> str:
    return t(PLAN_WITH_STEP[action] or "", step=step)


def _confirm(verb: str, run: Mapping[str, Any]) -> str | None:
    step = (run.get("step") or {}).get("step_name") or run.get("current_step") or ""
    if verb == "skip":
        return t("pgbus.workflows.forms.confirm.skip", step=step)
    if verb == "cancel":
        return t("pgbus.workflows.forms.confirm.cancel")
    return None


def run_actions(
    run: Mapping[str, Any],
    definition: Any,
    *,
    now: datetime,
    tz: tzinfo,
    refused: Mapping[str, Any] | None = None,
) -> list[RunAction]:
    """The forms of the run page, for what the run allows now (the
    runtime's available_actions; the verbs that need the definition only
    when it is loaded here). *refused*: a form just sent back, as
    ``{"verb", "values", "errors"}``, shown open with its values and errors."""
    offered = verb_table.available_actions(run, definition is not None)
    step = run.get("step") or {}
    actions = []
    for verb in offered:
        fields = verb_table.BY_NAME[verb].fields
        label = verb_label(verb)
        if verb == "resume":
            label = resume_label(plan_of(run, run.get("step"), definition), current_step=run.get("current_step"))
        action = RunAction(
            verb=verb,
            label=label,
            fields=fields,
            confirm=_confirm(verb, run),
            primary=verb in PRIMARY_VERBS,
            danger=verb in CONFIRMED_VERBS,
        )
        if "at" in fields:
            action.min_at = forms.local_input(now, tz)
            action.max_at = forms.local_input(now + forms.MAX_AHEAD, tz)
            due = step.get("scheduled_at") if verb == "reschedule" else None
            # A step due at ±infinity proposes the default: "infinity" is no time to type.
            keep = due and not is_infinite(due) and due > now
            action.values["at"] = forms.local_input(due, tz) if keep and due else forms.default_at(now, tz)
        if verb == "rerun" and definition is not None:
            action.step_names = tuple(definition.step_names)
            action.values["from_step"] = action.step_names[0] if action.step_names else ""
        if verb == SIGNAL:
            waiting = step.get("status") == states.STEP_WAITING
            action.values["name"] = (step.get("wait_for") or "") if waiting else ""
            action.values["payload"] = "{}"
        if refused and refused.get("verb") == verb:
            action.values.update(refused.get("values") or {})
            action.errors = dict(refused.get("errors") or {})
            action.open = True
        actions.append(action)
    return actions


@dataclass(frozen=True)
class GroupAction:
    """One bulk button of a needs-attention group."""

    verb: str
    label: str
    confirm: str
    danger: bool


def bulk_label(verb: str) -> str:
    bulk = WORDS[verb].bulk
    if bulk is None:
        raise KeyError(verb)
    return t(bulk)


def bulk_confirm(action: str, group: Mapping[str, Any]) -> str:
    """The question before a bulk action on a needs-attention group:
    "Resume all 3 runs paused at capture on TimeoutError?" (plural by the
    group's count). Raises ValueError for a verb that has no bulk form."""
    if action not in BULK_VERBS:
        raise ValueError(f"no bulk confirm for {action!r}; expected one of {', '.join(BULK_VERBS)}")
    key = f"{action}_error" if group.get("error_class") else action
    return tn(
        f"pgbus.workflows.attention.confirm.{key}",
        int(group.get("count") or 0),
        step=group.get("step_name") or "",
        error=group.get("error_class") or "",
    )


# What a needs-attention or failed group does not offer while its class's
# definition is not loaded here: the bulk verbs that need it, and rerun.
HIDDEN_WITHOUT_DEFINITION = (*BULK_CLASS_VERBS, "rerun")


def hidden_without_definition() -> str:
    """The labels of HIDDEN_WITHOUT_DEFINITION, as one list in the
    operator's language ("Retry, Resume, Skip and Rerun")."""
    return format_list([verb_label(verb) for verb in HIDDEN_WITHOUT_DEFINITION], locale=current_locale())


def bulk_verbs(group: Mapping[str, Any], class_loaded: bool) -> tuple[str, ...]:
    """The bulk verbs that fit the group's stuck reason; without the ones
    that need the definition when its class is not loaded here."""
    verbs = BULK_BY_REASON.get(group.get("reason") or "", ())
    if not class_loaded:
        verbs = tuple(verb for verb in verbs if verb not in BULK_CLASS_VERBS)
    return verbs


def group_actions(group: Mapping[str, Any], class_loaded: bool) -> list[GroupAction]:
    return [
        GroupAction(
            verb=verb,
            label=bulk_label(verb),
            confirm=bulk_confirm(verb, group),
            danger=verb in CONFIRMED_VERBS,
        )
        for verb in bulk_verbs(group, class_loaded)
    ]


def resume_label(plan: Any, *, current_step: str | None = None) -> str:
    """The Resume button's label: what resume will do ("Retry capture",
    "Continue with notify", "Finish after send_receipt"). *plan* is the
    runtime's action plan (attributes or keys ``action`` and ``step``), or
    None when it is not known: then plainly "Resume". A plan without a step
    (finishing) names the run's *current_step*."""
    action = _plan_value(plan, "action", "resume_action") if plan is not None else None
    if action not in PLAN_WITH_STEP:
        return verb_label("resume")
    step = _plan_value(plan, "step", "resume_step") or current_step or timefmt.NONE
    return with_step_label(action, step)


def _plan_value(plan: Any, *names: str) -> Any:
    for name in names:
        if isinstance(plan, Mapping):
            if plan.get(name) is not None:
                return plan[name]
        elif getattr(plan, name, None) is not None:
            return getattr(plan, name)
    return None
