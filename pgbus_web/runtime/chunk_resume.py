"""resume (and resume_at) of a whole chunk of an operation in one
transaction: the operation's fast path (docs/operations.md).

verbs.resume is about ten statements and a commit per run; an incident's
40,000 paused runs would keep a process and the database busy for minutes.
Here a chunk takes three statements whatever its size: the lock, what the
chunk reads under it (runtime/chunks/common.lock_and_read), and the writes
(models/chunk_writes.schedule_and_move). Every decision stays
the verb's own, only the writes are gathered:

- the runs are locked (FOR UPDATE, in id order, SKIP LOCKED: never waiting,
  so never deadlocking with a single verb or another operation);
- under those locks, a run this operation already acted on is "already"
  (verbs' AlreadyActed), one whose status the verb does not fit (the verb
  table's rule) is "skipped" (WrongStatus);
- the plan is plan.plan_for over the same latest step row the verb reads,
  the "resumed" event's details verbs.resume_details, the scheduled row and
  its event flow.schedule's plain case.

Runs this path does not do go back to the caller, for the per-run verb:
one held by another transaction (the verb waits for it), a definition not
loaded here, a plan that lets a pending step go on or finishes the run, a
step that waits for a signal (flow.schedule's signal rules), a step the
definition lost. A problem in the transaction rolls it all back; the caller
does the chunk run by run then.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Callable

from sqlalchemy.engine import Connection, Engine

from ..models import chunk_writes
from ..rules import states
from . import flow, verbs
from .definitions import Registry
from .plan import CONTINUE, RETRY, plan_for

# The operation verbs this path does.
VERBS = ("resume", "resume_at")


@dataclass
class ChunkResult:
    moved: list[str] = field(default_factory=list)  # resumed here
    already: list[str] = field(default_factory=list)  # this operation acted on them before
    skipped: list[str] = field(default_factory=list)  # the verb no longer fits their status
    rest: list[str] = field(default_factory=list)  # for the per-run verb


# What a chunk's caller may add to the chunk's own transaction, after its
# writes and before its COMMIT: the Runner's progress write under its
# fence, so that a chunk is one commit (docs/operations.md). It may raise
# to roll the chunk back whole.
Then = Callable[[Connection, ChunkResult], None]


def in_one(engine: Engine, statements: Callable[[Connection], ChunkResult], then: Then | None) -> ChunkResult:
    """*statements* (a chunk's) in one transaction, then *then*, given,
    in the same transaction before it commits."""
    with engine.begin() as conn:
        result = statements(conn)
        if then is not None:
            then(conn, result)
    return result


def resume_chunk(
    engine: Engine, verb: str, workflow_ids: list[str], *, operation_id: int, actor: str, reason: str | None,
    at: datetime | None, registry: Registry | None, now: datetime, then: Then | None = None,
) -> ChunkResult:
    """*verb* (resume or resume_at, due at *at*) on *workflow_ids* in one
    transaction, with the audit events of verbs.resume carrying
    *operation_id*."""
    from .chunks import common  # here: runtime/chunks imports this module

    reason = common.capped_reason(reason)
    actor = actor or states.APP_ACTOR
    due = at or now
    at_iso = common.capped(flow.iso(at)) if at is not None else None

    def statements(conn: Connection) -> ChunkResult:
        result, candidates, known = common.lock_and_read(conn, verb, workflow_ids, operation_id, latest=True)
        planned = []
        for run in candidates:
            definition = registry.get(run["workflow_class"]) if registry is not None else None
            row = known[run["workflow_id"]]["latest"]
            plan = None
            if definition is not None:
                try:
                    plan = plan_for(run, row, definition)
                except KeyError:
                    plan = None
            step = definition.get_step(plan.step) if plan is not None and plan.step else None
            if plan is None or plan.action not in (RETRY, CONTINUE) or step is None or not flow.plain_schedule(step):
                result.rest.append(run["workflow_id"])
                continue
            planned.append({"workflow_id": run["workflow_id"], "run_id": run["id"], "step_name": plan.step,
                            "step_name_capped": common.capped(plan.step), "action": plan.action, "from": row})
        if not planned:
            return result
        written = chunk_writes.schedule_and_move(
            conn, planned, first="resumed", from_=verbs.FROM[verb], due=due, due_iso=common.capped(flow.iso(due)),
            now=now, actor=actor, reason=reason, operation_id=operation_id, at=at_iso)
        common.moved_all([w for w, row in written.items() if row["moved"]], len(planned))
        result.moved = [plan["workflow_id"] for plan in planned]
        return result

    return in_one(engine, statements, then)
