"""signal of a whole chunk in one transaction (verbs.signal's deliver):
seven statements whatever the chunk's size.

Each run gets the signal with the operation's idempotency key for it and a
"signal_received" event; a waiting run whose latest step waits for that
name claims it at once (the row due now, a "signal_claimed" event, the run
ready), as the verb does. A key already stored stores nothing and writes
nothing (the verb's duplicate). Only a run another transaction holds goes
back to the per-run verb."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Callable

from sqlalchemy.engine import Connection, Engine

from ...models import events, signals, steps, workflow_rows
from ...rules import states
from ..chunk_resume import ChunkResult
from ..verbs import FROM, parse_payload
from . import common


def signal_chunk(
    engine: Engine, workflow_ids: list[str], *, operation_id: int, actor: str, reason: str | None,
    name: str, payload: Any, key_of: Callable[[str], str], now: datetime,
    then: common.Then | None = None,
) -> ChunkResult:
    """Signal *name* with *payload* to every run, the idempotency key of
    each ``key_of(workflow_id)`` (the operation's signal_key)."""
    reason = common.reason_of(reason)
    name = name.strip()
    body = parse_payload(payload, None)

    def statements(conn: Connection) -> ChunkResult:
        result, runs = common.lock(conn, "signal", workflow_ids, operation_id)
        if not runs:
            return result
        waiting = [run["workflow_id"] for run in runs if run["status"] == states.WAITING]
        latest = steps.latest_of(conn, waiting) if waiting else {}
        claims = {
            workflow_id: row for workflow_id, row in latest.items()
            if row["status"] == states.STEP_WAITING and row["wait_for"] == name
        }
        stored = signals.insert_many(conn, [
            {"workflow_id": run["workflow_id"], "name": name, "payload": body,
             "idempotency_key": (key_of(run["workflow_id"]) or "").strip() or None,
             "claimed_by_step_id": claims[run["workflow_id"]]["id"] if run["workflow_id"] in claims else None}
            for run in runs
        ], now=now)
        claiming = [run for run in runs if run["workflow_id"] in claims and run["workflow_id"] in stored]
        due = steps.set_due_many(conn, [(claims[run["workflow_id"]]["id"], now) for run in claiming],
                                 from_=states.STEP_WAITING, status=states.STEP_SCHEDULED, now=now)
        common.moved_all(list(due), len(claiming))
        moved = workflow_rows.move_many(conn, [{"workflow_id": run["workflow_id"], "to": states.READY}
                                               for run in claiming], from_=FROM["signal"], sync_latest=True)
        common.moved_all(moved, len(claiming))
        trail = []
        for run in runs:
            signal = stored.get(run["workflow_id"])
            if signal is None:
                continue  # a duplicate: the verb stores and writes nothing
            trail.append(common.event(run, "signal_received", actor=actor, now=now, operation_id=operation_id,
                                      reason=reason, details={"signal": name, "signal_id": signal["id"],
                                                              "idempotency_key": signal["idempotency_key"]}))
            if run["workflow_id"] in due:
                trail.append(common.event(run, "signal_claimed", actor=actor, now=now, operation_id=None,
                                          step=due[run["workflow_id"]],
                                          details={"signal": name, "signal_id": signal["id"]}))
        events.record_many(conn, trail)
        result.moved = [run["workflow_id"] for run in runs]
        return result

    return common.in_one(engine, statements, then)
