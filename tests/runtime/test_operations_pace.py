"""An operation's pace, pause and approval over the real database
(docs/operations.md): a rate holds over every one-second window of the
audit trail's timestamps, also when two runners take turns; a ceiling of
runs in flight is never passed; a paused operation is not claimed and
goes on where it stopped; an operation over the approval threshold waits
for a different operator, and its runs' audit sentences name them."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
import sqlalchemy as sa
from support.operation_support import THRESHOLDS, acted_at, busiest_second, query, seed_paused
from support.refusals import everything

from pgbus_web.core import page_reads, problems
from pgbus_web.core.words import presenters
from pgbus_web.demo.workflows import REGISTRY
from pgbus_web.models import events, operation_rows
from pgbus_web.rules import states
from pgbus_web.rules.approval import Approval
from pgbus_web.runtime import operation_policy, operation_record, operation_runner, pace

ALICE, BOB = "dashboard:alice", "dashboard:bob"


def create(engine, verb="resume", *, actor=ALICE, approval=None, **pace_values):
    return operation_policy.create(
        engine,
        query(status="paused"),
        verb,
        None,
        reason="gateway back",
        actor=actor,
        expected=None,
        registry=REGISTRY,
        thresholds=THRESHOLDS,
        approval=approval,
        **pace_values,
    )


def find(engine, operation_id):
    with engine.connect() as conn:
        return operation_rows.find(conn, operation_id)


# --- the budget, without a database ---------------------------------------------


def test_the_budget_counts_the_chunks_that_ended_inside_the_window():
    now = datetime(2026, 1, 1, 12, 0, 0).astimezone()
    epoch = now.timestamp()
    row = {"rate": 10, "pace_log": [[epoch - 1.5, 10], [epoch - 0.5, 6]], "max_in_flight": None}
    paced = pace.budget(row, now=now, in_flight=None, chunk=200)
    # 10 per second, 6 used by the chunk that ended half a second ago; at
    # most a quarter of the second's budget per chunk.
    assert paced.runs == 3 and paced.log == [[epoch - 0.5, 6]]
    spent = pace.budget(dict(row, pace_log=[[epoch - 0.25, 10]]), now=now, in_flight=None, chunk=200)
    assert spent.runs == 0 and spent.wait == pytest.approx(0.75)
    # No pace: the chunk; a ceiling: the room under it.
    assert pace.budget({"rate": None}, now=now, in_flight=None, chunk=200).runs == 200
    assert pace.budget({"max_in_flight": 5}, now=now, in_flight=3, chunk=200).runs == 2
    assert pace.budget({"max_in_flight": 5}, now=now, in_flight=5, chunk=200).runs == 0
    # Under one run per second the window is longer: 0.5/s is one run per two seconds.
    slow = pace.budget({"rate": 0.5, "pace_log": [[epoch - 1.5, 1]]}, now=now, in_flight=None, chunk=200)
    assert slow.runs == 0 and slow.wait == pytest.approx(0.5)


def test_chunks_slower_than_a_share_of_the_second_still_reach_the_rate():
    # At 50 a second a chunk takes 13 (a quarter); when each chunk took 0.45 s,
    # 13 a chunk would give 29 a second, so the next takes 0.45 s worth.
    now = datetime(2026, 1, 1, 12, 0, 0).astimezone()
    epoch = now.timestamp()
    slow = {"rate": 50, "pace_log": [[epoch - 0.9, 13], [epoch - 0.45, 13]]}
    assert pace.budget(slow, now=now, in_flight=None, chunk=200).runs == 23
    # Never past what is left of the window's budget (50 - 26 = 24) ...
    slower = {"rate": 50, "pace_log": [[epoch - 0.95, 13], [epoch - 0.05, 13]]}
    assert pace.budget(slower, now=now, in_flight=None, chunk=200).runs == 24
    # ... and the control: quick chunks keep a quarter of the second each.
    quick = {"rate": 50, "pace_log": [[epoch - 0.1, 13], [epoch - 0.05, 13]]}
    assert pace.budget(quick, now=now, in_flight=None, chunk=200).runs == 13


# --- rate -------------------------------------------------------------------------


def test_a_rate_holds_over_every_second_of_the_audit_trail(engine):
    seed_paused(engine, 45)
    created = create(engine, rate=15)
    assert created["rate"] == 15 and created["status"] == states.OPERATION_QUEUED
    runner = operation_runner.Runner(engine, REGISTRY)
    waits = 0
    while (chunk := runner.step()) is not None:
        waits += chunk.waited > 0
    done = find(engine, created["id"])
    assert done["status"] == states.OPERATION_DONE and done["moved"] == 45
    moments = acted_at(engine, created["id"])
    assert len(moments) == 45
    assert busiest_second(moments) <= 15
    # The control: the pace was reached (not a trickle that passes any
    # bound), and it made the runner wait.
    assert busiest_second(moments) >= 10 and waits > 0
    assert moments[-1] - moments[0] >= timedelta(seconds=2)


def test_two_runners_taking_turns_share_the_one_budget_on_the_row(engine):
    seed_paused(engine, 40)
    created = create(engine, rate=20)
    first, second = operation_runner.Runner(engine, REGISTRY), operation_runner.Runner(engine, REGISTRY)
    turns = 0
    for _ in range(1000):
        runner = (first, second)[turns % 2]
        chunk = runner.step(created["id"])
        if chunk is None or chunk.status != states.OPERATION_RUNNING:
            if find(engine, created["id"])["status"] == states.OPERATION_DONE:
                break
        runner.release()  # the other one claims it next: only the row carries the pace
        turns += 1
    assert find(engine, created["id"])["status"] == states.OPERATION_DONE
    moments = acted_at(engine, created["id"])
    assert len(moments) == 40 and busiest_second(moments) <= 20
    assert busiest_second(moments) >= 12 and turns > 4


def test_the_rate_changed_while_it_runs_is_read_at_the_next_chunk(engine):
    seed_paused(engine, 30)
    created = create(engine, rate=2)
    runner = operation_runner.Runner(engine, REGISTRY, sleep=lambda seconds: None)
    runner.step()
    assert find(engine, created["id"])["moved"] == 1  # a quarter of 2, at least one
    operation_policy.set_pace(engine, created["id"], {"rate": None})
    runner.step()  # the chunk in hand had the old rate: a wait or one run
    runner.step()
    assert find(engine, created["id"])["moved"] >= 25


# --- runs in flight -------------------------------------------------------------


def in_flight_ids(engine, operation_id):
    with engine.connect() as conn:
        return list(
            conn.execute(
                sa.text(
                    """
            SELECT w.workflow_id FROM pgbus_workflows w
            WHERE w.latest_step_status IN ('scheduled', 'in_progress') AND EXISTS (
                SELECT 1 FROM pgbus_workflow_events e
                WHERE e.workflow_id = w.workflow_id AND e.details ->> 'operation_id' = :op)
            ORDER BY w.workflow_id
            """
                ),
                {"op": str(operation_id)},
            ).scalars()
        )


def settle(engine, workflow_ids):
    """The step each run was resumed into completes (as a worker would)."""
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                "UPDATE pgbus_workflow_steps s SET status = 'completed', finished_at = now() FROM pgbus_workflows w "
                "WHERE w.workflow_id = ANY(:ids) AND s.id = w.latest_step_id"
            ),
            {"ids": list(workflow_ids)},
        )


def test_max_in_flight_never_has_more_runs_started_and_unsettled(engine):
    seed_paused(engine, 20)
    created = create(engine, max_in_flight=4)
    runner = operation_runner.Runner(engine, REGISTRY, sleep=lambda seconds: None)
    seen = []
    for _ in range(200):
        chunk = runner.step()
        if chunk is None:
            break
        flying = in_flight_ids(engine, created["id"])
        with engine.connect() as conn:
            assert events.operation_in_flight(conn, created["id"]) == len(flying)
        seen.append(len(flying))
        assert len(flying) <= 4
        if chunk.waited:
            settle(engine, flying[:3])  # three of them finish their step
    done = find(engine, created["id"])
    assert done["status"] == states.OPERATION_DONE and done["moved"] == 20
    # The control: the ceiling was reached, and it held the operation back.
    assert max(seen) == 4 and seen.count(4) >= 3


def test_a_run_that_went_on_to_its_next_step_is_no_longer_in_flight(engine):
    seed_paused(engine, 3)
    created = create(engine, max_in_flight=10)
    operation_runner.Runner(engine, REGISTRY).step()
    with engine.connect() as conn:
        assert events.operation_in_flight(conn, created["id"]) == 3
    [first, *_] = in_flight_ids(engine, created["id"])
    settle(engine, [first])
    with engine.begin() as conn:
        # Its next step is scheduled well after the act.
        conn.execute(
            sa.text(
                "INSERT INTO pgbus_workflow_steps (workflow_id, step_name, status, created_at) "
                "VALUES (:id, 'ship', 'scheduled', now() + interval '5 seconds')"
            ),
            {"id": first},
        )
        assert events.operation_in_flight(conn, created["id"]) == 2


def test_a_ceiling_of_runs_in_flight_is_refused_for_a_verb_that_starts_no_work(engine):
    seed_paused(engine, 2)
    before = everything(engine)
    with pytest.raises(operation_record.CeilingNotForVerb) as refused:
        create(engine, "cancel", max_in_flight=3)
    assert problems.refusal(refused.value).status == 422
    assert everything(engine) == before


# --- pause and go on ------------------------------------------------------------


def test_a_paused_operation_is_not_claimed_and_goes_on_where_it_stopped(engine):
    seed_paused(engine, 12)
    created = create(engine)
    holder = operation_runner.Runner(engine, REGISTRY, chunk=5)
    holder.step()
    paused = operation_record.pause(engine, created["id"], actor=BOB)
    assert (paused["status"], paused["paused_by"]) == (states.OPERATION_PAUSED, BOB)
    # The holder finishes the chunk in hand, writes its counts and drops it.
    chunk = holder.step()
    assert chunk.status == states.OPERATION_PAUSED and holder.held is None
    row = find(engine, created["id"])
    assert row["moved"] == 10 and row["cursor"] > 0
    # No process claims it, and it holds no lock: a run is free to change.
    assert operation_runner.Runner(engine, REGISTRY).step() is None
    with pytest.raises(operation_record.NotPausable):
        operation_record.pause(engine, created["id"], actor=BOB)
    gone_on = operation_record.go_on(engine, created["id"], actor=ALICE)
    assert (gone_on["status"], gone_on["resumed_by"]) == (states.OPERATION_QUEUED, ALICE)
    with pytest.raises(operation_record.NotPaused):
        operation_record.go_on(engine, created["id"], actor=ALICE)
    taker = operation_runner.Runner(engine, REGISTRY)
    while taker.step() is not None:
        pass
    done = find(engine, created["id"])
    assert (done["status"], done["moved"], done["skipped"]) == (states.OPERATION_DONE, 12, 0)
    assert len(acted_at(engine, created["id"])) == 12


def test_a_paused_operation_can_still_be_cancelled(engine):
    seed_paused(engine, 3)
    created = create(engine)
    operation_record.pause(engine, created["id"], actor=BOB)
    assert operation_record.cancel(engine, created["id"])["status"] == states.OPERATION_CANCELLED
    with pytest.raises(operation_record.NotPaused):
        operation_record.go_on(engine, created["id"], actor=BOB)


# --- approval ---------------------------------------------------------------------


def test_over_the_threshold_it_waits_for_another_operator(engine):
    seed_paused(engine, 4)
    rule = Approval(threshold=3, verbs=("resume", "cancel"))
    created = create(engine, approval=rule)
    assert created["status"] == states.OPERATION_AWAITING_APPROVAL
    assert operation_runner.Runner(engine, REGISTRY).step() is None  # never claimed
    before = everything(engine)
    with pytest.raises(operation_record.OwnApproval) as refused:
        operation_policy.approve(engine, created["id"], actor=ALICE)
    assert problems.refusal(refused.value).status == 403
    assert "alice" in problems.refusal(refused.value).message
    assert everything(engine) == before
    approved = operation_policy.approve(engine, created["id"], actor=BOB)
    assert (approved["status"], approved["approved_by"]) == (states.OPERATION_QUEUED, BOB)
    assert approved["approved_at"] is not None
    with pytest.raises(operation_record.NotAwaitingApproval):
        operation_policy.approve(engine, created["id"], actor=BOB)
    runner = operation_runner.Runner(engine, REGISTRY)
    while runner.step() is not None:
        pass
    assert find(engine, created["id"])["moved"] == 4
    # Each run's audit sentence names the approver.
    with engine.connect() as conn:
        rows = [
            dict(row)
            for row in conn.execute(
                sa.text(
                    "SELECT * FROM pgbus_workflow_events WHERE details ->> 'operation_id' = :op AND event = 'resumed'"
                ),
                {"op": str(created["id"])},
            ).mappings()
        ]
        page_reads.with_approvals(conn, rows)
    assert len(rows) == 4
    assert all("bob" in presenters.event_sentence(row) for row in rows)


def test_at_or_under_the_threshold_or_another_verb_it_starts_at_once(engine):
    seed_paused(engine, 3)
    assert create(engine, approval=Approval(threshold=3))["status"] == states.OPERATION_QUEUED
    assert create(engine, approval=Approval(threshold=0, verbs=("cancel",)))["status"] == states.OPERATION_QUEUED
    assert create(engine, approval=Approval(threshold=2))["status"] == states.OPERATION_AWAITING_APPROVAL


def test_an_operation_awaiting_approval_can_be_cancelled_and_then_not_approved(engine):
    seed_paused(engine, 3)
    created = create(engine, approval=Approval(threshold=1))
    operation_record.cancel(engine, created["id"])
    with pytest.raises(operation_record.NotAwaitingApproval):
        operation_policy.approve(engine, created["id"], actor=BOB)
