"""rerun of a whole chunk in one transaction (verbs._rerun): seven
statements whatever the chunk's size: a "rerun" event, a new attempt of
the step (from_step, else the first) due now and its event, the run ready.

Back to the per-run verb: a run another transaction holds, a definition
not loaded here, a step it does not declare (UnknownStep), a step that
waits for a signal (flow.schedule's signal rules), and a run whose class
and subject another ongoing run holds, or that shares them with another
run of the chunk (the one-ongoing-run-per-subject rule: the verb refuses
it as SubjectBusy, or moves the first of two)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy.engine import Connection, Engine

from ...models import events, steps, workflow_rows
from ...rules import states
from .. import flow
from ..chunk_resume import ChunkResult
from ..definitions import Registry
from ..verbs import FROM
from . import common


def rerun_chunk(
    engine: Engine, workflow_ids: list[str], *, operation_id: int, actor: str, reason: str | None,
    from_step: str | None, registry: Registry | None, now: datetime,
    then: common.Then | None = None,
) -> ChunkResult:
    reason = common.reason_of(reason)

    def statements(conn: Connection) -> ChunkResult:
        result, candidates = common.lock(conn, "rerun", workflow_ids, operation_id)
        planned = []  # (run, step name)
        for run in candidates:
            definition = registry.get(run["workflow_class"]) if registry is not None else None
            name = ((from_step or "").strip() or definition.first_step.name) if definition is not None else None
            step = definition.get_step(name) if definition is not None else None
            if step is None or not flow.plain_schedule(step):
                result.rest.append(run["workflow_id"])
            else:
                planned.append((run, name))
        subjects: dict[tuple, int] = {}
        for run, _ in planned:
            if run["subject_type"] is not None and run["subject_id"] is not None:
                key = (run["workflow_class"], run["subject_type"], run["subject_id"])
                subjects[key] = subjects.get(key, 0) + 1
        taken = workflow_rows.subject_taken(conn, [run for run, _ in planned])
        shared = {run["workflow_id"] for run, _ in planned
                  if subjects.get((run["workflow_class"], run["subject_type"], run["subject_id"]), 0) > 1}
        result.rest += [run["workflow_id"] for run, _ in planned if run["workflow_id"] in taken | shared]
        planned = [(run, name) for run, name in planned if run["workflow_id"] not in taken | shared]
        if not planned:
            return result
        attempts = steps.next_attempts(conn, [(run["workflow_id"], name) for run, name in planned])
        ids = steps.reserve_ids(conn, len(planned))
        rows = [{"id": step_id, "workflow_id": run["workflow_id"], "step_name": name, "scheduled_at": now,
                 "attempt": attempts[(run["workflow_id"], name)]} for step_id, (run, name) in zip(ids, planned)]
        scheduled = steps.schedule_many(conn, rows, now=now)
        moved = workflow_rows.move_many(conn, [
            {"workflow_id": run["workflow_id"], "to": states.READY, "current_step": name, "finished_at": None,
             "paused_at": None} for run, name in planned
        ], from_=FROM["rerun"], sync_latest=True)
        common.moved_all(moved, len(planned))
        trail = []
        for run, name in planned:
            trail.append(common.event(run, "rerun", actor=actor, now=now, operation_id=operation_id, reason=reason,
                                      details={"from_step": name, "was": run["status"]}))
            trail.append(common.event(run, "step_scheduled", actor=actor, now=now, operation_id=None,
                                      step=scheduled[run["workflow_id"]], details=flow.scheduled_details(now)))
        events.record_many(conn, trail)
        result.moved = [run["workflow_id"] for run, _ in planned]
        return result

    return common.in_one(engine, statements, then)
