"""rerun of a whole chunk in one transaction (verbs._rerun): three
statements whatever the chunk's size (the lock; what the chunk reads under
it; the writes, models/chunk_writes.schedule_and_move): a "rerun" event, a new attempt of
the step (from_step, else the first) due now and its event, the run ready.

Back to the per-run verb: a run another transaction holds, a definition
not loaded here, a step it does not declare (UnknownStep), a step that
waits for a signal (flow.schedule's signal rules), and a run whose class
and subject another ongoing run holds, or that shares them with another
run of the chunk (the one-ongoing-run-per-subject rule: the verb refuses
it as SubjectBusy, or moves the first of two)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy.engine import Connection, Engine

from ...models import chunk_writes
from ...rules import states
from .. import flow
from ..chunk_resume import ChunkResult
from ..definitions import Registry
from ..verbs import FROM
from . import locked_runs


def rerun_chunk(
    engine: Engine,
    workflow_ids: list[str],
    *,
    operation_id: int,
    actor: str,
    reason: str | None,
    from_step: str | None,
    registry: Registry | None,
    now: datetime,
    then: locked_runs.Then | None = None,
) -> ChunkResult:
    reason = locked_runs.capped_reason(reason)
    actor = actor or states.APP_ACTOR

    def statements(conn: Connection) -> ChunkResult:
        result, candidates, known = locked_runs.lock_and_read(conn, "rerun", workflow_ids, operation_id, subjects=True)
        # The step each class reruns from, once per class.
        steps_of: dict[str, str | None] = {}
        for run in candidates:
            klass = run["workflow_class"]
            if klass not in steps_of:
                definition = registry.get(klass) if registry is not None else None
                name = ((from_step or "").strip() or definition.first_step.name) if definition is not None else None
                step = definition.get_step(name) if definition is not None and name is not None else None
                steps_of[klass] = name if step is not None and flow.plain_schedule(step) else None
        planned: list[tuple[dict[str, Any], str]] = []  # (run, step name)
        for run in candidates:
            from_name = steps_of[run["workflow_class"]]
            if from_name is None:
                result.rest.append(run["workflow_id"])
            else:
                planned.append((run, from_name))
        subjects: dict[tuple, int] = {}
        for run, _ in planned:
            if run["subject_type"] is not None and run["subject_id"] is not None:
                key = (run["workflow_class"], run["subject_type"], run["subject_id"])
                subjects[key] = subjects.get(key, 0) + 1
        held = {
            run["workflow_id"]
            for run, _ in planned
            if known[run["workflow_id"]]["taken"]
            or subjects.get((run["workflow_class"], run["subject_type"], run["subject_id"]), 0) > 1
        }
        if held:
            result.rest += [run["workflow_id"] for run, _ in planned if run["workflow_id"] in held]
            planned = [(run, name) for run, name in planned if run["workflow_id"] not in held]
        if not planned:
            return result
        capped = {name: locked_runs.capped(name) for name in set(steps_of.values()) if name is not None}
        written = chunk_writes.schedule_and_move(
            conn,
            [
                {
                    "workflow_id": run["workflow_id"],
                    "run_id": run["id"],
                    "step_name": name,
                    "step_name_capped": capped[name],
                    "was": run["status"],
                }
                for run, name in planned
            ],
            first="rerun",
            from_=FROM["rerun"],
            due=now,
            due_iso=flow.iso(now),
            now=now,
            actor=actor,
            reason=reason,
            operation_id=operation_id,
            clear_finished=True,
        )
        locked_runs.moved_all([w for w, row in written.items() if row["moved"]], len(planned))
        result.moved = [run["workflow_id"] for run, _ in planned]
        return result

    return locked_runs.in_one(engine, statements, then)
