"""signal of a whole chunk in one transaction (verbs.signal's deliver):
three statements whatever the chunk's size (the lock; what the chunk reads
under it; the writes, models/chunk_writes.signal_and_move).

Each run gets the signal with the operation's idempotency key for it and a
"signal_received" event; a waiting run whose latest step waits for that
name claims it at once (the row due now, a "signal_claimed" event, the run
ready), as the verb does. A key already stored stores nothing and writes
nothing (the verb's duplicate). Only a run another transaction holds goes
back to the per-run verb."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from sqlalchemy.engine import Connection, Engine

from ...models import chunk_writes
from ...rules import states
from ..chunk_resume import ChunkResult
from ..verbs import FROM, parse_payload
from . import locked_runs


def signal_chunk(
    engine: Engine,
    workflow_ids: list[str],
    *,
    operation_id: int,
    actor: str,
    reason: str | None,
    name: str,
    payload: Any,
    key_of: Callable[[str], str],
    now: datetime,
    then: locked_runs.Then | None = None,
) -> ChunkResult:
    """Signal *name* with *payload* to every run, the idempotency key of
    each ``key_of(workflow_id)`` (the operation's signal_key)."""
    reason = locked_runs.capped_reason(reason)
    actor = actor or states.APP_ACTOR
    name = name.strip()
    body = parse_payload(payload, None)

    def statements(conn: Connection) -> ChunkResult:
        result, runs, known = locked_runs.lock_and_read(conn, "signal", workflow_ids, operation_id, latest=True)
        if not runs:
            return result
        deliveries = []
        for run in runs:
            row = known[run["workflow_id"]]["latest"]
            claims = (
                run["status"] == states.WAITING
                and row is not None
                and row["status"] == states.STEP_WAITING
                and row["wait_for"] == name
            )
            key = (key_of(run["workflow_id"]) or "").strip() or None
            deliveries.append(
                {
                    "workflow_id": run["workflow_id"],
                    "run_id": run["id"],
                    "idempotency_key": key,
                    "key_capped": locked_runs.capped(key),
                    "claim_id": row["id"] if claims else None,
                }
            )
        stored = chunk_writes.signal_and_move(
            conn,
            deliveries,
            name=name,
            name_capped=locked_runs.capped(name),
            payload=body or {},
            from_=FROM["signal"],
            now=now,
            actor=actor,
            reason=reason,
            operation_id=operation_id,
        )
        claiming = [row for row in stored if row["claiming"]]
        if not all(row["due"] and row["moved"] for row in claiming):  # cannot happen under the locks
            raise RuntimeError(f"{sum(row['moved'] for row in claiming)} of {len(claiming)} runs moved")
        result.moved = [run["workflow_id"] for run in runs]
        return result

    return locked_runs.in_one(engine, statements, then)
