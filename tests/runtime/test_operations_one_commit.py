"""A chunk of the chunk path is one commit: its runs, their events, and
the operation's counts, cursor and pace log under the holder's fence
(runtime/operation_runner.Runner._fast, docs/operations.md). A holder whose
fence is gone by then changes nothing: the chunk rolls back whole."""

from __future__ import annotations

from datetime import timedelta

import sqlalchemy as sa
from sqlalchemy import event
from support.action_support import paused_on_capture
from support.operation_support import create

from pgbus_web.demo.workflows import REGISTRY
from pgbus_web.models import operation_rows
from pgbus_web.runtime import operation_runner
from pgbus_web.runtime.clock import utcnow

# Long enough that no heartbeat renewal commits while a chunk is in hand.
QUIET = timedelta(minutes=10)


def acted(engine, operation_id):
    with engine.connect() as conn:
        return conn.execute(
            sa.text("SELECT count(*) FROM pgbus_workflow_events WHERE details ->> 'operation_id' = :op"),
            {"op": str(operation_id)},
        ).scalar_one()


def paused(engine, ids):
    with engine.connect() as conn:
        return conn.execute(
            sa.text("SELECT count(*) FROM pgbus_workflows WHERE workflow_id = ANY(:ids) AND status = 'paused'"),
            {"ids": list(ids)},
        ).scalar_one()


class Commits:
    """The transactions *engine* commits while counted (claims excluded:
    the runner claims before)."""

    def __init__(self, engine):
        self.count = 0
        event.listen(engine, "commit", self._seen)
        self.engine = engine

    def _seen(self, conn):
        self.count += 1

    def close(self):
        event.remove(self.engine, "commit", self._seen)


def test_a_chunk_of_the_chunk_path_is_one_commit_with_its_progress(engine, runs):
    ids = [paused_on_capture(runs) for _ in range(6)]
    operation = create(engine, "cancel", status="paused")
    runner = operation_runner.Runner(engine, REGISTRY, chunk=4, stale_after=QUIET)
    assert runner.claim() is not None
    commits = Commits(engine)
    try:
        first = runner.step()
    finally:
        commits.close()
    assert (first.moved, first.skipped, first.refused) == (4, 0, 0)
    assert commits.count == 1
    # What that one commit wrote: four runs cancelled with their events,
    # and the operation's counts and cursor past them.
    with engine.connect() as conn:
        row = operation_rows.find(conn, operation["id"])
        fourth = conn.execute(
            sa.text("SELECT id FROM pgbus_workflows WHERE workflow_id = :w"), {"w": ids[3]}
        ).scalar_one()
    assert (row["moved"], row["cursor"]) == (4, fourth)
    assert acted(engine, operation["id"]) == 4 and paused(engine, ids) == 2
    # Control: the per-run path (a chunk that hands its runs to the verb)
    # commits each run and then the progress, apart.
    commits = Commits(engine)
    try:
        saved, operation_runner.chunks.VERBS = operation_runner.chunks.VERBS, ()
        try:
            second = runner.step()
        finally:
            operation_runner.chunks.VERBS = saved
    finally:
        commits.close()
    assert second.moved == 2 and commits.count == 3


def test_a_holder_whose_fence_is_gone_rolls_its_chunk_back_whole(engine, runs):
    ids = [paused_on_capture(runs) for _ in range(6)]
    operation = create(engine, "cancel", status="paused")
    slow = operation_runner.Runner(engine, REGISTRY, chunk=4, stale_after=QUIET)
    assert slow.claim() is not None
    later = utcnow() + QUIET + timedelta(minutes=1)
    taker = operation_runner.Runner(engine, REGISTRY, chunk=4, stale_after=QUIET, clock=lambda: later)
    assert taker.claim()["id"] == operation["id"]  # the slow holder's heartbeat looked stale
    lost = slow.step()
    assert lost.lost and slow.held is None
    assert acted(engine, operation["id"]) == 0 and paused(engine, ids) == 6  # nothing of its chunk
    with engine.connect() as conn:
        assert operation_rows.find(conn, operation["id"])["moved"] == 0
    while taker.step() is not None:
        pass
    with engine.connect() as conn:
        done = operation_rows.find(conn, operation["id"])
    assert (done["status"], done["moved"], done["skipped"], done["refused"]) == ("done", 6, 0, 0)
    assert acted(engine, operation["id"]) == 6 and paused(engine, ids) == 0  # control: each run once
