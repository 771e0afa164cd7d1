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
from playwright.sync_api import expect
from support.action_support import operator_app
from support.browser import WAIT_MS, requires_chromium, serve
from support.web_helpers import soup, step, text_of, utcnow

from pgbus_web.models import operation_outcomes, operation_rows
from pgbus_web.rules import states


def acted_on(runs, operation_id: int, status: str, *attempts, **columns) -> str:
    """A run in *status* whose audit trail says operation *operation_id* acted on it."""
    event = {"event": "resumed", "actor": "dashboard:alice", "details": {"operation_id": operation_id}}
    return runs.make(status, *attempts, events_=[event], **columns)


def done_operation(engine) -> int:
    with engine.begin() as conn:
        created = operation_rows.insert(
            conn,
            verb="resume",
            filters={"status": "paused"},
            ceiling_id=10**6,
            params={},
            reason="gateway back",
            actor="dashboard:alice",
            total=6,
            now=utcnow(),
        )
        conn.execute(
            sa.text(
                "UPDATE pgbus_web_operations SET status = 'done', moved = 6, started_at = :now,"
                " finished_at = :now WHERE id = :id"
            ),
            {"id": created["id"], "now": utcnow()},
        )
    return created["id"]


def seeded(runs, engine) -> tuple[int, dict[str, str]]:
    operation_id = done_operation(engine)
    now = utcnow()
    made = {
        "completed": acted_on(runs, operation_id, states.COMPLETED, step("send_receipt", "completed"), finished_at=now),
        "failed": acted_on(
            runs,
            operation_id,
            states.FAILED,
            step("capture_payment", "failed", error_class="TimeoutError"),
            finished_at=now,
        ),
        "paused_error": acted_on(
            runs,
            operation_id,
            states.PAUSED,
            step("capture_payment", "failed", error_class="TimeoutError"),
            paused_at=now,
        ),
        "stalled": acted_on(
            runs,
            operation_id,
            states.PAUSED,
            step("capture_payment", "failed", error_class=states.STEP_STALLED_ERROR),
            paused_at=now,
        ),
        "running": acted_on(runs, operation_id, states.RUNNING, step("capture_payment", "in_progress")),
        "ready": acted_on(
            runs,
            operation_id,
            states.READY,
            step("capture_payment", "scheduled", scheduled_at=now + timedelta(minutes=5)),
        ),
    }
    # Control: runs the operation did not act on count nowhere.
    runs.make(states.COMPLETED, step("send_receipt", "completed"), finished_at=now)
    runs.make(
        states.PAUSED,
        step("capture_payment", "failed", error_class="TimeoutError"),
        paused_at=now,
        events_=[{"event": "paused", "actor": "x", "details": {"operation_id": operation_id + 1}}],
    )
    return operation_id, made


def links_of(page) -> dict[str, tuple[str, str]]:
    """{status or reason: (the badge's words, its href)} of the outcomes."""
    return {
        a["data-outcome-value"]: (text_of(a), a["href"]) for a in page.select(".pgbus-operation-outcomes a.pgbus-badge")
    }


def test_the_model_counts_each_status_and_stuck_reason_once(runs, engine):
    operation_id, _made = seeded(runs, engine)
    with engine.connect() as conn:
        counts = operation_outcomes.outcomes(
            conn, operation_id, threshold=timedelta(minutes=10), waiting_threshold=timedelta(hours=1), now=utcnow()
        )
    assert counts == {
        (states.COMPLETED, None): 1,
        (states.FAILED, None): 1,
        (states.PAUSED, states.PAUSED_ERROR): 1,
        (states.PAUSED, states.STALLED): 1,
        (states.RUNNING, None): 1,
        (states.READY, None): 1,
    }


def test_the_page_says_what_became_of_the_runs_each_a_link_to_exactly_them(browser, runs, engine):
    operation_id, made = seeded(runs, engine)
    page = soup(browser.load(f"/workflows/operations/{operation_id}"))
    groups = {div["data-outcome"]: div for div in page.select(".pgbus-outcomes > div")}
    assert set(groups) == {"completed", "failed", "stuck", "moving"}
    links = links_of(page)
    assert {value: words for value, (words, _href) in links.items()} == {
        "completed": "Completed 1",
        "failed": "Failed 1",
        "stalled": "Stalled 1",
        "paused_error": "Paused on an error 1",
        "running": "Running 1",
        "ready": "Ready 1",
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
            conn.execute(
                sa.text(
                    "UPDATE pgbus_workflows SET status = 'completed', finished_at = now()"
                    " WHERE workflow_id IN (:running, :ready)"
                ),
                {"running": made["running"], "ready": made["ready"]},
            )
        expect(completed).to_have_text("Completed 3", timeout=WAIT_MS)
        expect(page.locator('.pgbus-operation-outcomes a[data-outcome-value="running"]')).to_have_count(0)
        widths = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
        assert widths[0] <= widths[1], widths
    finally:
        context.close()


# --- the rule on failing again, and every door saying the same ------------------


def test_the_rule_more_than_half_of_at_least_ten_settled_runs_failing_again():
    from pgbus_web.core.operation_reads import FAILING_MIN_SETTLED, outcome_of

    assert FAILING_MIN_SETTLED == 10

    def rule(verb="resume", completed=0, failed=0, paused_error=0, stalled=0, cancelled=0, running=0):
        counts = {
            (states.COMPLETED, None): completed,
            (states.FAILED, None): failed,
            (states.PAUSED, states.PAUSED_ERROR): paused_error,
            (states.PAUSED, states.STALLED): stalled,
            (states.CANCELLED, None): cancelled,
            (states.RUNNING, None): running,
        }
        found = outcome_of(verb, {key: runs for key, runs in counts.items() if runs})
        return found.mostly_failing, found.settled, found.failing

    assert rule(completed=4, failed=6) == (True, 10, 6)
    assert rule(completed=4, failed=3, paused_error=2, stalled=1) == (True, 10, 6)  # stuck again on an error
    assert rule(completed=5, failed=5) == (False, 10, 5)  # half is not most
    assert rule(completed=0, failed=9, running=50) == (False, 9, 9)  # too few settled yet
    assert rule(completed=4, failed=6, cancelled=30) == (True, 10, 6)  # cancelled by someone: not settled
    assert rule("cancel", failed=20)[0] is False and rule("pause", paused_error=20)[0] is False


def _failing_operation(runs, engine, failed: int, completed: int) -> int:
    operation_id = done_operation(engine)
    now = utcnow()
    for _ in range(failed):
        acted_on(
            runs,
            operation_id,
            states.FAILED,
            step("capture_payment", "failed", error_class="TimeoutError"),
            finished_at=now,
        )
    for _ in range(completed):
        acted_on(runs, operation_id, states.COMPLETED, step("send_receipt", "completed"), finished_at=now)
    return operation_id


def test_the_page_the_api_and_the_command_line_say_the_same_outcome(browser, app, runs, engine):
    from click.testing import CliRunner
    from support.api_support import Api, token_for

    from pgbus_web.launch import main_group

    failing = _failing_operation(runs, engine, failed=8, completed=3)
    fine = _failing_operation(runs, engine, failed=3, completed=8)  # control
    api = Api(app.test_client(), token_for(engine, "deploy-bot", "viewer"))
    url = engine.url.render_as_string(hide_password=False)
    said = {}
    for operation_id in (failing, fine):
        page = soup(browser.load(f"/workflows/operations/{operation_id}"))
        banner = page.select_one(".pgbus-operation-failing")
        answer = api.get(f"/operations/{operation_id}")
        assert answer.status_code == 200
        outcome = answer.json_body["outcome"]
        shown = CliRunner().invoke(main_group, ["operations", "show", str(operation_id), "--database-url", url])
        assert shown.exit_code == 0, shown.output
        as_json = CliRunner().invoke(
            main_group, ["operations", "show", str(operation_id), "--json", "--database-url", url]
        )
        said[operation_id] = (banner, outcome, shown.output)
        # One core read: the JSON line is the API's outcome.
        import json

        assert json.loads(as_json.output)["outcome"] == outcome
        # The same counts on the page, in the API and the command line.
        page_counts = {
            a["data-outcome-value"]: text_of(a).rsplit(" ", 1)[1]
            for a in page.select(".pgbus-operation-outcomes a.pgbus-badge")
        }
        api_counts = {part["value"]: str(part["count"]) for group in outcome["groups"] for part in group["parts"]}
        assert page_counts == api_counts
        for value, count in api_counts.items():
            assert f"    {value}: {count}  (runs: operation={operation_id}&" in shown.output
        # Each part's query lists exactly its runs.
        for group in outcome["groups"]:
            for part in group["parts"]:
                listed = api.get(f"/runs?{part['query']}")
                assert len(listed.json_body["runs"]) == part["count"]
    banner, outcome, output = said[failing]
    assert outcome["mostly_failing"] is True and (outcome["settled"], outcome["failing_again"]) == (11, 8)
    assert banner is not None and "8" in text_of(banner) and "11" in text_of(banner)
    assert "Warning: most of the runs this operation set going fail again: 8 of the 11" in output
    banner, outcome, output = said[fine]
    assert outcome["mostly_failing"] is False and banner is None and "Warning" not in output
    # A missing operation: refused at the command line too.
    missing = CliRunner().invoke(main_group, ["operations", "show", str(fine + 100), "--database-url", url])
    assert missing.exit_code == 1 and f"no operation {fine + 100}" in missing.output
