"""run_now and reschedule of a whole chunk in one transaction
(verbs._set_due): six statements whatever the chunk's size. A run whose
latest step row is not scheduled is one the verb refuses as in the wrong
status: skipped here too."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy.engine import Connection, Engine

from ...models import events, steps, workflow_rows
from ...rules import states
from .. import flow
from ..chunk_resume import ChunkResult
from ..verbs import FROM
from . import common

# The event each verb writes.
EVENTS = {"run_now": "run_now", "reschedule": "rescheduled"}


def due_chunk(
    engine: Engine, verb: str, workflow_ids: list[str], *, operation_id: int, actor: str, reason: str | None,
    at: datetime | None, now: datetime,
    then: common.Then | None = None,
) -> ChunkResult:
    """*verb* (run_now: due *now*; reschedule: due *at*) on every run: its
    scheduled step row due then, the run ready, one event per run with the
    moment and the one it replaced."""
    reason = common.reason_of(reason)
    due = now if verb == "run_now" else at

    def statements(conn: Connection) -> ChunkResult:
        result, candidates = common.lock(conn, verb, workflow_ids, operation_id)
        if not candidates:
            return result
        latest = steps.latest_of(conn, [run["workflow_id"] for run in candidates])
        runs = []
        for run in candidates:
            row = latest.get(run["workflow_id"])
            if row is None or row["status"] != states.STEP_SCHEDULED:
                result.skipped.append(run["workflow_id"])
            else:
                runs.append(run)
        if not runs:
            return result
        updated = steps.set_due_many(conn, [(latest[run["workflow_id"]]["id"], due) for run in runs],
                                     from_=states.STEP_SCHEDULED, now=now)
        common.moved_all(list(updated), len(runs))
        moved = workflow_rows.move_many(conn, [{"workflow_id": run["workflow_id"], "to": states.READY}
                                               for run in runs], from_=FROM[verb], sync_latest=True)
        common.moved_all(moved, len(runs))
        events.record_many(conn, [
            common.event(run, EVENTS[verb], actor=actor, now=now, operation_id=operation_id, reason=reason,
                         step=updated[run["workflow_id"]],
                         details={"at": flow.iso(due), "was": flow.iso(latest[run["workflow_id"]]["scheduled_at"])})
            for run in runs
        ])
        result.moved = [run["workflow_id"] for run in runs]
        return result

    return common.in_one(engine, statements, then)
