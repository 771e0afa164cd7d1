"""resume (and resume_at) of a whole chunk of an operation in one
transaction: the operation's fast path (docs/operations.md).

verbs.resume is about ten statements and a commit per run; an incident's
40,000 paused runs would keep a process and the database busy for minutes.
Here a chunk takes eight statements whatever its size. Every decision stays
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

from ..models import events, steps, workflow_rows
from . import flow, verbs
from ..rules import verb_table
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
    allows = verb_table.get(verb).allows
    reason = (reason or "").strip() or None
    due = at or now
    result = ChunkResult()

    def statements(conn: Connection) -> ChunkResult:
        locked = workflow_rows.lock_many(conn, workflow_ids, commit_unflushed=True, columns=workflow_rows.CHUNK_COLUMNS)
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
        latest = steps.latest_of(conn, [run["workflow_id"] for run in candidates])
        planned = []  # (run, latest step row, plan)
        for run in candidates:
            definition = registry.get(run["workflow_class"]) if registry is not None else None
            row = latest.get(run["workflow_id"])
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
            planned.append((run, row, plan))
        if not planned:
            return result
        attempts = steps.next_attempts(conn, [(run["workflow_id"], plan.step) for run, _, plan in planned])
        ids = steps.reserve_ids(conn, len(planned))
        rows = [{"id": step_id, "workflow_id": run["workflow_id"], "step_name": plan.step, "scheduled_at": due,
                 "attempt": attempts[(run["workflow_id"], plan.step)]}
                for step_id, (run, _, plan) in zip(ids, planned)]
        events.record_many(conn, [
            events.row(workflow_id=run["workflow_id"], event="resumed", actor=actor, reason=reason, step=row,
                       details={**verbs.resume_details(plan, at), "operation_id": operation_id}, created_at=now)
            for run, row, plan in planned
        ])
        # The status change before the rows it points at: see workflow_rows.resume_many.
        moved = workflow_rows.resume_many(conn, [{**row, "step_id": row["id"]} for row in rows], from_=verbs.FROM[verb])
        if moved != len(planned):  # cannot happen under the locks; never write half a chunk
            raise RuntimeError(f"{moved} of {len(planned)} runs moved")
        scheduled = steps.schedule_many(conn, rows, now=now)
        events.record_many(conn, [
            events.row(workflow_id=run["workflow_id"], event="step_scheduled", actor=actor,
                       step=scheduled[run["workflow_id"]], details=flow.scheduled_details(due), created_at=now)
            for run, _, _ in planned
        ])
        result.moved = [run["workflow_id"] for run, _, _ in planned]
        return result

    return in_one(engine, statements, then)
