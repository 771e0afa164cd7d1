"""skip of a whole chunk in one transaction (verbs._skip): eight statements
whatever the chunk's size.

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

from ...models import events, signals, steps, workflow_rows
from ...rules import states
from .. import flow
from ..chunk_resume import ChunkResult
from ..definitions import Registry
from ..verbs import FROM
from . import common


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
    engine: Engine, workflow_ids: list[str], *, operation_id: int, actor: str, reason: str | None,
    registry: Registry | None, now: datetime,
    then: common.Then | None = None,
) -> ChunkResult:
    reason = common.reason_of(reason)

    def statements(conn: Connection) -> ChunkResult:
        result, candidates = common.lock(conn, "skip", workflow_ids, operation_id)
        latest = steps.latest_of(conn, [run["workflow_id"] for run in candidates]) if candidates else {}
        planned = []  # (run, open row or None, name, the step after)
        for run in candidates:
            definition = registry.get(run["workflow_class"]) if registry is not None else None
            decided = _decide(run, latest.get(run["workflow_id"]), definition) if definition is not None else None
            if decided is None:
                result.rest.append(run["workflow_id"])
            elif decided == "skipped":
                result.skipped.append(run["workflow_id"])
            else:
                planned.append((run, *decided))
        if not planned:
            return result
        pairs = [(run["workflow_id"], name) for run, skip_row, name, _ in planned if skip_row is None]
        pairs += [(run["workflow_id"], after.name) for run, _, _, after in planned if after is not None]
        attempts = steps.next_attempts(conn, pairs)
        ids = iter(steps.reserve_ids(conn, len(pairs)))
        inserts, skipped_ids, scheduled_ids = [], {}, {}
        for run, skip_row, name, after in planned:
            workflow_id = run["workflow_id"]
            if skip_row is None:
                skipped_ids[workflow_id] = next(ids)
                inserts.append({"id": skipped_ids[workflow_id], "workflow_id": workflow_id, "step_name": name,
                                "status": states.STEP_SKIPPED, "attempt": attempts[(workflow_id, name)],
                                "finished_at": now})
            else:
                skipped_ids[workflow_id] = skip_row["id"]
            if after is not None:
                scheduled_ids[workflow_id] = next(ids)
                inserts.append({"id": scheduled_ids[workflow_id], "workflow_id": workflow_id, "step_name": after.name,
                                "status": states.STEP_SCHEDULED, "attempt": attempts[(workflow_id, after.name)],
                                "scheduled_at": _due(after, now)})
        open_ids = [skip_row["id"] for _, skip_row, _, _ in planned if skip_row is not None]
        written = steps.skip_and_insert(conn, open_ids, inserts, now=now)
        if len(written) != len(open_ids) + len(inserts):  # cannot happen under the locks
            raise RuntimeError(f"{len(written)} of {len(open_ids) + len(inserts)} step rows written")
        signals.consume_held_many(conn, [(run["workflow_id"], name) for run, _, name, _ in planned], now=now)
        moves, rows = [], []
        for run, _, _, after in planned:
            workflow_id = run["workflow_id"]
            rows.append(common.event(run, "step_skipped", actor=actor, now=now, operation_id=operation_id,
                                     reason=reason, step=written[skipped_ids[workflow_id]]))
            if after is None:
                moves.append({"workflow_id": workflow_id, "to": states.COMPLETED, "finished_at": now,
                              "paused_at": None})
                rows.append(common.event(run, "finished", actor=actor, now=now, operation_id=operation_id,
                                         details={"status": states.COMPLETED}))
            else:
                scheduled = written[scheduled_ids[workflow_id]]
                moves.append({"workflow_id": workflow_id, "to": states.READY, "current_step": after.name,
                              "paused_at": None})
                rows.append(common.event(run, "step_scheduled", actor=actor, now=now, operation_id=None,
                                         step=scheduled, details=flow.scheduled_details(_due(after, now))))
        moved = workflow_rows.move_many(conn, moves, from_=FROM["skip"], sync_latest=True)
        common.moved_all(moved, len(planned))
        events.record_many(conn, rows)
        result.moved = [run["workflow_id"] for run, _, _, _ in planned]
        return result

    return common.in_one(engine, statements, then)
