"""`pgbus-web bulk` that cannot go on says why in one line and leaves the
operation queued for the workers, never running; its pool holds a
connection for each run a chunk acts on at once; and `pgbus-web
operations show` says what became of the runs, as the page and the API."""

from __future__ import annotations

import threading

import sqlalchemy as sa
from support.operation_support import bulk_cancel_paused, seed_paused

from pgbus_web.cli import bulk as bulk_cli
from pgbus_web.demo.workflows import REGISTRY
from pgbus_web.models import operation_rows
from pgbus_web.runtime import operation_runner
from pgbus_web.runtime.worker import Worker


def _url(engine) -> str:
    return engine.url.render_as_string(hide_password=False)


def test_a_chunk_that_keeps_failing_is_handed_back_and_the_command_says_why_in_one_line(engine):
    seed_paused(engine, 30)
    # Another transaction holds every run's row lock: each cancel waits on
    # it until the statement timeout, chunk after chunk.
    holder = engine.connect()
    locking = holder.begin()
    holder.execute(sa.text("SELECT id FROM pgbus_workflows FOR UPDATE"))
    try:
        result = bulk_cancel_paused(_url(engine), "--statement-timeout", "0.3")
    finally:
        locking.rollback()
        holder.close()
    assert result.exit_code == 1, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    with engine.connect() as conn:
        [operation] = operation_rows.recent(conn)
    stopped = [line for line in lines if line.startswith("Stopped:")]
    assert stopped == [lines[-1]], result.output  # said once, last, in one line
    assert f"operation {operation['id']} failed here (" in stopped[0] and "statement timeout" in stopped[0]
    assert "left queued" in stopped[0] and "Traceback" not in result.output
    assert operation["status"] == "queued" and operation["heartbeat_at"] is None and operation["moved"] == 0
    # The locks gone, a worker finishes it: every run cancelled once.
    Worker(engine, REGISTRY, steps_per_tick=0).drain()
    with engine.connect() as conn:
        done = operation_rows.find(conn, operation["id"])
        cancelled = conn.execute(
            sa.text("SELECT count(*), count(DISTINCT workflow_id) FROM pgbus_workflow_events WHERE event = 'cancelled'")
        ).one()
    assert (done["status"], done["moved"]) == ("done", 30) and tuple(cancelled) == (30, 30)


def test_a_failed_chunk_is_tried_again_before_the_command_gives_up(engine):
    # The lock is let go while the command retries: it goes on and finishes.
    seed_paused(engine, 12)
    holder = engine.connect()
    locking = holder.begin()
    holder.execute(sa.text("SELECT id FROM pgbus_workflows FOR UPDATE"))
    releaser = threading.Timer(0.8, lambda: (locking.rollback(), holder.close()))
    releaser.start()
    try:
        result = bulk_cancel_paused(_url(engine), "--statement-timeout", "0.3")
    finally:
        releaser.join()
    assert result.exit_code == 0, result.output
    assert "moved 12, skipped 0, refused 0 of 12" in result.output and "Stopped:" not in result.output


def test_the_command_and_the_worker_have_a_connection_for_each_run_a_chunk_does_at_once(engine):
    assert operation_runner.PARALLEL > 2  # control: the two connections they had were too few
    made = bulk_cli.engine_for(_url(engine))
    try:
        assert made.pool.size() >= operation_runner.PARALLEL + 1
        # Every thread of a chunk holds a connection at once, none waits.
        held, gate = [], threading.Barrier(operation_runner.PARALLEL, timeout=10)

        def hold():
            with made.connect() as conn:
                conn.exec_driver_sql("SELECT 1")
                held.append(1)
                gate.wait()

        threads = [threading.Thread(target=hold) for _ in range(operation_runner.PARALLEL)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert len(held) == operation_runner.PARALLEL and not gate.broken
    finally:
        made.dispose()
