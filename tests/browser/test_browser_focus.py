"""Keyboard focus in real Chromium: live refresh merges its fragments into
the page (idiomorph), so a focused link, button or summary stays focused
across polls; after an action focus moves to the message, or to the field
in error; live refresh has a remembered on/off switch; opening an action's
form moves no button; Escape closes an open form and the language menu;
the skip links lead to the main content and to the needs-attention
groups.

Skipped only when /usr/bin/chromium is missing (CI installs it)."""

from __future__ import annotations

import pytest
from support.action_support import ago, operator_app, paused_on_capture
from support.browser import WAIT_MS, requires_chromium, serve
from support.web_helpers import step

from pgbus_web.rules import states
from pgbus_web.web.routes.actions import REFRESH_SELDOM_EVERY

pytestmark = requires_chromium

# Marks the focused element itself (a property on the node, not an
# attribute the server could send back): a replaced node loses it.
MARK_FOCUSED = "document.activeElement.pgbusFocusMark = 'kept'"
FOCUS_KEPT = "document.activeElement && document.activeElement.pgbusFocusMark === 'kept'"


@pytest.fixture
def server(database):
    yield from serve(operator_app(database, actor_name=lambda request: "browser", refresh_interval=1))


@pytest.fixture
def page(chromium):
    context = chromium.new_context(locale="en-US", timezone_id="Europe/Oslo")
    page = context.new_page()
    page.set_default_timeout(WAIT_MS)
    problems: list[str] = []
    page.on("pageerror", lambda error: problems.append(str(error)))
    page.problems = problems
    try:
        yield page
    finally:
        context.close()


def polls_seen(page) -> list[str]:
    polls: list[str] = []
    page.on(
        "request",
        lambda req: (
            polls.append(req.headers.get("hx-target", "")) if req.headers.get("hx-trigger") == "pgbus-refresh" else None
        ),
    )
    return polls


def wait_for_polls(page, polls: list[str], wanted: str, count: int = 1) -> None:
    """Until *count* polls that asked for *wanted* have been answered."""
    for _ in range(40):
        if sum(wanted in target for target in polls) >= count:
            page.wait_for_timeout(400)  # its answer swapped in
            return
        page.wait_for_timeout(250)
    raise AssertionError(f"no poll for {wanted}: {polls}")


def test_focus_on_a_run_link_survives_live_refresh(server, page, runs):
    paused_on_capture(runs)
    page.goto(f"{server}/workflows")
    link = page.locator("#pgbus-runs tr.pgbus-run-row a").first
    link.focus()
    page.evaluate(MARK_FOCUSED)
    polls = polls_seen(page)
    # A new run between polls: it would come above the focused one, so it
    # waits behind the bar until the operator opens it (focus.js, 7).
    newer = runs.make(states.READY, step("reserve_stock", "scheduled", scheduled_at=ago(minutes=1)))
    page.locator("#pgbus-new-runs").wait_for(state="visible")
    wait_for_polls(page, polls, "pgbus-runs")
    assert page.evaluate(FOCUS_KEPT)
    page.locator("#pgbus-new-runs button").click()
    page.locator(f'#pgbus-runs tr[data-workflow-id="{newer}"]').wait_for()
    # Opened, the list merges in: the focused link is the same node.
    assert page.evaluate(FOCUS_KEPT)
    assert page.problems == []


def test_focus_on_a_groups_button_survives_the_groups_refresh(server, page, runs):
    runs.make(states.PAUSED, step("send_receipt", "scheduled", scheduled_at=ago(hours=1)), paused_at=ago(minutes=30))
    page.goto(f"{server}/workflows")
    button = page.locator('#pgbus-attention form[data-verb="resume"] button').first
    button.focus()
    page.evaluate(MARK_FOCUSED)
    polls = polls_seen(page)
    # The groups come every REFRESH_SELDOM_EVERY-th poll.
    page.wait_for_timeout(1000 * (REFRESH_SELDOM_EVERY + 1))
    wait_for_polls(page, polls, "pgbus-attention")
    assert page.evaluate(FOCUS_KEPT)
    assert page.problems == []


def test_focus_on_an_action_button_survives_the_run_page_refresh(server, page, runs):
    workflow_id = paused_on_capture(runs)
    page.goto(f"{server}/workflows/{workflow_id}")
    page.locator('details.pgbus-action[data-verb="resume"] summary').focus()
    page.evaluate(MARK_FOCUSED)
    polls = polls_seen(page)
    wait_for_polls(page, polls, "pgbus-run-header", count=2)
    assert page.evaluate(FOCUS_KEPT)


def wait_for_focus_on(page, element_id: str) -> None:
    # Polled from here: the page's CSP (rightly) refuses wait_for_function's eval.
    for _ in range(40):
        if page.evaluate("document.activeElement ? document.activeElement.id : ''") == element_id:
            return
        page.wait_for_timeout(100)


def active(page) -> dict:
    return page.evaluate("({id: document.activeElement.id, tag: document.activeElement.tagName})")


def test_after_an_action_focus_moves_to_the_message(server, page, runs):
    workflow_id = paused_on_capture(runs)
    page.goto(f"{server}/workflows/{workflow_id}")
    resume = page.locator('details.pgbus-action[data-verb="resume"]')
    resume.locator("summary").click()
    resume.locator('input[name="reason"]').fill("gateway is back")
    resume.locator('input[name="reason"]').press("Enter")
    page.locator("#pgbus-messages .pgbus-notice-ok").wait_for()
    wait_for_focus_on(page, "pgbus-messages")
    assert active(page)["id"] == "pgbus-messages"


def test_after_an_invalid_signal_payload_focus_moves_to_the_payload(server, page, runs):
    workflow_id = paused_on_capture(runs)
    page.goto(f"{server}/workflows/{workflow_id}")
    signal = page.locator('details.pgbus-action[data-verb="signal"]')
    signal.locator("summary").click()
    signal.locator('input[name="name"]').fill("shipment_confirmed")
    signal.locator('textarea[name="payload"]').fill("{not json")
    signal.locator('button[type="submit"]').click()
    page.locator('#pgbus-action-signal-payload[aria-invalid="true"]').wait_for()
    wait_for_focus_on(page, "pgbus-action-signal-payload")
    assert active(page)["id"] == "pgbus-action-signal-payload"


def test_live_refresh_switch_stops_polls_and_is_remembered(server, page, runs):
    paused_on_capture(runs)
    page.goto(f"{server}/workflows")
    switch = page.locator("#pgbus-live-toggle")
    assert switch.is_visible() and switch.get_attribute("aria-pressed") == "true"
    assert " ".join(switch.inner_text().split()) == "Live refresh: on"
    switch.click()
    assert switch.get_attribute("aria-pressed") == "false"
    assert " ".join(switch.inner_text().split()) == "Live refresh: off"
    polls = polls_seen(page)
    page.wait_for_timeout(2_500)
    assert polls == []
    page.reload()
    assert page.locator("#pgbus-live-toggle").get_attribute("aria-pressed") == "false"
    page.wait_for_timeout(2_000)
    assert polls == []
    # On again: the polls come back (the control case).
    page.locator("#pgbus-live-toggle").click()
    wait_for_polls(page, polls, "pgbus-runs")


def summary_places(page) -> list[list[float]]:
    """Where each action's button is on the page (not in the window: a
    click may scroll)."""
    return page.evaluate(
        "Array.from(document.querySelectorAll('details.pgbus-action > summary')).map(el => {"
        " const box = el.getBoundingClientRect();"
        " return [box.left + window.scrollX, box.top + window.scrollY, box.width, box.height]; })"
    )


def test_opening_a_form_moves_no_button(server, page, runs):
    workflow_id = paused_on_capture(runs)
    for width in (1280, 390):
        page.set_viewport_size({"width": width, "height": 900})
        page.goto(f"{server}/workflows/{workflow_id}")
        before = summary_places(page)
        assert len(before) >= 3
        page.locator('details.pgbus-action[data-verb="resume"] summary').click()
        assert summary_places(page) == before, width


def test_escape_closes_an_action_form_and_the_language_menu(server, page, runs):
    workflow_id = paused_on_capture(runs)
    page.goto(f"{server}/workflows/{workflow_id}")
    resume = page.locator('details.pgbus-action[data-verb="resume"]')
    resume.locator("summary").click()
    resume.locator('input[name="reason"]').focus()
    assert resume.get_attribute("open") is not None
    page.keyboard.press("Escape")
    assert resume.get_attribute("open") is None
    assert page.evaluate("document.activeElement.closest('details').dataset.verb") == "resume"
    menu = page.locator("details.pgbus-lang-menu")
    menu.locator("summary").click()
    assert menu.get_attribute("open") is not None
    page.keyboard.press("Escape")
    assert menu.get_attribute("open") is None


def test_the_skip_link_leads_to_the_main_content(server, page, runs):
    # On the index it comes second, after the one to the groups.
    page.goto(f"{server}/workflows")
    page.keyboard.press("Tab")
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.className") == "pgbus-skip-link"
    assert page.locator('.pgbus-skip-link[href="#pgbus-main"]').is_visible()
    page.keyboard.press("Enter")
    assert active(page)["id"] == "pgbus-main"


def test_the_timeline_key_stays_on_a_phone_screen_in_japanese(server, page, runs):
    # The key is HTML that wraps: on a 390 px phone, in Japanese, every item
    # is inside the window and no two overlap (the SVG legend ran off-screen).
    workflow_id = runs.make(
        states.PAUSED,
        step("capture_payment", "failed", attempt=1, started_at=ago(minutes=18), finished_at=ago(minutes=17)),
        step("capture_payment", "failed", attempt=2, started_at=ago(minutes=12), finished_at=ago(minutes=11)),
        paused_at=ago(minutes=11),
        events_=[{"event": "paused", "actor": "dashboard:alice", "step": 1}],
    )
    page.set_viewport_size({"width": 390, "height": 900})
    page.goto(f"{server}/workflows/{workflow_id}?locale=ja")
    boxes = page.evaluate(
        "Array.from(document.querySelectorAll('.pgbus-tl-legend-list li')).map(el => {"
        " const b = el.getBoundingClientRect(); return [b.left, b.top, b.right, b.bottom]; })"
    )
    assert len(boxes) >= 2
    assert all(0 <= left and right <= 390 for left, _, right, _ in boxes), boxes
    for index, a in enumerate(boxes):
        for b in boxes[index + 1 :]:
            assert a[2] <= b[0] or b[2] <= a[0] or a[3] <= b[1] or b[3] <= a[1], (a, b)


def test_a_focused_run_link_stays_on_its_run_when_a_new_run_comes_first(server, page, runs):
    # Rows are matched by id when the refresh merges the list: without,
    # the focused link's node stays where it is and takes the new run's
    # href, so Enter would open a run the operator never chose. The new
    # run waits behind the bar while the operator is on the list (focus.js,
    # 7); opened, it is merged in.
    for index in range(20):
        paused_on_capture(runs, created_at=ago(hours=2, minutes=index))
    page.set_viewport_size({"width": 1280, "height": 800})
    page.goto(f"{server}/workflows")
    # Far down the list, the newest runs scrolled out of sight above.
    page.locator("#pgbus-runs tr.pgbus-run-row a.pgbus-class").nth(12).focus()
    page.evaluate("document.activeElement.scrollIntoView({block: 'center'})")
    chosen = page.evaluate("document.activeElement.getAttribute('href')")
    top = page.evaluate("document.activeElement.getBoundingClientRect().top")
    polls = polls_seen(page)
    wait_for_polls(page, polls, "pgbus-runs")
    # Layout shifts as the browser reports them (the cumulative layout
    # shift), from before the poll that brings the new run.
    page.evaluate(
        "window.pgbusShift = 0; new PerformanceObserver((list) => { for (const entry of list.getEntries()) {"
        " if (!entry.hadRecentInput) window.pgbusShift += entry.value; } })"
        ".observe({type: 'layout-shift', buffered: false})"
    )
    # And the rows the merge puts into the table or takes out of it.
    page.evaluate(
        "window.pgbusRowsIn = []; window.pgbusRowsOut = []; new MutationObserver((records) => {"
        " for (const record of records) {"
        "  for (const node of record.addedNodes) { if (node.id) window.pgbusRowsIn.push(node.id); }"
        "  for (const node of record.removedNodes) { if (node.id) window.pgbusRowsOut.push(node.id); } } })"
        ".observe(document.querySelector('#pgbus-runs tbody'), {childList: true})"
    )
    newer = runs.make(states.READY, step("reserve_stock", "scheduled", scheduled_at=ago(minutes=1)))
    page.locator("#pgbus-new-runs").wait_for(state="visible")
    # Waiting, the list moves nothing, nor do the polls after it.
    wait_for_polls(page, polls, "pgbus-runs", count=sum("pgbus-runs" in target for target in polls) + 3)
    assert page.evaluate("window.pgbusRowsIn") == []
    assert page.evaluate("window.pgbusShift") == 0
    assert page.evaluate("document.activeElement.getAttribute('href')") == chosen
    assert page.evaluate("document.activeElement.getBoundingClientRect().top") == top
    page.locator("#pgbus-new-runs button").click()
    page.locator(f'#pgbus-runs tr[data-workflow-id="{newer}"]').wait_for(state="attached")
    page.wait_for_timeout(400)  # the frames after the merge drawn
    assert page.locator("#pgbus-runs tr.pgbus-run-row").first.get_attribute("data-workflow-id") == newer
    # The frame the new row comes in moves nothing on screen: 0.027 while
    # the table's frame was a scroll container (Chromium measures a shift
    # against the nearest one, and the rows below the new one moved within
    # it, though the page's scroll anchoring kept them still on screen).
    assert page.evaluate("window.pgbusShift") == 0
    # The new row is the one node put in; no other row was taken out and
    # back (12 were, while the whitespace between rows was merged too).
    row_id = page.locator(f'#pgbus-runs tr[data-workflow-id="{newer}"]').get_attribute("id")
    assert page.evaluate("window.pgbusRowsIn") == [row_id]
    assert page.evaluate("window.pgbusRowsOut") == []
    assert page.evaluate("document.activeElement.getAttribute('href')") == chosen
    # Where it was on screen (the browser's scroll anchoring, to within
    # its subpixel rounding).
    assert abs(page.evaluate("document.activeElement.getBoundingClientRect().top") - top) < 1
    # Nor do the polls after it.
    wait_for_polls(page, polls, "pgbus-runs", count=sum("pgbus-runs" in target for target in polls) + 3)
    assert page.evaluate("window.pgbusShift") == 0
    # Each row's id is its run's (or its group's), once in the page.
    ids = page.evaluate(
        "Array.from(document.querySelectorAll('#pgbus-runs "
        "tr.pgbus-run-row, #pgbus-attention tbody tr')).map((row) => row.id)"
    )
    assert all(ids) and len(set(ids)) == len(ids)
    assert page.problems == []


def test_a_groups_button_is_a_few_tabs_from_the_top(server, page, runs):
    # The index's first focusable element skips to the needs-attention
    # groups: an operator on call reaches a group's button at once.
    for index in range(3):
        paused_on_capture(runs, paused_at=ago(minutes=5 + index))
    page.goto(f"{server}/workflows")
    first = "#pgbus-attention tr.pgbus-attention-group form[data-verb] button"
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.getAttribute('href')") == "#pgbus-attention"
    page.keyboard.press("Enter")
    tabs = 1
    while not page.evaluate(f"document.activeElement === document.querySelector({first!r})"):
        assert tabs < 5, page.evaluate("document.activeElement.outerHTML.slice(0, 120)")
        page.keyboard.press("Tab")
        tabs += 1
    assert tabs <= 5
