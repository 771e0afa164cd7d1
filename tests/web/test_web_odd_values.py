"""Stored values the dashboard would never write, left by another writer:
timestamps at ±infinity in every moment column, arguments that are not a
JSON object, JSON Python cannot read, a value too large to print. Every
page renders them (200, never a 500), shows each as it is stored, and
marks it: the class pgbus-odd and the translated words "unusual value".
Actions on such a run answer success and are applied once, and a failure
while drawing the answer to a done action still answers success."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest
import sqlalchemy as sa
from support.action_support import (
    Browser,
    ago,
    events_of,
    later,
    message,
    operator_app,
    paused_on_capture,
    run_row,
    waiting_for_shipment,
)
from support.web_helpers import set_column, soup, step, text_of

from pgbus_web.core import policy
from pgbus_web.demo.workflows import REGISTRY
from pgbus_web.i18n import force_locale, t
from pgbus_web.models import events, steps, workflow_attention
from pgbus_web.rules import states
from pgbus_web.runtime import operation_runner

MARKER = "unusual value"


def odd_texts(page) -> list[str]:
    """The text of every marked value on a page (without the marker word)."""
    found = []
    for node in page.select(".pgbus-odd"):
        marker = node.select_one(".pgbus-odd-marker")
        assert marker is not None and text_of(marker) == t("pgbus.web.odd.marker")
        found.append(text_of(node).removesuffix(text_of(marker)).strip())
    return found


def assert_page(response, *expected: str) -> None:
    """A 200 page on which each of *expected* is shown, marked."""
    assert response.status_code == 200, response.status_code
    shown = odd_texts(soup(response))
    for value in expected:
        assert any(value in text for text in shown), (value, shown)


def test_the_marker_is_translated(browser, runs, engine):
    workflow_id = paused_on_capture(runs)
    set_column(engine, "pgbus_workflows", "paused_at", "-infinity", workflow_id)
    with force_locale("de"):
        word = t("pgbus.web.odd.marker")
    assert word != MARKER
    page = soup(browser.client.get(f"/workflows/{workflow_id}?locale=de"))
    assert [text_of(node) for node in page.select(".pgbus-odd-marker")] and all(
        text_of(node) == word for node in page.select(".pgbus-odd-marker")
    )


# --- arguments -------------------------------------------------------------------------


@pytest.mark.parametrize("stored, shown", [
    ("[1, 2]", "[1,2]"),
    ('"just text"', '"just text"'),
    ("42", "42"),
    ("null", "null"),
    ("true", "true"),
])  # fmt: skip
def test_arguments_that_are_not_an_object_are_shown_as_stored(browser, runs, engine, stored, shown):
    workflow_id = paused_on_capture(runs)
    set_column(engine, "pgbus_workflows", "arguments", stored, workflow_id)
    response = browser.client.get(f"/workflows/{workflow_id}")
    assert_page(response, shown)
    arguments = soup(response).select_one(".pgbus-arguments")
    assert odd_texts(arguments) == [shown]
    assert t("pgbus.workflows.show.no_arguments") not in text_of(arguments)


def test_an_empty_object_is_no_arguments_and_not_marked(browser, runs, engine):
    workflow_id = paused_on_capture(runs)
    response = browser.client.get(f"/workflows/{workflow_id}")
    arguments = soup(response).select_one(".pgbus-arguments")
    assert odd_texts(arguments) == []
    assert t("pgbus.workflows.show.no_arguments") in text_of(arguments)


def test_json_nested_deeper_than_python_reads_is_shown_raw(browser, runs, engine):
    workflow_id = paused_on_capture(runs)
    deep = "[" * 3000 + "]" * 3000
    set_column(engine, "pgbus_workflows", "arguments", deep, workflow_id)
    response = browser.client.get(f"/workflows/{workflow_id}")
    [shown] = odd_texts(soup(response).select_one(".pgbus-arguments"))
    assert shown.startswith("[[[[") and "]]]]" in shown


@pytest.mark.parametrize("number, marked", [
    ("1e400", False),  # jsonb stores 1 and 400 zeros: an int Python holds exactly
    ("-1e400", False),
    ("1e-400", True),  # a float would read it as 0.0
    ("1" + "0" * 5000, True),  # longer than Python converts to an int
])  # fmt: skip
def test_a_number_is_shown_as_stored_never_rounded(browser, runs, engine, number, marked):
    workflow_id = paused_on_capture(runs)
    set_column(engine, "pgbus_workflows", "arguments", f'{{"amount": {number}}}', workflow_id)
    with engine.connect() as conn:
        stored = conn.execute(
            sa.text("SELECT arguments->>'amount' FROM pgbus_workflows WHERE workflow_id = :w"), {"w": workflow_id}
        ).scalar_one()
    response = browser.client.get(f"/workflows/{workflow_id}")
    assert response.status_code == 200
    arguments = soup(response).select_one(".pgbus-arguments")
    if marked:
        # The text PostgreSQL gave (its spacing too), not "0.0" or "inf".
        [shown] = odd_texts(arguments)
        assert shown.replace(" ", "").startswith('{"amount":' + stored[:100])
    else:
        assert odd_texts(arguments) == []
        assert text_of(arguments.select_one("td")) == stored
    assert "inf" not in text_of(arguments).lower() and "0.0}" not in text_of(arguments)


def test_a_huge_value_is_cut_with_its_length_and_marked(browser, runs, engine):
    workflow_id = paused_on_capture(runs)
    set_column(engine, "pgbus_workflows", "arguments", '{"blob": "' + "x" * 200_000 + '"}', workflow_id)
    response = browser.client.get(f"/workflows/{workflow_id}")
    assert response.status_code == 200
    body = response.get_data(as_text=True)
    assert len(body) < 100_000
    [cell] = soup(response).select(".pgbus-arguments .pgbus-odd")
    assert t("pgbus.web.odd.shortened", shown="10,000", total="200,000") in text_of(cell)


@pytest.mark.parametrize("column, stored, shown", [
    ("payload", "[1, 2]", "[1,2]"),
    ("payload", '"text"', '"text"'),
])  # fmt: skip
def test_a_signal_payload_that_is_not_an_object_is_shown_as_stored(browser, runs, engine, column, stored, shown):
    workflow_id = runs.make(
        states.WAITING,
        step("await_shipment", "waiting", wait_for="shipment_confirmed", waiting_since=ago(hours=1)),
        signals_=[{"name": "other", "payload": {"a": 1}}],
    )
    set_column(engine, "pgbus_workflow_signals", column, stored, workflow_id)
    response = browser.client.get(f"/workflows/{workflow_id}")
    assert_page(response, shown)
    assert odd_texts(soup(response).select_one("#pgbus-run-signals")) == [shown]


def test_a_step_result_python_cannot_read_and_details_that_are_not_an_object_are_shown_raw(browser, runs, engine):
    workflow_id = runs.make(
        states.COMPLETED,
        step("send_receipt", "completed", started_at=ago(minutes=9), finished_at=ago(minutes=8), result={"a": 1}),
        finished_at=ago(minutes=8),
    )
    set_column(engine, "pgbus_workflow_steps", "result", '{"n": 1e-400}', workflow_id)
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                "INSERT INTO pgbus_workflow_events (workflow_id, event, actor, details, created_at) "
                "VALUES (:w, 'finished', 'someone', CAST('[1, 2]' AS jsonb), now())"
            ),
            {"w": workflow_id},
        )
    response = browser.client.get(f"/workflows/{workflow_id}")
    assert response.status_code == 200
    [result] = odd_texts(soup(response).select_one("#pgbus-run-steps"))
    assert result.startswith('{"n": 0.0000') and result.endswith("1}")
    assert odd_texts(soup(response).select_one("#pgbus-run-audit")) == ["[1,2]"]


# --- timestamps at ±infinity -------------------------------------------------------------

RUN_COLUMNS = ("paused_at", "started_at", "finished_at", "created_at", "updated_at")
STEP_COLUMNS = ("scheduled_at", "started_at", "finished_at", "waiting_since", "timeout_at", "created_at", "updated_at")
SIGNAL_COLUMNS = ("created_at", "claimed_at", "consumed_at")
# Read, but not shown on the run page (a failed attempt's deadline no
# longer matters): they must only not break it.
NOT_SHOWN = {
    ("pgbus_workflow_steps", "updated_at"),
    ("pgbus_workflow_steps", "timeout_at"),
    ("pgbus_workflow_signals", "consumed_at"),
}


def a_run_with_everything(runs) -> str:
    """A paused run with two attempts, a claimed signal and events: every
    moment column of every table the run page reads is set."""
    return runs.make(
        states.PAUSED,
        step(
            "reserve_stock",
            "completed",
            started_at=ago(minutes=30),
            finished_at=ago(minutes=29),
            scheduled_at=ago(minutes=31),
        ),
        step(
            "capture_payment",
            "failed",
            error_class="TimeoutError",
            scheduled_at=ago(minutes=10),
            wait_for="shipment_confirmed",
            started_at=ago(minutes=6),
            finished_at=ago(minutes=5),
            waiting_since=ago(minutes=8),
            timeout_at=later(hours=1),
        ),
        paused_at=ago(minutes=5),
        finished_at=ago(minutes=1),
        events_=[{"event": "step_failed", "actor": "system", "step": 1}, {"event": "paused", "actor": "system"}],
        signals_=[{"name": "shipment_confirmed", "payload": {"a": 1}, "claimed_by": 1}],
    )


def odd_moment_cases():
    for literal in ("infinity", "-infinity"):
        for column in RUN_COLUMNS:
            yield pytest.param("pgbus_workflows", column, literal, id=f"run.{column}={literal}")
        for column in STEP_COLUMNS:
            yield pytest.param("pgbus_workflow_steps", column, literal, id=f"step.{column}={literal}")
        for column in SIGNAL_COLUMNS:
            yield pytest.param("pgbus_workflow_signals", column, literal, id=f"signal.{column}={literal}")


@pytest.mark.parametrize("table, column, literal", list(odd_moment_cases()))
def test_a_moment_at_infinity_renders_every_page_marked(browser, runs, engine, table, column, literal):
    workflow_id = a_run_with_everything(runs)
    set_column(engine, table, column, literal, workflow_id)
    run_page = browser.client.get(f"/workflows/{workflow_id}")
    if (table, column) in NOT_SHOWN:
        assert run_page.status_code == 200
    else:
        assert_page(run_page, literal)
    # The timeline leaves an infinite moment out, and says so.
    if table == "pgbus_workflow_steps" and column != "timeout_at":
        note = soup(run_page).select_one(".pgbus-timeline-left-out")
        assert text_of(note) == t("pgbus.workflows.timeline.left_out")
    index = browser.client.get("/workflows")
    assert index.status_code == 200
    for target in ("pgbus-run-header", "pgbus-run-steps", "pgbus-run-signals", "pgbus-run-timeline", "pgbus-run-audit"):
        fragment = browser.client.get(f"/workflows/{workflow_id}", headers={"HX-Request": "true", "HX-Target": target})
        assert fragment.status_code == 200, target
    assert browser.client.get("/workflows/insights/OrderWorkflow").status_code == 200


@pytest.mark.parametrize("literal", ["infinity", "-infinity"])
def test_an_event_at_infinity_renders_marked(browser, runs, engine, literal):
    from pgbus_web.models import values

    workflow_id = a_run_with_everything(runs)
    with engine.begin() as conn:
        events.record(
            conn,
            workflow_id=workflow_id,
            event="resumed",
            actor="someone",
            created_at=values.Infinite.of(1 if literal == "infinity" else -1),
        )
    response = browser.client.get(f"/workflows/{workflow_id}")
    assert_page(response, literal)
    assert literal in odd_texts(soup(response).select_one("#pgbus-run-audit"))
    assert text_of(soup(response).select_one(".pgbus-timeline-left-out")) == t("pgbus.workflows.timeline.left_out")


@pytest.mark.parametrize("literal", ["infinity", "-infinity"])
def test_the_index_shows_an_infinite_moment_as_it_is(browser, runs, engine, literal):
    workflow_id = paused_on_capture(runs)
    set_column(engine, "pgbus_workflows", "paused_at", literal, workflow_id)
    set_column(engine, "pgbus_workflows", "created_at", literal, workflow_id)
    response = browser.client.get("/workflows")
    assert response.status_code == 200
    row = soup(response).select_one(f'tr[data-workflow-id="{workflow_id}"]')
    assert odd_texts(row).count(literal) == 2  # the next sentence and the age


def test_a_ready_run_due_at_infinity_is_never_overdue_and_minus_infinity_is(browser, runs, engine, app):
    from pgbus_web.models import values

    never = runs.make(states.READY, step("reserve_stock", "scheduled", scheduled_at=ago(hours=5)))
    always = runs.make(states.READY, step("reserve_stock", "scheduled", scheduled_at=ago(hours=5)))
    set_column(engine, "pgbus_workflow_steps", "scheduled_at", "infinity", never)
    set_column(engine, "pgbus_workflow_steps", "scheduled_at", "-infinity", always)
    settings = policy.current(engine)
    with engine.connect() as conn:
        counts = workflow_attention.stuck_reason_counts(conn, threshold=settings.stall_threshold)
        groups = workflow_attention.attention_groups(conn, threshold=settings.stall_threshold)
        ids = workflow_attention.attention_ids(
            conn,
            {"workflow_class": "OrderWorkflow", "step_name": "reserve_stock", "reason": states.OVERDUE},
            threshold=settings.stall_threshold,
        )
    assert counts == {("OrderWorkflow", states.OVERDUE): 1}
    assert ids == [always]
    [group] = groups
    assert group["first_seen_at"] == values.MINUS_INFINITY
    page = soup(browser.client.get("/workflows?reason=overdue"))
    assert [row["data-workflow-id"] for row in page.select("tr.pgbus-run-row")] == [always]
    index = soup(browser.client.get("/workflows"))
    assert index.select_one(f'tr[data-workflow-id="{never}"]')["data-badge"] == states.READY
    assert index.select_one(f'tr[data-workflow-id="{always}"]')["data-badge"] == "overdue"
    assert "-infinity" in odd_texts(index.select_one("#pgbus-attention"))


def test_insights_leave_out_an_attempt_with_an_infinite_run_time(browser, runs, engine):
    finite = runs.make(
        states.COMPLETED,
        step("send_receipt", "completed", started_at=ago(minutes=9), finished_at=ago(minutes=8)),
        finished_at=ago(minutes=8),
    )
    odd = runs.make(
        states.COMPLETED,
        step("send_receipt", "completed", started_at=ago(minutes=9), finished_at=ago(minutes=8)),
        finished_at=ago(minutes=8),
    )
    set_column(engine, "pgbus_workflow_steps", "finished_at", "infinity", odd)
    response = browser.client.get("/workflows/insights/OrderWorkflow")
    assert response.status_code == 200
    row = soup(response).select_one('tr[data-step="send_receipt"]')
    assert text_of(row.select_one("td")) == "1"  # one attempt with a run time: the finite one
    assert text_of(row.select_one(".pgbus-median")) == "1m"
    assert finite


# --- the worker and its sweep ---------------------------------------------------------------


def test_the_worker_takes_a_step_due_at_minus_infinity_and_leaves_one_due_at_infinity(runs, engine):
    from pgbus_web.demo.workflows import REGISTRY
    from pgbus_web.models import values
    from pgbus_web.runtime import system
    from pgbus_web.runtime.clock import utcnow

    never = runs.make(
        states.READY, step("reserve_stock", "scheduled", scheduled_at=ago(minutes=1)), arguments={"order_id": 1}
    )
    always = runs.make(
        states.READY, step("reserve_stock", "scheduled", scheduled_at=ago(minutes=1)), arguments={"order_id": 2}
    )
    set_column(engine, "pgbus_workflow_steps", "scheduled_at", "infinity", never)
    set_column(engine, "pgbus_workflow_steps", "scheduled_at", "-infinity", always)
    with engine.begin() as conn:
        due = steps.claim_due(conn, now=utcnow() + timedelta(days=365 * 100), classes=REGISTRY.names, limit=10)
    assert [row["workflow_id"] for row in due] == [always]
    taken = system.take_step(engine, REGISTRY, now=utcnow())
    assert taken is not None and taken.run["workflow_id"] == always
    assert taken.step["scheduled_at"] == values.MINUS_INFINITY
    assert system.finish_step(engine, taken, system.execute(taken, now=utcnow()), now=utcnow()) == "completed"
    assert run_row(engine, never)["status"] == states.READY


def test_the_sweep_copes_with_infinite_deadlines_and_starts(runs, engine):
    from pgbus_web.runtime import system
    from pgbus_web.runtime.clock import utcnow

    forever = runs.make(
        states.WAITING,
        step("await_shipment", "waiting", wait_for="s", waiting_since=ago(hours=1), timeout_at=later(hours=1)),
    )
    expired = runs.make(
        states.WAITING,
        step("await_shipment", "waiting", wait_for="s", waiting_since=ago(hours=1), timeout_at=later(hours=1)),
    )
    stalled = runs.make(states.RUNNING, step("reserve_stock", "in_progress", started_at=ago(seconds=1)))
    set_column(engine, "pgbus_workflow_steps", "timeout_at", "infinity", forever)
    set_column(engine, "pgbus_workflow_steps", "timeout_at", "-infinity", expired)
    set_column(engine, "pgbus_workflow_steps", "waiting_since", "-infinity", expired)
    set_column(engine, "pgbus_workflow_steps", "started_at", "-infinity", stalled)
    result = system.sweep(engine, now=utcnow(), stall_threshold=timedelta(minutes=10))
    assert (result.timed_out, result.stalled) == (1, 1)
    assert run_row(engine, forever)["status"] == states.WAITING
    assert run_row(engine, expired)["status"] == states.PAUSED
    assert run_row(engine, stalled)["status"] == states.PAUSED


@pytest.mark.parametrize("stored", ["[1, 2]", '"text"', "null"])
def test_a_step_of_a_run_whose_arguments_are_not_an_object_fails_with_a_clear_error(runs, engine, stored):
    from pgbus_web.demo.workflows import REGISTRY
    from pgbus_web.runtime import system
    from pgbus_web.runtime.clock import utcnow

    workflow_id = runs.make(states.READY, step("reserve_stock", "scheduled", scheduled_at=ago(minutes=1)))
    set_column(engine, "pgbus_workflows", "arguments", stored, workflow_id)
    taken = system.take_step(engine, REGISTRY, now=utcnow())
    outcome = system.execute(taken, now=utcnow())
    assert not outcome.ok
    assert outcome.error_class == "TypeError"
    assert "not as a JSON object" in outcome.error_message


# --- the Locks page --------------------------------------------------------------------------


@pytest.mark.parametrize("literal, state", [("infinity", "fresh"), ("-infinity", "orphan")])
def test_a_lock_stamped_at_infinity_renders_marked(browser, engine, locks, literal, state):
    locks.acquire("odd-key")
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE pgbus_uniqueness_keys SET created_at = CAST(:v AS timestamp)"), {"v": literal})
    for url in (f"/locks?state={state}", "/locks"):
        response = browser.client.get(url)
        assert response.status_code == 200, url
        row = soup(response).select_one('tr[data-lock-key="odd-key"]')
        assert row["data-state"] == state
        assert literal in odd_texts(row)


def test_the_locks_page_after_a_lock_at_infinity(engine, locks, database):
    from support.action_support import operator_app as make

    client = make(database, page_size=1).test_client()
    locks.acquire("a-key")
    locks.acquire("b-key")
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE pgbus_uniqueness_keys SET created_at = 'infinity' WHERE lock_key = 'a-key'"))
    first = soup(client.get("/locks"))
    assert [row["data-lock-key"] for row in first.select("tr.pgbus-lock")] == ["b-key"]
    second = client.get(first.select_one("a[rel=next]")["href"])
    assert second.status_code == 200
    assert [row["data-lock-key"] for row in soup(second).select("tr.pgbus-lock")] == ["a-key"]


# --- actions on runs with odd values ----------------------------------------------------------


def odd_run(runs, engine) -> str:
    workflow_id = paused_on_capture(runs)
    set_column(engine, "pgbus_workflows", "paused_at", "-infinity", workflow_id)
    set_column(engine, "pgbus_workflows", "arguments", "[1, 2]", workflow_id)
    set_column(engine, "pgbus_workflow_steps", "finished_at", "infinity", workflow_id)
    return workflow_id


def verb_events(engine, workflow_id: str, event: str) -> int:
    return sum(1 for row in events_of(engine, workflow_id) if row["event"] == event)


@pytest.mark.parametrize("htmx", [True, False], ids=["htmx", "plain"])
@pytest.mark.parametrize("verb, data, event, status_after", [
    ("cancel", {"reason": "odd"}, "cancelled", states.CANCELLED),
    ("resume", {}, "resumed", states.READY),
    ("skip", {}, "step_skipped", states.READY),
])  # fmt: skip
def test_a_verb_on_a_run_with_odd_values_answers_success_and_is_applied_once(
    browser, runs, engine, htmx, verb, data, event, status_after
):
    workflow_id = odd_run(runs, engine)
    response = browser.post(f"/workflows/{workflow_id}/{verb}", data, htmx=htmx)
    assert response.status_code == (200 if htmx else 303)
    assert run_row(engine, workflow_id)["status"] == status_after
    assert verb_events(engine, workflow_id, event) == 1
    if htmx:
        assert "-infinity" in odd_texts(soup(response)) or "[1,2]" in odd_texts(soup(response))
    else:
        assert browser.client.get(response.headers["Location"]).status_code == 200


def test_a_signal_to_a_run_with_odd_values_answers_success(browser, runs, engine):
    workflow_id = waiting_for_shipment(runs)
    set_column(engine, "pgbus_workflow_steps", "waiting_since", "-infinity", workflow_id)
    set_column(engine, "pgbus_workflows", "arguments", '"text"', workflow_id)
    response = browser.post(f"/workflows/{workflow_id}/signals", {"name": "shipment_confirmed"}, htmx=True)
    assert response.status_code == 200
    assert verb_events(engine, workflow_id, "signal_received") == 1


@pytest.fixture
def quiet_app(database):
    # Flask's testing mode re-raises errors to the test; this app answers
    # as it does in production.
    return operator_app(database, PROPAGATE_EXCEPTIONS=False)


@pytest.fixture
def broken_answers(monkeypatch):
    from pgbus_web.web.routes import actions

    def broken(*args, **kwargs):
        raise RuntimeError("drawing failed")

    monkeypatch.setattr(actions.page_reads, "run_context", broken)
    monkeypatch.setattr(actions.page_reads, "index_context", broken)


@pytest.mark.parametrize("htmx", [True, False], ids=["htmx", "plain"])
def test_a_done_verb_whose_answer_fails_to_draw_still_answers_success(
    quiet_app, broken_answers, runs, engine, htmx, caplog
):
    workflow_id = paused_on_capture(runs)
    browser = Browser(quiet_app.test_client())
    browser.load("/locks")  # a page that draws without the broken builders
    with caplog.at_level(logging.ERROR):
        response = browser.post(f"/workflows/{workflow_id}/cancel", {"reason": "r"}, htmx=htmx)
    assert response.status_code == (200 if htmx else 303)
    assert run_row(engine, workflow_id)["status"] == states.CANCELLED
    assert verb_events(engine, workflow_id, "cancelled") == 1
    if htmx:
        assert message(response).startswith(t("pgbus.workflows.forms.done.cancel"))
        assert t("pgbus.workflows.forms.redraw_failed") in message(response)
        assert soup(response).select_one("#pgbus-messages")["hx-swap-oob"] == "innerHTML"
        assert any("drawing failed" in (record.exc_text or "") for record in caplog.records)


@pytest.mark.parametrize("htmx", [True, False], ids=["htmx", "plain"])
def test_a_done_signal_and_bulk_action_whose_answers_fail_to_draw_still_answer_success(
    quiet_app, broken_answers, runs, engine, htmx
):
    browser = Browser(quiet_app.test_client())
    browser.load("/locks")
    waiting = waiting_for_shipment(runs)
    response = browser.post(f"/workflows/{waiting}/signals", {"name": "shipment_confirmed"}, htmx=htmx)
    assert response.status_code == (200 if htmx else 303)
    assert verb_events(engine, waiting, "signal_received") == 1
    paused = paused_on_capture(runs)
    group = {
        "workflow_class": "OrderWorkflow",
        "step_name": "capture_payment",
        "reason": "paused_error",
        "error_class": "TimeoutError",
        "confirmed": "1",
        "note": "n",
    }
    # A group's button is an operation: created, then done by a runner.
    response = browser.post("/workflows/bulk/cancel", group, htmx=htmx)
    assert response.status_code == (200 if htmx else 303)
    runner = operation_runner.Runner(engine, REGISTRY)
    while runner.step() is not None:
        pass
    assert run_row(engine, paused)["status"] == states.CANCELLED
    assert verb_events(engine, paused, "cancelled") == 1


@pytest.mark.parametrize("htmx", [True, False], ids=["htmx", "plain"])
def test_a_done_lock_action_whose_answer_fails_to_draw_still_answers_success(
    database, engine, locks, monkeypatch, htmx
):
    from pgbus_web.web.answering import answers
    from pgbus_web.web.routes import locks as locks_views

    locks.acquire("k")
    app = operator_app(database, PROPAGATE_EXCEPTIONS=False)
    browser = Browser(app.test_client())
    browser.load("/locks")

    def broken(*args, **kwargs):
        raise RuntimeError("drawing failed")

    monkeypatch.setattr(locks_views, "locks_context", broken)
    monkeypatch.setattr(answers, "flash", broken)
    response = browser.post("/locks/release", {"lock_key": "k"}, htmx=htmx)
    assert response.status_code == (200 if htmx else 303)
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM pgbus_uniqueness_keys")).scalar_one() == 0
    if htmx:
        assert t("pgbus.workflows.forms.redraw_failed") in text_of(soup(response))
