"""The worker: claiming with SKIP LOCKED, the step callable's context,
retries, timers, signals, fan-out, the sweep (wait timeouts, stalls), late
completions and a clean stop."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from support.runtime_support import T0, Driver

from pgbus_web.demo import workflows as demo
from pgbus_web.models import workflow_attention, workflow_rows
from pgbus_web.rules import states
from pgbus_web.runtime import system, verbs
from pgbus_web.runtime.definitions import FanOut, Registry, Step, Workflow
from pgbus_web.runtime.worker import Worker


def test_two_workers_never_run_one_step_twice(engine):
    calls: list[str] = []
    guard = threading.Lock()

    def tally(ctx):
        with guard:
            calls.append(ctx.workflow_id)
        threading.Event().wait(0.002)  # long enough for the other worker to try the same step

    registry = Registry([Workflow("Tally", [Step("count", tally), Step("again", tally)])])
    runs = [system.start(engine, "Tally", {"n": n}, registry=registry, now=T0)["workflow_id"] for n in range(30)]
    workers = [Worker(engine, registry) for _ in range(2)]
    threads = [threading.Thread(target=worker.drain, kwargs={"now": T0}) for worker in workers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    assert sorted(calls) == sorted(runs * 2)  # each run's two steps, each exactly once
    assert sum(worker.total_steps for worker in workers) == 60
    with engine.connect() as conn:
        assert {workflow_rows.find(conn, run)["status"] for run in runs} == {"completed"}


def test_the_step_callable_gets_the_run_context(engine):
    seen = []
    registry = Registry([Workflow("Ctx", [Step("look", lambda ctx: seen.append(ctx))])])
    run = system.start(engine, "Ctx", {"order_id": 7}, registry=registry, subject_type="Order", subject_id=7, now=T0)
    Worker(engine, registry).drain(now=T0)
    (ctx,) = seen
    assert (ctx.workflow_id, ctx.workflow_class, ctx.step_name, ctx.attempt) == (run["workflow_id"], "Ctx", "look", 1)
    assert ctx.arguments == {"order_id": 7}
    assert (ctx.subject_type, ctx.subject_id) == ("Order", "7")
    assert ctx.signal is None
    assert ctx.now == T0


def test_a_retry_waits_for_its_backoff(driver: Driver):
    workflow_id = driver.start(demo.ORDER, {"order_id": 1, "fail_capture": 1, "vendors": 2})
    driver.drain()
    assert driver.steps(workflow_id)[-1] == ("capture_payment", 2, "scheduled", None)
    assert driver.status(workflow_id) == "ready"
    driver.later(seconds=9)
    assert driver.drain().steps == 0
    driver.later(seconds=1)
    assert driver.drain().steps >= 1
    assert ("capture_payment", 2, "completed", None) in driver.steps(workflow_id)


def test_a_timer_step_runs_when_due(driver: Driver):
    workflow_id = driver.ready_with_timer()
    driver.later(hours=23, minutes=59)
    assert driver.drain().steps == 0
    driver.later(minutes=1)
    assert driver.drain().steps == 1
    assert driver.steps(workflow_id)[-2:] == [
        ("send_tips", 1, "completed", None),
        ("await_profile", 1, "waiting", None),
    ]
    latest = driver.latest(workflow_id)
    assert latest["wait_for"] == "profile_completed"
    assert latest["timeout_at"] is None


def test_a_signal_sent_early_is_claimed_as_soon_as_the_step_waits(driver: Driver, engine):
    workflow_id = driver.start(demo.ORDER, {"order_id": 1, "vendors": 2})
    sent = verbs.signal(engine, workflow_id, "shipment_confirmed", {"tracking": "early"}, now=driver.now)
    assert sent.signal["status"] == "pending"
    driver.drain()
    assert driver.status(workflow_id) == "completed"
    shipment = [row for row in driver.step_rows(workflow_id) if row["step_name"] == "await_shipment"]
    assert [row["status"] for row in shipment] == ["completed"]
    assert shipment[0]["waiting_since"] is None  # it never had to wait
    assert shipment[0]["result"] == {"tracking": "early"}
    names = [event[0] for event in driver.events(workflow_id)]
    assert "step_waiting" not in names
    assert names.index("signal_claimed") < names.index("finished")
    assert driver.signals(workflow_id)[0]["status"] == "consumed"


def test_a_reattempted_step_runs_again_with_the_signal_it_claimed(engine):
    seen = []

    def approve(ctx):
        seen.append((ctx.attempt, ctx.signal.payload if ctx.signal else None))
        if ctx.attempt == 1:
            raise ConnectionError("approval service down")

    registry = Registry(
        [
            Workflow(
                "Approval",
                [
                    Step("approve", approve, wait_for="approved", retries=1),
                ],
            )
        ]
    )
    driver = Driver(engine, registry)
    workflow_id = driver.start("Approval")
    driver.drain()
    assert driver.status(workflow_id) == "waiting"
    verbs.signal(engine, workflow_id, "approved", {"by": "carol"}, now=driver.now)
    driver.drain()
    (signal,) = driver.signals(workflow_id)
    assert signal["status"] == "claimed"  # the failed attempt does not use it up
    driver.later(seconds=1)
    driver.drain()
    assert seen == [(1, {"by": "carol"}), (2, {"by": "carol"})]
    assert driver.status(workflow_id) == "completed"
    (signal,) = driver.signals(workflow_id)
    assert signal["status"] == "consumed"
    assert signal["claimed_by_step_id"] == driver.step_rows(workflow_id)[0]["id"]


def test_a_wait_past_its_timeout_pauses_the_run(driver: Driver, engine):
    workflow_id = driver.waiting_for_shipment()
    driver.later(days=3)
    assert driver.worker.sweep(now=driver.now - timedelta(seconds=1)).timed_out == 0
    swept = driver.worker.sweep(now=driver.now)
    assert (swept.timed_out, swept.stalled) == (1, 0)
    run = driver.run(workflow_id)
    assert run["status"] == "paused"
    assert driver.steps(workflow_id)[-1] == ("await_shipment", 1, "failed", states.WAIT_TIMED_OUT_ERROR)
    assert driver.events(workflow_id)[-2:] == [
        ("wait_timed_out", "system", None, "await_shipment", 1),
        ("paused", "system", None, "await_shipment", 1),
    ]
    with engine.connect() as conn:
        counts = workflow_attention.stuck_reason_counts(conn, threshold=timedelta(minutes=10), now=driver.now)
    assert counts == {(demo.ORDER, "paused_error"): 1}
    # Resume retries the wait with a fresh deadline.
    verbs.resume(engine, workflow_id, registry=demo.REGISTRY, now=driver.now)
    latest = driver.latest(workflow_id)
    assert (latest["step_name"], latest["attempt"], latest["status"]) == ("await_shipment", 2, "waiting")
    assert latest["timeout_at"] == driver.now + timedelta(days=3)


def test_a_stalled_step_is_failed_and_its_late_completion_ignored(engine):
    registry = Registry([Workflow("Slow", [Step("crunch", lambda ctx: {"ok": True}), Step("after", lambda ctx: None)])])
    driver = Driver(engine, registry)
    workflow_id = driver.start("Slow")
    taken = system.take_step(engine, registry, now=driver.now)
    worker = Worker(engine, registry, stall_threshold=timedelta(minutes=2))
    assert worker.sweep(now=driver.now + timedelta(minutes=2)).stalled == 0
    assert worker.sweep(now=driver.now + timedelta(minutes=2, seconds=1)).stalled == 1

    assert driver.status(workflow_id) == "paused"
    assert driver.steps(workflow_id) == [("crunch", 1, "failed", states.STEP_STALLED_ERROR)]
    with engine.connect() as conn:
        counts = workflow_attention.stuck_reason_counts(conn, threshold=timedelta(minutes=10), now=driver.now)
    assert counts == {("Slow", "stalled"): 1}

    # The stalled worker finishes after all: recorded, nothing else changes.
    outcome = system.execute(taken, now=driver.now)
    assert system.finish_step(engine, taken, outcome, now=driver.now + timedelta(minutes=3)) == "late"
    assert driver.status(workflow_id) == "paused"
    assert driver.steps(workflow_id) == [("crunch", 1, "failed", states.STEP_STALLED_ERROR)]
    assert driver.events(workflow_id)[-3:] == [
        ("stall_detected", "system", None, "crunch", 1),
        ("paused", "system", None, "crunch", 1),
        ("late_completion_ignored", "system", None, "crunch", 1),
    ]
    assert driver.event_rows(workflow_id)[-1]["details"]["step_status"] == "failed"


def test_the_default_stall_threshold_is_the_shared_default(engine):
    from pgbus_web import defaults

    assert Worker(engine, demo.REGISTRY).stall_threshold == defaults.STALL_THRESHOLD


def test_a_failure_stores_the_error_class_message_and_a_capped_backtrace(engine):
    def explode(ctx):
        raise RuntimeError("x" * 10_000)

    registry = Registry([Workflow("Boom", [Step("explode", explode)])])
    driver = Driver(engine, registry)
    workflow_id = driver.start("Boom")
    driver.drain()
    row = driver.latest(workflow_id)
    assert row["error_class"] == "RuntimeError"
    assert len(row["error_message"]) == system.ERROR_MESSAGE_LIMIT
    assert len(row["error_backtrace"]) <= system.BACKTRACE_LIMIT
    assert row["error_backtrace"].rstrip().endswith("x")  # the end, where the error is, is kept
    assert driver.status(workflow_id) == "paused"
    failed = driver.event_rows(workflow_id)[-2]
    assert failed["event"] == "step_failed"
    assert len(failed["details"]["error_message"]) == 1_000  # the trail caps detail strings


def test_a_fan_out_without_jobs_goes_on_at_once(engine):
    registry = Registry(
        [Workflow("Fan", [Step("fan", lambda ctx: FanOut(0), fan_out=True), Step("done", lambda ctx: None)])]
    )
    driver = Driver(engine, registry)
    workflow_id = driver.start("Fan")
    driver.drain()
    assert driver.status(workflow_id) == "completed"
    assert [event[0] for event in driver.events(workflow_id)].count("fan_out_finished") == 1


def test_a_fan_out_step_that_returns_no_fan_out_fails(engine):
    registry = Registry([Workflow("Fan", [Step("fan", lambda ctx: 3, fan_out=True)])])
    driver = Driver(engine, registry)
    workflow_id = driver.start("Fan")
    driver.drain()
    assert driver.steps(workflow_id) == [("fan", 1, "failed", "TypeError")]


def test_the_batch_a_step_waits_on_is_shown_with_its_progress(driver: Driver, engine):
    from pgbus_web.models import batches

    workflow_id = driver.start(demo.ORDER, {"order_id": 1, "vendors": 12})
    for _ in range(3):
        driver.worker.run_step(now=driver.now)
    waiting = driver.latest(workflow_id)
    assert (waiting["step_name"], waiting["status"]) == ("notify_vendors", "waiting")
    assert driver.status(workflow_id) == "waiting"
    with engine.connect() as conn:
        batch = batches.find(conn, waiting["batch_id"])
    assert (batch["total_jobs"], batch["completed_jobs"], batch["status"]) == (12, 0, "processing")


def test_a_worker_leaves_runs_of_classes_it_does_not_know(engine):
    run = system.start(engine, demo.REFUND, {}, registry=demo.REGISTRY, now=T0)
    other = Registry([Workflow("Other", [Step("a", lambda ctx: None)])])
    assert Worker(engine, other).drain(now=T0).steps == 0
    with engine.connect() as conn:
        assert workflow_rows.find(conn, run["workflow_id"])["status"] == "ready"


def test_a_step_the_definition_no_longer_declares_pauses_the_run(engine):
    old = Registry([Workflow("Changing", [Step("old_step", lambda ctx: None)])])
    run = system.start(engine, "Changing", {}, registry=old, now=T0)
    new = Registry([Workflow("Changing", [Step("new_step", lambda ctx: None)])])
    Worker(engine, new).drain(now=T0)
    driver = Driver(engine, new)
    assert driver.status(run["workflow_id"]) == "paused"
    assert driver.steps(run["workflow_id"]) == [("old_step", 1, "failed", system.STEP_NOT_DEFINED_ERROR)]


def test_start_with_a_used_idempotency_key_returns_the_first_run(engine):
    first = system.start(engine, demo.REFUND, {}, registry=demo.REGISTRY, idempotency_key="r-1", now=T0)
    again = system.start(engine, demo.REFUND, {}, registry=demo.REGISTRY, idempotency_key="r-1", now=T0)
    assert again["workflow_id"] == first["workflow_id"]
    assert len(Driver(engine).events(first["workflow_id"])) == 2


def test_start_of_an_unknown_class_is_refused(engine):
    from pgbus_web.runtime.errors import ClassNotLoaded

    with pytest.raises(ClassNotLoaded):
        system.start(engine, "Nope", {}, registry=demo.REGISTRY)


def test_stop_lets_the_step_in_hand_finish_and_be_recorded(engine):
    entered, release = threading.Event(), threading.Event()

    def slow(ctx):
        entered.set()
        release.wait(10)
        return {"finished": True}

    registry = Registry([Workflow("Slow", [Step("slow", slow), Step("next", lambda ctx: None)])])
    run = system.start(engine, "Slow", {}, registry=registry)
    worker = Worker(engine, registry, poll_interval=0.01)
    thread = threading.Thread(target=worker.run)
    thread.start()
    assert entered.wait(10)
    worker.stop()
    release.set()
    thread.join(10)
    assert not thread.is_alive()
    driver = Driver(engine, registry)
    # The step in hand completed and was recorded; nothing after it was started.
    assert driver.steps(run["workflow_id"]) == [("slow", 1, "completed", None), ("next", 1, "scheduled", None)]
    assert driver.status(run["workflow_id"]) == "ready"


def test_chaining_a_runs_next_step_records_the_same_rows_and_events(engine):
    def story(chain):
        driver = Driver(engine)
        driver.worker.chain = chain
        workflow_id = driver.start(demo.ORDER, {"order_id": 1, "fail_capture": 1, "vendors": 2})
        driver.drain()
        driver.later(seconds=10)
        driver.drain()
        return driver.steps(workflow_id), driver.events(workflow_id)

    assert story(chain=True) == story(chain=False)


def test_an_operator_retry_gets_the_full_retry_budget_again(driver: Driver, engine):
    workflow_id = driver.paused_on_capture()  # fail_capture: every attempt fails
    verbs.resume(engine, workflow_id, registry=demo.REGISTRY, now=driver.now)
    driver.drain()
    assert driver.steps(workflow_id)[-1] == ("capture_payment", 5, "scheduled", None)
    assert driver.status(workflow_id) == "ready"
    driver.later(seconds=10)
    driver.drain()
    driver.later(seconds=20)
    driver.drain()
    assert driver.status(workflow_id) == "paused"
    assert [row[1:3] for row in driver.steps(workflow_id) if row[0] == "capture_payment"] == [
        (n, "failed") for n in range(1, 7)
    ]


def test_a_rerun_of_a_failed_run_gets_the_full_retry_budget_again(driver: Driver, engine):
    workflow_id = driver.start(demo.REFUND, {"refund_id": 9, "fail_refund": True})
    driver.drain()
    driver.later(seconds=10)
    driver.drain()
    assert driver.status(workflow_id) == "failed"
    verbs.rerun(engine, workflow_id, from_step="issue_refund", registry=demo.REGISTRY, now=driver.now)
    driver.drain()
    assert driver.steps(workflow_id)[-1] == ("issue_refund", 4, "scheduled", None)
    driver.later(seconds=10)
    driver.drain()
    assert driver.status(workflow_id) == "failed"
    assert [row[1] for row in driver.steps(workflow_id) if row[0] == "issue_refund"] == [1, 2, 3, 4]
