"""What every verb's chunk shares: the runs locked, sorted under the locks
into already acted on, not fitting and candidates, and the audit event as
the per-run verb writes it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, overload

from sqlalchemy.engine import Connection

from ...models import chunk_writes, events, workflow_rows
from ...models.text import truncate
from ...rules import states, verb_table
from ...rules.limits import REASON_LIMIT
from ..chunk_resume import ChunkResult, Then, in_one  # noqa: F401  (the verbs' modules use them through here)


def reason_of(reason: str | None) -> str | None:
    """The reason as the verbs store it (verbs._reason)."""
    reason = (reason or "").strip()
    return reason or None


def lock(
    conn: Connection,
    verb: str,
    workflow_ids: list[str],
    operation_id: int,
    *,
    sets_latest: bool = True,
) -> tuple[ChunkResult, list[dict[str, Any]]]:
    """The runs locked FOR UPDATE SKIP LOCKED in id order; under the locks,
    a run this operation already acted on is "already" (verbs' AlreadyActed),
    one whose status the verb does not fit "skipped" (WrongStatus), one
    another transaction holds (or gone) "rest" for the per-run verb. The
    others come back as candidates, in id order."""
    allows = verb_table.BY_NAME[verb].allows
    result = ChunkResult()
    locked = workflow_rows.lock_many(
        conn, workflow_ids, sets_latest=sets_latest, commit_unflushed=True, columns=workflow_rows.CHUNK_COLUMNS
    )
    held = {run["workflow_id"] for run in locked}
    result.rest = [workflow_id for workflow_id in workflow_ids if workflow_id not in held]
    acted = events.operation_acted_among(conn, list(held), operation_id)
    candidates = []
    for run in locked:
        if run["workflow_id"] in acted:
            result.already.append(run["workflow_id"])
        elif not allows(run["status"]):
            result.skipped.append(run["workflow_id"])
        else:
            candidates.append(run)
    return result, candidates


def lock_and_read(
    conn: Connection,
    verb: str,
    workflow_ids: list[str],
    operation_id: int,
    *,
    latest: bool = False,
    subjects: bool = False,
) -> tuple[ChunkResult, list[dict[str, Any]], dict[str, dict[str, Any]]]:
    """lock() in two statements whatever the verb reads: the runs locked
    (as lock()), then, under the locks, whether this operation acted on
    each, with what the verb decides from in the same statement
    (chunk_writes.facts: the latest step row with *latest*, whether
    another ongoing run holds the subject with *subjects*). The result
    sorted as lock() sorts it, the candidates, and the facts by
    workflow_id."""
    allows = verb_table.BY_NAME[verb].allows
    result = ChunkResult()
    locked = workflow_rows.lock_many(
        conn, workflow_ids, sets_latest=True, commit_unflushed=True, columns=workflow_rows.CHUNK_COLUMNS
    )
    held = {run["workflow_id"] for run in locked}
    result.rest = [workflow_id for workflow_id in workflow_ids if workflow_id not in held]
    known = chunk_writes.facts(conn, locked, operation_id, latest=latest, subjects=subjects)
    candidates = []
    for run in locked:
        if known[run["workflow_id"]]["acted"]:
            result.already.append(run["workflow_id"])
        elif not allows(run["status"]):
            result.skipped.append(run["workflow_id"])
        else:
            candidates.append(run)
    return result, candidates, known


@overload
def capped(value: str) -> str: ...
@overload
def capped(value: str | None) -> str | None: ...
def capped(value: str | None) -> str | None:
    """A string of an event's details as models/events.cap stores it."""
    return truncate(value, events.DETAIL_LIMIT) if isinstance(value, str) else value


def capped_reason(reason: str | None) -> str | None:
    """The reason as the verbs store it on an event (reason_of, then
    models/events' cap)."""
    reason = reason_of(reason)
    return truncate(str(reason), REASON_LIMIT) if reason else None


def event(
    run: Mapping[str, Any],
    name: str,
    *,
    actor: str,
    now,
    operation_id: int | None,
    step=None,
    reason: str | None = None,
    details: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """One event row as the per-run verb writes it: the verb's own events
    (verbs._Verb.event) carry *operation_id*; the moves it shares with the
    worker (flow.schedule, flow.claim_signal) pass None and carry none."""
    if operation_id is not None:
        details = {**(details or {}), "operation_id": operation_id}
    return events.row(
        workflow_id=run["workflow_id"],
        event=name,
        actor=actor or states.APP_ACTOR,
        reason=reason,
        step=step,
        details=details,
        created_at=now,
    )


def moved_all(moved: list[str], expected: int) -> None:
    """Under the locks every candidate moves; anything else and the chunk
    rolls back whole (the caller then goes run by run)."""
    if len(moved) != expected:
        raise RuntimeError(f"{len(moved)} of {expected} runs moved")
