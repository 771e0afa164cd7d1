"""A paused run's page in Chromium: the cause (the latest attempt's error
class and its message's first line) is in the header beside the primary
action, inside the first screen on a desktop and on a phone.

Skipped only when /usr/bin/chromium is missing (CI installs it)."""

from __future__ import annotations

import pytest
from support.action_support import ago, operator_app
from support.browser import WAIT_MS, requires_chromium, serve
from support.web_helpers import step

from pgbus_web.rules import states

pytestmark = requires_chromium


@pytest.fixture
def server(database):
    yield from serve(operator_app(database, actor_name=lambda request: "browser"))


def inside(box, viewport) -> bool:
    return (
        box is not None
        and box["y"] >= 0
        and box["y"] + box["height"] <= viewport["height"]
        and box["x"] >= 0
        and box["x"] + box["width"] <= viewport["width"]
    )


@pytest.mark.parametrize("viewport", [{"width": 1280, "height": 800}, {"width": 390, "height": 844}])
def test_a_paused_runs_error_is_on_the_first_screen(chromium, server, runs, viewport):
    workflow_id = runs.make(
        states.PAUSED,
        step("reserve_stock", "completed", finished_at=ago(minutes=20)),
        step(
            "capture_payment",
            "failed",
            attempt=1,
            error_class="TimeoutError",
            error_message="an older cause",
            finished_at=ago(minutes=9),
        ),
        step(
            "capture_payment",
            "failed",
            attempt=2,
            error_class="Payments::GatewayTimeout",
            error_message="payment gateway did not answer within 5s\n  from gateway.rb:12\n  from job.rb:3",
            finished_at=ago(minutes=5),
        ),
        paused_at=ago(minutes=5),
        arguments={f"argument_{index}": "x" * 40 for index in range(12)},
    )
    context = chromium.new_context(viewport=viewport)
    page = context.new_page()
    page.set_default_timeout(WAIT_MS)
    try:
        page.goto(f"{server}/workflows/{workflow_id}")
        cause = page.locator("#pgbus-run-header .pgbus-run-cause")
        assert (
            cause.inner_text().split()
            == "Latest error: Payments::GatewayTimeout payment gateway did not answer within 5s".split()
        )
        assert inside(cause.bounding_box(), viewport), (cause.bounding_box(), viewport)
        primary = page.locator("#pgbus-run-header .pgbus-button-primary").first
        assert inside(primary.bounding_box(), viewport), primary.bounding_box()
    finally:
        context.close()


def test_a_completed_run_shows_no_error_in_its_header(chromium, server, runs):
    workflow_id = runs.make(
        states.COMPLETED,
        step("capture_payment", "failed", attempt=1, error_class="TimeoutError", finished_at=ago(minutes=9)),
        step("capture_payment", "completed", attempt=2, finished_at=ago(minutes=5)),
        finished_at=ago(minutes=5),
    )
    context = chromium.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    try:
        page.goto(f"{server}/workflows/{workflow_id}")
        page.locator("#pgbus-run-header").wait_for()
        assert page.locator("#pgbus-run-cause").count() == 0
    finally:
        context.close()
