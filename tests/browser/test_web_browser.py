"""The pages in a real browser (Debian's Chromium, headless, driven by
Playwright) against the dashboard on a free localhost port: every page
loads without a Content-Security-Policy violation or a script error, the
filter form swaps the runs in place, pushes the shareable URL, keeps the
range links on the filters it applied and shows a refused filter, the
stylesheet follows the system's dark mode, and no page is wider than the
window on a desktop or a phone.

Skipped only when /usr/bin/chromium is missing (CI installs it)."""

from __future__ import annotations

from datetime import timedelta

import pytest
import sqlalchemy as sa
from support.browser import WAIT_MS, requires_chromium, serve
from support.web_helpers import every_state, make_app, step, utcnow

from pgbus_web.models import uniqueness_keys
from pgbus_web.rules import states

pytestmark = requires_chromium


@pytest.fixture
def server(database):
    yield from serve(make_app(database))


@pytest.fixture
def small_pages_server(database):
    yield from serve(make_app(database, page_size=5))


def open_page(chromium, **context_options):
    """A page that records console errors and CSP violations."""
    context = chromium.new_context(**context_options)
    page = context.new_page()
    page.set_default_timeout(WAIT_MS)
    problems: list[str] = []
    page.on("console", lambda message: problems.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: problems.append(str(error)))
    return context, page, problems


def test_every_page_loads_without_csp_violations_or_script_errors(chromium, server, runs):
    made = every_state(runs)
    context, page, problems = open_page(chromium)
    try:
        for path in (
            "/workflows",
            f"/workflows/{made['paused_error']}",
            f"/workflows/{made['waiting_batch']}",
            "/workflows/insights/OrderWorkflow",
            "/workflows/no-such-run",
        ):
            page.goto(server + path)
            page.wait_for_load_state("load")
            assert page.evaluate("typeof htmx") == "object", path
        # A 404 page (and the favicon nobody ships) is a failed load, not a problem.
        assert [problem for problem in problems if "Failed to load resource" not in problem] == []
    finally:
        context.close()


def show_stalled(page):
    """The filter form applied with reason "stalled", through htmx."""
    page.select_option("#pgbus-filter-reason", "stalled")
    page.click("form.pgbus-filters button[type=submit]")
    # The stalled run is listed before the swap too: wait for what only
    # the filtered list has, its filter chip.
    page.locator('#pgbus-runs .pgbus-chip[data-filter="reason"]').wait_for()


def test_filter_form_swaps_the_runs_in_place_and_pushes_the_url(chromium, server, runs):
    made = every_state(runs)
    context, page, problems = open_page(chromium)
    try:
        page.goto(server + "/workflows")
        page.evaluate("window.pgbusMarker = 'still here'")
        assert page.locator("#pgbus-runs tr.pgbus-run-row").count() == len(made)
        show_stalled(page)
        assert page.locator("#pgbus-runs tr.pgbus-run-row").count() == 1
        assert page.locator(f'#pgbus-runs tr[data-workflow-id="{made["stalled"]}"]').count() == 1
        assert page.evaluate("window.pgbusMarker") == "still here"
        assert "reason=stalled" in page.url
        assert not [problem for problem in problems if "Content Security Policy" in problem]
    finally:
        context.close()


def test_range_links_follow_the_filters_the_form_applied(chromium, server, runs):
    made = every_state(runs)
    context, page, problems = open_page(chromium)
    try:
        page.goto(server + "/workflows")
        day = page.locator('#pgbus-filter-ranges a[href*="since=24h"]')
        # Control: drawn with the page, the link knows no reason yet.
        assert "reason=" not in day.get_attribute("href")
        show_stalled(page)
        assert "reason=stalled" in day.get_attribute("href")
        # Focus stays on the button that applied them.
        assert page.evaluate("document.activeElement.type") == "submit"
        day.click()
        page.wait_for_url("**since=24h**")
        assert "reason=stalled" in page.url
        assert "since=24h" in page.locator('#pgbus-filter-ranges a[aria-current="true"]').get_attribute("href")
        assert page.locator("#pgbus-runs tr.pgbus-run-row").count() == 1
        assert page.locator(f'#pgbus-runs tr[data-workflow-id="{made["stalled"]}"]').count() == 1
        assert [problem for problem in problems if "Failed to load resource" not in problem] == []
    finally:
        context.close()


def test_filter_form_says_what_is_wrong_with_its_filters(chromium, server, runs):
    made = every_state(runs)
    context, page, problems = open_page(chromium)
    try:
        page.goto(server + "/workflows")
        page.evaluate("window.pgbusMarker = 'still here'")
        page.select_option("#pgbus-filter-since", "24h")
        page.fill("#pgbus-filter-from", "2026-01-01T10:00")
        page.click("form.pgbus-filters button[type=submit]")
        error = page.locator("#pgbus-runs .pgbus-filter-error")
        error.wait_for()
        assert error.inner_text() == "Choose either a recent period or a from/to range, not both."
        assert error.get_attribute("role") == "alert"
        assert page.evaluate("document.activeElement.type") == "submit"
        assert page.locator("#pgbus-runs tr.pgbus-run-row").count() == 0
        assert page.evaluate("window.pgbusMarker") == "still here"
        # Control: the same form with the range alone lists the runs again.
        page.fill("#pgbus-filter-from", "")
        page.click("form.pgbus-filters button[type=submit]")
        page.locator("#pgbus-runs tr.pgbus-run-row").first.wait_for()
        assert error.count() == 0
        assert page.locator("#pgbus-runs tr.pgbus-run-row").count() == len(made)
    finally:
        context.close()


def test_older_and_newer_pages_swap_the_runs_in_place(chromium, small_pages_server, runs):
    made = every_state(runs)
    newest_first = list(reversed(list(made.values())))
    context, page, problems = open_page(chromium)
    try:
        page.goto(small_pages_server + "/workflows")
        page.evaluate("window.pgbusMarker = 'still here'")
        first = page.locator("#pgbus-runs tr.pgbus-run-row").first.get_attribute("data-workflow-id")
        assert first == newest_first[0]
        page.click('#pgbus-runs a[rel="next"]')
        page.locator(f'#pgbus-runs tr[data-workflow-id="{newest_first[5]}"]').wait_for()
        assert "before=" in page.url
        page.click('#pgbus-runs a[rel="prev"]')
        page.locator(f'#pgbus-runs tr[data-workflow-id="{newest_first[0]}"]').wait_for()
        assert page.evaluate("window.pgbusMarker") == "still here"
        assert [problem for problem in problems if "Failed to load resource" not in problem] == []
    finally:
        context.close()


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_colours_follow_the_system_scheme(chromium, server, scheme):
    context, page, _problems = open_page(chromium, color_scheme=scheme)
    try:
        page.goto(server + "/workflows")
        background = page.evaluate("getComputedStyle(document.body).backgroundColor")
        # Light is near white, dark near black.
        red = int(background.split("(")[1].split(",")[0])
        assert (red > 200) if scheme == "light" else (red < 60), background
    finally:
        context.close()


def wide_content(runs, engine) -> str:
    """Runs, an audit trail with fan-out details and locks with long keys,
    as a busy installation has them; the fan-out run's id."""
    every_state(runs)
    batch_id = "490bebca-4227-403c-8833-154bc0537b63-" + "x" * 40
    workflow_id = runs.make(
        states.WAITING,
        step("notify_vendors", "waiting", waiting_since=utcnow()),
        events_=[
            {
                "event": "fan_out_opened",
                "actor": "system",
                "step": 0,
                "details": {"batch_id": batch_id, "total_jobs": 12, "description": "OrderWorkflow#notify_vendors"},
            },
            {
                "event": "fan_out_finished",
                "actor": "system",
                "step": 0,
                "details": {
                    "batch_id": batch_id,
                    "total_jobs": 12,
                    "completed_jobs": 12,
                    "failed_jobs": 0,
                    "discarded_jobs": 0,
                },
            },
        ],
    )
    with engine.begin() as conn:
        for index in range(3):
            uniqueness_keys.acquire(conn, f"pgbus:unique:RebuildSearchIndexJob:{index}{'7e87a2b05eec757533b1' * 3}")
    return workflow_id


@pytest.mark.parametrize("width", [1280, 390])
def test_no_page_is_wider_than_the_window(chromium, server, runs, engine, width):
    workflow_id = wide_content(runs, engine)
    for scheme in ("light", "dark"):
        context, page, _problems = open_page(chromium, viewport={"width": width, "height": 900}, color_scheme=scheme)
        try:
            for path in ("/workflows", f"/workflows/{workflow_id}", "/locks"):
                page.goto(server + path)
                page.wait_for_load_state("load")
                widths = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
                assert widths[0] <= widths[1], (path, scheme, widths)
            if width == 390:
                # The action answer's message stays in view on a phone.
                position = page.evaluate("getComputedStyle(document.getElementById('pgbus-messages')).position")
                assert position == "sticky"
        finally:
            context.close()


def test_attention_group_buttons_are_inside_the_table_on_a_desktop(chromium, server, runs, engine):
    wide_content(runs, engine)
    context, page, _problems = open_page(chromium, viewport={"width": 1280, "height": 900}, locale="de-DE")
    try:
        page.goto(server + "/workflows?locale=de")
        wrap = page.locator(".pgbus-attention").first.locator("xpath=..")
        sizes = wrap.evaluate("element => [element.scrollWidth, element.clientWidth]")
        assert sizes[0] <= sizes[1], sizes
    finally:
        context.close()


def test_locks_release_buttons_are_inside_the_table_on_a_desktop(chromium, server, runs, engine):
    wide_content(runs, engine)
    context, page, _problems = open_page(chromium, viewport={"width": 1280, "height": 900})
    try:
        page.goto(server + "/locks")
        wrap = page.locator(".pgbus-locks").locator("xpath=..")
        sizes = wrap.evaluate("element => [element.scrollWidth, element.clientWidth]")
        assert sizes[0] <= sizes[1], sizes
    finally:
        context.close()


def test_a_refused_lock_release_is_shown_in_place(chromium, server, engine):
    """A refusal keeps its status (404: the lock went meanwhile) and the
    page still shows why, swapped in place: the one refusal convention."""
    from support.lock_support import Locks

    locks = Locks(engine)
    locks.acquire("gone-meanwhile", age=timedelta(hours=2))
    context, page, problems = open_page(chromium)
    try:
        page.goto(server + "/locks")
        page.evaluate("() => { window.pgbusNoReload = true; }")
        with engine.begin() as conn:
            conn.execute(sa.text("DELETE FROM pgbus_uniqueness_keys WHERE lock_key = 'gone-meanwhile'"))
        row = page.locator("tr", has_text="gone-meanwhile")
        row.locator("details.pgbus-confirm summary").first.click()
        with page.expect_response(lambda response: "/locks/release" in response.url) as answered:
            row.locator("details.pgbus-confirm form button[type=submit]").first.click()
        assert answered.value.status == 404
        page.locator("#pgbus-messages .pgbus-notice-error").wait_for(timeout=WAIT_MS)
        # Swapped in place (no reload), and the block redrawn without the lock.
        assert page.evaluate("() => window.pgbusNoReload === true")
        assert page.locator("tr", has_text="gone-meanwhile").count() == 0
        # The browser logs the 404 itself; nothing else went wrong.
        assert [problem for problem in problems if "status of 404" not in problem] == []
    finally:
        context.close()
