"""resume and resume_at of a whole chunk of an operation in one
transaction (runtime/chunk_resume.py says what the path does and leaves to
the per-run verb; runtime/chunks/__init__.py calls it)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy.engine import Connection, Engine

from ...models import chunk_writes
from ...rules import states
from .. import flow, verbs
from ..chunk_resume import ChunkResult, Then, in_one
from ..definitions import Registry
from ..plan import CONTINUE, RETRY, plan_for
from . import locked_runs


def resume_chunk(
    engine: Engine,
    verb: str,
    workflow_ids: list[str],
    *,
    operation_id: int,
    actor: str,
    reason: str | None,
    at: datetime | None,
    registry: Registry | None,
    now: datetime,
    then: Then | None = None,
) -> ChunkResult:
    """*verb* (resume or resume_at, due at *at*) on *workflow_ids* in one
    transaction, with the audit events of verbs.resume carrying
    *operation_id*."""
    reason = locked_runs.capped_reason(reason)
    actor = actor or states.APP_ACTOR
    due = at or now
    at_iso = locked_runs.capped(flow.iso(at)) if at is not None else None

    def statements(conn: Connection) -> ChunkResult:
        result, candidates, known = locked_runs.lock_and_read(conn, verb, workflow_ids, operation_id, latest=True)
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
            step = definition.get_step(plan.step) if definition is not None and plan is not None and plan.step else None
            if plan is None or plan.action not in (RETRY, CONTINUE) or step is None or not flow.plain_schedule(step):
                result.rest.append(run["workflow_id"])
                continue
            planned.append(
                {
                    "workflow_id": run["workflow_id"],
                    "run_id": run["id"],
                    "step_name": plan.step,
                    "step_name_capped": locked_runs.capped(plan.step),
                    "action": plan.action,
                    "from": row,
                }
            )
        if not planned:
            return result
        written = chunk_writes.schedule_and_move(
            conn,
            planned,
            first="resumed",
            from_=verbs.FROM[verb],
            due=due,
            due_iso=locked_runs.capped(flow.iso(due)),
            now=now,
            actor=actor,
            reason=reason,
            operation_id=operation_id,
            at=at_iso,
        )
        locked_runs.moved_all([w for w, row in written.items() if row["moved"]], len(planned))
        result.moved = [plan["workflow_id"] for plan in planned]
        return result

    return in_one(engine, statements, then)
