"""What became of the step an operation fixed (docs/operations.md, "The
step that was stuck"): of the runs it acted on, how many got past that
step (completed, or moved on and waiting for a later step), how many are
stuck at it again, and how many failed elsewhere; one core read that every
door shows (the operation's page, the API, the command line, MCP). Real
runs, driven by the worker on a hand-moved clock; runs the operation did
not act on count nowhere."""

from __future__ import annotations

from datetime import timedelta

import pytest
from support.api_support import Api, token_for
from support.operation_support import THRESHOLDS, query
from support.runtime_support import Driver
from support.web_helpers import make_app, soup, text_of, utcnow

from pgbus_web.core import operation_reads
from pgbus_web.core import representations as rep
from pgbus_web.core.settings import Settings
from pgbus_web.core.words import command_line
from pgbus_web.i18n import t
from pgbus_web.mcp.server import Tools
from pgbus_web.rules import states
from pgbus_web.runtime import Registry, Step, Workflow, operation_policy, operation_runner

CLASS = "StepFixWorkflow"
# The payment gateway is down until the test mends it.
GATEWAY = {"down": True}


def prepare(ctx):
    return {"prepared": True}


def charge(ctx):
    mode = ctx.arguments["mode"]
    if mode == "always" or GATEWAY["down"]:
        raise TimeoutError("payment gateway did not answer")
    return {"charged": True}


def ship(ctx):
    if ctx.arguments["mode"] == "ship_fails":
        raise RuntimeError("carrier refused the parcel")
    return {"shipped": True}


def notify(ctx):
    return {"notified": True}


REGISTRY = Registry(
    [
        Workflow(
            CLASS,
            [
                Step("prepare", prepare),
                Step("charge", charge),
                # Due the next day: a run that got past charge waits, ready, for it.
                Step("ship", ship, delay=timedelta(days=1)),
                Step("notify", notify),
            ],
        )
    ]
)


@pytest.fixture(autouse=True)
def gateway_down():
    GATEWAY["down"] = True
    yield
    GATEWAY["down"] = True


@pytest.fixture
def driver(engine):
    # The clock the operation's runner reads is the real one: the runs' is started there.
    return Driver(engine, REGISTRY, now=utcnow())


def stuck_runs(driver) -> dict[str, list[str]]:
    """Runs paused on charge (five to be fixed, two whose charge always
    fails, one whose shipping will fail) and controls the operation does
    not act on: one paused on ship, one completed."""
    made = {
        mode: [driver.start(CLASS, {"mode": mode}) for _ in range(count)]
        for mode, count in (("fixed", 5), ("always", 2), ("ship_fails", 1))
    }
    driver.drain()
    GATEWAY["down"] = False
    made["control_completed"] = [driver.start(CLASS, {"mode": "fixed"})]
    made["control_ship"] = [driver.start(CLASS, {"mode": "ship_fails"})]
    driver.drain()
    driver.later(days=1, minutes=1)
    driver.drain()
    GATEWAY["down"] = True
    for mode in ("fixed", "always", "ship_fails"):
        assert {driver.status(run) for run in made[mode]} == {states.PAUSED}, mode
        assert {driver.run(run)["current_step"] for run in made[mode]} == {"charge"}
    assert driver.status(made["control_completed"][0]) == states.COMPLETED
    assert driver.status(made["control_ship"][0]) == states.PAUSED
    assert driver.run(made["control_ship"][0])["current_step"] == "ship"
    return made


def resume_all(engine, driver, **filter_values) -> dict:
    operation = operation_policy.create(
        engine,
        query(**filter_values),
        "resume",
        None,
        reason="gateway back",
        actor="dashboard:alice",
        expected=None,
        registry=REGISTRY,
        thresholds=THRESHOLDS,
    )
    GATEWAY["down"] = False
    runner = operation_runner.Runner(engine, REGISTRY)
    for _ in range(100):
        if runner.step() is None:
            break
    driver.later(seconds=30)
    driver.drain()
    with engine.connect() as conn:
        return operation_reads.find(conn, operation["id"])


def outcome_now(engine, operation, now) -> operation_reads.Outcome:
    with engine.connect() as conn:
        return operation_reads.outcome(conn, Settings(), operation, now)


def test_runs_that_moved_on_to_a_later_step_got_past_the_step_that_was_stuck(engine, driver):
    made = stuck_runs(driver)
    operation = resume_all(engine, driver, workflow_class=CLASS, status=states.PAUSED, step="charge")
    assert operation["moved"] == 8
    # Five charged and wait, ready, for shipping tomorrow: by status alone
    # they were only "still running or waiting".
    assert {driver.status(run) for run in made["fixed"] + made["ship_fails"]} == {states.READY}
    assert {driver.run(run)["current_step"] for run in made["fixed"]} == {"ship"}
    found = outcome_now(engine, operation, driver.now)
    moving = next(group for group in found.groups if group["kind"] == "moving")
    assert moving["total"] == 6
    assert found.step is not None
    assert found.step.steps == ("charge",)
    assert found.step.counts == {"past": 6, "again": 2, "elsewhere": 0, "at_step": 0}

    # A day on: five complete, the sixth fails at shipping: elsewhere.
    GATEWAY["down"] = False
    driver.later(days=1, minutes=1)
    driver.drain()
    assert {driver.status(run) for run in made["fixed"]} == {states.COMPLETED}
    found = outcome_now(engine, operation, driver.now)
    assert found.step.counts == {"past": 5, "again": 2, "elsewhere": 1, "at_step": 0}
    # The controls (a completed run, a run paused at another step) are in no count.
    assert found.step.total == 8


def test_without_a_step_in_the_filter_the_step_is_the_one_the_resume_named(engine, driver):
    made = stuck_runs(driver)
    # The filter names no step: the run paused on ship is acted on too, and
    # its own stuck step is ship.
    operation = resume_all(engine, driver, workflow_class=CLASS, status=states.PAUSED)
    assert operation["moved"] == 9
    found = outcome_now(engine, operation, driver.now)
    assert found.step.steps == ("charge", "ship")
    # The ship control fails at ship again when resumed: stuck there again.
    assert driver.status(made["control_ship"][0]) == states.PAUSED
    assert found.step.counts == {"past": 6, "again": 3, "elsewhere": 0, "at_step": 0}


def test_every_door_shows_the_one_read(engine, driver, database):
    stuck_runs(driver)
    operation = resume_all(engine, driver, workflow_class=CLASS, status=states.PAUSED, step="charge")
    found = outcome_now(engine, operation, driver.now)
    # The API's representation (also `operations show --json` and MCP's show_operation).
    shown = rep.operation_outcome(found, operation["id"])
    assert shown["step"] == {"steps": ["charge"], "total": 8, "past": 6, "again": 2, "elsewhere": 0, "at_step": 0}
    # The API (checked against its OpenAPI document) and MCP.
    app = make_app(database, registry=REGISTRY)
    api = Api(app.test_client(), token_for(engine, "grafana", "viewer"))
    assert api.get(f"/operations/{operation['id']}").json_body["outcome"]["step"] == shown["step"]
    tools = Tools(engine, Settings(registry=REGISTRY))
    assert tools.show_operation(operation["id"])["outcome"]["step"] == shown["step"]
    # The command line's lines.
    lines = command_line.outcome_lines(shown, mostly_failing=False, failing=found.failing, settled=found.settled)
    assert "At the step that was stuck (charge):" in lines
    assert "  got past it: 6" in lines and "  stuck there again: 2" in lines
    # The page (its clock is the real one: the runs' next step is still a day off).
    page = soup(app.test_client().get(f"/workflows/operations/{operation['id']}"))
    assert text_of(page.select_one(".pgbus-outcomes-step-title")) == t(
        "pgbus.operations.outcomes.step.title", steps="charge"
    )
    counts = {
        part["data-step-outcome"]: text_of(part.select_one("dd"))
        for part in page.select(".pgbus-outcomes-step [data-step-outcome]")
    }
    assert counts == {"past": "6", "again": "2", "elsewhere": "0", "at_step": "0"}


@pytest.mark.parametrize(
    ("status", "reason", "at_step", "kind"),
    [
        (states.COMPLETED, None, True, "past"),
        (states.COMPLETED, None, False, "past"),
        (states.READY, None, False, "past"),
        (states.WAITING, None, False, "past"),
        (states.READY, states.OVERDUE, False, "past"),
        (states.PAUSED, states.PAUSED_ERROR, True, "again"),
        (states.FAILED, None, True, "again"),
        (states.READY, states.OVERDUE, True, "again"),
        (states.RUNNING, states.STALLED, True, "again"),
        (states.PAUSED, states.PAUSED_ERROR, False, "elsewhere"),
        (states.FAILED, None, False, "elsewhere"),
        (states.READY, None, True, "at_step"),
        (states.RUNNING, None, True, "at_step"),
        (states.CANCELLED, None, True, None),
    ],
)
def test_each_run_is_one_kind(status, reason, at_step, kind):
    assert operation_reads.step_kind(status, reason, at_step) == kind


def test_nothing_is_said_of_cancel_and_pause():
    counts = {(states.CANCELLED, None, "charge", True): 3}
    assert operation_reads.step_outcome_of("cancel", counts) is None
    assert operation_reads.step_outcome_of("pause", counts) is None
    assert operation_reads.step_outcome_of("resume", {}) is None
