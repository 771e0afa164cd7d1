"""The serving process's operations thread looks for an open operation
every poll; between two looks it holds no connection in a transaction
(in the million-run trial its connection sat "idle in transaction" on
pgbus_web_operations through every 2 s wait: a snapshot kept and a lock on
the table while nothing was to be done). docs/operations.md."""

from __future__ import annotations

import sqlalchemy as sa
from support.waiting import wait_until

from pgbus_web.models import operation_rows
from pgbus_web.runtime import operation_runner

LOOK = "SELECT EXISTS (SELECT 1 FROM pgbus_web_operations WHERE status IN ('queued', 'running'))"


def _idle_in_a_transaction(engine) -> list[str]:
    """The thread's sessions left in a transaction after its look for
    longer than a look and its ROLLBACK take (a few milliseconds)."""
    with engine.connect() as conn:
        return list(
            conn.execute(
                sa.text(
                    "SELECT state FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() "
                    "AND query = :look AND state <> 'idle' AND now() - state_change > interval '300 milliseconds'"
                ),
                {"look": LOOK},
            ).scalars()
        )


def test_between_two_looks_the_thread_holds_no_transaction(engine, monkeypatch):
    # Control: the looks happen (counted around the real one).
    looks = []
    real = operation_rows.any_open

    def counted(conn):
        looks.append(1)
        return real(conn)

    monkeypatch.setattr(operation_rows, "any_open", counted)
    background = operation_runner.Background(engine, poll=1.0).start()
    try:
        seen = []

        def looked_twice():
            seen.extend(_idle_in_a_transaction(engine))
            return len(looks) >= 2

        wait_until(looked_twice, timeout=60, what="two looks of the thread")
    finally:
        background.stop()
    assert len(looks) >= 2, "the thread never looked: the check proves nothing"
    assert seen == []
