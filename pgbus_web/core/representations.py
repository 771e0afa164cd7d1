"""Plain JSON shapes of what the pages show: a run's row, one run in detail,
the counts, the needs-attention groups, an operation (and its preview), a
lock. Every door that answers in JSON (the API, the command line's
``--json``, MCP) reads them here, built from the rows the pages' own
queries and context builders return (core/page_reads.py, models/*.py) and the
one verb table (rules/verb_table.py, runtime/plan.py): nothing is read or
decided twice.

Moments are ISO 8601 strings in UTC (``2026-03-01T14:05:00Z``); a stored
``infinity`` or ``-infinity`` is that word. JSON a Python parser could not
read (models/values.RawJson) is given as the stored text, and the field's
name is listed in the object's ``raw_json``. So every stored value
serializes, however odd.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from collections.abc import Mapping as AnyMapping
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from ..models.values import Infinite, RawJson
from ..rules import states, verb_table
from ..rules import stuck as stuck_rules
from ..rules.run_filters import group_query
from ..runtime.definitions import Workflow
from ..runtime.operation_preview import Preview
from ..runtime.plan import plan_of
from .words.verb_labels import BULK_VERBS, bulk_verbs

if TYPE_CHECKING:
    # Their shapes only: compare and operation_reads import core/reads,
    # which imports this module (through worker_reads).
    from .compare import Change, Comparison, Side
    from .operation_reads import Outcome

# --- values ----------------------------------------------------------------

_UTC = UTC


def moment(value: datetime | None) -> str | None:
    """*value* as ISO 8601 in UTC with a ``Z``; ``infinity``/``-infinity``
    for a stored infinite timestamp; None stays None. A naive timestamp is
    UTC already (the pgbus tables write them so)."""
    if value is None:
        return None
    if type(value) is datetime and value.tzinfo is _UTC:
        # What psycopg loads for a timestamptz on a UTC session: most moments.
        return value.isoformat()[:-6] + "Z"
    if isinstance(value, Infinite):
        return value.literal
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    text = value.astimezone(UTC).isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text


# Values plain already (exactly these types: a subclass of str such as
# RawJson is not one of them).
_AS_IS = frozenset((str, int, float, bool, type(None)))


def plain(value: Any) -> Any:
    """Any value a row can hold as JSON-ready Python: moments as moment(),
    containers walked (without recursion limits of their own: a stored JSON
    value is at most values.MAX_JSON_DEPTH deep, or it came back RawJson).
    The plain types first, by their exact type: a page of runs is tens of
    thousands of values, and most are text, numbers and None."""
    kind = type(value)
    if kind in _AS_IS:
        return value
    if kind is dict:
        return {key if type(key) is str else str(key): plain(item) for key, item in value.items()}
    if kind is list:
        return [plain(item) for item in value]
    if kind is datetime:
        return moment(value)
    if isinstance(value, RawJson):
        return str(value)
    if isinstance(value, datetime):
        return moment(value)
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, AnyMapping):
        return {str(key): plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [plain(item) for item in value]
    return value


def _object(row: Mapping[str, Any], names: Iterable[str], *, json_fields: Iterable[str] = ()) -> dict[str, Any]:
    """The named fields of *row*, plain; ``raw_json`` lists the JSON fields
    given as their stored text."""
    # plain()'s first test inlined: a page of runs is thousands of values,
    # most of them text, numbers, None and UTC moments.
    get = row.get
    shaped: dict[str, Any] = {}
    for name in names:
        value: Any = get(name)
        kind = type(value)
        if kind in _AS_IS:
            shaped[name] = value
        elif kind is datetime and value.tzinfo is _UTC:
            shaped[name] = value.isoformat()[:-6] + "Z"
        else:
            shaped[name] = plain(value)
    raw = [name for name in json_fields if isinstance(row.get(name), RawJson)]
    if raw:
        shaped["raw_json"] = raw
    return shaped


def _optional(
    row: Mapping[str, Any] | None, names: Iterable[str], *, json_fields: Iterable[str] = ()
) -> dict[str, Any] | None:
    """_object of *row*, or None without one."""
    return None if row is None else _object(row, names, json_fields=json_fields)


# --- runs ------------------------------------------------------------------

STEP_FIELDS = (
    "id",
    "step_name",
    "status",
    "attempt",
    "scheduled_at",
    "started_at",
    "finished_at",
    "wait_for",
    "waiting_since",
    "timeout_at",
    "batch_id",
    "error_class",
    "error_message",
    "created_at",
)
# What a run's page shows of an attempt, beyond its row in the index.
ATTEMPT_FIELDS = STEP_FIELDS + ("error_backtrace", "result", "updated_at")
BATCH_FIELDS = (
    "batch_id",
    "description",
    "total_jobs",
    "completed_jobs",
    "failed_jobs",
    "discarded_jobs",
    "status",
    "finished_at",
)
RUN_FIELDS = (
    "id",
    "workflow_id",
    "workflow_class",
    "status",
    "current_step",
    "subject_type",
    "subject_id",
    "definition_digest",
    "paused_at",
    "started_at",
    "finished_at",
    "created_at",
    "updated_at",
)
RUN_DETAIL_FIELDS = RUN_FIELDS + ("arguments", "idempotency_key")
SIGNAL_FIELDS = (
    "id",
    "name",
    "payload",
    "idempotency_key",
    "status",
    "claimed_by_step_id",
    "claimed_at",
    "consumed_at",
    "created_at",
)
EVENT_FIELDS = ("id", "event", "actor", "reason", "step_id", "step_name", "attempt", "details", "created_at")


def stuck_reason(
    run: Mapping[str, Any], *, now: datetime, stall_threshold: timedelta, waiting_threshold: timedelta | None
) -> str | None:
    """The run's stuck reason (states.STUCK_REASONS) by rules.stuck, the
    rule its badge and the needs-attention groups read, or None; None too
    for a status no rule knows."""
    try:
        return stuck_rules.reason_of_run(run, now=now, threshold=stall_threshold, waiting_threshold=waiting_threshold)
    except OverflowError:  # a threshold reaching before year 1
        return None


def run_row(run: Mapping[str, Any], *, stuck: str | None = None) -> dict[str, Any]:
    """A run as the index lists it: its columns, its latest step and the
    batch that step waits on (a models.workflow_index.page row), and its stuck
    reason (stuck_reason)."""
    shaped = _object(run, RUN_FIELDS)
    shaped["stuck_reason"] = stuck
    shaped["latest_step"] = _optional(run.get("step"), STEP_FIELDS)
    shaped["batch"] = _optional(run.get("batch"), BATCH_FIELDS)
    return shaped


def signal(row: Mapping[str, Any]) -> dict[str, Any]:
    """A signal's row (models.signals)."""
    return _object(row, SIGNAL_FIELDS, json_fields=("payload",))


def plan(
    run: Mapping[str, Any], latest: Mapping[str, Any] | None, definition: Workflow | None
) -> dict[str, Any] | None:
    """What resume would do now (runtime/plan.py), or None."""
    found = plan_of(run, latest, definition)
    return {"action": found.action, "step": found.step} if found is not None else None


def run_detail(page: Mapping[str, Any], *, stuck: str | None = None) -> dict[str, Any]:
    """One run as its page shows it, from web.context.run_context: the run,
    its steps in the definition's order each with its attempts, its
    signals, its audit events, the verbs it allows now and what resume
    would do."""
    run = page["run"]
    shaped = _object(run, RUN_DETAIL_FIELDS, json_fields=("arguments",))
    shaped["stuck_reason"] = stuck
    shaped["latest_step"] = _optional(run.get("step"), STEP_FIELDS)
    shaped["batch"] = _optional(run.get("batch"), BATCH_FIELDS)
    return {
        "run": shaped,
        "steps": [
            {
                "name": group["name"],
                "defined": group["defined"],
                "attempts": [
                    _object(attempt, ATTEMPT_FIELDS, json_fields=("result",)) for attempt in group["attempts"]
                ],
            }
            for group in page["step_groups"]
        ],
        "signals": [signal(row) for row in page["signals"]],
        "events": [
            dict(
                _object(event, EVENT_FIELDS, json_fields=("details",)),
                **(
                    {"approval": _object(event["approval"], ("approved_by", "approved_at"))}
                    if event.get("approval")
                    else {}
                ),
            )
            for event in page["events"]
        ],
        "available_actions": list(verb_table.available_actions(run, page["class_loaded"])),
        "plan": plan(run, run.get("step"), page["definition"]),
        "class_loaded": page["class_loaded"],
        "definition_outdated": bool(page["definition_outdated"]),
        # Values the policy redacts were shown as "[redacted]"; or, through
        # a Reveal (an audit line), in clear (docs/redaction.md).
        "redacted": bool(page.get("redacted")),
        "revealed": bool(page.get("revealed")),
    }


# --- counts and needs attention ----------------------------------------------


def counts(table: Mapping[str, Any]) -> dict[str, Any]:
    """The index's count table (web.context.index_context's ``counts``):
    per class, the runs in every run status (zeros included), and totals."""
    return {
        "classes": [
            {
                "workflow_class": row["workflow_class"],
                "counts": {status: row["counts"].get(status, 0) for status in states.RUN},
                "total": row["total"],
            }
            for row in table["rows"]
        ],
        "totals": {status: table["totals"].get(status, 0) for status in states.RUN},
        "total": table["total"],
    }


GROUP_FIELDS = (
    "workflow_class",
    "step_name",
    "reason",
    "error_class",
    "count",
    "first_seen_at",
    "last_seen_at",
    "error_message",
)


def attention_group(group: Mapping[str, Any], class_loaded: bool) -> dict[str, Any]:
    """A needs-attention group (models.workflow_attention.attention_groups): its
    runs' filter (run_filters.group_query, the index's and an operation's
    ``filters``) and the verbs its buttons offer as operations."""
    shaped = _object(group, GROUP_FIELDS)
    shaped["filters"] = group_query(group)
    offered: list[str] = []
    for verb in bulk_verbs(group, class_loaded):
        if BULK_VERBS[verb] not in offered:
            offered.append(BULK_VERBS[verb])
    shaped["actions"] = offered
    return shaped


# --- operations ----------------------------------------------------------------

OPERATION_FIELDS: tuple[str, ...] = (
    "id",
    "verb",
    "filters",
    "params",
    "reason",
    "actor",
    "status",
    "total",
    "moved",
    "skipped",
    "refused",
    "ceiling_id",
    "cursor",
    "heartbeat_at",
    "created_at",
    "started_at",
    "finished_at",
    "error",
)
# The pace, pause and approval of an operation (docs/operations.md).
OPERATION_FIELDS += (
    "rate",
    "max_in_flight",
    "paused_by",
    "paused_at",
    "resumed_by",
    "resumed_at",
    "approved_by",
    "approved_at",
)
# Who asked (the proven principal), and the why of each change (docs/policy.md).
OPERATION_FIELDS += ("requested_by", "cancelled_by", "cancel_reason", "approve_reason", "pause_reason", "resume_reason")


def policy_rule(rule: Mapping[str, Any]) -> dict[str, Any]:
    """One rule of the policy as core/policy_changes.rules shows it."""
    return {
        "key": rule["key"],
        "value": plain(rule["value"]),
        "default": plain(rule["default"]),
        "is_default": rule["is_default"],
        "version": rule["version"],
        "changed_by": rule["changed_by"],
        "changed_at": moment(rule["changed_at"]),
        "reason": rule["reason"],
    }


def policy_change(change: Mapping[str, Any]) -> dict[str, Any]:
    """One change of the policy's history."""
    return {
        "id": change["id"],
        "key": change["key"],
        "old_value": plain(change["old_value"]),
        "new_value": plain(change["new_value"]),
        "actor": change["actor"],
        "reason": change["reason"],
        "changed_at": moment(change["changed_at"]),
    }


def operation(row: Mapping[str, Any]) -> dict[str, Any]:
    """An operation's row (models.operation_rows)."""
    return _object(row, OPERATION_FIELDS, json_fields=("filters", "params"))


def operation_outcome(found: Outcome, operation_id: int) -> dict[str, Any]:
    """What became of the runs an operation acted on (core
    operation_reads.Outcome): each group, each part with the query that
    lists its runs (GET /runs, the index), and whether they mostly fail
    again (``mostly_failing``: the rule in docs/operations.md)."""

    def query(filter_: Mapping[str, str]) -> str:
        return "&".join([f"operation={int(operation_id)}"] + [f"{name}={value}" for name, value in filter_.items()])

    return {
        "groups": [
            {
                "kind": group["kind"],
                "total": group["total"],
                "overlap": group["overlap"],
                "parts": [
                    {
                        "value": part["value"],
                        "count": part["count"],
                        "filter": dict(part["filter"]),
                        "query": query(part["filter"]),
                    }
                    for part in group["parts"]
                ],
            }
            for group in found.groups
        ],
        "settled": found.settled,
        "failing_again": found.failing,
        "mostly_failing": found.mostly_failing,
        # By the step that was stuck (docs/operations.md): null for cancel,
        # pause, and where no run's step is known.
        "step": None
        if found.step is None
        else {"steps": list(found.step.steps), "total": found.step.total, **found.step.counts},
    }


def preview(shown: Preview, *, stuck_of: Callable[[Mapping[str, Any]], str | None] | None = None) -> dict[str, Any]:
    """An operation's preview (runtime.operation_preview.Preview): what it would
    do now; *stuck_of*(run) gives each sampled run its stuck reason."""
    return {
        "verb": shown.verb,
        "filters": plain(shown.query),
        "params": plain(shown.params),
        "total": shown.total,
        "by_status": dict(shown.by_status),
        "fits": shown.fits,
        "skipped": shown.skipped,
        "skips": plain(shown.skips),
        "sample": [run_row(run, stuck=stuck_of(run) if stuck_of else None) for run in shown.sample],
        "ceiling_id": shown.ceiling_id,
    }


# --- locks -----------------------------------------------------------------------

LOCK_FIELDS = (
    "lock_key",
    "queue_name",
    "msg_id",
    "state",
    "created_at",
    "age_seconds",
    "enqueued_at",
    "read_ct",
    "concurrency_key",
)


def lock(row: Mapping[str, Any]) -> dict[str, Any]:
    """A uniqueness lock as the Locks page lists it (models.uniqueness_keys.list_locks)."""
    return _object(row, LOCK_FIELDS)


# --- workers and queues ------------------------------------------------------

WORKER_FIELDS = (
    "id",
    "kind",
    "state",
    "host",
    "pid",
    "started_at",
    "heartbeat_at",
    "steps_done",
    "operation_id",
    "stopped_at",
    "holding",
)
QUEUE_FIELDS = ("queue_name", "depth", "visible", "oldest_enqueued_at", "oldest_age_seconds")


def worker(row: Mapping[str, Any]) -> dict[str, Any]:
    """A worker's or serving process's row (core/worker_reads.worker_rows)."""
    return _object(row, WORKER_FIELDS)


def queue(row: Mapping[str, Any]) -> dict[str, Any]:
    """A PGMQ queue's depth and oldest message (core/worker_reads.queue_rows)."""
    return _object(row, QUEUE_FIELDS)


# --- two runs compared (core/compare.py) -----------------------------------


def _compared_side(side: Side) -> dict[str, Any]:
    return {
        "reached": side.reached,
        "attempts": side.attempts,
        "status": side.status,
        "started_at": moment(side.started_at),
        "finished_at": moment(side.finished_at),
        "duration_seconds": _seconds_between(side.started_at, side.finished_at),
        "error_class": side.error_class,
        "error_message_first_line": side.error_line,
    }


def _seconds_between(start: datetime | None, end: datetime | None) -> float | None:
    if start is None or end is None or isinstance(start, Infinite) or isinstance(end, Infinite):
        return None
    return max((end - start).total_seconds(), 0.0)


def comparison(found: Comparison) -> dict[str, Any]:
    """Two runs compared: each run's row, where they part (the step, or
    ``status`` when only the runs' statuses differ, or null), the
    arguments' diff rows (path, kind, a, b, type_changed; the equal ones
    apart) and the steps side by side."""
    divergence = None
    if found.divergence is not None:
        divergence = {
            "kind": "step",
            "step_name": found.divergence.name,
            "a": _compared_side(found.divergence.a),
            "b": _compared_side(found.divergence.b),
        }
    elif found.status_differs:
        divergence = {"kind": "status", "a": found.a["status"], "b": found.b["status"]}

    def change(row: Change) -> dict[str, Any]:
        return {
            "path": row.path,
            "kind": row.kind,
            "a": plain(row.a),
            "b": plain(row.b),
            "type_changed": row.type_changed,
        }

    return {
        "a": _object(found.a, RUN_DETAIL_FIELDS, json_fields=("arguments",)),
        "b": _object(found.b, RUN_DETAIL_FIELDS, json_fields=("arguments",)),
        "diverges": found.diverges,
        "divergence": divergence,
        "same_class": found.same_class,
        "definition_changed": found.digest_changed,
        "arguments": {
            "identical": found.arguments["identical"],
            "changes": [change(row) for row in found.arguments["changes"]],
            "equal": [row.path for row in found.arguments["equal"]],
            "left_out": found.arguments["left_out"],
        },
        "steps": [
            {"step_name": row.name, "diverges": row.diverges, "a": _compared_side(row.a), "b": _compared_side(row.b)}
            for row in found.steps
        ],
    }
