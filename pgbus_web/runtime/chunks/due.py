"""run_now and reschedule of a whole chunk in one transaction
(verbs._set_due): three statements whatever the chunk's size (the lock;
what the chunk reads under it; the writes, models/chunk_writes.due_and_move). A run whose
latest step row is not scheduled is one the verb refuses as in the wrong
status: skipped here too."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy.engine import Connection, Engine

from ...models import chunk_writes
from ...rules import states
from .. import flow
from ..chunk_resume import ChunkResult
from ..verbs import FROM
from . import locked_runs

# The event each verb writes.
EVENTS = {"run_now": "run_now", "reschedule": "rescheduled"}


def due_chunk(
    engine: Engine,
    verb: str,
    workflow_ids: list[str],
    *,
    operation_id: int,
    actor: str,
    reason: str | None,
    at: datetime | None,
    now: datetime,
    then: locked_runs.Then | None = None,
) -> ChunkResult:
    """*verb* (run_now: due *now*; reschedule: due *at*) on every run: its
    scheduled step row due then, the run ready, one event per run with the
    moment and the one it replaced."""
    reason = locked_runs.capped_reason(reason)
    actor = actor or states.APP_ACTOR
    due = now if verb == "run_now" else at
    due_iso = locked_runs.capped(flow.iso(due))

    def statements(conn: Connection) -> ChunkResult:
        result, candidates, known = locked_runs.lock_and_read(conn, verb, workflow_ids, operation_id, latest=True)
        dues = []
        for run in candidates:
            row = known[run["workflow_id"]]["latest"]
            if row is None or row["status"] != states.STEP_SCHEDULED:
                result.skipped.append(run["workflow_id"])
            else:
                dues.append(
                    {
                        "workflow_id": run["workflow_id"],
                        "run_id": run["id"],
                        "step_id": row["id"],
                        "was": locked_runs.capped(flow.iso(row["scheduled_at"])),
                    }
                )
        if not dues:
            return result
        made_due, moved = chunk_writes.due_and_move(
            conn,
            dues,
            event=EVENTS[verb],
            from_=FROM[verb],
            due=due,
            due_iso=due_iso,
            now=now,
            actor=actor,
            reason=reason,
            operation_id=operation_id,
        )
        if made_due != len(dues) or moved != len(dues):  # cannot happen under the locks; never write half a chunk
            raise RuntimeError(f"{made_due} step rows and {moved} of {len(dues)} runs moved")
        result.moved = [item["workflow_id"] for item in dues]
        return result

    return locked_runs.in_one(engine, statements, then)
