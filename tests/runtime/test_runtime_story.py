"""Whole runs driven through the demo workflows, checking every step row
and every audit event (with actor and reason) along the way."""

from __future__ import annotations

from datetime import timedelta

from support.runtime_support import Driver

from pgbus_web.demo import workflows as demo
from pgbus_web.models import batches, steps
from pgbus_web.runtime import system, verbs

ALICE = "dashboard:alice"
SHIPPING = "api:shipping"


def test_a_run_from_start_through_failure_pause_resume_signal_to_completion(driver: Driver, engine):
    workflow_id = driver.start(
        demo.ORDER,
        {"order_id": 1042, "amount_cents": 4599, "fail_capture": 3, "vendors": 2},
        subject_type="Order",
        subject_id=1042,
    )
    driver.drain()
    driver.later(seconds=10)
    driver.drain()
    driver.later(seconds=20)
    driver.drain()
    assert driver.status(workflow_id) == "paused"
    paused_run = driver.run(workflow_id)
    assert paused_run["paused_at"] == driver.now
    assert paused_run["current_step"] == "capture_payment"

    driver.later(minutes=5)
    resumed = verbs.resume(
        engine, workflow_id, actor=ALICE, reason="gateway is back", registry=demo.REGISTRY, now=driver.now
    )
    assert resumed["status"] == "ready"
    assert resumed["paused_at"] is None
    driver.drain()
    assert driver.status(workflow_id) == "waiting"

    driver.later(hours=2)
    result = verbs.signal(
        engine,
        workflow_id,
        "shipment_confirmed",
        {"tracking": "1Z999"},
        idempotency_key="ship-1042",
        actor=SHIPPING,
        now=driver.now,
    )
    assert result.duplicate is False
    assert result.run["status"] == "ready"
    driver.drain()

    run = driver.run(workflow_id)
    assert run["status"] == "completed"
    assert run["finished_at"] == driver.now
    assert driver.steps(workflow_id) == [
        ("reserve_stock", 1, "completed", None),
        ("capture_payment", 1, "failed", "TimeoutError"),
        ("capture_payment", 2, "failed", "TimeoutError"),
        ("capture_payment", 3, "failed", "TimeoutError"),
        ("capture_payment", 4, "completed", None),
        ("notify_vendors", 1, "completed", None),
        ("await_shipment", 1, "completed", None),
        ("send_receipt", 1, "completed", None),
    ]
    assert driver.events(workflow_id) == [
        ("started", "app", None, None, None),
        ("step_scheduled", "app", None, "reserve_stock", 1),
        ("step_started", "system", None, "reserve_stock", 1),
        ("step_completed", "system", None, "reserve_stock", 1),
        ("step_scheduled", "system", None, "capture_payment", 1),
        ("step_started", "system", None, "capture_payment", 1),
        ("step_failed", "system", None, "capture_payment", 1),
        ("step_reattempted", "system", None, "capture_payment", 2),
        ("step_started", "system", None, "capture_payment", 2),
        ("step_failed", "system", None, "capture_payment", 2),
        ("step_reattempted", "system", None, "capture_payment", 3),
        ("step_started", "system", None, "capture_payment", 3),
        ("step_failed", "system", None, "capture_payment", 3),
        ("paused", "system", None, "capture_payment", 3),
        ("resumed", ALICE, "gateway is back", "capture_payment", 3),
        ("step_scheduled", ALICE, None, "capture_payment", 4),
        ("step_started", "system", None, "capture_payment", 4),
        ("step_completed", "system", None, "capture_payment", 4),
        ("step_scheduled", "system", None, "notify_vendors", 1),
        ("step_started", "system", None, "notify_vendors", 1),
        ("fan_out_opened", "system", None, "notify_vendors", 1),
        ("fan_out_finished", "system", None, "notify_vendors", 1),
        ("step_completed", "system", None, "notify_vendors", 1),
        ("step_waiting", "system", None, "await_shipment", 1),
        ("signal_received", SHIPPING, None, None, None),
        ("signal_claimed", SHIPPING, None, "await_shipment", 1),
        ("step_started", "system", None, "await_shipment", 1),
        ("step_completed", "system", None, "await_shipment", 1),
        ("step_scheduled", "system", None, "send_receipt", 1),
        ("step_started", "system", None, "send_receipt", 1),
        ("step_completed", "system", None, "send_receipt", 1),
        ("finished", "system", None, None, None),
    ]

    rows = {(row["step_name"], row["attempt"]): row for row in driver.step_rows(workflow_id)}
    failed = rows[("capture_payment", 1)]
    assert failed["error_message"] == demo.CAPTURE_ERROR
    assert "TimeoutError" in failed["error_backtrace"]
    # The retry was due after the backoff (10 s after the first failure).
    assert rows[("capture_payment", 2)]["scheduled_at"] - failed["finished_at"] == timedelta(seconds=10)
    details = {event["event"]: event["details"] for event in driver.event_rows(workflow_id)}
    assert details["resumed"]["action"] == "retry"
    assert details["resumed"]["step"] == "capture_payment"
    assert details["step_failed"]["error_class"] == "TimeoutError"

    fan_out = rows[("notify_vendors", 1)]
    with engine.connect() as conn:
        batch = batches.find(conn, fan_out["batch_id"])
    assert batch["description"] == "OrderWorkflow#notify_vendors"
    assert (batch["total_jobs"], batch["completed_jobs"], batch["status"]) == (2, 2, "finished")

    shipment = rows[("await_shipment", 1)]
    assert shipment["result"] == {"tracking": "1Z999"}
    (signal,) = driver.signals(workflow_id)
    assert signal["status"] == "consumed"
    assert signal["claimed_by_step_id"] == shipment["id"]
    assert signal["payload"] == {"tracking": "1Z999"}


def test_skip_a_failed_step_then_a_waiting_one(driver: Driver, engine):
    workflow_id = driver.paused_on_capture()
    events_before = len(driver.events(workflow_id))
    run = verbs.skip(
        engine, workflow_id, actor=ALICE, reason="captured by hand", registry=demo.REGISTRY, now=driver.now
    )
    assert run["status"] == "ready"
    assert run["current_step"] == "notify_vendors"
    assert driver.steps(workflow_id)[-2:] == [
        ("capture_payment", 4, "skipped", None),
        ("notify_vendors", 1, "scheduled", None),
    ]
    assert driver.events(workflow_id)[events_before:] == [
        ("step_skipped", ALICE, "captured by hand", "capture_payment", 4),
        ("step_scheduled", ALICE, None, "notify_vendors", 1),
    ]

    driver.drain()
    assert driver.status(workflow_id) == "waiting"
    events_before = len(driver.events(workflow_id))
    run = verbs.skip(
        engine, workflow_id, actor=ALICE, reason="shipped without tracking", registry=demo.REGISTRY, now=driver.now
    )
    assert run["status"] == "ready"
    assert driver.steps(workflow_id)[-2:] == [
        ("await_shipment", 1, "skipped", None),
        ("send_receipt", 1, "scheduled", None),
    ]
    assert driver.events(workflow_id)[events_before:] == [
        ("step_skipped", ALICE, "shipped without tracking", "await_shipment", 1),
        ("step_scheduled", ALICE, None, "send_receipt", 1),
    ]
    driver.drain()
    assert driver.status(workflow_id) == "completed"


def test_skip_of_the_last_step_completes_the_run(driver: Driver, engine):
    workflow_id = driver.start(demo.REFUND, {"refund_id": 3})
    verbs.pause(engine, workflow_id, actor=ALICE, now=driver.now)
    # Skip validate_refund and issue_refund by hand, then the last step.
    for _ in range(3):
        run = verbs.skip(engine, workflow_id, actor=ALICE, registry=demo.REGISTRY, now=driver.now)
    assert run["status"] == "completed"
    assert run["finished_at"] == driver.now
    assert [row[2] for row in driver.steps(workflow_id)] == ["skipped", "skipped", "skipped"]
    assert driver.events(workflow_id)[-2:] == [
        ("step_skipped", ALICE, None, "notify_customer", 1),
        ("finished", ALICE, None, None, None),
    ]


def test_rerun_a_completed_run_from_a_named_step(driver: Driver, engine):
    workflow_id = driver.completed()
    events_before = len(driver.events(workflow_id))
    driver.later(hours=1)
    run = verbs.rerun(
        engine,
        workflow_id,
        from_step="issue_refund",
        actor=ALICE,
        reason="refund bounced",
        registry=demo.REGISTRY,
        now=driver.now,
    )
    assert run["status"] == "ready"
    assert run["finished_at"] is None
    assert run["current_step"] == "issue_refund"
    assert driver.steps(workflow_id)[-1] == ("issue_refund", 2, "scheduled", None)
    assert driver.events(workflow_id)[events_before:] == [
        ("rerun", ALICE, "refund bounced", None, None),
        ("step_scheduled", ALICE, None, "issue_refund", 2),
    ]
    assert driver.event_rows(workflow_id)[events_before]["details"] == {
        "from_step": "issue_refund",
        "was": "completed",
    }
    driver.drain()
    assert driver.status(workflow_id) == "completed"
    assert driver.steps(workflow_id)[-2:] == [
        ("issue_refund", 2, "completed", None),
        ("notify_customer", 2, "completed", None),
    ]


def test_rerun_defaults_to_the_first_step(driver: Driver, engine):
    workflow_id = driver.completed()
    verbs.rerun(engine, workflow_id, actor=ALICE, registry=demo.REGISTRY, now=driver.now)
    assert driver.steps(workflow_id)[-1] == ("validate_refund", 2, "scheduled", None)


def test_cancel_a_waiting_run_cancels_its_open_step(driver: Driver, engine):
    workflow_id = driver.waiting_for_shipment()
    events_before = len(driver.events(workflow_id))
    run = verbs.cancel(engine, workflow_id, actor=ALICE, reason="customer cancelled", now=driver.now)
    assert run["status"] == "cancelled"
    assert run["finished_at"] == driver.now
    assert driver.steps(workflow_id)[-1] == ("await_shipment", 1, "cancelled", None)
    assert driver.events(workflow_id)[events_before:] == [
        ("cancelled", ALICE, "customer cancelled", "await_shipment", 1),
    ]
    # A signal arriving later finds a finished run; the worker leaves it alone.
    driver.later(days=4)
    assert not driver.drain().busy
    assert driver.status(workflow_id) == "cancelled"


def test_cancel_while_a_step_runs_ignores_its_late_completion(driver: Driver, engine):
    workflow_id = driver.start(demo.REFUND, {"refund_id": 5})
    taken = system.take_step(engine, demo.REGISTRY, now=driver.now)
    assert driver.status(workflow_id) == "running"
    verbs.cancel(engine, workflow_id, actor=ALICE, reason="wrong refund", now=driver.now)
    outcome = system.execute(taken, now=driver.now)
    assert system.finish_step(engine, taken, outcome, now=driver.now) == "late"

    assert driver.status(workflow_id) == "cancelled"
    assert driver.steps(workflow_id) == [("validate_refund", 1, "cancelled", None)]
    assert driver.events(workflow_id)[-2:] == [
        ("cancelled", ALICE, "wrong refund", "validate_refund", 1),
        ("late_completion_ignored", "system", None, "validate_refund", 1),
    ]
    assert driver.event_rows(workflow_id)[-1]["details"]["run_status"] == "cancelled"


def test_run_now_makes_a_timer_due_now(driver: Driver, engine):
    workflow_id = driver.ready_with_timer()
    due = driver.latest(workflow_id)["scheduled_at"]
    assert due == driver.now + timedelta(days=1)
    events_before = len(driver.events(workflow_id))
    driver.later(minutes=1)
    run = verbs.run_now(engine, workflow_id, actor=ALICE, reason="send tips today", now=driver.now)
    assert run["status"] == "ready"
    assert driver.latest(workflow_id)["scheduled_at"] == driver.now
    assert driver.events(workflow_id)[events_before:] == [
        ("run_now", ALICE, "send tips today", "send_tips", 1),
    ]
    assert driver.event_rows(workflow_id)[-1]["details"]["was"] == due.isoformat()
    driver.drain()
    assert driver.steps(workflow_id)[-2:] == [
        ("send_tips", 1, "completed", None),
        ("await_profile", 1, "waiting", None),
    ]


def test_reschedule_moves_the_due_step(driver: Driver, engine):
    workflow_id = driver.ready_with_timer()
    events_before = len(driver.events(workflow_id))
    at = driver.now + timedelta(hours=2)
    run = verbs.reschedule(
        engine, workflow_id, at=at.isoformat(), actor=ALICE, reason="after the newsletter", now=driver.now
    )
    assert run["status"] == "ready"
    assert driver.latest(workflow_id)["scheduled_at"] == at
    assert driver.events(workflow_id)[events_before:] == [
        ("rescheduled", ALICE, "after the newsletter", "send_tips", 1),
    ]
    assert driver.event_rows(workflow_id)[-1]["details"]["at"] == at.isoformat()
    driver.later(hours=1)
    assert driver.drain().steps == 0
    driver.later(hours=1)
    assert driver.drain().steps == 1
    assert driver.latest(workflow_id)["step_name"] == "await_profile"


def test_pause_holds_a_run_until_resumed(driver: Driver, engine):
    workflow_id = driver.ready_with_timer()
    due = driver.latest(workflow_id)["scheduled_at"]
    events_before = len(driver.events(workflow_id))
    run = verbs.pause(engine, workflow_id, actor=ALICE, reason="mail server migration", now=driver.now)
    assert run["status"] == "paused"
    assert run["paused_at"] == driver.now
    assert driver.events(workflow_id)[events_before:] == [
        ("paused", ALICE, "mail server migration", "send_tips", 1),
    ]
    driver.later(days=2)
    assert driver.drain().steps == 0
    assert driver.status(workflow_id) == "paused"

    run = verbs.resume(
        engine, workflow_id, actor=ALICE, reason="migration done", registry=demo.REGISTRY, now=driver.now
    )
    assert run["status"] == "ready"
    # The pending timer keeps its time: resume lets it go on, it does not re-arm it.
    assert driver.latest(workflow_id)["scheduled_at"] == due
    assert driver.events(workflow_id)[-1] == ("resumed", ALICE, "migration done", "send_tips", 1)
    assert driver.event_rows(workflow_id)[-1]["details"]["action"] == "resume"
    driver.drain()
    assert driver.latest(workflow_id)["step_name"] == "await_profile"


def test_resume_at_schedules_the_retry_at_the_given_time(driver: Driver, engine):
    workflow_id = driver.paused_on_capture()
    at = driver.now + timedelta(hours=1)
    run = verbs.resume_at(
        engine, workflow_id, at=at, actor=ALICE, reason="gateway window", registry=demo.REGISTRY, now=driver.now
    )
    assert run["status"] == "ready"
    assert driver.steps(workflow_id)[-1] == ("capture_payment", 4, "scheduled", None)
    assert driver.latest(workflow_id)["scheduled_at"] == at
    resumed = driver.event_rows(workflow_id)[-2]
    assert (resumed["event"], resumed["actor"], resumed["reason"]) == ("resumed", ALICE, "gateway window")
    assert resumed["details"] == {"action": "retry", "step": "capture_payment", "at": at.isoformat()}


def test_refund_out_of_attempts_fails_the_run(driver: Driver, engine):
    workflow_id = driver.start(demo.REFUND, {"refund_id": 9, "fail_refund": True})
    driver.drain()
    driver.later(seconds=10)
    driver.drain()
    run = driver.run(workflow_id)
    assert run["status"] == "failed"
    assert run["finished_at"] == driver.now
    assert driver.steps(workflow_id) == [
        ("validate_refund", 1, "completed", None),
        ("issue_refund", 1, "failed", "ValueError"),
        ("issue_refund", 2, "failed", "ValueError"),
    ]
    assert driver.events(workflow_id)[-1] == ("finished", "system", None, "issue_refund", 2)
    assert driver.event_rows(workflow_id)[-1]["details"] == {"status": "failed", "error_class": "ValueError"}


def test_onboarding_welcome_email_error_class_is_module_qualified(driver: Driver, engine):
    workflow_id = driver.start(demo.ONBOARDING, {"user_id": 4, "fail_welcome_email": True})
    driver.drain()
    driver.later(minutes=1)
    driver.drain()
    assert driver.status(workflow_id) == "paused"
    assert driver.steps(workflow_id)[-1] == (
        "send_welcome_email",
        2,
        "failed",
        "smtplib.SMTPServerDisconnected",
    )
    with engine.connect() as conn:
        assert steps.latest(conn, workflow_id)["error_message"] == demo.SMTP_ERROR
