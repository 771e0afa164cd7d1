"""The words of operations' pages (no I/O): the verb, the status, why a
part of the preview is skipped, the progress (rate, time left)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from ...core import checks, operation_reads
from ...core.words import pace, verb_labels
from ...core.words.presenters import RUN_TONES, _humanize
from ...i18n import t
from ...rules import states, verb_table
from ...rules.run_filters import FilterError, parse
from ...rules.states import OPERATION as STATUSES
from ...rules.states import OPERATION_OPEN as OPEN


def operation_verb(verb: str, filters: Mapping[str, Any] | None) -> str:
    try:
        return verb_labels.operation_label(verb, filters)
    except KeyError:
        return _humanize(str(verb))


# The badge tone of each operation status (presenters.TONES).
STATUS_TONES = {
    states.OPERATION_QUEUED: "gray",
    states.OPERATION_RUNNING: "blue",
    states.OPERATION_DONE: "green",
    states.OPERATION_CANCELLED: "yellow",
    states.OPERATION_FAILED: "red",
    states.OPERATION_PAUSED: "yellow",
    states.OPERATION_AWAITING_APPROVAL: "yellow",
}


def operation_status(status: str) -> str:
    return t(f"pgbus.operations.statuses.{status}") if status in STATUSES else _humanize(str(status))


def operation_preview(preview: Any) -> dict[str, Any]:
    """The preview's words: the verb, and why each skipped part is skipped."""
    skips = []
    for skip in preview.skips:
        if skip["why"] == "status":
            why = t(
                "pgbus.operations.preview.skip_status",
                status=t(f"pgbus.workflows.statuses.{skip['status']}")
                if skip["status"] in states.RUN
                else skip["status"],
            )
        else:
            why = t("pgbus.operations.preview.skip_class", workflow_class=skip["workflow_class"])
        skips.append({"count": skip["count"], "why": why})
    return {"verb_label": operation_verb(preview.verb, preview.query), "skip_lines": skips}


def filters_readable(operation: Mapping[str, Any]) -> bool:
    """True when the stored filters are ones this version reads (a stored
    value the page cannot show never breaks it)."""
    stored = operation.get("filters")
    if not isinstance(stored, Mapping):
        return False
    try:
        parse({str(name): str(value) for name, value in stored.items()})
    except (FilterError, ValueError, TypeError):
        return False
    return True


def _paused_seconds(operation: Mapping[str, Any], started: datetime, end: datetime) -> float:
    """How long the operation was held by pauses between *started* and
    *end*: every pause that went on (held_seconds, summed at each go-on),
    and the one it is in (from paused_at to *end*, while paused or when it
    ended paused). The rate counts working time only (docs/operations.md)."""
    held = float(operation.get("held_seconds") or 0.0)
    paused = operation.get("paused_at")
    resumed = operation.get("resumed_at")
    if paused is not None and paused < end and (resumed is None or resumed < paused):
        held += (end - max(paused, started)).total_seconds()
    return max(held, 0.0)


def operation_progress(operation: Mapping[str, Any], *, now: datetime) -> dict[str, Any]:
    """Handled, rate (runs per second) and time left (a duration, or None
    when it cannot be told yet) of an operation."""
    handled = sum(int(operation.get(name) or 0) for name in ("moved", "skipped", "refused"))
    total = int(operation.get("total") or 0)
    started = operation.get("started_at")
    end = operation.get("finished_at") or now
    rate = None
    left = None
    if started is not None and handled:
        seconds = (end - started).total_seconds() - _paused_seconds(operation, started, end)
        if seconds > 0:
            rate = handled / seconds
            if operation.get("status") in OPEN and total > handled:
                left = timedelta(seconds=(total - handled) / rate)
    return {
        "handled": handled,
        "rate": rate,
        "time_left": left,
        "percent": min(100, int(handled * 100 / total)) if total else 100,
        "open": operation.get("status") in OPEN,
        "held": operation.get("status") in states.OPERATION_HELD,
        "verb_label": operation_verb(operation.get("verb") or "", operation.get("filters")),
        "status_label": operation_status(operation.get("status") or ""),
        "status_tone": STATUS_TONES.get(operation.get("status") or "", "gray"),
    }


# A stuck reason's badge tone (the one the attention list gives its status).
_REASON_TONES = {
    states.STALLED: "red",
    states.PAUSED_ERROR: "red",
    states.PAUSED_MANUAL: "yellow",
    states.OVERDUE: "yellow",
    states.WAITING_OVERDUE: "yellow",
}


def outcome_groups(found: operation_reads.Outcome) -> list[dict[str, Any]]:
    """What became of an operation's runs (core operation_reads.outcome)
    as the page's groups: each with its label (words under
    pgbus.operations.outcomes.) and each part with its label and tone."""
    groups = []
    for group in found.groups:
        parts = []
        for part in group["parts"]:
            value = part["value"]
            if "status" in part["filter"]:
                label, tone = t(f"pgbus.workflows.statuses.{value}"), RUN_TONES.get(value, "gray")
            else:
                label = t(f"pgbus.workflows.attention.reasons.{value}")
                tone = _REASON_TONES.get(value, "yellow")
            parts.append(dict(part, label=label, tone=tone))
        groups.append(dict(group, label=t(f"pgbus.operations.outcomes.{group['kind']}"), parts=parts))
    return groups


def step_outcome(found: operation_reads.Outcome) -> dict[str, Any] | None:
    """What became of the step that was stuck (core operation_reads.outcome,
    its ``step``) as the page draws it: the title naming the step (or
    steps) and a labelled count per kind, in STEP_KINDS' order; None where
    the outcome says nothing of it."""
    if found.step is None:
        return None
    return {
        "title": t("pgbus.operations.outcomes.step.title", steps=", ".join(found.step.steps)),
        "parts": [
            {"kind": kind, "label": t(f"pgbus.operations.outcomes.step.{kind}"), "count": found.step.counts[kind]}
            for kind in operation_reads.STEP_KINDS
        ],
    }


def pace_preview(preview: Any, form: Mapping[str, Any], approval: Any) -> dict[str, Any]:
    """What the preview says of the pace typed into its form (nothing of a
    value the form will refuse), whether the verb takes a ceiling of runs
    in flight, and whether the operation will wait for approval."""
    try:
        paced = checks.parse_pace({name: str(form.get(name) or "") for name in checks.PACE_FIELDS})
    except checks.FormError:
        paced = {}
    return {
        "pace_lines": pace.pace_lines(paced.get("rate"), paced.get("max_in_flight"), preview.fits),
        "starts_work": preview.verb in verb_table.STARTS_WORK,
        "needs_approval": approval.needed(preview.verb, preview.fits),
        "approval_threshold": approval.threshold,
    }
