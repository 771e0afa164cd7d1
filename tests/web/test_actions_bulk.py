"""A needs-attention group's bulk buttons are operations on the group's
filter (docs/operations.md): the buttons that fit each reason, the operation's
preview (a dialog with htmx, a page without JavaScript, never the
browser's confirm()) asking the reason, every run of the group with no cap,
the reason in every run's audit trail, and every refusal with the
database exactly as before."""

from __future__ import annotations

import pytest
from support.action_support import ago, events_of, message, paused_on_capture, run_row
from support.operation_support import seed_paused
from support.runtime_support import snapshot
from support.web_helpers import soup, step, text_of

from pgbus_web.demo.workflows import REGISTRY
from pgbus_web.models import operation_rows
from pgbus_web.rules import states
from pgbus_web.runtime import operation_runner

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
        runs.make(
            states.PAUSED,
            step("send_receipt", "scheduled", scheduled_at=ago(hours=1)),
            paused_at=ago(minutes=30 - index),
        )
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
                "title": form.select_one("button").get("title"),
                "hx-confirm": form.get("hx-confirm"),
                "action": form["action"],
            }
        rows[key or row["data-reason"]] = buttons
    return rows


def recent(engine):
    with engine.connect() as conn:
        return operation_rows.recent(conn)


def finish(engine):
    runner = operation_runner.Runner(engine, REGISTRY)
    while runner.step() is not None:
        pass


def act_on_group(browser, engine, verb, group, reason, *, htmx):
    """A group's button, its preview, and the preview's form confirmed with
    *reason*; then the operation is done. The preview's dialog, and the
    answer to the confirmation."""
    asked = browser.post(f"/workflows/bulk/{verb}", group, htmx=htmx)
    assert asked.status_code == 200
    dialog = soup(asked).select_one("dialog#pgbus-operation-dialog")
    form = dialog.select_one("form.pgbus-operation-form")
    fields = {field["name"]: field.get("value", "") for field in form.select("input")}
    done = browser.post(form["action"], {**fields, "reason": reason}, htmx=htmx)
    finish(engine)
    return dialog, done


# --- the buttons --------------------------------------------------------------------


def test_each_group_offers_the_verbs_that_fit_its_reason(browser, runs):
    paused_group(runs, 3)
    manual_group(runs, 2)
    runs.make(states.READY, step("reserve_stock", "scheduled", scheduled_at=ago(hours=2)))  # overdue
    rows = group_rows(browser.load())
    error_group = rows[("OrderWorkflow", "capture_payment", "paused_error", "TimeoutError")]
    assert [button["label"] for button in error_group.values()] == ["Retry all", "Skip all", "Cancel all"]
    assert error_group["retry"]["title"] == "Retry capture_payment for all 3 runs that failed with TimeoutError?"
    # The preview asks, not the browser's confirm().
    assert all(button["hx-confirm"] is None for row in rows.values() for button in row.values())
    assert error_group["retry"]["action"] == "/workflows/bulk/retry"
    manual = rows[("OrderWorkflow", "send_receipt", "paused_manual", "")]
    assert list(manual) == ["resume", "skip", "cancel"]
    overdue = rows[("OrderWorkflow", "reserve_stock", "overdue", "")]
    assert list(overdue) == ["skip", "cancel"]


def test_a_group_whose_class_is_not_loaded_offers_only_cancel(browser, runs):
    runs.make(
        states.PAUSED,
        step("mystery", "failed", error_class="KeyError"),
        workflow_class="RetiredWorkflow",
        paused_at=ago(minutes=3),
    )
    rows = group_rows(browser.load())
    assert list(rows[("RetiredWorkflow", "mystery", "paused_error", "KeyError")]) == ["cancel"]


# --- an operation on the group's filter ------------------------------------------------


def test_bulk_retry_is_an_operation_on_every_run_of_the_group(browser, runs, engine):
    ids = paused_group(runs, 3)
    other = manual_group(runs, 1)
    dialog, done = act_on_group(browser, engine, "retry", CAPTURE_GROUP, "gateway fixed", htmx=True)
    assert dialog["data-total"] == "3"
    assert {li["data-workflow-id"] for li in dialog.select(".pgbus-operation-sample li")} == set(ids)
    [operation] = recent(engine)
    assert done.status_code == 200 and done.headers["HX-Redirect"] == f"/workflows/operations/{operation['id']}"
    assert operation["filters"] == {
        "workflow_class": "OrderWorkflow",
        "step": "capture_payment",
        "reason": "paused_error",
        "error_class": "TimeoutError",
    }
    assert (operation["status"], operation["moved"]) == ("done", 3)
    for workflow_id in ids:
        run = run_row(engine, workflow_id)
        assert (run["status"], run["current_step"]) == ("ready", "capture_payment")
        resumed = [e for e in events_of(engine, workflow_id) if e["event"] == "resumed"]
        assert [(e["actor"], e["reason"], e["details"]["operation_id"]) for e in resumed] == [
            ("dashboard:alice", "gateway fixed", operation["id"])
        ]
    assert run_row(engine, other[0])["status"] == "paused"


BULK_CASES = [
    # bulk verb, the group's runs, the group, the event each run gets, its status after
    ("retry", lambda runs: paused_group(runs, 2), CAPTURE_GROUP, "resumed", "ready"),
    (
        "resume",
        lambda runs: manual_group(runs, 2),
        {"workflow_class": "OrderWorkflow", "step_name": "send_receipt", "reason": "paused_manual", "error_class": ""},
        "resumed",
        "ready",
    ),
    ("skip", lambda runs: paused_group(runs, 2), CAPTURE_GROUP, "step_skipped", "ready"),
    ("cancel", lambda runs: paused_group(runs, 2), CAPTURE_GROUP, "cancelled", "cancelled"),
]


@pytest.mark.parametrize("verb, make, group, event, status", BULK_CASES, ids=[case[0] for case in BULK_CASES])
@pytest.mark.parametrize("htmx", [True, False], ids=["htmx", "plain"])
def test_every_bulk_verb_with_and_without_javascript(browser, runs, engine, verb, make, group, event, status, htmx):
    ids = make(runs)
    dialog, done = act_on_group(browser, engine, verb, group, "n", htmx=htmx)
    assert dialog["data-total"] == "2"
    assert done.status_code == (200 if htmx else 303)
    for workflow_id in ids:
        assert run_row(engine, workflow_id)["status"] == status
        written = [e for e in events_of(engine, workflow_id) if e["event"] == event]
        assert [(e["actor"], e["reason"]) for e in written] == [("dashboard:alice", "n")]


def test_bulk_skip_on_an_overdue_group(browser, runs, engine):
    workflow_id = runs.make(states.READY, step("reserve_stock", "scheduled", scheduled_at=ago(hours=2)))
    group = {"workflow_class": "OrderWorkflow", "step_name": "reserve_stock", "reason": "overdue", "error_class": ""}
    act_on_group(browser, engine, "skip", group, "stock is there", htmx=True)
    assert run_row(engine, workflow_id)["current_step"] == "capture_payment"


def test_no_cap_every_run_of_a_large_group(browser, runs, engine):
    seed_paused(engine, 501)  # more than the 500 a bulk request used to move
    group = {**CAPTURE_GROUP, "workflow_class": "OrderWorkflow"}
    dialog, _ = act_on_group(browser, engine, "retry", group, "gateway back", htmx=False)
    assert dialog["data-total"] == "501"
    [operation] = recent(engine)
    assert (operation["status"], operation["moved"], operation["skipped"]) == ("done", 501, 0)


@pytest.mark.parametrize("htmx", [True, False], ids=["htmx", "plain"])
def test_the_reason_is_asked_and_required(browser, runs, engine, htmx):
    paused_group(runs, 2)
    asked = browser.post("/workflows/bulk/retry", CAPTURE_GROUP, htmx=htmx)
    form = soup(asked).select_one("form.pgbus-operation-form")
    assert form.select_one("input[name=reason]").has_attr("required")
    fields = {field["name"]: field.get("value", "") for field in form.select("input")}
    before = snapshot(engine)
    refused = browser.post(form["action"], {**fields, "reason": ""}, htmx=htmx)
    assert refused.status_code == 422
    assert soup(refused).select_one("#pgbus-operation-reason")["aria-invalid"] == "true"
    assert snapshot(engine) == before and recent(engine) == []


def test_without_javascript_the_button_leads_to_the_preview_page_first(browser, runs, engine):
    ids = paused_group(runs, 3)
    before = snapshot(engine)
    response = browser.post("/workflows/bulk/retry", CAPTURE_GROUP)
    assert response.status_code == 200
    assert snapshot(engine) == before  # nothing moved yet
    page = soup(response)
    assert page.select_one("html") is not None
    assert page.select_one("dialog")["data-total"] == "3"
    assert {run_row(engine, workflow_id)["status"] for workflow_id in ids} == {"paused"}


# --- refusals ------------------------------------------------------------------------


@pytest.mark.parametrize("htmx", [True, False], ids=["htmx", "plain"])
def test_a_group_that_emptied_meanwhile_answers_so_and_nothing_moves(browser, runs, engine, htmx):
    manual_group(runs, 1)  # another group, untouched
    before = snapshot(engine)
    asked = browser.post("/workflows/bulk/retry", CAPTURE_GROUP, htmx=htmx)
    assert asked.status_code == 200
    assert soup(asked).select_one("dialog")["data-total"] == "0"
    assert soup(asked).select_one("form.pgbus-operation-form") is None  # nothing to confirm
    response = browser.post("/workflows/bulk/retry", {**CAPTURE_GROUP, "confirmed": "1", "note": "n"}, htmx=htmx)
    assert response.status_code == 422
    assert "fits none of the 0 matching runs" in text_of(soup(response))
    assert snapshot(engine) == before and recent(engine) == []


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


@pytest.mark.parametrize(
    "form, expected",
    [
        ({"step_name": "capture_payment", "reason": "paused_error"}, "workflow_class is missing"),
        ({**CAPTURE_GROUP, "reason": "bored"}, "bored is not a reason a run needs attention"),
    ],
)
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


@pytest.mark.parametrize(
    "locale, words",
    [
        ("en", ("Retry", "Resume", "Run again", "PGBUS_WEB_DEFINITIONS", "OrderWorkflow")),
        ("de", ("Wiederholen", "PGBUS_WEB_DEFINITIONS", "OrderWorkflow")),
    ],
)
def test_without_the_definitions_the_index_says_which_verbs_are_hidden_and_how_to_load_them(
    database, runs, locale, words
):
    from support.action_support import Browser, operator_app

    paused_group(runs, 2)
    unloaded = Browser(operator_app(database, registry=None).test_client())
    page = soup(unloaded.load(f"/workflows?locale={locale}"))
    note = page.select_one("#pgbus-attention .pgbus-definitions-missing")
    assert note is not None and note["data-classes"] == "OrderWorkflow"
    assert all(word in note.get_text() for word in words), note.get_text()
    # Only Cancel all is offered for the group, as the note says.
    labels = [button.get_text(strip=True) for button in page.select("#pgbus-attention .pgbus-group-action button")]
    assert labels and all(label != "Retry all" for label in labels)


def test_with_the_definitions_loaded_no_verb_is_said_to_be_hidden(browser, runs):
    # Control for the note above: the same group, its class loaded.
    paused_group(runs, 2)
    page = soup(browser.load())
    assert page.select_one("#pgbus-attention .pgbus-group-action") is not None
    assert page.select_one(".pgbus-definitions-missing") is None
