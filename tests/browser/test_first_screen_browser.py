"""The index's first screen in Chromium at 1280x800: a filtered URL, a
needs-attention group's "N runs" link and a search open on the matching
runs and their filter chips, and a filter error is shown at the top; the
unfiltered index keeps its counts and groups first (the control: there the
runs start below the first screen). The search box, typed into, finds a
run by each form it accepts, and a near miss finds nothing."""

from __future__ import annotations

import pytest
from support.browser import WAIT_MS, requires_chromium, serve
from support.web_helpers import Runs, every_state, make_app, step, utcnow

from pgbus_web.rules import states

pytestmark = requires_chromium

VIEWPORT = {"width": 1280, "height": 800}


@pytest.fixture
def server(database):
    yield from serve(make_app(database))


@pytest.fixture
def made(engine):
    """Every state, and enough needs-attention groups (one per failed step)
    to fill more than a screen above the runs on the unfiltered index."""
    runs = Runs(engine)
    made = every_state(runs)
    now = utcnow()
    for number in range(12):
        runs.make(states.PAUSED, step(f"step_{number:02}", "failed", error_class=f"Error{number:02}"), paused_at=now)
    return made


def top_of(page, selector: str) -> float:
    box = page.locator(selector).first.bounding_box()
    assert box is not None, selector
    return box["y"]


def opened(chromium, url):
    context = chromium.new_context(viewport=VIEWPORT)
    page = context.new_page()
    page.set_default_timeout(WAIT_MS)
    page.goto(url)
    return context, page


def test_the_unfiltered_index_keeps_counts_and_groups_first(chromium, server, made):
    context, page = opened(chromium, server + "/workflows")
    try:
        assert top_of(page, "#pgbus-counts") < top_of(page, "#pgbus-runs")
        assert top_of(page, "#pgbus-attention") < top_of(page, "#pgbus-runs")
        # The control of the tests below: here the runs are off the first screen.
        assert top_of(page, "tr.pgbus-run-row") > VIEWPORT["height"]
    finally:
        context.close()


@pytest.mark.parametrize("query", ["?status=paused", "?workflow_class=RefundWorkflow", "?q=Refund+3"])
def test_a_filtered_url_opens_on_its_runs_and_chips(chromium, server, made, query):
    context, page = opened(chromium, server + "/workflows" + query)
    try:
        assert top_of(page, "tr.pgbus-run-row") < VIEWPORT["height"]
        assert top_of(page, ".pgbus-chips") < VIEWPORT["height"]
        assert top_of(page, "#pgbus-runs") < top_of(page, "#pgbus-counts")
        assert top_of(page, "#pgbus-runs") < top_of(page, "#pgbus-attention")
    finally:
        context.close()


@pytest.mark.parametrize(
    "link, chip",
    [("tr.pgbus-attention-group a.pgbus-group-link", "reason"), ("tr.pgbus-failed-group a.pgbus-group-link", "status")],
    ids=["needs-attention group", "failed runs' group"],
)
def test_a_groups_link_opens_on_the_groups_runs(chromium, server, made, link, chip):
    context, page = opened(chromium, server + "/workflows")
    try:
        page.locator(link).last.click()
        page.wait_for_url(f"**{chip}=*")
        first_row = page.locator("tr.pgbus-run-row").first
        assert first_row.bounding_box()["y"] < VIEWPORT["height"]
        assert top_of(page, f'.pgbus-chip[data-filter="{chip}"]') < VIEWPORT["height"]
    finally:
        context.close()


def test_a_filter_error_is_shown_at_the_top(chromium, server, made):
    context, page = opened(chromium, server + "/workflows?status=bogus")
    try:
        error = page.locator(".pgbus-filter-error")
        assert "bogus" in error.inner_text()
        assert top_of(page, ".pgbus-filter-error") < VIEWPORT["height"] / 2
        assert top_of(page, ".pgbus-filter-error") < top_of(page, "#pgbus-counts")
    finally:
        context.close()


RUN_ID = "6ced4f1b-9a3e-4c55-8d1e-0a2b3c4d5e6f"


@pytest.mark.parametrize(
    "typed",
    [RUN_ID, RUN_ID[:8].upper(), "checkout-77a", "order 100615", "Order 100615", "100615"],
)
def test_the_search_box_finds_the_run_by_each_form(chromium, server, made, engine, typed):
    Runs(engine).make(
        states.PAUSED,
        step("capture_payment", "failed", error_class="Timeout"),
        paused_at=utcnow(),
        workflow_id=RUN_ID,
        subject=("Order", "100615"),
        idempotency_key="Checkout-77A",
    )
    context, page = opened(chromium, server + "/workflows")
    try:
        page.get_by_label(page.locator('label[for="pgbus-search-q"]').inner_text()).fill(typed)
        page.locator("#pgbus-search-q").press("Enter")
        page.wait_for_url("**q=*")
        rows = page.locator("tr.pgbus-run-row")
        assert [rows.nth(i).get_attribute("data-workflow-id") for i in range(rows.count())] == [RUN_ID]
        assert rows.first.bounding_box()["y"] < VIEWPORT["height"]
    finally:
        context.close()


def test_a_near_miss_in_the_search_box_finds_nothing(chromium, server, made, engine):
    Runs(engine).make(
        states.PAUSED,
        step("capture_payment", "failed", error_class="Timeout"),
        paused_at=utcnow(),
        workflow_id=RUN_ID,
        subject=("Order", "100615"),
    )
    context, page = opened(chromium, server + "/workflows")
    try:
        page.locator("#pgbus-search-q").fill("order 100616")
        page.locator("#pgbus-search-q").press("Enter")
        page.wait_for_url("**q=*")
        assert page.locator("tr.pgbus-run-row").count() == 0
        assert page.locator("#pgbus-runs .pgbus-empty").is_visible()
    finally:
        context.close()
