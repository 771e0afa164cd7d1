"""The outside verbs' refusals: wrong status, bad input, unknown runs and
steps, a definition not registered. Each refusal raises a specific error
and leaves every workflow table exactly as it was. And the race: two
callers, one winner."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from support.runtime_support import Driver, snapshot
from support.waiting import wait_until

from pgbus_web.demo import workflows as demo
from pgbus_web.models import workflow_rows
from pgbus_web.runtime import errors, verbs

ALICE = "dashboard:alice"


def refused(engine, error, call):
    """Run *call*, expect *error*, and prove nothing was written; returns the error."""
    before = snapshot(engine)
    with pytest.raises(error) as caught:
        call()
    assert snapshot(engine) == before
    return caught.value


# --- wrong status: every verb ------------------------------------------------

WRONG_STATUS = [
    # verb, the run it is tried on, its status there, extra options
    ("resume", "ready_with_timer", "ready", {}),
    ("resume_at", "waiting_for_shipment", "waiting", {"at": "2030-01-01T00:00:00+00:00"}),
    ("run_now", "paused_on_capture", "paused", {}),
    ("skip", "completed", "completed", {}),
    ("rerun", "paused_on_capture", "paused", {}),
    ("cancel", "completed", "completed", {}),
    ("pause", "paused_on_capture", "paused", {}),
    ("reschedule", "waiting_for_shipment", "waiting", {"at": "2030-01-01T00:00:00+00:00"}),
]


@pytest.mark.parametrize("verb, make, status, options", WRONG_STATUS, ids=[case[0] for case in WRONG_STATUS])
def test_a_verb_in_the_wrong_status_changes_nothing_and_names_the_status(
    driver: Driver, engine, verb, make, status, options
):
    workflow_id = getattr(driver, make)()
    error = refused(
        engine,
        errors.WrongStatus,
        lambda: verbs.perform(
            engine, verb, workflow_id, actor=ALICE, registry=demo.REGISTRY, now=driver.now, **options
        ),
    )
    assert error.status == status
    assert error.verb == verb
    assert f"it is {status}" in str(error)
    assert error.workflow_id == workflow_id


def test_signal_to_a_finished_run_is_refused(driver: Driver, engine):
    workflow_id = driver.completed()
    error = refused(
        engine, errors.RunFinished, lambda: verbs.signal(engine, workflow_id, "anything", {}, now=driver.now)
    )
    assert error.status == "completed"
    assert "already ended (completed)" in str(error)


# --- bad input ---------------------------------------------------------------


@pytest.mark.parametrize("verb", sorted(verbs.VERBS))
def test_an_unknown_run_is_refused(engine, verb, driver: Driver):
    driver.completed()  # some rows, so "unchanged" means something
    error = refused(
        engine,
        errors.RunNotFound,
        lambda: verbs.perform(
            engine, verb, "no-such-run", registry=demo.REGISTRY, now=driver.now, at=driver.now + timedelta(hours=1)
        ),
    )
    assert error.workflow_id == "no-such-run"


def test_signal_to_an_unknown_run_is_refused(engine, driver: Driver):
    driver.completed()
    refused(engine, errors.RunNotFound, lambda: verbs.signal(engine, "no-such-run", "go", {}))


def test_rerun_of_an_unknown_step_is_refused(driver: Driver, engine):
    workflow_id = driver.completed()
    error = refused(
        engine,
        errors.UnknownStep,
        lambda: verbs.rerun(engine, workflow_id, from_step="teleport", registry=demo.REGISTRY, now=driver.now),
    )
    assert error.step == "teleport"
    assert error.known == ("validate_refund", "issue_refund", "notify_customer")


@pytest.mark.parametrize(
    "at, problem",
    [
        ("tomorrow at noon", "unparseable"),
        ("2030-01-01T12:00:00", "naive"),
        ("2020-01-01T12:00:00+00:00", "past"),
        ("", "missing"),
        (None, "missing"),
    ],
)
def test_resume_at_with_a_bad_time_is_refused(driver: Driver, engine, at, problem):
    workflow_id = driver.paused_on_capture()
    error = refused(
        engine,
        errors.InvalidTime,
        lambda: verbs.resume_at(engine, workflow_id, at=at, registry=demo.REGISTRY, now=driver.now),
    )
    assert error.problem == problem


def test_a_time_equal_to_now_is_not_in_the_future(driver: Driver, engine):
    workflow_id = driver.ready_with_timer()
    error = refused(
        engine, errors.InvalidTime, lambda: verbs.reschedule(engine, workflow_id, at=driver.now, now=driver.now)
    )
    assert error.problem == "past"


@pytest.mark.parametrize("payload", ["[1, 2]", "not json", "42", '"text"', [1, 2], 5])
def test_a_signal_payload_that_is_not_a_json_object_is_refused(driver: Driver, engine, payload):
    workflow_id = driver.waiting_for_shipment()
    refused(
        engine,
        errors.InvalidPayload,
        lambda: verbs.signal(engine, workflow_id, "shipment_confirmed", payload, now=driver.now),
    )


@pytest.mark.parametrize("name", ["", "   ", None])
def test_a_signal_without_a_name_is_refused(driver: Driver, engine, name):
    workflow_id = driver.waiting_for_shipment()
    refused(engine, errors.InvalidSignalName, lambda: verbs.signal(engine, workflow_id, name, {}, now=driver.now))


@pytest.mark.parametrize(
    "verb, make",
    [
        ("resume", "paused_on_capture"),
        ("resume_at", "paused_on_capture"),
        ("skip", "waiting_for_shipment"),
        ("rerun", "completed"),
    ],
)
def test_class_verbs_need_the_definition(driver: Driver, engine, verb, make):
    workflow_id = getattr(driver, make)()
    error = refused(
        engine,
        errors.ClassNotLoaded,
        lambda: verbs.perform(
            engine, verb, workflow_id, registry=None, now=driver.now, at=driver.now + timedelta(hours=1)
        ),
    )
    assert error.verb == verb


def test_an_unknown_verb_name_is_refused(engine):
    with pytest.raises(errors.UnknownVerb):
        verbs.perform(engine, "explode", "any")


def test_rerun_refused_while_another_run_of_the_subject_is_ongoing(driver: Driver, engine):
    first = driver.start(demo.REFUND, {"refund_id": 1}, subject_type="Refund", subject_id="1")
    driver.drain()
    driver.start(demo.REFUND, {"refund_id": 1}, subject_type="Refund", subject_id="1")
    error = refused(
        engine, errors.SubjectBusy, lambda: verbs.rerun(engine, first, registry=demo.REGISTRY, now=driver.now)
    )
    assert (error.subject_type, error.subject_id) == ("Refund", "1")


# --- signals -----------------------------------------------------------------


def test_a_repeated_idempotency_key_does_nothing_and_says_duplicate(driver: Driver, engine):
    workflow_id = driver.start(demo.ORDER, {"order_id": 3, "vendors": 2})  # ready: not waiting yet
    first = verbs.signal(engine, workflow_id, "shipment_confirmed", {"n": 1}, idempotency_key="k", now=driver.now)
    assert first.duplicate is False
    assert first.signal["status"] == "pending"
    before = snapshot(engine)
    again = verbs.signal(engine, workflow_id, "shipment_confirmed", '{"n": 2}', idempotency_key="k", now=driver.now)
    assert snapshot(engine) == before
    assert again.duplicate is True
    assert again.signal["id"] == first.signal["id"]
    assert again.signal["payload"] == {"n": 1}


def test_a_signal_of_another_name_stays_pending(driver: Driver, engine):
    workflow_id = driver.waiting_for_shipment()
    result = verbs.signal(engine, workflow_id, "something_else", {}, now=driver.now)
    assert result.signal["status"] == "pending"
    assert result.run["status"] == "waiting"
    assert driver.events(workflow_id)[-1][0] == "signal_received"


def test_a_signal_to_a_paused_run_waits_until_resume(driver: Driver, engine):
    workflow_id = driver.waiting_for_shipment()
    verbs.pause(engine, workflow_id, now=driver.now)
    result = verbs.signal(engine, workflow_id, "shipment_confirmed", {"tracking": "T"}, now=driver.now)
    assert result.signal["status"] == "pending"
    assert result.run["status"] == "paused"
    run = verbs.resume(engine, workflow_id, registry=demo.REGISTRY, now=driver.now)
    assert run["status"] == "ready"
    assert driver.signals(workflow_id)[0]["status"] == "claimed"
    driver.drain()
    assert driver.status(workflow_id) == "completed"
    assert driver.signals(workflow_id)[0]["status"] == "consumed"


def test_payload_may_come_as_a_json_string(driver: Driver, engine):
    workflow_id = driver.waiting_for_shipment()
    result = verbs.signal(engine, workflow_id, "shipment_confirmed", '{"tracking": "Z"}', now=driver.now)
    assert result.signal["payload"] == {"tracking": "Z"}
    assert result.signal["status"] == "claimed"


# --- two callers at once -----------------------------------------------------


def race(engine, workflow_id, calls):
    """Run *calls* in threads that all queue on the run's row lock, held by
    a third connection until every thread is blocked on it; returns each
    call's outcome (the run, or the error)."""
    outcomes: list = [None] * len(calls)
    holder = engine.connect()
    transaction = holder.begin()
    workflow_rows.lock_for(holder, workflow_id)

    def attempt(index, call):
        try:
            outcomes[index] = call()
        except errors.WorkflowError as exc:
            outcomes[index] = exc

    threads = [threading.Thread(target=attempt, args=(i, call)) for i, call in enumerate(calls)]
    for thread in threads:
        thread.start()
    _wait_for_lock_waiters(engine, len(calls))
    transaction.commit()
    holder.close()
    for thread in threads:
        thread.join(timeout=30)
    return outcomes


def _wait_for_lock_waiters(engine, count, timeout=60.0):
    import sqlalchemy as sa

    def queued():
        with engine.connect() as conn:
            waiting = conn.execute(
                sa.text(
                    "SELECT count(*) FROM pg_stat_activity "
                    "WHERE wait_event_type = 'Lock' AND datname = current_database()"
                )
            ).scalar_one()
        return waiting >= count

    wait_until(queued, timeout=timeout, every=0.01, what="the racing verbs queued on the row lock")


@pytest.mark.parametrize(
    "verb, make, options",
    [
        ("cancel", "waiting_for_shipment", {}),
        ("resume", "paused_on_capture", {}),
        ("pause", "ready_with_timer", {}),
        ("rerun", "completed", {}),
    ],
)
def test_two_callers_at_once_exactly_one_wins(driver: Driver, engine, verb, make, options):
    workflow_id = getattr(driver, make)()
    events_before = len(driver.events(workflow_id))
    outcomes = race(
        engine,
        workflow_id,
        [
            lambda actor=actor: verbs.perform(
                engine, verb, workflow_id, actor=actor, registry=demo.REGISTRY, now=driver.now, **options
            )
            for actor in ("dashboard:alice", "dashboard:bob")
        ],
    )
    winners = [outcome for outcome in outcomes if isinstance(outcome, dict)]
    losers = [outcome for outcome in outcomes if isinstance(outcome, errors.WrongStatus)]
    assert len(winners) == 1 and len(losers) == 1
    assert losers[0].status == winners[0]["status"]
    # Only the winner's events were written.
    actors = {event[1] for event in driver.events(workflow_id)[events_before:]}
    assert len(actors) == 1


def test_signal_racing_a_cancel_is_either_delivered_first_or_refused(driver: Driver, engine):
    workflow_id = driver.waiting_for_shipment()
    outcomes = race(
        engine,
        workflow_id,
        [
            lambda: verbs.cancel(engine, workflow_id, now=driver.now),
            lambda: verbs.signal(engine, workflow_id, "shipment_confirmed", {}, now=driver.now),
        ],
    )
    assert outcomes[0]["status"] == "cancelled"
    signal_outcome = outcomes[1]
    if isinstance(signal_outcome, errors.RunFinished):
        assert driver.signals(workflow_id) == []
    else:
        assert signal_outcome.signal["status"] == "claimed"


# --- bulk --------------------------------------------------------------------


def test_bulk_counts_runs_moved_and_runs_that_moved_on(driver: Driver, engine):
    paused = [driver.paused_on_capture(order_id=n) for n in range(3)]
    verbs.cancel(engine, paused[1], now=driver.now)
    result = verbs.bulk(
        engine,
        "resume",
        paused + ["gone-run"],
        actor=ALICE,
        reason="gateway fixed",
        registry=demo.REGISTRY,
        now=driver.now,
    )
    assert (result.moved, result.moved_on, result.errors) == (2, 2, [])
    assert [driver.status(workflow_id) for workflow_id in paused] == ["ready", "cancelled", "ready"]
    assert driver.events(paused[0])[-2][1:3] == (ALICE, "gateway fixed")


def test_bulk_reports_other_refusals_per_run(driver: Driver, engine):
    paused = driver.paused_on_capture()
    result = verbs.bulk(engine, "resume", [paused], registry=None, now=driver.now)
    assert (result.moved, result.moved_on) == (0, 0)
    ((workflow_id, error),) = result.errors
    assert workflow_id == paused and isinstance(error, errors.ClassNotLoaded)
