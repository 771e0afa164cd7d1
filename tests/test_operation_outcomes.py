"""What became of the runs an operation acted on (its page): how many are
now completed, failed again or cancelled, stuck again (by reason), still
running or waiting; each count links to exactly those runs (the index's
operation filter with a status or a reason), and the page keeps counting
while they move, in a real browser too."""

from __future__ import annotations

from datetime import timedelta
from urllib.parse import parse_qs, urlsplit

import pytest
import sqlalchemy as sa
from action_support import operator_app
from browser import WAIT_MS, requires_chromium, serve
from playwright.sync_api import expect
from web_helpers import soup, step, text_of, utcnow

from pgbus_web.models import operation_outcomes
from pgbus_web.models import operations as store
from pgbus_web.rules import states


def acted_on(runs, operation_id: int, status: str, *attempts, **columns) -> str:
    """A run in *status* whose audit trail says operation *operation_id* acted on it."""
    event = {"event": "resumed", "actor": "dashboard:alice", "details": {"operation_id": operation_id}}
    return runs.make(status, *attempts, events_=[event], **columns)


def done_operation(engine) -> int:
    with engine.begin() as conn:
        created = store.insert(conn, verb="resume", filters={"status": "paused"}, ceiling_id=10**6, params={},
                               reason="gateway back", actor="dashboard:alice", total=6, now=utcnow())
        conn.execute(sa.text("UPDATE pgbus_web_operations SET status = 'done', moved = 6, started_at = :now,"
                             " finished_at = :now WHERE id = :id"), {"id": created["id"], "now": utcnow()})
    return created["id"]


def seeded(runs, engine) -> tuple[int, dict[str, str]]:
    operation_id = done_operation(engine)
    now = utcnow()
    made = {
        "completed": acted_on(runs, operation_id, states.COMPLETED, step("send_receipt", "completed"),
                              finished_at=now),
        "failed": acted_on(runs, operation_id, states.FAILED,
                           step("capture_payment", "failed", error_class="TimeoutError"), finished_at=now),
        "paused_error": acted_on(runs, operation_id, states.PAUSED,
                                 step("capture_payment", "failed", error_class="TimeoutError"), paused_at=now),
        "stalled": acted_on(runs, operation_id, states.PAUSED,
                            step("capture_payment", "failed", error_class=states.STEP_STALLED_ERROR),
                            paused_at=now),
        "running": acted_on(runs, operation_id, states.RUNNING, step("capture_payment", "in_progress")),
        "ready": acted_on(runs, operation_id, states.READY,
                          step("capture_payment", "scheduled", scheduled_at=now + timedelta(minutes=5))),
    }
    # Control: runs the operation did not act on count nowhere.
    runs.make(states.COMPLETED, step("send_receipt", "completed"), finished_at=now)
    runs.make(states.PAUSED, step("capture_payment", "failed", error_class="TimeoutError"), paused_at=now,
              events_=[{"event": "paused", "actor": "x", "details": {"operation_id": operation_id + 1}}])
    return operation_id, made


def links_of(page) -> dict[str, tuple[str, str]]:
    """{status or reason: (the badge's words, its href)} of the outcomes."""
    return {a["data-outcome-value"]: (text_of(a), a["href"])
            for a in page.select(".pgbus-operation-outcomes a.pgbus-badge")}


def test_the_model_counts_each_status_and_stuck_reason_once(runs, engine):
    operation_id, _made = seeded(runs, engine)
    with engine.connect() as conn:
        counts = operation_outcomes.outcomes(conn, operation_id, threshold=timedelta(minutes=10),
                                             waiting_threshold=timedelta(hours=1), now=utcnow())
    assert counts == {
        (states.COMPLETED, None): 1, (states.FAILED, None): 1, (states.PAUSED, states.PAUSED_ERROR): 1,
        (states.PAUSED, states.STALLED): 1, (states.RUNNING, None): 1, (states.READY, None): 1,
    }


def test_the_page_says_what_became_of_the_runs_each_a_link_to_exactly_them(browser, runs, engine):
    operation_id, made = seeded(runs, engine)
    page = soup(browser.load(f"/workflows/operations/{operation_id}"))
    groups = {div["data-outcome"]: div for div in page.select(".pgbus-outcomes > div")}
    assert set(groups) == {"completed", "failed", "stuck", "moving"}
    links = links_of(page)
    assert {value: words for value, (words, _href) in links.items()} == {
        "completed": "Completed 1", "failed": "Failed 1", "stalled": "Stalled 1",
        "paused_error": "Paused on an error 1", "running": "Running 1", "ready": "Ready 1",
    }
    for value, (_words, href) in links.items():
        query = parse_qs(urlsplit(href).query)
        assert query["operation"] == [str(operation_id)], href
        listed = soup(browser.client.get(href))
        assert [row["data-workflow-id"] for row in listed.select("tr.pgbus-run-row")] == [made[value]], value
    # Still moving: the page goes on polling after the operation is done.
    assert page.select_one("#pgbus-operation")["hx-trigger"] == "every 2s"


def test_with_nothing_left_moving_the_poll_stops(browser, runs, engine):
    operation_id = done_operation(engine)
    acted_on(runs, operation_id, states.COMPLETED, step("send_receipt", "completed"), finished_at=utcnow())
    url = f"/workflows/operations/{operation_id}"
    assert not soup(browser.load(url)).select_one("#pgbus-operation").has_attr("hx-trigger")
    fragment = browser.client.get(url, headers={"HX-Request": "true", "HX-Target": "pgbus-operation"})
    # 286: htmx's word for "stop polling".
    assert fragment.status_code == 286


@pytest.fixture
def server(database):
    yield from serve(operator_app(database, actor_name=lambda request: "browser"))


@requires_chromium
def test_the_counts_move_live_in_the_browser(chromium, server, runs, engine):
    operation_id, made = seeded(runs, engine)
    context = chromium.new_context(viewport={"width": 390, "height": 844})
    page = context.new_page()
    page.set_default_timeout(WAIT_MS)
    try:
        page.goto(f"{server}/workflows/operations/{operation_id}")
        completed = page.locator('.pgbus-operation-outcomes a[data-outcome-value="completed"]')
        expect(completed).to_have_text("Completed 1")
        with engine.begin() as conn:
            conn.execute(sa.text("UPDATE pgbus_workflows SET status = 'completed', finished_at = now()"
                                 " WHERE workflow_id IN (:running, :ready)"),
                         {"running": made["running"], "ready": made["ready"]})
        expect(completed).to_have_text("Completed 3", timeout=WAIT_MS)
        expect(page.locator('.pgbus-operation-outcomes a[data-outcome-value="running"]')).to_have_count(0)
        widths = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
        assert widths[0] <= widths[1], widths
    finally:
        context.close()
