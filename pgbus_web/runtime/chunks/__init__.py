"""An operation's chunk of runs in one transaction, for every verb: the
operation's fast path (docs/operations.md).

The per-run verb (runtime/verbs.py) is about ten statements and a commit
per run. Here a chunk takes three to eight statements whatever its size:
the lock, what it reads under the lock, and its writes, one statement per
table (multi-row INSERT or UPDATE with unnest, RETURNING) or, for resume,
resume_at, run_now, reschedule, rerun and signal, one statement of
data-modifying CTEs for all of them (models/chunk_writes.py).
Every decision stays the verb's: the runs are locked FOR UPDATE SKIP
LOCKED in id order (never waiting, so never deadlocking with a single verb
or another operation); under those locks a run this operation already
acted on is "already", one whose status the verb does not fit "skipped";
then each verb's module decides as its per-run verb does, gathers the
writes and writes each table once.

What a chunk cannot decide goes back to the caller for the per-run verb
(ChunkResult.rest): a run another transaction holds, a definition not
loaded here, a step the definition lost, a step that waits for a signal,
and what each module names. A problem in the transaction rolls the chunk
back whole; the caller does it run by run then.

One module per verb family: halt (cancel, pause), due (run_now,
reschedule), skip, rerun, signal, resume (resume and resume_at; what a
chunk answers is runtime/chunk_resume.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from sqlalchemy.engine import Engine

from .. import chunk_resume
from ..chunk_resume import ChunkResult, Then
from ..clock import parse_future
from ..definitions import Registry
from . import due, halt, rerun, resume, signal, skip

# The verbs these modules do (resume and resume_at: chunk_resume.VERBS).
VERBS = ("cancel", "pause", "run_now", "reschedule", "skip", "rerun", "signal")


def covers(verb: str) -> bool:
    """Whether *verb* has a chunk path."""
    return verb in VERBS or verb in chunk_resume.VERBS


def act(
    engine: Engine,
    operation: Mapping[str, Any],
    workflow_ids: list[str],
    *,
    registry: Registry | None,
    now: datetime,
    key_of: Callable[[str], str],
    then: Then | None = None,
) -> ChunkResult:
    """The operation's verb on *workflow_ids* in one transaction, with its
    actor, reason and fields (params) and its id on every audit event.
    *key_of*: the idempotency key of the signal it sends a run. *then*:
    called with the connection and the result in that transaction before
    it commits (the Runner's progress write)."""
    verb = operation["verb"]
    params = operation["params"] or {}
    common = {
        "operation_id": operation["id"],
        "actor": operation["actor"],
        "reason": operation["reason"],
        "now": now,
        "then": then,
    }
    if verb in chunk_resume.VERBS:
        at = parse_future(params.get("at"), now=now) if verb == "resume_at" else None
        return resume.resume_chunk(engine, verb, workflow_ids, at=at, registry=registry, **common)
    if verb == "cancel":
        return halt.cancel_chunk(engine, workflow_ids, **common)
    if verb == "pause":
        return halt.pause_chunk(engine, workflow_ids, **common)
    if verb in ("run_now", "reschedule"):
        at = parse_future(params.get("at"), now=now) if verb == "reschedule" else None
        return due.due_chunk(engine, verb, workflow_ids, at=at, **common)
    if verb == "skip":
        return skip.skip_chunk(engine, workflow_ids, registry=registry, **common)
    if verb == "rerun":
        return rerun.rerun_chunk(engine, workflow_ids, from_step=params.get("from_step"), registry=registry, **common)
    if verb == "signal":
        return signal.signal_chunk(
            engine, workflow_ids, name=params.get("name") or "", payload=params.get("payload"), key_of=key_of, **common
        )
    raise ValueError(f"no chunk path for {verb!r}")
