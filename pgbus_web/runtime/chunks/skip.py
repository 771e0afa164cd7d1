"""skip of a whole chunk in one transaction (verbs._skip): four statements
whatever the chunk's size (the lock, the check, the latest rows, and the
writes: models/chunk_writes.skip_and_move).

For each run, as the verb decides it: an open latest step row becomes
skipped; otherwise a skipped row records the step resume would have run
(the first step, the failed or cancelled one again, or the next one); a
run whose last step already ended is skipped (the verb's WrongStatus).
The signal the skipped step held is used up, then the next step is
scheduled (flow.schedule's plain case, due after its delay) or the run
completes after the last step.

Back to the per-run verb: a run another transaction holds, a definition
not loaded here, a step the definition does not declare (the verb's
UnknownStep), a next step that waits for a signal (flow.schedule's signal
rules)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy.engine import Connection, Engine

from ...models import chunk_writes, steps
from ...rules import states
from .. import flow
from ..chunk_resume import ChunkResult
from ..definitions import Registry
from ..verbs import FROM
from . import locked_runs


def _decide(run, row, definition):
    """(open row to skip or None, step name skipped, the step after it or
    None) for one run; "skipped" when the verb refuses it for its status;
    None when this path cannot do it."""
    if row is not None and row["status"] in states.STEP_OPEN:
        name = row["step_name"]
        skip_row = row
    else:
        skip_row = None
        if row is None:
            name = definition.first_step.name
        elif row["status"] in (states.STEP_FAILED, states.STEP_CANCELLED):
            name = row["step_name"]
        else:
            try:
                following = definition.next_step(row["step_name"])
            except KeyError:
                return None
            if following is None:
                return "skipped"
            name = following.name
        if definition.get_step(name) is None:
            return None
    try:
        after = definition.next_step(name)
    except KeyError:
        return None
    if after is not None and (not flow.plain_schedule(after) or after.name == name):
        return None
    return skip_row, name, after


def _due(step, now: datetime) -> datetime:
    """When flow.schedule makes a plain step due: after its delay, else now."""
    return now + step.delay if step.delay else now


def skip_chunk(
    engine: Engine,
    workflow_ids: list[str],
    *,
    operation_id: int,
    actor: str,
    reason: str | None,
    registry: Registry | None,
    now: datetime,
    then: locked_runs.Then | None = None,
) -> ChunkResult:
    reason = locked_runs.capped_reason(reason)
    actor = actor or states.APP_ACTOR

    def statements(conn: Connection) -> ChunkResult:
        result, candidates = locked_runs.lock(conn, "skip", workflow_ids, operation_id)
        latest = steps.latest_of(conn, [run["workflow_id"] for run in candidates]) if candidates else {}
        plans = []
        for run in candidates:
            definition = registry.get(run["workflow_class"]) if registry is not None else None
            decided = _decide(run, latest.get(run["workflow_id"]), definition) if definition is not None else None
            if decided is None:
                result.rest.append(run["workflow_id"])
            elif decided == "skipped":
                result.skipped.append(run["workflow_id"])
            else:
                skip_row, name, after = decided
                due = _due(after, now) if after is not None else None
                plans.append(
                    {
                        "workflow_id": run["workflow_id"],
                        "run_id": run["id"],
                        "open_id": skip_row["id"] if skip_row is not None else None,
                        "name": name,
                        "after": after.name if after is not None else None,
                        "due": due,
                        "due_iso": flow.scheduled_details(due)["at"] if due is not None else None,
                    }
                )
        if not plans:
            return result
        moved, closed, made = chunk_writes.skip_and_move(
            conn,
            plans,
            from_=FROM["skip"],
            open_=states.STEP_OPEN,
            now=now,
            actor=actor,
            reason=reason,
            operation_id=operation_id,
        )
        opened = sum(plan["open_id"] is not None for plan in plans)
        inserts = len(plans) - opened + sum(plan["after"] is not None for plan in plans)
        # Under the locks every run moves and every row is written; anything
        # else rolls the chunk back whole (the caller then goes run by run).
        if (moved, closed, made) != (len(plans), opened, inserts):
            raise RuntimeError(
                f"{moved} of {len(plans)} runs moved, {closed} of {opened} rows skipped, "
                f"{made} of {inserts} rows written"
            )
        result.moved = [plan["workflow_id"] for plan in plans]
        return result

    return locked_runs.in_one(engine, statements, then)
