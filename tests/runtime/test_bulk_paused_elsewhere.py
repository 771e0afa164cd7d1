"""`pgbus-web bulk` whose operation another operator pauses ends (exit 1)
and says who paused it, how it goes on and who finishes it then: in the
million-run trial it printed only "Operation 6 paused: moved 2154 ..."
(docs/operations.md, "The million-run trial")."""

from __future__ import annotations

import threading

from support.operation_support import bulk_cancel_paused, seed_paused

from pgbus_web.models import operation_rows
from pgbus_web.rules import states
from pgbus_web.runtime import operation_record


def _pause_once_started(engine, stop: threading.Event) -> None:
    while not stop.is_set():
        with engine.connect() as conn:
            found = operation_rows.recent(conn)
        if found and found[0]["moved"] > 0:
            operation_record.pause(engine, found[0]["id"], actor="dashboard:olga")
            return
        stop.wait(0.05)


def test_bulk_paused_from_elsewhere_says_who_and_how_it_goes_on(database_url, engine):
    seed_paused(engine, 40)
    stop = threading.Event()
    pauser = threading.Thread(target=_pause_once_started, args=(engine, stop), daemon=True)
    pauser.start()
    try:
        result = bulk_cancel_paused(database_url, "--rate", "8", catch_exceptions=False)
    finally:
        stop.set()
        pauser.join(timeout=10)
    with engine.connect() as conn:
        [operation] = operation_rows.recent(conn)
    assert operation["status"] == states.OPERATION_PAUSED and 0 < operation["moved"] < 40, result.output
    assert result.exit_code == 1, result.output
    assert (
        f"Paused by dashboard:olga: `pgbus-web operations resume {operation['id']}` lets it go on" in result.output
    ), result.output
    assert "any `pgbus-web worker` or serving dashboard finishes it then" in result.output
