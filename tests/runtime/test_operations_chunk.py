"""The operation's chunk path for resume (runtime/chunks/resume.py) writes
exactly what the per-run verb writes, run for run, and hands back what it
does not do; a chunk whose transaction fails is done run by run."""

from __future__ import annotations

from datetime import timedelta

import pytest
import sqlalchemy as sa
from support.action_support import ago, paused_on_capture, ready_later
from support.web_helpers import step

from pgbus_web.demo.workflows import REGISTRY
from pgbus_web.models import events as event_rows
from pgbus_web.rules import run_filters, states
from pgbus_web.runtime import chunk_resume, errors, operation_policy, operation_record, operation_runner, verbs
from pgbus_web.runtime.chunks import resume as chunk_resume_path
from pgbus_web.runtime.clock import utcnow

OPERATION = 41
NOW = utcnow().replace(microsecond=123456)


def kinds(runs):
    """One run of each kind resume meets, by name."""
    return {
        "retry": paused_on_capture(runs),
        "continue": runs.make(
            states.PAUSED, step("reserve_stock", "completed", finished_at=ago(minutes=9)), paused_at=ago(minutes=8)
        ),
        "first_step": runs.make(states.PAUSED, paused_at=ago(minutes=8)),
        # The next step waits for a signal: flow.schedule's signal rules, per run.
        "waits": runs.make(
            states.PAUSED,
            step("reserve_stock", "completed", finished_at=ago(hours=1)),
            step("capture_payment", "completed", finished_at=ago(hours=1)),
            step("notify_vendors", "completed", finished_at=ago(minutes=30)),
            paused_at=ago(minutes=20),
        ),
        # A pending step goes on where it was: per run.
        "pending": runs.make(
            states.PAUSED, step("reserve_stock", "scheduled", scheduled_at=ago(minutes=1)), paused_at=ago(minutes=2)
        ),
        "ready": ready_later(runs),
        "ghost": runs.make(
            states.PAUSED,
            step("charge", "failed"),
            workflow_class="GhostWorkflow",
            paused_at=ago(minutes=3),
            subject=False,
        ),
    }


def per_run(engine, workflow_id):
    try:
        verbs.resume(
            engine,
            workflow_id,
            registry=REGISTRY,
            reason="gateway back",
            actor="dashboard:alice",
            now=NOW,
            operation_id=OPERATION,
        )
    except errors.AlreadyActed:
        return "moved"
    except errors.WrongStatus:
        return "skipped"
    except errors.WorkflowError:
        return "refused"
    return "moved"


def trail(engine, workflow_id):
    """What a verb leaves on one run, without ids; the moments the twins
    were seeded with differ by a little, so only those the verb wrote (at
    NOW) are compared exactly."""
    binds = {"w": workflow_id, "now": NOW}
    with engine.connect() as conn:
        run = conn.execute(
            sa.text(
                "SELECT status, current_step, paused_at IS NULL, finished_at IS NULL, latest_step_name, "
                "latest_step_status, latest_scheduled_at IS NOT DISTINCT FROM (SELECT scheduled_at FROM "
                "pgbus_workflow_steps WHERE id = latest_step_id), latest_step_id IS NOT DISTINCT FROM "
                "(SELECT max(id) FROM pgbus_workflow_steps WHERE workflow_id = :w) "
                "FROM pgbus_workflows WHERE workflow_id = :w"
            ),
            binds,
        ).one()
        steps = conn.execute(
            sa.text(
                "SELECT step_name, status, attempt, created_at = :now, updated_at = :now, "
                "CASE WHEN created_at = :now THEN scheduled_at ELSE NULL END, scheduled_at IS NULL, wait_for, "
                "CASE WHEN created_at = :now THEN waiting_since ELSE NULL END "
                "FROM pgbus_workflow_steps WHERE workflow_id = :w ORDER BY id"
            ),
            binds,
        ).all()
        events = conn.execute(
            sa.text(
                "SELECT event, actor, reason, step_name, attempt, details - 'signal_id', created_at = :now "
                "FROM pgbus_workflow_events WHERE workflow_id = :w ORDER BY id"
            ),
            binds,
        ).all()
    return tuple(run), [tuple(row) for row in steps], [tuple(row) for row in events]


def test_the_chunk_path_writes_what_the_verb_writes_run_for_run(engine, runs):
    one_by_one = kinds(runs)
    chunked = kinds(runs)
    before = {name: trail(engine, workflow_id) for name, workflow_id in chunked.items()}

    expected = {name: per_run(engine, workflow_id) for name, workflow_id in one_by_one.items()}
    done = chunk_resume_path.resume_chunk(
        engine,
        "resume",
        list(chunked.values()),
        operation_id=OPERATION,
        actor="dashboard:alice",
        reason="gateway back",
        at=None,
        registry=REGISTRY,
        now=NOW,
    )
    names = {workflow_id: name for name, workflow_id in chunked.items()}
    assert sorted(names[w] for w in done.moved) == ["continue", "first_step", "retry"]
    assert [names[w] for w in done.skipped] == ["ready"]
    assert sorted(names[w] for w in done.rest) == ["ghost", "pending", "waits"]
    assert done.already == []
    # What it did not do, the verb does: then every run matches its twin.
    got = {names[w]: "moved" for w in done.moved} | {names[w]: "skipped" for w in done.skipped}
    got |= {names[w]: per_run(engine, w) for w in done.rest}
    assert got == expected
    assert expected == {
        "retry": "moved",
        "continue": "moved",
        "first_step": "moved",
        "waits": "moved",
        "pending": "moved",
        "ready": "skipped",
        "ghost": "refused",
    }
    for name in chunked:
        assert trail(engine, chunked[name]) == trail(engine, one_by_one[name]), name
    # Control: the chunk path did change the runs it moved.
    assert all(trail(engine, chunked[name]) != before[name] for name in ("retry", "continue", "first_step"))
    assert trail(engine, chunked["retry"])[2][-2][0] == "resumed"
    # The runs' latest-step columns are their latest row's, as the trigger keeps them.
    assert all(trail(engine, workflow_id)[0][-2:] == (True, True) for workflow_id in chunked.values())


def test_resume_at_through_the_chunk_path_matches_the_verb(engine, runs):
    at = NOW + timedelta(hours=2)
    a, b = paused_on_capture(runs), paused_on_capture(runs)
    verbs.resume_at(engine, a, at=at, registry=REGISTRY, reason="later", actor="x", now=NOW, operation_id=OPERATION)
    done = chunk_resume_path.resume_chunk(
        engine, "resume_at", [b], operation_id=OPERATION, actor="x", reason="later", at=at, registry=REGISTRY, now=NOW
    )
    assert done.moved == [b]
    assert trail(engine, a) == trail(engine, b)


def test_runs_already_acted_on_or_locked_are_not_done_here(engine, runs):
    acted, locked, free = paused_on_capture(runs), paused_on_capture(runs), paused_on_capture(runs)
    verbs.resume(engine, acted, registry=REGISTRY, reason="r", operation_id=OPERATION)
    with engine.connect() as holder, holder.begin():
        holder.execute(sa.text("SELECT 1 FROM pgbus_workflows WHERE workflow_id = :w FOR UPDATE"), {"w": locked})
        done = chunk_resume_path.resume_chunk(
            engine,
            "resume",
            [acted, locked, free],
            operation_id=OPERATION,
            actor="x",
            reason="r",
            at=None,
            registry=REGISTRY,
            now=NOW,
        )
    assert (done.already, done.rest, done.moved) == ([acted], [locked], [free])
    with engine.connect() as conn:
        assert event_rows.operation_acted_among(conn, [acted, locked, free], OPERATION) == {acted, free}


def test_a_chunk_whose_transaction_fails_is_done_run_by_run(engine, runs, monkeypatch):
    paused = [paused_on_capture(runs) for _ in range(5)]
    operation = operation_policy.create(
        engine,
        run_filters.parse({"status": "paused"}),
        "resume",
        None,
        reason="r",
        actor="a",
        expected=5,
        registry=REGISTRY,
        thresholds={"threshold": timedelta(minutes=5), "waiting_threshold": timedelta(hours=1)},
    )

    def broken(*args, **kwargs):
        raise sa.exc.OperationalError("INSERT", {}, Exception("the chunk's statement failed"))

    monkeypatch.setattr(chunk_resume_path, "resume_chunk", broken)
    runner = operation_runner.Runner(engine, REGISTRY)
    while runner.step() is not None:
        pass
    done = operation_record.find(engine, operation["id"])
    assert (done["status"], done["moved"], done["skipped"], done["refused"]) == ("done", 5, 0, 0)
    with engine.connect() as conn:
        assert event_rows.operation_acted_among(conn, paused, operation["id"]) == set(paused)


@pytest.mark.parametrize("chunk_path", [True, False])
def test_both_paths_leave_the_same_counts(engine, runs, monkeypatch, chunk_path):
    if not chunk_path:
        monkeypatch.setattr(chunk_resume, "VERBS", ())
    kinds(runs)
    kinds(runs)
    operation = operation_policy.create(
        engine,
        run_filters.parse({}),
        "resume",
        None,
        reason="r",
        actor="a",
        expected=14,
        registry=REGISTRY,
        thresholds={"threshold": timedelta(minutes=5), "waiting_threshold": timedelta(hours=1)},
    )
    runner = operation_runner.Runner(engine, REGISTRY, chunk=4)
    while runner.step() is not None:
        pass
    done = operation_record.find(engine, operation["id"])
    assert (done["status"], done["moved"], done["skipped"], done["refused"]) == ("done", 10, 2, 2)
