"""An operation's record (docs/operations.md): what pgbus_web_operations
keeps of one and how it changes, with no rule of who may start or approve it.

- The refusals every part of an operation raises before anything is written.
- The verbs an operation may apply, and what it keeps: its filter (the
  runs index's query without page cursors), its verb's fields and reason.
- find, cancel, pause and go on: the changes of its status that need no
  rule beyond the status it is in.

The preview (operation_preview.py), the rules it is stored, approved and
paced under (operation_policy.py) and the runner (operation_runner.py)
stand on this module.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy.engine import Engine

from ..models import operation_rows
from ..models.text import truncate
from ..rules import run_filters as index_filters
from ..rules import verb_table
from ..rules.limits import REASON_LIMIT
from . import verbs
from .clock import parse_future, utcnow
from .errors import InvalidSignalName, UnknownVerb

if TYPE_CHECKING:
    from .operation_preview import Preview

# The verbs an operation may apply: every outside verb of the table.
VERBS = tuple(verb.name for verb in verb_table.TABLE)


# --- refusals ----------------------------------------------------------------


class OperationError(Exception):
    """An operation refused before anything was written."""

    code = "operation_error"


class ReasonMissing(OperationError):
    code = "reason_missing"

    def __init__(self) -> None:
        super().__init__("a reason is required")


class NothingFits(OperationError):
    """The verb fits none of the runs the filter matches (or none match)."""

    code = "nothing_fits"

    def __init__(self, preview: Preview) -> None:
        self.preview = preview
        super().__init__(f"{preview.verb} fits none of the {preview.total} matching runs")


class CountChanged(OperationError):
    """The count the operator confirmed is not the count now: they must see
    the fresh preview first."""

    code = "count_changed"

    def __init__(self, expected: int, preview: Preview) -> None:
        self.expected = expected
        self.preview = preview
        super().__init__(f"the filter matched {expected} runs when shown and matches {preview.total} now")


class OperationNotFound(OperationError):
    code = "operation_not_found"

    def __init__(self, operation_id: Any) -> None:
        self.operation_id = operation_id
        super().__init__(f"no operation {operation_id!r}")


class NotCancellable(OperationError):
    code = "not_cancellable"

    def __init__(self, operation: Mapping[str, Any]) -> None:
        self.operation = operation
        self.status = operation["status"]
        super().__init__(f"operation {operation['id']} is {self.status}: only a queued or running one can be cancelled")


class NotPausable(OperationError):
    code = "not_pausable"

    def __init__(self, operation: Mapping[str, Any]) -> None:
        self.operation = operation
        self.status = operation["status"]
        super().__init__(f"operation {operation['id']} is {self.status}: only a queued or running one can be paused")


class NotPaused(OperationError):
    code = "not_paused"

    def __init__(self, operation: Mapping[str, Any]) -> None:
        self.operation = operation
        self.status = operation["status"]
        super().__init__(f"operation {operation['id']} is {self.status}: only a paused one can go on")


class NotAwaitingApproval(OperationError):
    code = "not_awaiting_approval"

    def __init__(self, operation: Mapping[str, Any]) -> None:
        self.operation = operation
        self.status = operation["status"]
        super().__init__(f"operation {operation['id']} is {self.status}: it is not waiting for approval")


class OwnApproval(OperationError):
    """The operator who asked for an operation cannot approve it."""

    code = "own_approval"

    def __init__(self, operation: Mapping[str, Any]) -> None:
        self.operation = operation
        super().__init__(
            f"{operation['actor']} asked for operation {operation['id']}: another operator must approve it"
        )


class PaceEnded(OperationError):
    code = "pace_ended"

    def __init__(self, operation: Mapping[str, Any]) -> None:
        self.operation = operation
        self.status = operation["status"]
        super().__init__(f"operation {operation['id']} is {self.status}: its pace can no longer be changed")


class CeilingNotForVerb(OperationError):
    """A ceiling of runs in flight on a verb that starts no work."""

    code = "ceiling_not_for_verb"

    def __init__(self, verb: str) -> None:
        self.verb = verb
        super().__init__(f"{verb} starts no work: a ceiling of runs in flight does not apply to it")


# --- the filter, the verb and its fields -------------------------------------


def stored_query(run_filters: index_filters.RunFilters) -> dict[str, str]:
    """The index query an operation keeps: its filters without the page
    cursors, from/to with their offset so another process in another zone
    reads the same moments."""
    changes: dict[str, Any] = {"before": None, "after": None}
    if run_filters.created_from is not None:
        changes["from"] = run_filters.created_from.isoformat()
    if run_filters.created_to is not None:
        changes["to"] = run_filters.created_to.isoformat()
    query = run_filters.query(**changes)
    return query


def filters_of(operation: Mapping[str, Any]) -> index_filters.RunFilters:
    return index_filters.parse(operation["filters"] or {})


def check(
    verb: str, params: Mapping[str, Any] | None, reason: str | None, *, now: datetime, require_reason: bool = True
) -> tuple[verb_table.Verb, dict[str, Any], str]:
    """The verb, its fields as stored, and the reason; raises what is wrong
    (UnknownVerb, ReasonMissing, InvalidTime, InvalidSignalName,
    InvalidPayload) before anything is read or written."""
    found = verb_table.get(verb) if isinstance(verb, str) else None
    if found is None:
        raise UnknownVerb(str(verb)[:50])
    params = dict(params or {})
    text = (reason or "").strip()
    if require_reason and not text:
        raise ReasonMissing()
    stored: dict[str, Any] = {}
    if verb_table.AT in found.fields:
        stored["at"] = parse_future(params.get("at"), now=now).isoformat()
    if verb_table.FROM_STEP in found.fields:
        step = (params.get("from_step") or "").strip()
        if step:
            stored["from_step"] = step
    if found.name == verb_table.SIGNAL:
        name = params.get("name")
        if not isinstance(name, str) or not name.strip():
            raise InvalidSignalName(name)
        stored["name"] = name.strip()
        stored["payload"] = verbs.parse_payload(params.get("payload"), None)
    return found, stored, truncate(text, REASON_LIMIT)


def cancel(
    engine: Engine,
    operation_id: int,
    *,
    now: datetime | None = None,
    actor: str | None = None,
    reason: str | None = None,
) -> dict[str, Any]:
    """Stop an operation that has not ended (awaiting approval, queued,
    running or paused) -> cancelled, saying who and why. The process doing
    it stops after the chunk in hand, whose runs are still counted."""
    with engine.begin() as conn:
        cancelled = operation_rows.cancel(
            conn, operation_id, now=now or utcnow(), actor=actor, reason=stored_reason(reason)
        )
        if cancelled is not None:
            return cancelled
        current = operation_rows.find(conn, operation_id)
    if current is None:
        raise OperationNotFound(operation_id)
    raise NotCancellable(current)


def changed_or_refused(engine: Engine, operation_id: int, change, refused) -> dict[str, Any]:
    """*change*(conn) in a transaction, or the refusal *refused*(current row)
    when it changed nothing (OperationNotFound when there is none)."""
    with engine.begin() as conn:
        changed = change(conn)
        if changed is not None:
            return changed
        current = operation_rows.find(conn, operation_id)
    if current is None:
        raise OperationNotFound(operation_id)
    raise refused(current)


def stored_reason(reason: str | None) -> str | None:
    text = (reason or "").strip()
    return truncate(text, REASON_LIMIT) or None


def pause(
    engine: Engine, operation_id: int, *, actor: str, now: datetime | None = None, reason: str | None = None
) -> dict[str, Any]:
    """queued or running -> paused: no process claims it; the one doing it
    drops it at its next write (the chunk in hand is finished and counted)."""
    return changed_or_refused(
        engine,
        operation_id,
        lambda conn: operation_rows.pause(
            conn, operation_id, now=now or utcnow(), actor=actor, reason=stored_reason(reason)
        ),
        NotPausable,
    )


def go_on(
    engine: Engine, operation_id: int, *, actor: str, now: datetime | None = None, reason: str | None = None
) -> dict[str, Any]:
    """paused -> queued: any process claims it and goes on from its cursor."""
    return changed_or_refused(
        engine,
        operation_id,
        lambda conn: operation_rows.go_on(
            conn, operation_id, now=now or utcnow(), actor=actor, reason=stored_reason(reason)
        ),
        NotPaused,
    )


def find(engine: Engine, operation_id: int) -> dict[str, Any]:
    with engine.connect() as conn:
        found = operation_rows.find(conn, operation_id)
    if found is None:
        raise OperationNotFound(operation_id)
    return found
