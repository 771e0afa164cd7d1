"""The actions in a real browser: Debian's Chromium, headless, driven by
Playwright, against the dashboard served on a free localhost port over the
test database. It clicks Resume on a paused run and a bulk Resume on a
needs-attention group through the operation's dialog and page (and
cancels one), and sees the page change
without a reload (a marker set on ``window`` before the click survives);
then it watches live refresh pick up a change made elsewhere, and keep
the list the operator filtered or paged to. The browser also reports any
Content-Security-Policy violation or script error.

Skipped only when /usr/bin/chromium is missing (CI installs it); Playwright
never downloads a browser here."""

from __future__ import annotations

import pytest
from support.action_support import ago, events_of, operator_app, paused_on_capture, run_row
from support.browser import WAIT_MS, requires_chromium, serve
from support.waiting import wait_until
from support.web_helpers import step

from pgbus_web.demo.workflows import REGISTRY
from pgbus_web.models import operation_rows
from pgbus_web.rules import states
from pgbus_web.runtime import operation_runner, verbs

# The run page's badge. Waits go through locators: the page's CSP (rightly)
# refuses the eval that a string predicate would need.
BADGE = "#pgbus-run-header .pgbus-run-title [data-status]"
BADGE_READY = '#pgbus-run-header .pgbus-run-title [data-status="ready"]'

pytestmark = requires_chromium


@pytest.fixture
def server(database):
    """The dashboard on a free port, in a thread; its base URL."""
    yield from serve(operator_app(database, actor_name=lambda request: "browser", refresh_interval=1))


@pytest.fixture
def small_pages_server(database):
    """The same with five runs to a page."""
    yield from serve(operator_app(database, actor_name=lambda request: "browser", refresh_interval=1, page_size=5))


@pytest.fixture
def page(chromium):
    """A fresh browser context (no cookies) and page, recording every
    script error and CSP violation the browser reports."""
    context = chromium.new_context(locale="en-US", timezone_id="Europe/Oslo")
    page = context.new_page()
    page.set_default_timeout(WAIT_MS)
    problems: list[str] = []

    def console(msg):
        # The browser also logs every 4xx answer (a refused action, the
        # favicon the standalone app lacks); the tests check statuses
        # themselves, so only script errors and CSP violations count here.
        if msg.type == "error" and not msg.text.startswith("Failed to load resource"):
            problems.append(msg.text)

    page.on("console", console)
    page.on("pageerror", lambda error: problems.append(str(error)))
    page.problems = problems
    try:
        yield page
    finally:
        context.close()


def mark_window(page) -> None:
    page.evaluate("window.pgbusMarker = 'still here'")


def marker(page) -> str | None:
    return page.evaluate("window.pgbusMarker || null")


def test_resume_a_paused_run_without_a_reload(server, page, runs, engine):
    workflow_id = paused_on_capture(runs)
    page.goto(f"{server}/workflows/{workflow_id}")
    badge = page.locator(BADGE)
    assert badge.get_attribute("data-status") == "paused"
    mark_window(page)

    resume = page.locator('details.pgbus-action[data-verb="resume"]')
    resume.locator("summary").click()
    resume.locator('input[name="reason"]').fill("gateway is back")
    resume.locator('button[type="submit"]').click()

    page.locator("#pgbus-messages .pgbus-notice-ok").wait_for()
    assert page.locator("#pgbus-messages").inner_text().strip() == "Resumed: capture_payment goes on."
    page.locator(BADGE_READY).wait_for()
    assert marker(page) == "still here"
    assert page.locator('#pgbus-run-audit .pgbus-event[data-event="resumed"]').count() == 1
    assert run_row(engine, workflow_id)["status"] == "ready"
    resumed = next(e for e in events_of(engine, workflow_id) if e["event"] == "resumed")
    assert (resumed["actor"], resumed["reason"]) == ("dashboard:browser", "gateway is back")
    assert page.problems == []


def test_a_groups_button_opens_the_operation_dialog_and_its_page_reaches_done(server, page, runs, engine):
    # The group's button is an operation: its preview opens in the page (no
    # browser confirm()), asks the reason, and leads to the operation's
    # page, which refreshes itself until the operation is done.
    ids = [
        runs.make(
            states.PAUSED,
            step("send_receipt", "scheduled", scheduled_at=ago(hours=1)),
            paused_at=ago(minutes=30 - index),
        )
        for index in range(2)
    ]
    page.goto(f"{server}/workflows")
    mark_window(page)
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    group = page.locator('#pgbus-attention tr.pgbus-attention-group[data-reason="paused_manual"]')
    group.locator('form[data-verb="resume"] button').click()
    dialog = page.locator("dialog#pgbus-operation-dialog[open]")
    dialog.wait_for()
    assert marker(page) == "still here"  # in the page, not a new one
    assert dialog.get_attribute("data-total") == "2"
    dialog.locator("input[name=reason]").fill("receipts fixed")
    dialog.locator("button.pgbus-operation-start").click()
    page.wait_for_url("**/workflows/operations/*")
    assert page.locator("#pgbus-operation").get_attribute("data-status") == "queued"
    runner = operation_runner.Runner(engine, REGISTRY)
    while runner.step() is not None:
        pass
    page.locator('#pgbus-operation[data-status="done"]').wait_for()
    assert page.locator("#pgbus-operation .pgbus-operation-moved").inner_text().strip() == "2"
    assert dialogs == []
    assert {run_row(engine, workflow_id)["status"] for workflow_id in ids} == {"ready"}
    assert page.problems == []


def test_an_operation_is_cancelled_from_its_page(server, page, runs, engine):
    paused_on_capture(runs)
    page.goto(f"{server}/workflows?status=paused")
    page.locator("form.pgbus-operation-entry select[name=verb]").select_option("cancel")
    page.locator("form.pgbus-operation-entry button").click()
    dialog = page.locator("dialog#pgbus-operation-dialog[open]")
    dialog.locator("input[name=reason]").fill("test orders")
    dialog.locator("button.pgbus-operation-start").click()
    page.wait_for_url("**/workflows/operations/*")
    page.locator("form.pgbus-operation-cancel button").click()
    page.locator('#pgbus-operation[data-status="cancelled"]').wait_for()
    page.locator("#pgbus-messages .pgbus-notice-ok").wait_for()
    page.locator("form.pgbus-operation-cancel").wait_for(state="detached")
    with engine.connect() as conn:
        assert [row["status"] for row in operation_rows.recent(conn)] == ["cancelled"]
    assert page.problems == []


def test_a_lost_race_shows_why_and_the_fresh_state(server, page, runs, engine):
    workflow_id = paused_on_capture(runs)
    page.goto(f"{server}/workflows/{workflow_id}")
    mark_window(page)
    resume = page.locator('details.pgbus-action[data-verb="resume"]')
    resume.locator("summary").click()  # an open form: live refresh holds still
    verbs.resume(engine, workflow_id, actor="dashboard:someone-else", registry=runs_registry())
    resume.locator('button[type="submit"]').click()

    page.locator("#pgbus-messages .pgbus-notice-error").wait_for()
    assert page.locator("#pgbus-messages").inner_text().strip() == (
        "This run is already ready to run again; nothing changed."
    )
    page.locator(BADGE_READY).wait_for()
    assert marker(page) == "still here"
    assert [e["actor"] for e in events_of(engine, workflow_id) if e["event"] == "resumed"] == ["dashboard:someone-else"]
    assert page.problems == []


def test_a_dismissed_dialog_moves_nothing(server, page, runs, engine):
    workflow_id = runs.make(
        states.PAUSED, step("send_receipt", "scheduled", scheduled_at=ago(hours=1)), paused_at=ago(minutes=5)
    )
    page.goto(f"{server}/workflows")
    page.on("dialog", lambda dialog: dialog.dismiss())
    page.locator('tr.pgbus-attention-group form[data-verb="cancel"] button').click()
    page.wait_for_timeout(500)
    assert run_row(engine, workflow_id)["status"] == "paused"
    assert page.locator("#pgbus-messages").inner_text().strip() == ""


def test_live_refresh_shows_a_change_made_elsewhere_and_waits_while_a_form_is_open(server, page, runs, engine):
    workflow_id = paused_on_capture(runs)
    page.goto(f"{server}/workflows/{workflow_id}")
    mark_window(page)
    badge = page.locator(BADGE)

    # A form unfolded: the page holds still, so what is being typed survives.
    cancel = page.locator('details.pgbus-action[data-verb="cancel"]')
    cancel.locator("summary").click()
    cancel.locator('input[name="reason"]').fill("half typed")
    verbs.resume(engine, workflow_id, actor="dashboard:someone-else", registry=runs_registry())
    page.wait_for_timeout(2_500)  # more than two refresh intervals
    assert badge.get_attribute("data-status") == "paused"
    assert cancel.locator('input[name="reason"]').input_value() == "half typed"

    # Folded again and out of the form: the next poll brings the new state.
    cancel.locator("summary").click()
    page.locator("h1").click()
    page.locator(BADGE_READY).wait_for()
    assert marker(page) == "still here"
    assert page.problems == []


def record_polls(page) -> list[dict[str, str]]:
    """The poller's requests from now on: URL and HX-Target of each."""
    polls: list[dict[str, str]] = []

    def request(req):
        if req.headers.get("hx-trigger") == "pgbus-refresh":
            polls.append({"url": req.url, "target": req.headers.get("hx-target", "")})

    page.on("request", request)
    return polls


def shown_ids(page) -> list[str]:
    rows = page.locator("#pgbus-runs tr.pgbus-run-row")
    return [rows.nth(index).get_attribute("data-workflow-id") for index in range(rows.count())]


def test_live_refresh_keeps_the_filtered_list(server, page, runs):
    failed = runs.make(
        states.FAILED, step("issue_refund", "failed", finished_at=ago(minutes=3)), finished_at=ago(minutes=3)
    )
    paused_on_capture(runs)
    runs.make(
        states.COMPLETED, step("send_receipt", "completed", finished_at=ago(minutes=8)), finished_at=ago(minutes=8)
    )
    page.goto(f"{server}/workflows")
    assert len(shown_ids(page)) == 3
    page.select_option("#pgbus-filter-status", "failed")
    page.click("form.pgbus-filters button[type=submit]")
    page.locator("#pgbus-runs .pgbus-chip").first.wait_for()
    # A refresh sent before the submit may still land first on a loaded
    # machine; the filtered list must be what the page settles on.
    wait_until(lambda: shown_ids(page) == [failed], timeout=15, what="the filtered list")
    polls = record_polls(page)
    page.wait_for_timeout(2_500)  # more than two refresh intervals
    assert polls, "the poller sent nothing"
    assert all("status=failed" in poll["url"] for poll in polls)
    assert polls[0]["target"] == "pgbus-workers-banner,pgbus-total,pgbus-counts,pgbus-runs"
    assert shown_ids(page) == [failed]
    assert page.locator("#pgbus-filter-status").input_value() == "failed"
    # A run made meanwhile: the head's count (the filter's, of the total)
    # follows with the counts, the filtered list stays as it is (the new
    # run is not failed).
    total = page.locator("#pgbus-total")
    assert total.inner_text() == "1 run of 3 matches the filters"
    runs.make(
        states.COMPLETED, step("send_receipt", "completed", finished_at=ago(minutes=1)), finished_at=ago(minutes=1)
    )
    page.locator("#pgbus-total", has_text="1 run of 4 matches the filters").wait_for()
    assert shown_ids(page) == [failed]
    assert page.problems == []


def test_live_refresh_keeps_an_older_page_and_reads_the_groups_seldom(small_pages_server, page, runs):
    ids = [runs.make(states.COMPLETED, created_at=ago(minutes=60 - minute)) for minute in range(7)]
    page.goto(f"{small_pages_server}/workflows")
    assert shown_ids(page) == ids[:1:-1]
    page.click('#pgbus-runs a[rel="next"]')
    page.locator(f'#pgbus-runs tr[data-workflow-id="{ids[0]}"]').wait_for()
    polls = record_polls(page)
    page.wait_for_timeout(2_500)
    assert polls and all("before=" in poll["url"] for poll in polls)
    assert shown_ids(page) == [ids[1], ids[0]]
    # Of any six polls in a row, one also asks for the needs-attention groups.
    for _ in range(20):
        if len(polls) >= 6:
            break
        page.wait_for_timeout(500)
    with_groups = [poll for poll in polls[:6] if "pgbus-attention" in poll["target"]]
    assert len(with_groups) == 1, polls
    assert shown_ids(page) == [ids[1], ids[0]]
    assert page.problems == []


def runs_registry():
    from pgbus_web.demo.workflows import REGISTRY

    return REGISTRY
