"""The action plan (what resume will do) and available_actions, each case
reached through the runtime itself, and checked against what resume then does."""

from __future__ import annotations

import pytest
from support.runtime_support import Driver

from pgbus_web.demo import workflows as demo
from pgbus_web.models import steps
from pgbus_web.rules import states
from pgbus_web.rules.verb_table import CLASS_VERBS, available_actions
from pgbus_web.runtime import system, verbs
from pgbus_web.runtime.plan import ActionPlan, plan_of
from pgbus_web.runtime.worker import Worker


def plan(engine, driver: Driver, workflow_id, definition=demo.ORDER_WORKFLOW):
    with engine.connect() as conn:
        return plan_of(driver.run(workflow_id), steps.latest(conn, workflow_id), definition)


def pause_while_running(engine, driver: Driver, workflow_class, arguments, steps_before=0):
    """Start a run, let *steps_before* steps finish, take the next step,
    pause the run while it runs, then let the step end."""
    workflow_id = driver.start(workflow_class, arguments)
    one_at_a_time = Worker(engine, demo.REGISTRY, chain=False)
    for _ in range(steps_before):
        one_at_a_time.run_step(now=driver.now)
    taken = system.take_step(engine, demo.REGISTRY, now=driver.now)
    verbs.pause(engine, workflow_id, now=driver.now)
    system.finish_step(engine, taken, system.execute(taken, now=driver.now), now=driver.now)
    return workflow_id


def test_paused_on_a_failure_plans_a_retry_of_that_step(driver: Driver, engine):
    workflow_id = driver.paused_on_capture()
    assert plan(engine, driver, workflow_id) == ActionPlan("retry", "capture_payment")


def test_paused_with_a_pending_step_plans_to_resume_it(driver: Driver, engine):
    workflow_id = driver.ready_with_timer()
    verbs.pause(engine, workflow_id, now=driver.now)
    assert plan(engine, driver, workflow_id, demo.ONBOARDING_WORKFLOW) == ActionPlan("resume", "send_tips")


def test_paused_after_a_step_completed_plans_to_continue_with_the_next(driver: Driver, engine):
    workflow_id = pause_while_running(engine, driver, demo.ORDER, {"order_id": 1})
    assert driver.status(workflow_id) == "paused"
    assert driver.steps(workflow_id) == [("reserve_stock", 1, "completed", None)]
    assert plan(engine, driver, workflow_id) == ActionPlan("continue", "capture_payment")
    run = verbs.resume(engine, workflow_id, registry=demo.REGISTRY, now=driver.now)
    assert run["status"] == "ready"
    assert driver.steps(workflow_id)[-1] == ("capture_payment", 1, "scheduled", None)


def test_paused_after_the_last_step_completed_plans_to_finish(driver: Driver, engine):
    workflow_id = pause_while_running(engine, driver, demo.REFUND, {"refund_id": 1}, steps_before=2)
    assert driver.steps(workflow_id)[-1] == ("notify_customer", 1, "completed", None)
    assert plan(engine, driver, workflow_id, demo.REFUND_WORKFLOW) == ActionPlan("finish", None)
    run = verbs.resume(engine, workflow_id, registry=demo.REGISTRY, now=driver.now)
    assert run["status"] == "completed"
    assert driver.events(workflow_id)[-2:] == [
        ("resumed", "app", None, "notify_customer", 1),
        ("finished", "app", None, None, None),
    ]


def test_paused_with_a_step_still_running_resumes_to_running(driver: Driver, engine):
    workflow_id = driver.start(demo.REFUND, {"refund_id": 1})
    taken = system.take_step(engine, demo.REGISTRY, now=driver.now)
    verbs.pause(engine, workflow_id, now=driver.now)
    assert plan(engine, driver, workflow_id, demo.REFUND_WORKFLOW) == ActionPlan("resume", "validate_refund")
    assert verbs.resume(engine, workflow_id, registry=demo.REGISTRY, now=driver.now)["status"] == "running"
    system.finish_step(engine, taken, system.execute(taken, now=driver.now), now=driver.now)
    assert driver.status(workflow_id) == "ready"


def test_a_waiting_step_resumed_goes_back_to_waiting(driver: Driver, engine):
    workflow_id = driver.waiting_for_shipment()
    verbs.pause(engine, workflow_id, now=driver.now)
    assert plan(engine, driver, workflow_id) == ActionPlan("resume", "await_shipment")
    assert verbs.resume(engine, workflow_id, registry=demo.REGISTRY, now=driver.now)["status"] == "waiting"


def test_no_plan_without_the_definition_or_outside_paused(driver: Driver, engine):
    paused = driver.paused_on_capture()
    assert plan(engine, driver, paused, definition=None) is None
    assert plan(engine, driver, driver.waiting_for_shipment()) is None


def test_plan_is_none_when_the_definition_lost_the_step(driver: Driver, engine):
    from pgbus_web.runtime.definitions import Step, Workflow

    workflow_id = pause_while_running(engine, driver, demo.ORDER, {"order_id": 1})
    changed = Workflow(demo.ORDER, [Step("something_else", lambda ctx: None)])
    assert plan(engine, driver, workflow_id, changed) is None


@pytest.mark.parametrize(
    "status, expected",
    [
        (states.READY, ("run_now", "reschedule", "skip", "pause", "cancel", "signal")),
        (states.RUNNING, ("pause", "cancel", "signal")),
        (states.WAITING, ("skip", "pause", "cancel", "signal")),
        (states.PAUSED, ("resume", "resume_at", "skip", "cancel", "signal")),
        (states.COMPLETED, ("rerun",)),
        (states.FAILED, ("rerun",)),
        (states.CANCELLED, ("rerun",)),
    ],
)
def test_available_actions_per_status(status, expected):
    assert available_actions({"status": status}, class_loaded=True) == expected


@pytest.mark.parametrize("status", states.RUN)
def test_without_the_class_the_class_actions_are_not_offered(status):
    loaded = available_actions({"status": status}, class_loaded=True)
    unloaded = available_actions({"status": status}, class_loaded=False)
    assert unloaded == tuple(action for action in loaded if action not in CLASS_VERBS)
    assert not set(unloaded) & {"resume", "resume_at", "rerun", "skip"}


def test_every_offered_action_is_accepted_by_the_verb(driver: Driver, engine):
    """What available_actions offers, the verb does not refuse for status."""
    from datetime import timedelta

    for make in ("paused_on_capture", "waiting_for_shipment", "ready_with_timer", "completed"):
        for action in available_actions(driver.run(getattr(driver, make)()), class_loaded=True):
            workflow_id = getattr(driver, make)()
            if action == "signal":
                verbs.signal(engine, workflow_id, "any", {}, now=driver.now)
            else:
                verbs.perform(
                    engine,
                    action,
                    workflow_id,
                    registry=demo.REGISTRY,
                    now=driver.now,
                    at=driver.now + timedelta(hours=1),
                )
