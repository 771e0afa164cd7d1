"""Doing one operation to its end in this process: the command line's
``pgbus-web bulk`` and the MCP server's start_operation both answer only
once the operation they started is no longer open (docs/operations.md)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from sqlalchemy.engine import Engine

from ..rules import states
from ..runtime import operation_record, operation_runner
from ..runtime.definitions import Registry

# A failed chunk (a statement timed out, the connection dropped) is handed
# back by the Runner and tried again this many times, a little later each
# time, before the failure goes up: the operation is queued then, for any
# worker or serving dashboard.
RETRIES = 3


def run_to_end(
    engine: Engine,
    registry: Registry | None,
    operation_id: int,
    *,
    poll: float,
    deadline: float | None = None,
    seen: Callable[[dict[str, Any]], None] | None = None,
    stopping: Callable[[], bool] | None = None,
) -> dict[str, Any]:
    """Do operation *operation_id* chunk by chunk here, or watch another
    process do it (polling every *poll* seconds while that one holds it),
    until it is no longer open; its row then. *seen* gets the row after
    each chunk (a progress bar); past *deadline* (a time.monotonic()
    moment) the row is returned as it is. Ctrl-C gives the operation back
    to the queue before it goes on up, so any worker finishes it; so does
    a chunk that fails more than RETRIES times in a row."""
    runner = operation_runner.Runner(engine, registry)
    failures = 0
    try:
        while True:
            try:
                chunk = runner.step(operation_id)
                current = operation_record.find(engine, operation_id)
            except Exception:  # noqa: BLE001  (the chunk was handed back: tried again, then raised)
                failures += 1
                if failures > RETRIES:
                    raise
                time.sleep(poll * failures)
                continue
            failures = 0
            if seen is not None:
                seen(current)
            if current["status"] not in states.OPERATION_OPEN:
                return current
            if stopping is not None and stopping():
                # Asked to stop (a Ctrl-C the caller caught): between chunks,
                # so the chunk in hand has committed with its progress.
                raise KeyboardInterrupt
            if deadline is not None and time.monotonic() > deadline:
                return current
            if chunk is None:
                time.sleep(poll)  # another process holds it: watch
    except KeyboardInterrupt:
        runner.release()
        raise
