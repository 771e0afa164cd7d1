"""cancel and pause of a whole chunk in one transaction (verbs._cancel,
verbs._pause): cancel in three statements, pause in five, whatever the
chunk's size. Neither needs the
definition, so only a run another transaction holds goes back to the
per-run verb."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy.engine import Connection, Engine

from ...models import chunk_writes, events, steps, workflow_rows
from ...rules import states
from ..chunk_resume import ChunkResult
from ..verbs import FROM
from . import locked_runs


def cancel_chunk(
    engine: Engine,
    workflow_ids: list[str],
    *,
    operation_id: int,
    actor: str,
    reason: str | None,
    now: datetime,
    then: locked_runs.Then | None = None,
) -> ChunkResult:
    """Every run -> cancelled, its open step rows cancelled; one "cancelled"
    event per run naming its last cancelled row and all of them: the lock,
    the check, and one statement of writes (chunk_writes.cancel_and_move)."""
    reason = locked_runs.capped_reason(reason)
    actor = actor or states.APP_ACTOR

    def statements(conn: Connection) -> ChunkResult:
        result, runs = locked_runs.lock(conn, "cancel", workflow_ids, operation_id)
        if not runs:
            return result
        moved, closed, named = chunk_writes.cancel_and_move(
            conn,
            runs,
            from_=FROM["cancel"],
            open_=states.STEP_OPEN,
            now=now,
            actor=actor,
            reason=reason,
            operation_id=operation_id,
        )
        # Under the locks every run moves and the rows the events name are
        # those cancelled; anything else rolls the chunk back whole.
        if moved != len(runs) or closed != named:
            raise RuntimeError(f"{moved} of {len(runs)} runs moved; {closed} step rows cancelled, {named} named")
        result.moved = [run["workflow_id"] for run in runs]
        return result

    return locked_runs.in_one(engine, statements, then)


def pause_chunk(
    engine: Engine,
    workflow_ids: list[str],
    *,
    operation_id: int,
    actor: str,
    reason: str | None,
    now: datetime,
    then: locked_runs.Then | None = None,
) -> ChunkResult:
    """Every run -> paused (paused_at now); one "paused" event per run
    naming its latest step row."""
    reason = locked_runs.reason_of(reason)

    def statements(conn: Connection) -> ChunkResult:
        result, runs = locked_runs.lock(conn, "pause", workflow_ids, operation_id, sets_latest=False)
        if not runs:
            return result
        ids = [run["workflow_id"] for run in runs]
        latest = steps.latest_of(conn, ids)
        moved = workflow_rows.move_many(
            conn, [{"workflow_id": w, "to": states.PAUSED, "paused_at": now} for w in ids], from_=FROM["pause"]
        )
        locked_runs.moved_all(moved, len(runs))
        events.record_many(
            conn,
            [
                locked_runs.event(
                    run,
                    "paused",
                    actor=actor,
                    now=now,
                    operation_id=operation_id,
                    reason=reason,
                    step=latest.get(run["workflow_id"]),
                    details={"was": run["status"]},
                )
                for run in runs
            ],
        )
        result.moved = ids
        return result

    return locked_runs.in_one(engine, statements, then)
