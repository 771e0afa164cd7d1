"""Bulk actions on a needs-attention group: the buttons that fit each
reason, the confirmation (the browser's dialog with htmx, a page without
JavaScript), one transaction per run for at most BULK_LIMIT runs oldest
stuck first, the answer's counts, the refreshed group list, and every
refusal with the database exactly as before."""

from __future__ import annotations

import pytest
from action_support import ago, events_of, message, paused_on_capture, run_row
from runtime_support import snapshot
from web_helpers import soup, step, text_of

from pgbus_web import states
from pgbus_web.runtime import verbs
from pgbus_web.web import actions

CAPTURE_GROUP = {
    "workflow_class": "OrderWorkflow",
    "step_name": "capture_payment",
    "reason": "paused_error",
    "error_class": "TimeoutError",
}


def paused_group(runs, count: int) -> list[str]:
    """*count* runs paused on capture_payment, oldest stuck first."""
    return [paused_on_capture(runs, paused_at=ago(minutes=60 - index)) for index in range(count)]


def manual_group(runs, count: int) -> list[str]:
    return [
        runs.make(states.PAUSED, step("send_receipt", "scheduled", scheduled_at=ago(hours=1)),
                  paused_at=ago(minutes=30 - index))
        for index in range(count)
    ]


def group_rows(response) -> dict[tuple, dict]:
    rows = {}
    for row in soup(response).select("#pgbus-attention tr.pgbus-attention-group"):
        forms = row.select("form.pgbus-group-action")
        key = None
        buttons = {}
        for form in forms:
            fields = {field["name"]: field.get("value", "") for field in form.select("input[type=hidden]")}
            key = (fields["workflow_class"], fields["step_name"], fields["reason"], fields["error_class"])
            buttons[form["data-verb"]] = {
                "label": text_of(form.select_one("button")),
                "confirm": form.get("hx-confirm"),
                "vals": form.get("hx-vals"),
                "action": form["action"],
            }
        rows[key or row["data-reason"]] = buttons
    return rows


# --- the buttons --------------------------------------------------------------------


def test_each_group_offers_the_verbs_that_fit_its_reason(browser, runs):
    paused_group(runs, 3)
    manual_group(runs, 2)
    runs.make(states.READY, step("reserve_stock", "scheduled", scheduled_at=ago(hours=2)))  # overdue
    rows = group_rows(browser.load())
    error_group = rows[("OrderWorkflow", "capture_payment", "paused_error", "TimeoutError")]
    assert [button["label"] for button in error_group.values()] == ["Retry all", "Skip all", "Cancel all"]
    assert error_group["retry"]["confirm"] == "Retry capture_payment for all 3 runs that failed with TimeoutError?"
    assert error_group["retry"]["vals"] == '{"confirmed": "1"}'
    assert error_group["retry"]["action"] == "/workflows/bulk/retry"
    manual = rows[("OrderWorkflow", "send_receipt", "paused_manual", "")]
    assert list(manual) == ["resume", "skip", "cancel"]
    assert manual["resume"]["confirm"] == "Resume all 2 runs paused at send_receipt?"
    overdue = rows[("OrderWorkflow", "reserve_stock", "overdue", "")]
    assert list(overdue) == ["skip", "cancel"]
    assert overdue["cancel"]["confirm"] == "Cancel the 1 run stuck at reserve_stock?"


def test_a_group_whose_class_is_not_loaded_offers_only_cancel(browser, runs):
    runs.make(states.PAUSED, step("mystery", "failed", error_class="KeyError"), workflow_class="RetiredWorkflow",
              paused_at=ago(minutes=3))
    rows = group_rows(browser.load())
    assert list(rows[("RetiredWorkflow", "mystery", "paused_error", "KeyError")]) == ["cancel"]


# --- with htmx: confirmed in the browser, answered in place ----------------------------


def test_bulk_retry_moves_every_run_of_the_group_and_refreshes_the_list(browser, runs, engine):
    ids = paused_group(runs, 3)
    other = manual_group(runs, 1)
    response = browser.post("/workflows/bulk/retry", {**CAPTURE_GROUP, "confirmed": "1"}, htmx=True,
                            current_url="http://localhost/workflows")
    assert response.status_code == 200
    assert message(response) == "Moved 3 runs."
    page = soup(response)
    assert page.select_one("#pgbus-attention")["hx-swap-oob"] == "true"
    assert page.select_one("#pgbus-counts")["hx-swap-oob"] == "true"
    assert page.select_one("#pgbus-runs")["hx-swap-oob"] == "true"
    # The group is gone from the list; the untouched one is still there.
    reasons = [row["data-reason"] for row in page.select("#pgbus-attention tr.pgbus-attention-group")]
    assert reasons == ["paused_manual"]
    for workflow_id in ids:
        run = run_row(engine, workflow_id)
        assert (run["status"], run["current_step"]) == ("ready", "capture_payment")
        resumed = [e for e in events_of(engine, workflow_id) if e["event"] == "resumed"]
        assert [(e["actor"], e["details"]["action"]) for e in resumed] == [("dashboard:alice", "retry")]
    assert run_row(engine, other[0])["status"] == "paused"


BULK_CASES = [
    # bulk verb, the group's runs, the group, the event each run gets, its status after
    ("retry", lambda runs: paused_group(runs, 2), CAPTURE_GROUP, "resumed", "ready"),
    ("resume", lambda runs: manual_group(runs, 2),
     {"workflow_class": "OrderWorkflow", "step_name": "send_receipt", "reason": "paused_manual", "error_class": ""},
     "resumed", "ready"),
    ("skip", lambda runs: paused_group(runs, 2), CAPTURE_GROUP, "step_skipped", "ready"),
    ("cancel", lambda runs: paused_group(runs, 2), CAPTURE_GROUP, "cancelled", "cancelled"),
]


@pytest.mark.parametrize("verb, make, group, event, status", BULK_CASES, ids=[case[0] for case in BULK_CASES])
@pytest.mark.parametrize("htmx", [True, False], ids=["htmx", "plain"])
def test_every_bulk_verb_with_and_without_javascript(browser, runs, engine, verb, make, group, event, status, htmx):
    ids = make(runs)
    response = browser.post(f"/workflows/bulk/{verb}", {**group, "confirmed": "1", "note": "n"}, htmx=htmx)
    if htmx:
        assert response.status_code == 200
        assert message(response) == "Moved 2 runs."
    else:
        assert response.status_code == 303
        assert message(browser.client.get(response.headers["Location"])) == "Moved 2 runs."
    for workflow_id in ids:
        assert run_row(engine, workflow_id)["status"] == status
        written = [e for e in events_of(engine, workflow_id) if e["event"] == event]
        assert [(e["actor"], e["reason"]) for e in written] == [("dashboard:alice", "n")]


def test_bulk_cancel_with_a_note_in_the_audit_trail(browser, runs, engine):
    ids = manual_group(runs, 2)
    group = {"workflow_class": "OrderWorkflow", "step_name": "send_receipt", "reason": "paused_manual",
             "error_class": ""}
    response = browser.post("/workflows/bulk/cancel", {**group, "confirmed": "1", "note": "test orders"}, htmx=True)
    assert response.status_code == 200
    assert message(response) == "Moved 2 runs."
    for workflow_id in ids:
        assert run_row(engine, workflow_id)["status"] == "cancelled"
        cancelled = next(e for e in events_of(engine, workflow_id) if e["event"] == "cancelled")
        assert (cancelled["actor"], cancelled["reason"]) == ("dashboard:alice", "test orders")


def test_bulk_skip_on_an_overdue_group(browser, runs, engine):
    workflow_id = runs.make(states.READY, step("reserve_stock", "scheduled", scheduled_at=ago(hours=2)))
    group = {"workflow_class": "OrderWorkflow", "step_name": "reserve_stock", "reason": "overdue", "error_class": ""}
    response = browser.post("/workflows/bulk/skip", {**group, "confirmed": "1"}, htmx=True)
    assert response.status_code == 200
    assert run_row(engine, workflow_id)["current_step"] == "capture_payment"


def test_runs_that_moved_on_meanwhile_are_counted_and_left_alone(browser, runs, engine, monkeypatch):
    ids = paused_group(runs, 3)
    real = actions.workflows.attention_ids

    def another_operator_acts_first(conn, group, **kwargs):
        found = real(conn, group, **kwargs)
        # Between reading the group and acting on it, someone cancels one run.
        verbs.cancel(engine, found[1], actor="dashboard:bob")
        return found

    monkeypatch.setattr(actions.workflows, "attention_ids", another_operator_acts_first)
    response = browser.post("/workflows/bulk/retry", {**CAPTURE_GROUP, "confirmed": "1"}, htmx=True)
    assert response.status_code == 200
    assert message(response) == "Moved 2 runs. 1 run had already moved on and was left as it was."
    assert [run_row(engine, workflow_id)["status"] for workflow_id in ids] == ["ready", "cancelled", "ready"]
    assert not [e for e in events_of(engine, ids[1]) if e["event"] == "resumed"]


def test_at_most_the_limit_oldest_stuck_first(browser, runs, engine, monkeypatch):
    monkeypatch.setattr(actions, "BULK_LIMIT", 2)
    ids = paused_group(runs, 3)  # ids[0] stuck longest
    response = browser.post("/workflows/bulk/retry", {**CAPTURE_GROUP, "confirmed": "1"}, htmx=True)
    assert message(response) == "Moved 2 runs."
    assert [run_row(engine, workflow_id)["status"] for workflow_id in ids] == ["ready", "ready", "paused"]
    rows = group_rows(response)
    assert rows[tuple(CAPTURE_GROUP.values())]["retry"]["confirm"].startswith("Retry capture_payment for the 1 run")


def test_the_limit_is_five_hundred():
    assert actions.BULK_LIMIT == 500


def test_the_refreshed_runs_list_keeps_the_operators_filters(browser, runs):
    paused_group(runs, 1)
    kept = runs.make(states.COMPLETED, step("send_receipt", "completed", finished_at=ago(minutes=1)),
                     workflow_class="RefundWorkflow", subject=("Refund", "9"), finished_at=ago(minutes=1))
    manual_group(runs, 1)
    group = {"workflow_class": "OrderWorkflow", "step_name": "send_receipt", "reason": "paused_manual",
             "error_class": ""}
    response = browser.post("/workflows/bulk/resume", {**group, "confirmed": "1"}, htmx=True,
                            current_url="http://localhost/workflows?workflow_class=RefundWorkflow")
    shown = [row["data-workflow-id"] for row in soup(response).select("#pgbus-runs tr.pgbus-run-row")]
    assert shown == [kept]


# --- without JavaScript: a confirmation page first --------------------------------------


def test_without_javascript_the_form_leads_to_a_confirmation_page_first(browser, runs, engine):
    ids = paused_group(runs, 3)
    before = snapshot(engine)
    response = browser.post("/workflows/bulk/retry", CAPTURE_GROUP)
    assert response.status_code == 200
    assert snapshot(engine) == before  # nothing moved yet
    page = soup(response)
    assert text_of(page.select_one(".pgbus-bulk-question")) == (
        "Retry capture_payment for all 3 runs that failed with TimeoutError?"
    )
    form = page.select_one("form.pgbus-bulk-confirm-form")
    fields = {field["name"]: field.get("value", "") for field in form.select("input")}
    assert fields["confirmed"] == "1" and fields["csrf_token"]
    assert {name: fields[name] for name in CAPTURE_GROUP} == CAPTURE_GROUP
    assert text_of(form.select_one("button")) == "Retry all"

    confirmed = browser.post(form["action"], {**fields, "note": "gateway fixed"})
    assert confirmed.status_code == 303
    assert confirmed.headers["Location"].endswith("/workflows")
    assert {run_row(engine, workflow_id)["status"] for workflow_id in ids} == {"ready"}
    assert message(browser.client.get("/workflows")) == "Moved 3 runs."
    resumed = next(e for e in events_of(engine, ids[0]) if e["event"] == "resumed")
    assert resumed["reason"] == "gateway fixed"


def test_the_confirmation_page_says_when_the_group_is_over_the_limit(browser, runs, monkeypatch):
    monkeypatch.setattr(actions, "BULK_LIMIT", 2)
    paused_group(runs, 3)
    page = soup(browser.post("/workflows/bulk/retry", CAPTURE_GROUP))
    assert text_of(page.select_one(".pgbus-bulk-limit")).startswith("At most 2 runs are changed per request")


# --- refusals ------------------------------------------------------------------------


@pytest.mark.parametrize("htmx", [True, False], ids=["htmx", "plain"])
def test_a_group_that_emptied_meanwhile_answers_so_and_nothing_moves(browser, runs, engine, htmx):
    manual_group(runs, 1)  # another group, untouched
    before = snapshot(engine)
    response = browser.post("/workflows/bulk/retry", {**CAPTURE_GROUP, "confirmed": "1"}, htmx=htmx)
    assert response.status_code == 409
    assert message(response) == "No run is left in this group: they have all moved on. Nothing changed."
    assert snapshot(engine) == before
    assert soup(response).select_one("#pgbus-attention") is not None  # the list as it is now


@pytest.mark.parametrize("htmx", [True, False], ids=["htmx", "plain"])
def test_an_unknown_bulk_verb_is_404(browser, runs, engine, htmx):
    paused_group(runs, 1)
    before = snapshot(engine)
    response = browser.post("/workflows/bulk/explode", {**CAPTURE_GROUP, "confirmed": "1"}, htmx=htmx)
    assert response.status_code == 404
    assert snapshot(engine) == before


def test_a_verb_that_does_not_fit_the_group_is_422(browser, runs, engine):
    runs.make(states.READY, step("reserve_stock", "scheduled", scheduled_at=ago(hours=2)))
    before = snapshot(engine)
    group = {"workflow_class": "OrderWorkflow", "step_name": "reserve_stock", "reason": "overdue", "error_class": ""}
    response = browser.post("/workflows/bulk/resume", {**group, "confirmed": "1"}, htmx=True)
    assert response.status_code == 422
    assert message(response) == "Resume all is not offered for this group (Overdue); nothing changed."
    assert snapshot(engine) == before


@pytest.mark.parametrize("form, expected", [
    ({"step_name": "capture_payment", "reason": "paused_error"}, "workflow_class is missing"),
    ({**CAPTURE_GROUP, "reason": "bored"}, "bored is not a reason a run needs attention"),
])
def test_an_incomplete_or_wrong_group_is_422(browser, runs, engine, form, expected):
    paused_group(runs, 1)
    before = snapshot(engine)
    response = browser.post("/workflows/bulk/retry", {**form, "confirmed": "1"}, htmx=True)
    assert response.status_code == 422
    assert expected in message(response)
    assert snapshot(engine) == before


def test_bulk_is_post_only(browser):
    # A GET moves nothing: it leads back to the index.
    response = browser.client.get("/workflows/bulk/retry")
    assert response.status_code == 303
    assert response.headers["Location"].endswith("/workflows")
