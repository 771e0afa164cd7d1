"""The API's OpenAPI 3.1 document. What a request may carry is read from
the checks the doors use: the runs' filters (rules/run_filters.py), the
verb table's fields (rules/verb_table.py), the form checks and their bounds
(core/checks.py, rules/limits.py), the Locks page's, the exports' and the
policy's; nothing there is a number or a list written twice. The answers'
shapes are written beside core/representations.py. The tests check the
document with openapi-spec-validator, every response they get against it,
and run Schemathesis against a server from it (tests/api/)."""

from __future__ import annotations

from typing import Any

from .. import __version__
from ..core import checks, compare, exports, lock_filters, policy
from ..rules import run_filters, states, verb_table
from ..rules.limits import ID_MAX, ID_MIN, REASON_LIMIT
from ..runtime.clock import utcnow
from ..runtime.operation_record import VERBS as OPERATION_VERBS
from ..runtime.verbs import VERBS

JSON = "application/json"
PROBLEM = "application/problem+json"


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _null(kind: str | dict) -> dict[str, Any]:
    if isinstance(kind, dict):
        return {"anyOf": [kind, {"type": "null"}]}
    return {"type": [kind, "null"]}


def _object(properties: dict[str, Any], *, extra: bool = False, required: list[str] | None = None) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties) if required is None else required,
        "additionalProperties": extra,
    }


MOMENT = {"type": ["string", "null"], "description": "ISO 8601 in UTC (…Z), or infinity / -infinity as stored."}
TEXT = {"type": ["string", "null"]}
INT = {"type": ["integer", "null"]}
ANY_JSON: dict[str, Any] = {"description": "JSON as stored; the stored text when listed in raw_json."}
RAW_JSON = {
    "type": "array",
    "items": {"type": "string"},
    "description": "The JSON fields given as their stored text (JSON Python could not read).",
}

STEP = {
    "id": {"type": "integer"},
    "step_name": {"type": "string"},
    "status": {"type": "string"},
    "attempt": {"type": "integer"},
    "scheduled_at": MOMENT,
    "started_at": MOMENT,
    "finished_at": MOMENT,
    "wait_for": TEXT,
    "waiting_since": MOMENT,
    "timeout_at": MOMENT,
    "batch_id": TEXT,
    "error_class": TEXT,
    "error_message": TEXT,
    "created_at": MOMENT,
}
RUN = {
    "id": {"type": "integer"},
    "workflow_id": {"type": "string"},
    "workflow_class": {"type": "string"},
    "status": {"type": "string", "enum": list(states.RUN)},
    "current_step": TEXT,
    "subject_type": TEXT,
    "subject_id": TEXT,
    "definition_digest": TEXT,
    "paused_at": MOMENT,
    "started_at": MOMENT,
    "finished_at": MOMENT,
    "created_at": MOMENT,
    "updated_at": MOMENT,
    "stuck_reason": {"type": ["string", "null"], "enum": [*states.STUCK_REASONS, None]},
    "latest_step": _null(_ref("Step")),
    "batch": _null(_ref("Batch")),
}
ATTEMPT = {**STEP, "error_backtrace": TEXT, "result": ANY_JSON, "updated_at": MOMENT}

# --- what a request carries, read from the checks ----------------------------

# A body field the form checks read as optional text (null: not given).
REASON = {"type": ["string", "null"], "maxLength": REASON_LIMIT, "pattern": checks.NO_NUL}
RATE = {"type": ["number", "null"], "exclusiveMinimum": 0, "maximum": checks.MAX_RATE}
MAX_IN_FLIGHT = {"type": ["integer", "null"], "minimum": 1, "maximum": checks.MAX_IN_FLIGHT}
ID = {"type": "integer", "minimum": ID_MIN, "maximum": ID_MAX}
SIGNAL_NAME = {"type": "string", "maxLength": checks.NAME_LIMIT, "pattern": checks.NOT_BLANK}
FILTER_WORDS = {
    "q": "Search: a run id or its shown prefix (4+ characters), 6+ characters from anywhere in a run id (where "
    "the database has pg_trgm), an idempotency key, a subject in any case, or a subject's id alone.",
    "workflow_class": "A class.",
    "status": "A run status.",
    "reason": "A stuck reason.",
    "subject": "A subject: type, or type and id.",
    "step": "The latest step.",
    "error_class": "The latest step's error class.",
    "no_error_class": "1: runs whose latest step has no error class.",
    "since": "A preset range.",
    "from": "Created at or after (ISO 8601).",
    "to": "Created before (ISO 8601).",
    "operation": "The runs an operation acted on.",
    "worker": "The runs whose step in progress this worker (GET /workers) started.",
    "before": "Keyset cursor: runs older than this id (next_before).",
    "after": "Keyset cursor: runs newer than this id.",
}


def _apart(name: str) -> str:
    others = [b if a == name else a for a, b in run_filters.APART if name in (a, b)]
    return f" Not with {', '.join(others)}." if others else ""


def _filter_schema(name: str, *, blank: bool) -> dict[str, Any]:
    """One filter's value as run_filters.parse reads it; *blank*: a query
    string's, where an empty value is no filter (a body's is refused)."""
    if name in run_filters.CHOICES:
        return {"type": "string", "enum": ([""] if blank else []) + list(run_filters.CHOICES[name])}
    if name in run_filters.IDS:
        return ID if blank else {"type": ["integer", "string"], **ID, "pattern": "^[1-9][0-9]{0,17}$"}
    if name in run_filters.MOMENTS:
        pattern = run_filters.MOMENT_PATTERN
        return {"type": "string", "pattern": pattern if blank else pattern.removeprefix("^$|")}
    return {
        "type": "string",
        "maxLength": run_filters.MAX_TEXT,
        "pattern": checks.NO_NUL if blank else checks.NOT_BLANK,
    }


def _filter_parameters(names) -> list[dict[str, Any]]:
    return [
        {
            "name": name,
            "in": "query",
            "required": False,
            "schema": _filter_schema(name, blank=True),
            "description": FILTER_WORDS[name] + _apart(name),
        }
        for name in names
    ]


FILTERS_BODY = {
    "type": "object",
    "properties": {name: _filter_schema(name, blank=False) for name in run_filters.NAMES},
    "additionalProperties": False,
    "description": "GET /runs's query parameters (an attention group's filters), each given once and not empty; "
    "the searches inside JSON (arg.<path>, signal.<path>) too, docs/search.md. "
    + " ".join(f"{a} and {b} not together." for a, b in run_filters.APART if b != "after"),
}


def _verb_field(name: str, now) -> dict[str, Any]:
    """A field of the verb table as core/checks.py reads it."""
    if name == verb_table.AT:
        return {
            "type": "string",
            "pattern": checks.at_pattern(now),
            "description": "ISO 8601, after now and at most "
            f"{checks.MAX_AHEAD.days} days ahead; without an offset, UTC.",
        }
    if name == verb_table.FROM_STEP:
        return {"type": ["string", "null"], "maxLength": checks.NAME_LIMIT, "pattern": checks.NO_NUL}
    if name == verb_table.SIGNAL_NAME:
        return SIGNAL_NAME
    if name == verb_table.PAYLOAD:
        return _null({"type": "object"})
    if name == verb_table.IDEMPOTENCY_KEY:
        return {"type": ["string", "null"], "maxLength": checks.KEY_LIMIT, "pattern": checks.NO_NUL}
    return REASON


def _verb_body(verb: verb_table.Verb, now) -> dict[str, Any]:
    """The body of POST /runs/{workflow_id}/<verb>: its fields and no other."""
    fields = {name: _verb_field(name, now) for name in verb.fields}
    return _object(fields, required=[name for name in fields if name == verb_table.AT])


def _operation_body(verb: verb_table.Verb, now) -> dict[str, Any]:
    """POST /operations for *verb*: the fields of api/writes.py's
    OPERATION_FIELDS_OF; confirmed, it needs a reason (and its time)."""
    properties: dict[str, Any] = {
        "verb": {"const": verb.name},
        "filters": FILTERS_BODY,
        "reason": REASON,
        "expected": {"type": ["integer", "null"], "minimum": 0, "maximum": checks.EXPECTED_MAX},
        "confirmed": {"type": ["boolean", "null"]},
        "rate": {**RATE, "description": "Runs per second at most."},
    }
    for name in verb.fields:
        if name in (verb_table.AT, verb_table.FROM_STEP, verb_table.SIGNAL_NAME, verb_table.PAYLOAD):
            properties[name] = _verb_field(name, now)
    if verb.name in verb_table.STARTS_WORK:
        properties["max_in_flight"] = {**MAX_IN_FLIGHT, "description": "Runs in flight at most."}
    else:
        properties["max_in_flight"] = {"type": "null", "description": f"{verb.name} starts no work: no ceiling."}
    required = ["verb"] + [name for name in verb.fields if name == verb_table.SIGNAL_NAME]
    confirmed_needs = ["reason"] + [name for name in verb.fields if name == verb_table.AT]
    return {
        **_object(properties, required=required),
        "if": {"properties": {"confirmed": {"const": True}}, "required": ["confirmed"]},
        "then": {
            "required": confirmed_needs,
            "properties": {"reason": {"type": "string", "pattern": checks.NOT_BLANK}},
        },
    }


def request_bodies(now) -> dict[str, Any]:
    """The request bodies that depend on the moment (a time must be ahead)."""
    bodies = {f"{_camel(verb.name)}Body": _verb_body(verb, now) for verb in verb_table.TABLE if verb.name in VERBS}
    bodies["SignalBody"] = _object(
        {name: _verb_field(name, now) for name in verb_table.BY_NAME[verb_table.SIGNAL].fields},
        required=[verb_table.SIGNAL_NAME],
    )
    bodies["OperationBody"] = {
        "oneOf": [_operation_body(verb, now) for verb in verb_table.TABLE if verb.name in OPERATION_VERBS],
        "description": "One verb on every run the filters match; each verb takes its own fields.",
    }
    return bodies


def _camel(name: str) -> str:
    return "".join(part.title() for part in name.split("_"))


SCHEMAS: dict[str, Any] = {
    "Problem": _object(
        {
            "type": {"type": "string"},
            "title": {"type": "string"},
            "status": {"type": "integer"},
            "detail": {"type": "string", "description": "What went wrong, in the request's language."},
            "field": {"type": "string", "description": "The body field at fault."},
            "preview": _ref("Preview"),
        },
        required=["type", "title", "status", "detail"],
    ),
    "Step": _object(STEP),
    "Attempt": _object({**ATTEMPT, "raw_json": RAW_JSON}, required=list(ATTEMPT)),
    "Batch": _object(
        {
            "batch_id": {"type": "string"},
            "description": TEXT,
            "total_jobs": INT,
            "completed_jobs": INT,
            "failed_jobs": INT,
            "discarded_jobs": INT,
            "status": TEXT,
            "finished_at": MOMENT,
        }
    ),
    "RunRow": _object(RUN),
    "RunFull": _object(
        {**RUN, "arguments": ANY_JSON, "idempotency_key": TEXT, "raw_json": RAW_JSON},
        required=[*RUN, "arguments", "idempotency_key"],
    ),
    "Signal": _object(
        {
            "id": {"type": "integer"},
            "name": {"type": "string"},
            "payload": ANY_JSON,
            "idempotency_key": TEXT,
            "status": {"type": "string"},
            "claimed_by_step_id": INT,
            "claimed_at": MOMENT,
            "consumed_at": MOMENT,
            "created_at": MOMENT,
            "raw_json": RAW_JSON,
        },
        required=[
            "id",
            "name",
            "payload",
            "idempotency_key",
            "status",
            "claimed_by_step_id",
            "claimed_at",
            "consumed_at",
            "created_at",
        ],
    ),
    "Event": _object(
        {
            "id": {"type": "integer"},
            "event": {"type": "string"},
            "actor": {"type": "string"},
            "reason": TEXT,
            "step_id": INT,
            "step_name": TEXT,
            "attempt": INT,
            "details": ANY_JSON,
            "created_at": MOMENT,
            "raw_json": RAW_JSON,
            "approval": _object({"approved_by": {"type": "string"}, "approved_at": MOMENT}),
        },
        required=["id", "event", "actor", "reason", "step_id", "step_name", "attempt", "details", "created_at"],
    ),
    "RunDetail": _object(
        {
            "run": _ref("RunFull"),
            "steps": {
                "type": "array",
                "items": _object(
                    {
                        "name": {"type": "string"},
                        "defined": {"type": "boolean"},
                        "attempts": {"type": "array", "items": _ref("Attempt")},
                    }
                ),
            },
            "signals": {"type": "array", "items": _ref("Signal")},
            "events": {"type": "array", "items": _ref("Event")},
            "available_actions": {
                "type": "array",
                "items": {"type": "string", "enum": [v.name for v in verb_table.TABLE]},
            },
            "plan": _null(_object({"action": {"type": "string"}, "step": TEXT})),
            "class_loaded": {"type": "boolean"},
            "definition_outdated": {"type": "boolean"},
            "redacted": {"type": "boolean"},
            "revealed": {"type": "boolean"},
        }
    ),
    "RunsPage": _object(
        {
            "runs": {"type": "array", "items": _ref("RunRow")},
            "next_before": INT,
            "next_after": INT,
        }
    ),
    "Comparison": _object(
        {
            "a": {"type": "object"},
            "b": {"type": "object"},
            "diverges": {"type": "boolean"},
            "divergence": {
                "type": ["object", "null"],
                "description": "Where they part: kind step (step_name, a, b) or status (a, b); null when they do not.",
            },
            "same_class": {"type": "boolean"},
            "definition_changed": {"type": "boolean", "description": "Their definition digests differ."},
            "arguments": _object(
                {
                    "identical": {"type": "boolean"},
                    "changes": {
                        "type": "array",
                        "items": _object(
                            {
                                "path": {"type": "string"},
                                "kind": {"type": "string", "enum": ["added", "removed", "changed"]},
                                "a": ANY_JSON,
                                "b": ANY_JSON,
                                "type_changed": {"type": "boolean"},
                            }
                        ),
                    },
                    "equal": {"type": "array", "items": {"type": "string"}},
                    "left_out": {"type": "integer"},
                }
            ),
            "steps": {"type": "array", "items": {"type": "object"}},
        }
    ),
    "Counts": _object(
        {
            "classes": {
                "type": "array",
                "items": _object(
                    {
                        "workflow_class": {"type": "string"},
                        "counts": {"type": "object", "additionalProperties": {"type": "integer"}},
                        "total": {"type": "integer"},
                    }
                ),
            },
            "totals": {"type": "object", "additionalProperties": {"type": "integer"}},
            "total": {"type": "integer"},
        }
    ),
    "AttentionGroup": _object(
        {
            "workflow_class": {"type": "string"},
            "step_name": TEXT,
            "reason": {"type": "string", "enum": list(states.STUCK_REASONS)},
            "error_class": TEXT,
            "count": {"type": "integer"},
            "first_seen_at": MOMENT,
            "last_seen_at": MOMENT,
            "error_message": TEXT,
            "filters": {
                "type": "object",
                "additionalProperties": {"type": "string"},
                "description": "The query of GET /runs (and an operation's filters) listing its runs.",
            },
            "actions": {"type": "array", "items": {"type": "string"}},
        }
    ),
    "Attention": _object({"groups": {"type": "array", "items": _ref("AttentionGroup")}}),
    "Operation": _object(
        {
            "id": {"type": "integer"},
            "verb": {"type": "string"},
            "filters": ANY_JSON,
            "params": ANY_JSON,
            "reason": {"type": "string"},
            "actor": {"type": "string"},
            "status": {"type": "string", "enum": list(states.OPERATION)},
            "total": {"type": "integer"},
            "moved": {"type": "integer"},
            "skipped": {"type": "integer"},
            "refused": {"type": "integer"},
            "ceiling_id": {"type": "integer"},
            "cursor": {"type": "integer"},
            "heartbeat_at": MOMENT,
            "created_at": MOMENT,
            "started_at": MOMENT,
            "finished_at": MOMENT,
            "error": TEXT,
            "raw_json": RAW_JSON,
            "rate": {"type": ["number", "null"], "description": "Runs per second at most; null: as fast as it goes."},
            "max_in_flight": {
                "type": ["integer", "null"],
                "description": "Runs it started whose step is still scheduled or running, at most.",
            },
            "paused_by": TEXT,
            "paused_at": MOMENT,
            "resumed_by": TEXT,
            "resumed_at": MOMENT,
            "approved_by": TEXT,
            "approved_at": MOMENT,
            "requested_by": {**TEXT, "description": "The principal who asked for it (user:, token: or break-glass)."},
            "cancelled_by": TEXT,
            "cancel_reason": TEXT,
            "approve_reason": TEXT,
            "pause_reason": TEXT,
            "resume_reason": TEXT,
        },
        required=[
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
        ],
    ),
    "Preview": _object(
        {
            "verb": {"type": "string"},
            "filters": {"type": "object", "additionalProperties": {"type": "string"}},
            "params": {"type": "object"},
            "total": {"type": "integer"},
            "by_status": {"type": "object", "additionalProperties": {"type": "integer"}},
            "fits": {"type": "integer"},
            "skipped": {"type": "integer"},
            "skips": {"type": "array", "items": {"type": "object"}},
            "sample": {"type": "array", "items": _ref("RunRow")},
            "ceiling_id": {"type": "integer"},
            "rate": {"type": ["number", "null"]},
            "max_in_flight": {"type": ["integer", "null"]},
            "needs_approval": {
                "type": "boolean",
                "description": "Started, it would wait for another operator's approval.",
            },
        },
        required=[
            "verb",
            "filters",
            "params",
            "total",
            "by_status",
            "fits",
            "skipped",
            "skips",
            "sample",
            "ceiling_id",
        ],
    ),
    "Lock": _object(
        {
            "lock_key": {"type": "string"},
            "queue_name": {"type": "string"},
            "msg_id": {"type": "integer"},
            "state": {"type": "string"},
            "created_at": MOMENT,
            "age_seconds": {"type": ["number", "null"]},
            "enqueued_at": MOMENT,
            "read_ct": INT,
            "concurrency_key": TEXT,
        }
    ),
    "Locks": _object(
        {
            "locks": {"type": "array", "items": _ref("Lock")},
            "next": _null({"type": "object", "additionalProperties": {"type": "string"}}),
            "counts": {"type": "object", "additionalProperties": {"type": "integer"}},
        }
    ),
    "Worker": _object(
        {
            "id": {"type": "integer"},
            "kind": {"type": "string", "enum": ["worker", "serve"]},
            "state": {"type": "string", "enum": ["alive", "gone", "stopped"]},
            "host": TEXT,
            "pid": INT,
            "started_at": MOMENT,
            "heartbeat_at": MOMENT,
            "steps_done": {"type": "integer"},
            "operation_id": INT,
            "stopped_at": MOMENT,
            "holding": {"type": "integer"},
        }
    ),
    "Workers": _object(
        {"workers": {"type": "array", "items": _ref("Worker")}, "gone_after_seconds": {"type": "number"}}
    ),
    "Queue": _object(
        {
            "queue_name": {"type": "string"},
            "depth": {"type": "integer"},
            "visible": {"type": "integer"},
            "oldest_enqueued_at": MOMENT,
            "oldest_age_seconds": {"type": ["number", "null"]},
        }
    ),
    "Queues": _object({"queues": {"type": "array", "items": _ref("Queue")}}),
    "RunChanged": _object(
        {
            "message": {"type": "string"},
            "run": _null(_ref("RunDetail")),
            "duplicate": {"type": "boolean"},
            "signal": _ref("Signal"),
        },
        required=["message", "run"],
    ),
    "OperationAnswer": _object(
        {"message": {"type": "string"}, "operation": _ref("Operation"), "outcome": _ref("OperationOutcome")},
        required=["operation"],
    ),
    "OperationOutcome": _object(
        {
            "groups": {
                "type": "array",
                "items": _object(
                    {
                        "kind": {"type": "string", "enum": ["completed", "failed", "stuck", "moving"]},
                        "total": {"type": "integer"},
                        "overlap": {"type": "boolean"},
                        "parts": {
                            "type": "array",
                            "items": _object(
                                {
                                    "value": {"type": "string"},
                                    "count": {"type": "integer"},
                                    "filter": {"type": "object", "additionalProperties": {"type": "string"}},
                                    "query": {
                                        "type": "string",
                                        "description": "The query of GET /runs listing these runs.",
                                    },
                                }
                            ),
                        },
                    }
                ),
            },
            "settled": {"type": "integer", "description": "Acted-on runs that completed or failed again."},
            "failing_again": {"type": "integer", "description": "Acted-on runs failed, or stuck again by an error."},
            "mostly_failing": {
                "type": "boolean",
                "description": "More than half of at least 10 settled runs failed again (not for cancel, pause).",
            },
            "step": {
                **_object(
                    {
                        "steps": {"type": "array", "items": {"type": "string"}},
                        "total": {"type": "integer"},
                        "past": {"type": "integer", "description": "Got past it: completed, or at a later step."},
                        "again": {"type": "integer", "description": "Failed, paused or stuck at that step again."},
                        "elsewhere": {"type": "integer", "description": "Failed or paused at another step."},
                        "at_step": {"type": "integer", "description": "Still at that step, not stuck."},
                    }
                ),
                "type": ["object", "null"],
                "description": "The acted-on runs by the step that was stuck (docs/operations.md); "
                "null for cancel, pause, and where no run's step is known.",
            },
        }
    ),
    "PreviewAnswer": _object({"preview": _ref("Preview")}),
    "Operations": _object({"operations": {"type": "array", "items": _ref("Operation")}}),
    "RevealBody": _object({"reason": {**REASON, "description": "Kept on the audit line."}}, required=[]),
    "WhyBody": _object(
        {"reason": {**REASON, "description": "Why: kept on the operation with who did it."}}, required=[]
    ),
    "PolicyRule": _object(
        {
            "key": {"type": "string"},
            "value": ANY_JSON,
            "default": ANY_JSON,
            "is_default": {"type": "boolean"},
            "version": {"type": "integer"},
            "changed_by": TEXT,
            "changed_at": MOMENT,
            "reason": TEXT,
        },
        required=["key", "value", "default", "is_default", "version"],
    ),
    "Policy": _object({"rules": {"type": "array", "items": _ref("PolicyRule")}}, required=["rules"]),
    "PolicyChange": _object(
        {
            "id": {"type": "integer"},
            "key": {"type": "string"},
            "old_value": ANY_JSON,
            "new_value": ANY_JSON,
            "actor": {"type": "string"},
            "reason": {"type": "string"},
            "changed_at": MOMENT,
        },
        required=["id", "key", "old_value", "new_value", "actor", "reason", "changed_at"],
    ),
    "PolicyHistory": _object({"changes": {"type": "array", "items": _ref("PolicyChange")}}, required=["changes"]),
    "PolicyBody": _object(
        {
            "value": {**ANY_JSON, "description": "The rule's new value (null: its default)."},
            "reason": {"type": "string", "maxLength": REASON_LIMIT, "pattern": checks.NOT_BLANK},
            "version": {
                "type": ["integer", "null"],
                "description": "The version read: refused (409) if it changed since.",
            },
        },
        required=["value", "reason"],
    ),
    "PolicyAnswer": _object(
        {"message": {"type": "string"}, "change": _ref("PolicyChange")}, required=["message", "change"]
    ),
    "Session": _object(
        {
            "id": {"type": "string"},
            "name": {"type": "string"},
            "provider": {"type": "string"},
            "address": TEXT,
            "started_at": MOMENT,
            "last_seen_at": MOMENT,
            "expires_at": MOMENT,
        },
        required=["id", "name", "provider", "address", "started_at", "last_seen_at", "expires_at"],
    ),
    "Token": _object(
        {
            "name": {"type": "string"},
            "role": {"type": "string"},
            "scope": {"type": "string", "enum": ["read-only", "grants"]},
            "created_at": MOMENT,
            "expires_at": MOMENT,
            "last_used_at": MOMENT,
            "last_used_from": TEXT,
        },
        required=["name", "role", "scope", "created_at", "expires_at", "last_used_at", "last_used_from"],
    ),
    "Sessions": _object(
        {"sessions": {"type": "array", "items": _ref("Session")}, "tokens": {"type": "array", "items": _ref("Token")}},
        required=["sessions", "tokens"],
    ),
    "AccessLine": _object(
        {
            "id": {"type": "integer"},
            "at": MOMENT,
            "kind": {
                "type": "string",
                "enum": [
                    "sign_in",
                    "sign_in_failed",
                    "sign_out",
                    "session_ended",
                    "sessions_ended",
                    "token_added",
                    "token_revoked",
                    "token_new_address",
                ],
            },
            "subject": {"type": "string"},
            "actor": TEXT,
            "address": TEXT,
            "detail": TEXT,
        },
        required=["id", "at", "kind", "subject", "actor", "address", "detail"],
    ),
    "AccessLog": _object({"lines": {"type": "array", "items": _ref("AccessLine")}}, required=["lines"]),
    "NameBody": _object(
        {"name": {"type": "string", "pattern": checks.NOT_BLANK, "description": "A user's name."}}, required=["name"]
    ),
    "EmptyBody": _object({}, required=[]),
    "Ended": _object({"message": {"type": "string"}, "ended": {"type": "integer"}}, required=["message", "ended"]),
    "PaceBody": _object(
        {
            "rate": {**RATE, "description": "Runs per second at most; null removes the limit."},
            "max_in_flight": {**MAX_IN_FLIGHT, "description": "null removes the ceiling."},
        },
        required=[],
    ),
}


def _answer(description: str, schema: str, media: str = JSON) -> dict[str, Any]:
    return {"description": description, "content": {media: {"schema": _ref(schema)}}}


def _problems(*statuses: int) -> dict[str, Any]:
    return {str(status): _answer("Refused; nothing changed.", "Problem", PROBLEM) for status in statuses}


def _query(name: str, description: str, kind: str = "string", enum=None) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": kind}
    if enum:
        schema["enum"] = list(enum)
    return {"name": name, "in": "query", "required": False, "schema": schema, "description": description}


RUN_ID = {
    "name": "workflow_id",
    "in": "path",
    "required": True,
    "schema": {"type": "string"},
    "description": "The run's id, percent-encoded (an id the dashboard's URLs escape starts with ~).",
}
OPERATION_ID = {"name": "operation_id", "in": "path", "required": True, "schema": ID}
# GET /runs/compare's a and b: required, and (of what compare.parse reads)
# a printable id without spaces.
RUN_PAIR = {
    "required": True,
    "schema": {"type": "string", "minLength": 1, "maxLength": compare.ID_LIMIT, "pattern": "^[!-~]+$"},
}


def _text_of(limit: int) -> dict[str, Any]:
    return {"type": "string", "maxLength": limit, "pattern": run_filters.NO_NUL}


READ = (400, 401, 403)
WRITE = (400, 401, 403, 404, 409, 413, 415, 422)


def _body(schema: str, *, required: bool = False) -> dict[str, Any]:
    """A JSON body; *required* when it has a required field (an empty
    post is an empty object, refused for the field it lacks)."""
    return {"required": required, "content": {JSON: {"schema": _ref(schema)}}}


def document(base: str = "/api/v1") -> dict[str, Any]:
    """The document; *base*: where the API is served (under the dashboard's prefix)."""
    now = utcnow()
    filters = _filter_parameters(run_filters.NAMES + run_filters.CURSORS)
    cursors = _filter_parameters(run_filters.CURSORS)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "pgbus-web",
            "version": __version__,
            "description": "The runs of pgbus workflows: read them, and act on them as the dashboard does.",
        },
        "servers": [{"url": base}],
        "security": [{"bearer": []}, {"host": []}],
        "components": {
            "schemas": {**SCHEMAS, **request_bodies(now)},
            "securitySchemes": {
                "bearer": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "pgbus-web tokens add NAME --role viewer|operator|approver|admin",
                },
                "host": {
                    "type": "apiKey",
                    "in": "header",
                    "name": "X-CSRF-Token",
                    "description": "The dashboard's own sign-in (or the host app's), with the CSRF token for a post.",
                },
            },
        },
        "paths": {
            "/runs": {
                "get": {
                    "operationId": "listRuns",
                    "summary": "Runs, newest first, as the index filters them "
                    "(arg.<path>=VALUE and signal.<path>=VALUE too).",
                    "parameters": filters,
                    "responses": {"200": _answer("A page of runs.", "RunsPage"), **_problems(*READ)},
                }
            },
            "/runs/export": {
                "get": {
                    "operationId": "exportRuns",
                    "summary": "Every run the index's filters match (the cursors aside), oldest first, "
                    "streamed as CSV or "
                    "NDJSON up to the highest run id at the start; arg.<path>=VALUE and signal.<path>=VALUE "
                    "search inside the arguments and the signals' payloads, as on GET /runs.",
                    "parameters": [{**_query("format", "The rows' format.", enum=exports.FORMATS), "required": True}]
                    + [item for item in filters if item not in cursors],
                    "responses": {
                        "200": {
                            "description": "The rows, streamed; the filename names the filters and the moment.",
                            "content": {
                                "text/csv": {"schema": {"type": "string"}},
                                "application/x-ndjson": {"schema": {"type": "string"}},
                            },
                        },
                        **_problems(*READ),
                    },
                }
            },
            "/runs/compare": {
                "get": {
                    "operationId": "compareRuns",
                    "summary": "Two runs compared: the arguments' diff, the steps side by side "
                    "and the first step where "
                    "they part. a and b are run ids or the short ids the pages print.",
                    "parameters": [
                        {**_query(name, f"The {which} run's id (or its shown prefix)."), **RUN_PAIR}
                        for name, which in zip(compare.PARAMETERS, ("first", "second"), strict=True)
                    ],
                    "responses": {"200": _answer("The comparison.", "Comparison"), **_problems(*READ, 404, 422)},
                }
            },
            "/runs/{workflow_id}": {
                "get": {
                    "operationId": "showRun",
                    "summary": "One run with its steps, signals, events and available actions.",
                    "parameters": [RUN_ID],
                    "responses": {"200": _answer("The run.", "RunDetail"), **_problems(*READ, 404)},
                }
            },
            "/runs/{workflow_id}/reveal": {
                "post": {
                    "operationId": "revealRun",
                    "summary": "One run with the values the policy redacts in clear, for a caller with the reveal "
                    "power on its class; writes an audit line saying who revealed (docs/redaction.md).",
                    "parameters": [RUN_ID],
                    "requestBody": _body("RevealBody"),
                    "responses": {"200": _answer("The run, its values in clear.", "RunDetail"), **_problems(*WRITE)},
                }
            },
            "/runs/{workflow_id}/signals": {
                "post": {
                    "operationId": "sendSignal",
                    "summary": "Deliver a signal to one run.",
                    "parameters": [RUN_ID],
                    "requestBody": _body("SignalBody", required=True),
                    "responses": {
                        "200": _answer("Stored (or a duplicate of its idempotency key).", "RunChanged"),
                        **_problems(*WRITE),
                    },
                }
            },
            **{
                f"/runs/{{workflow_id}}/{verb}": {
                    "post": {
                        "operationId": f"{verb}Run",
                        "summary": f"{verb} one run, with the verb table's fields of {verb}.",
                        "parameters": [RUN_ID],
                        "requestBody": _body(
                            f"{_camel(verb)}Body", required=verb_table.AT in verb_table.BY_NAME[verb].fields
                        ),
                        "responses": {"200": _answer("Done.", "RunChanged"), **_problems(*WRITE)},
                    }
                }
                for verb in VERBS
            },
            "/counts": {
                "get": {
                    "operationId": "counts",
                    "summary": "Runs per class and status.",
                    "responses": {"200": _answer("The counts.", "Counts"), **_problems(*READ)},
                }
            },
            "/attention": {
                "get": {
                    "operationId": "attention",
                    "summary": "The needs-attention groups, biggest first.",
                    "responses": {"200": _answer("The groups.", "Attention"), **_problems(*READ)},
                }
            },
            "/operations": {
                "get": {
                    "operationId": "listOperations",
                    "summary": "The recent operations.",
                    "responses": {"200": _answer("Newest first.", "Operations"), **_problems(*READ)},
                },
                "post": {
                    "operationId": "startOperation",
                    "summary": "Preview (without confirmed) or start (confirmed, with a reason) "
                    "one verb on every run a filter matches.",
                    "requestBody": _body("OperationBody", required=True),
                    "responses": {
                        "200": _answer("The preview.", "PreviewAnswer"),
                        "201": _answer("Started.", "OperationAnswer"),
                        **_problems(*WRITE),
                    },
                },
            },
            "/operations/{operation_id}": {
                "get": {
                    "operationId": "showOperation",
                    "summary": "One operation and its progress.",
                    "parameters": [OPERATION_ID],
                    "responses": {"200": _answer("The operation.", "OperationAnswer"), **_problems(*READ, 404)},
                },
                "patch": {
                    "operationId": "paceOperation",
                    "summary": "Change the pace of an operation that has not ended.",
                    "parameters": [OPERATION_ID],
                    "requestBody": _body("PaceBody"),
                    "responses": {"200": _answer("Changed.", "OperationAnswer"), **_problems(*WRITE)},
                },
            },
            "/operations/{operation_id}/pace": {
                "post": {
                    "operationId": "paceOperationPost",
                    "summary": "PATCH /operations/{operation_id} as a POST.",
                    "parameters": [OPERATION_ID],
                    "requestBody": _body("PaceBody"),
                    "responses": {"200": _answer("Changed.", "OperationAnswer"), **_problems(*WRITE)},
                }
            },
            "/operations/{operation_id}/pause": {
                "post": {
                    "operationId": "pauseOperation",
                    "summary": "Hold a queued or running operation.",
                    "parameters": [OPERATION_ID],
                    "requestBody": _body("WhyBody"),
                    "responses": {"200": _answer("Paused.", "OperationAnswer"), **_problems(*WRITE)},
                }
            },
            "/operations/{operation_id}/resume": {
                "post": {
                    "operationId": "resumeOperation",
                    "summary": "Let a paused operation go on.",
                    "parameters": [OPERATION_ID],
                    "requestBody": _body("WhyBody"),
                    "responses": {"200": _answer("Queued again.", "OperationAnswer"), **_problems(*WRITE)},
                }
            },
            "/operations/{operation_id}/approve": {
                "post": {
                    "operationId": "approveOperation",
                    "summary": "Approve an operation awaiting approval (a caller other than the one who asked for it).",
                    "parameters": [OPERATION_ID],
                    "requestBody": _body("WhyBody"),
                    "responses": {"200": _answer("Approved and queued.", "OperationAnswer"), **_problems(*WRITE)},
                }
            },
            "/operations/{operation_id}/cancel": {
                "post": {
                    "operationId": "cancelOperation",
                    "summary": "Stop an operation that has not ended.",
                    "parameters": [OPERATION_ID],
                    "requestBody": _body("WhyBody"),
                    "responses": {"200": _answer("Cancelled.", "OperationAnswer"), **_problems(*WRITE)},
                }
            },
            "/policy": {
                "get": {
                    "operationId": "showPolicy",
                    "summary": "Every rule of the policy: its value, default, version, "
                    "and who changed it last and why.",
                    "responses": {"200": _answer("The rules.", "Policy"), **_problems(*READ)},
                }
            },
            "/policy/history": {
                "get": {
                    "operationId": "policyHistory",
                    "summary": "The policy's changes, newest first.",
                    "parameters": [_query("key", "One rule's changes only.", enum=("", *policy.KEYS))],
                    "responses": {"200": _answer("The changes.", "PolicyHistory"), **_problems(*READ, 422)},
                }
            },
            "/policy/{key}": {
                "put": {
                    "operationId": "setPolicyRule",
                    "summary": "Change one rule (the policy power: an admin), with a reason; "
                    "null puts its default back.",
                    "parameters": [
                        {"name": "key", "in": "path", "required": True, "schema": {"enum": list(policy.KEYS)}}
                    ],
                    "requestBody": _body("PolicyBody", required=True),
                    "responses": {"200": _answer("Changed.", "PolicyAnswer"), **_problems(*WRITE)},
                }
            },
            "/sessions": {
                "get": {
                    "operationId": "listSessions",
                    "summary": "The live signed-in sessions and API tokens (the sessions power: an admin).",
                    "responses": {"200": _answer("Sessions and tokens.", "Sessions"), **_problems(*READ)},
                }
            },
            "/sessions/end-all": {
                "post": {
                    "operationId": "endSessionsOf",
                    "summary": "End every session of a person: refused on its next request at every process.",
                    "requestBody": _body("NameBody", required=True),
                    "responses": {"200": _answer("Ended (how many were live).", "Ended"), **_problems(*WRITE)},
                }
            },
            "/sessions/{session_id}/end": {
                "post": {
                    "operationId": "endSession",
                    "summary": "End one session: refused on its next request.",
                    "parameters": [
                        {"name": "session_id", "in": "path", "required": True, "schema": {"type": "string"}}
                    ],
                    "requestBody": _body("EmptyBody"),
                    "responses": {"200": _answer("Ended.", "Ended"), **_problems(*WRITE)},
                }
            },
            "/tokens/{name}/revoke": {
                "post": {
                    "operationId": "revokeToken",
                    "summary": "Revoke a live API token: refused on its next request.",
                    "parameters": [{"name": "name", "in": "path", "required": True, "schema": {"type": "string"}}],
                    "requestBody": _body("EmptyBody"),
                    "responses": {"200": _answer("Revoked.", "Ended"), **_problems(*WRITE)},
                }
            },
            "/access-log": {
                "get": {
                    "operationId": "accessLog",
                    "summary": "Sign-ins, failed sign-ins, sign-outs, sessions ended, tokens made, revoked and first "
                    "used from a new address; newest first (the sessions power).",
                    "responses": {"200": _answer("The newest lines.", "AccessLog"), **_problems(*READ)},
                }
            },
            "/locks": {
                "get": {
                    "operationId": "listLocks",
                    "summary": "Uniqueness locks, oldest first, and counts by state.",
                    "parameters": [
                        _query("state", "A lock state.", enum=("", *states.LOCK_STATES)),
                        {**_query("queue", "A queue."), "schema": _text_of(lock_filters.MAX_QUEUE)},
                        {
                            **_query("after_at", "Cursor (next), with after_key."),
                            "schema": {"type": "string", "pattern": run_filters.MOMENT_PATTERN + "|^-?infinity$"},
                        },
                        {**_query("after_key", "Cursor, with after_at."), "schema": _text_of(lock_filters.MAX_KEY)},
                    ],
                    "responses": {"200": _answer("A page of locks.", "Locks"), **_problems(*READ)},
                }
            },
            "/workers": {
                "get": {
                    "operationId": "listWorkers",
                    "summary": "Workers and serving processes with their heartbeat: alive, gone or stopped.",
                    "responses": {"200": _answer("Every kept row, alive first.", "Workers"), **_problems(*READ)},
                }
            },
            "/queues": {
                "get": {
                    "operationId": "listQueues",
                    "summary": "PGMQ queues with their depth and oldest message.",
                    "responses": {"200": _answer("Each queue.", "Queues"), **_problems(*READ)},
                }
            },
            "/openapi.json": {
                "get": {
                    "operationId": "openapi",
                    "summary": "This document.",
                    "responses": {
                        "200": {"description": "OpenAPI 3.1", "content": {JSON: {"schema": {"type": "object"}}}}
                    },
                }
            },
        },
    }
