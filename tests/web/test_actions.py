"""Acting on one run from its page: every outside verb and Send signal,
posted as htmx does (the run's fragments come back and swap themselves in,
with a message) and as a plain form (redirect, flashed message), checked
against the run's rows and its audit event with actor and reason; and every
refusal (unknown run or verb, wrong status, a bad time, a bad payload),
with its status, its message, and the database exactly as before."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta, timezone

import pytest
from support.action_support import (
    Browser,
    ago,
    completed,
    events_of,
    later,
    message,
    paused_on_capture,
    ready_later,
    run_row,
    running,
    signals_of,
    steps_of,
    waiting_for_shipment,
)
from support.runtime_support import snapshot
from support.web_helpers import soup, step, text_of

from pgbus_web.core import checks as forms
from pgbus_web.rules import states

RUN_FRAGMENT_IDS = ("pgbus-run-header", "pgbus-run-steps", "pgbus-run-signals", "pgbus-run-timeline", "pgbus-run-audit")


def url(workflow_id: str, verb: str) -> str:
    return f"/workflows/{workflow_id}/{verb}"


def assert_fragments(response):
    """An htmx answer: each run fragment swaps itself in, the message goes
    into the messages area, and there is no page around them."""
    page = soup(response)
    assert page.select_one("html") is None and page.select_one("header.pgbus-topbar") is None
    for fragment in RUN_FRAGMENT_IDS:
        assert page.select_one(f"#{fragment}")["hx-swap-oob"] == "true", fragment
    assert page.select_one("#pgbus-messages")["hx-swap-oob"] == "innerHTML"


def last_event(engine, workflow_id: str) -> dict:
    return events_of(engine, workflow_id)[-1]


# --- each verb, through htmx ------------------------------------------------------


def test_resume_retries_the_failed_step_and_rerenders_the_run(browser, runs, engine):
    workflow_id = paused_on_capture(runs)
    response = browser.post(url(workflow_id, "resume"), {"reason": "gateway is back"}, htmx=True)
    assert response.status_code == 200
    assert_fragments(response)
    assert message(response) == "Resumed: capture_payment goes on."
    page = soup(response)
    assert page.select_one("#pgbus-run-header [data-status]")["data-status"] == "ready"
    assert page.select_one('#pgbus-run-audit .pgbus-event[data-event="resumed"]') is not None

    run = run_row(engine, workflow_id)
    assert (run["status"], run["current_step"], run["paused_at"]) == ("ready", "capture_payment", None)
    retry = steps_of(engine, workflow_id)[-1]
    assert (retry["step_name"], retry["attempt"], retry["status"]) == ("capture_payment", 2, "scheduled")
    resumed = [event for event in events_of(engine, workflow_id) if event["event"] == "resumed"]
    assert len(resumed) == 1
    assert resumed[0]["actor"] == "dashboard:alice"
    assert resumed[0]["reason"] == "gateway is back"
    assert resumed[0]["details"]["action"] == "retry"


def test_resume_at_reads_the_time_in_the_operators_zone(browser, runs, engine):
    workflow_id = paused_on_capture(runs)
    browser.client.set_cookie("pgbus_tz", "Europe/Oslo")
    response = browser.post(
        url(workflow_id, "resume_at"), {"at": "2030-01-31T14:05", "reason": "after the fix"}, htmx=True
    )
    assert response.status_code == 200, message(response)
    retry = steps_of(engine, workflow_id)[-1]
    # 14:05 in Oslo in winter is 13:05 UTC.
    assert retry["scheduled_at"] == datetime(2030, 1, 31, 13, 5, tzinfo=UTC)
    event = last_event(engine, workflow_id)
    assert event["event"] == "step_scheduled" or event["event"] == "resumed"
    resumed = next(e for e in events_of(engine, workflow_id) if e["event"] == "resumed")
    assert resumed["details"]["at"].startswith("2030-01-31T13:05")
    assert resumed["reason"] == "after the fix"
    assert "capture_payment" in message(response) and "2030" in message(response)


def test_resume_at_message_writes_the_time_in_the_operators_language(browser, runs, engine):
    workflow_id = paused_on_capture(runs)
    browser.client.set_cookie("pgbus_locale", "de")
    response = browser.post(url(workflow_id, "resume_at"), {"at": "2030-01-31T14:05"}, htmx=True)
    assert response.status_code == 200, message(response)
    assert "Januar 2030" in message(response)
    assert "January" not in message(response)


def test_run_now_makes_the_step_due_now(browser, runs, engine):
    workflow_id = ready_later(runs)
    before = datetime.now(UTC)
    response = browser.post(url(workflow_id, "run_now"), {"reason": "customer waiting"}, htmx=True)
    assert response.status_code == 200
    assert message(response) == "reserve_stock is due now."
    due = steps_of(engine, workflow_id)[-1]["scheduled_at"]
    assert before - timedelta(seconds=1) <= due <= datetime.now(UTC)
    event = last_event(engine, workflow_id)
    assert (event["event"], event["actor"], event["reason"]) == ("run_now", "dashboard:alice", "customer waiting")


def test_skip_a_waiting_step_goes_on_with_the_next(browser, runs, engine):
    workflow_id = waiting_for_shipment(runs)
    response = browser.post(url(workflow_id, "skip"), {"reason": "shipped by hand"}, htmx=True)
    assert response.status_code == 200
    assert message(response) == "Skipped await_shipment; next is send_receipt."
    rows = steps_of(engine, workflow_id)
    assert [(row["step_name"], row["status"]) for row in rows[-2:]] == [
        ("await_shipment", "skipped"),
        ("send_receipt", "scheduled"),
    ]
    skipped = next(e for e in events_of(engine, workflow_id) if e["event"] == "step_skipped")
    assert (skipped["actor"], skipped["reason"], skipped["step_name"]) == (
        "dashboard:alice",
        "shipped by hand",
        "await_shipment",
    )


def test_rerun_from_a_chosen_step(browser, runs, engine):
    workflow_id = completed(runs)
    response = browser.post(
        url(workflow_id, "rerun"), {"from_step": "capture_payment", "reason": "refund reversed"}, htmx=True
    )
    assert response.status_code == 200
    assert message(response) == "Running again from capture_payment."
    run = run_row(engine, workflow_id)
    assert (run["status"], run["current_step"], run["finished_at"]) == ("ready", "capture_payment", None)
    rerun = next(e for e in events_of(engine, workflow_id) if e["event"] == "rerun")
    assert rerun["details"]["from_step"] == "capture_payment"
    assert (rerun["actor"], rerun["reason"]) == ("dashboard:alice", "refund reversed")


def test_cancel_a_running_run(browser, runs, engine):
    workflow_id = running(runs)
    response = browser.post(url(workflow_id, "cancel"), {"reason": "duplicate order"}, htmx=True)
    assert response.status_code == 200
    assert message(response) == "The run is cancelled."
    assert run_row(engine, workflow_id)["status"] == "cancelled"
    assert steps_of(engine, workflow_id)[-1]["status"] == "cancelled"
    event = next(e for e in events_of(engine, workflow_id) if e["event"] == "cancelled")
    assert (event["actor"], event["reason"]) == ("dashboard:alice", "duplicate order")


def test_pause_a_ready_run(browser, runs, engine):
    workflow_id = ready_later(runs)
    response = browser.post(url(workflow_id, "pause"), {"reason": "investigating"}, htmx=True)
    assert response.status_code == 200
    run = run_row(engine, workflow_id)
    assert run["status"] == "paused" and run["paused_at"] is not None
    event = last_event(engine, workflow_id)
    assert (event["event"], event["actor"], event["reason"]) == ("paused", "dashboard:alice", "investigating")


def test_reschedule_moves_the_due_time(browser, runs, engine):
    workflow_id = ready_later(runs)
    response = browser.post(url(workflow_id, "reschedule"), {"at": "2031-06-01T08:30:00+02:00"}, htmx=True)
    assert response.status_code == 200, message(response)
    assert steps_of(engine, workflow_id)[-1]["scheduled_at"] == datetime(2031, 6, 1, 6, 30, tzinfo=UTC)
    event = last_event(engine, workflow_id)
    assert (event["event"], event["actor"], event["reason"]) == ("rescheduled", "dashboard:alice", None)


# --- without JavaScript ---------------------------------------------------------------


def test_a_plain_form_post_redirects_to_the_run_with_a_flashed_message(browser, runs, engine):
    workflow_id = paused_on_capture(runs)
    response = browser.post(url(workflow_id, "resume"), {"reason": "gateway is back"})
    assert response.status_code == 303
    assert response.headers["Location"].endswith(f"/workflows/{workflow_id}")
    assert run_row(engine, workflow_id)["status"] == "ready"
    page = browser.client.get(response.headers["Location"])
    assert message(page) == "Resumed: capture_payment goes on."
    assert soup(page).select_one("#pgbus-messages .pgbus-notice-ok") is not None
    # Shown once.
    assert message(browser.client.get(response.headers["Location"])) == ""


PLAIN_CASES = [
    # verb, the run it acts on, form, the audit event it writes, the run's status after
    ("resume", paused_on_capture, {"reason": "r"}, "resumed", "ready"),
    ("resume_at", paused_on_capture, {"at": "2030-01-31T14:05", "reason": "r"}, "resumed", "ready"),
    ("run_now", ready_later, {"reason": "r"}, "run_now", "ready"),
    ("skip", waiting_for_shipment, {"reason": "r"}, "step_skipped", "ready"),
    ("rerun", completed, {"from_step": "reserve_stock", "reason": "r"}, "rerun", "ready"),
    ("cancel", running, {"reason": "r"}, "cancelled", "cancelled"),
    ("pause", ready_later, {"reason": "r"}, "paused", "paused"),
    ("reschedule", ready_later, {"at": "2030-01-31T14:05", "reason": "r"}, "rescheduled", "ready"),
]


@pytest.mark.parametrize("verb, make, data, event, status", PLAIN_CASES, ids=[case[0] for case in PLAIN_CASES])
def test_every_verb_works_as_a_plain_form(browser, runs, engine, verb, make, data, event, status):
    workflow_id = make(runs)
    response = browser.post(url(workflow_id, verb), data)
    assert response.status_code == 303
    assert response.headers["Location"].endswith(f"/workflows/{workflow_id}")
    assert run_row(engine, workflow_id)["status"] == status
    written = [e for e in events_of(engine, workflow_id) if e["event"] == event]
    assert [(e["actor"], e["reason"]) for e in written] == [("dashboard:alice", "r")]
    assert message(browser.client.get(response.headers["Location"]))


# --- the run page's forms ------------------------------------------------------------


def forms_on(response) -> dict[str, dict]:
    page = soup(response)
    found = {}
    for details in page.select("#pgbus-run-actions details.pgbus-action"):
        form = details.select_one("form")
        found[details["data-verb"]] = {
            "summary": text_of(details.select_one("summary")),
            "action": form["action"],
            "hx-post": form.get("hx-post"),
            "confirm": form.get("hx-confirm"),
            "fields": [field["name"] for field in form.select("input, select, textarea")],
            "open": details.has_attr("open"),
        }
    return found


def test_a_paused_run_offers_its_verbs_with_the_resume_labelled_by_the_plan(browser, runs):
    workflow_id = paused_on_capture(runs)
    offered = forms_on(browser.load(f"/workflows/{workflow_id}"))
    assert list(offered) == ["resume", "resume_at", "skip", "cancel", "signal"]
    assert offered["resume"]["summary"] == "Retry capture_payment"
    assert offered["resume"]["action"] == offered["resume"]["hx-post"] == f"/workflows/{workflow_id}/resume"
    assert offered["resume_at"]["fields"] == ["csrf_token", "at", "tz", "reason"]
    assert offered["skip"]["confirm"] and "capture_payment" in offered["skip"]["confirm"]
    assert offered["cancel"]["confirm"] and offered["resume"]["confirm"] is None
    assert offered["signal"]["action"] == f"/workflows/{workflow_id}/signals"
    assert offered["signal"]["fields"] == ["csrf_token", "name", "payload", "idempotency_key"]


@pytest.mark.parametrize(
    "make, verbs",
    [
        (ready_later, ["run_now", "reschedule", "skip", "pause", "cancel", "signal"]),
        (running, ["pause", "cancel", "signal"]),
        (waiting_for_shipment, ["skip", "pause", "cancel", "signal"]),
        (completed, ["rerun"]),
    ],
)
def test_each_status_offers_what_the_runtime_allows(browser, runs, make, verbs):
    assert list(forms_on(browser.load(f"/workflows/{make(runs)}"))) == verbs


def test_the_waiting_signal_is_proposed_and_rerun_offers_the_steps(browser, runs):
    waiting = forms_on(browser.load(f"/workflows/{waiting_for_shipment(runs)}"))
    page = soup(browser.load(f"/workflows/{waiting_for_shipment(runs)}"))
    assert page.select_one('#pgbus-action-signal input[name="name"]')["value"] == "shipment_confirmed"
    assert "signal" in waiting
    done = soup(browser.load(f"/workflows/{completed(runs)}"))
    options = [option["value"] for option in done.select('#pgbus-action-rerun select[name="from_step"] option')]
    assert options == ["reserve_stock", "capture_payment", "notify_vendors", "await_shipment", "send_receipt"]


def test_without_the_definition_only_the_verbs_that_need_no_step_list(browser, runs):
    workflow_id = runs.make(
        states.PAUSED,
        step("mystery", "failed", error_class="KeyError"),
        workflow_class="RetiredWorkflow",
        paused_at=ago(minutes=1),
    )
    assert list(forms_on(browser.load(f"/workflows/{workflow_id}"))) == ["cancel", "signal"]


def test_the_time_field_proposes_a_future_minute_in_the_operators_zone(browser, runs):
    browser.client.set_cookie("pgbus_tz", "Asia/Tokyo")
    page = soup(browser.load(f"/workflows/{paused_on_capture(runs)}"))
    field = page.select_one('#pgbus-action-resume_at input[name="at"]')
    assert field["type"] == "datetime-local"
    proposed = datetime.strptime(field["value"], forms.LOCAL_FORMAT)
    tokyo_now = datetime.now(timezone(timedelta(hours=9))).replace(tzinfo=None)
    assert timedelta(minutes=58) <= proposed - tokyo_now <= timedelta(minutes=61)
    assert "Asia/Tokyo" in text_of(page.select_one("#pgbus-action-resume_at .pgbus-field-hint"))


# --- signals -----------------------------------------------------------------------


def test_send_signal_wakes_the_waiting_step(browser, runs, engine):
    workflow_id = waiting_for_shipment(runs)
    data = {"name": "shipment_confirmed", "payload": '{"tracking": "1Z999"}', "idempotency_key": "ship-1"}
    response = browser.post(f"/workflows/{workflow_id}/signals", data, htmx=True)
    assert response.status_code == 200
    assert_fragments(response)
    assert message(response) == "Signal shipment_confirmed delivered: await_shipment is due now."
    assert run_row(engine, workflow_id)["status"] == "ready"
    [signal] = signals_of(engine, workflow_id)
    assert (signal["name"], signal["payload"], signal["idempotency_key"], signal["status"]) == (
        "shipment_confirmed",
        {"tracking": "1Z999"},
        "ship-1",
        "claimed",
    )
    received = next(e for e in events_of(engine, workflow_id) if e["event"] == "signal_received")
    assert received["actor"] == "dashboard:alice"
    assert soup(response).select_one('#pgbus-run-signals .pgbus-signal[data-status="claimed"]') is not None


def test_the_same_idempotency_key_again_says_already_delivered_and_changes_nothing(browser, runs, engine):
    workflow_id = waiting_for_shipment(runs)
    data = {"name": "shipment_confirmed", "payload": "{}", "idempotency_key": "ship-1"}
    assert browser.post(f"/workflows/{workflow_id}/signals", data, htmx=True).status_code == 200
    before = snapshot(engine)
    again = browser.post(f"/workflows/{workflow_id}/signals", data, htmx=True)
    assert again.status_code == 200
    assert message(again) == "A signal with the key ship-1 was already delivered: nothing changed."
    assert snapshot(engine) == before


def test_a_signal_for_no_waiting_step_stays_pending(browser, runs, engine):
    workflow_id = ready_later(runs)
    response = browser.post(f"/workflows/{workflow_id}/signals", {"name": "profile_completed", "payload": ""})
    assert response.status_code == 303
    [signal] = signals_of(engine, workflow_id)
    assert (signal["status"], signal["payload"]) == ("pending", {})
    assert run_row(engine, workflow_id)["status"] == "ready"


@pytest.mark.parametrize(
    "payload, expected",
    [
        ('{"tracking": ', "The payload is not valid JSON: Expecting value (line 1, column 14)."),
        ("[1, 2]", 'The payload must be a JSON object, like {"tracking": "1Z999"}.'),
        ('{"x": NaN}', "The payload holds a number that cannot be stored as written: NaN."),
        ('{"x": "a\\u0000b"}', "This contains a NUL character, which cannot be stored."),
    ],
)
@pytest.mark.parametrize("htmx", [True, False], ids=["htmx", "plain"])
def test_a_bad_payload_is_shown_back_with_the_error_and_nothing_stored(browser, runs, engine, payload, expected, htmx):
    workflow_id = waiting_for_shipment(runs)
    before = snapshot(engine)
    response = browser.post(
        f"/workflows/{workflow_id}/signals", {"name": "shipment_confirmed", "payload": payload}, htmx=htmx
    )
    assert response.status_code == 422
    assert snapshot(engine) == before
    assert message(response).startswith(expected)
    page = soup(response)
    form = page.select_one("details.pgbus-action[data-verb=signal]")
    assert form.has_attr("open")
    assert form.select_one("textarea[name=payload]").get_text() == payload
    assert form.select_one("textarea[name=payload]")["aria-invalid"] == "true"
    assert text_of(form.select_one(".pgbus-field-error")).startswith(expected)
    if not htmx:
        assert page.select_one("html") is not None  # the whole page, with the status


def test_a_signal_without_a_name_is_refused(browser, runs, engine):
    workflow_id = waiting_for_shipment(runs)
    before = snapshot(engine)
    response = browser.post(f"/workflows/{workflow_id}/signals", {"name": "  ", "payload": "{}"}, htmx=True)
    assert response.status_code == 422
    assert message(response) == "A signal needs a name."
    assert snapshot(engine) == before


def test_a_payload_too_large_is_413_and_nothing_stored(browser, runs, engine):
    workflow_id = waiting_for_shipment(runs)
    before = snapshot(engine)
    payload = '{"blob": "' + "x" * forms.PAYLOAD_LIMIT + '"}'
    response = browser.post(
        f"/workflows/{workflow_id}/signals", {"name": "shipment_confirmed", "payload": payload}, htmx=True
    )
    assert response.status_code == 413
    assert message(response) == "The payload is too large: at most 64 KiB."
    assert snapshot(engine) == before


def test_a_signal_to_a_finished_run_is_refused(browser, runs, engine):
    workflow_id = completed(runs)
    before = snapshot(engine)
    response = browser.post(f"/workflows/{workflow_id}/signals", {"name": "x", "payload": "{}"}, htmx=True)
    assert response.status_code == 409
    assert message(response) == "This run is already completed; nothing changed."
    assert snapshot(engine) == before


# --- refusals ---------------------------------------------------------------------


@pytest.mark.parametrize("htmx", [True, False], ids=["htmx", "plain"])
def test_unknown_run_is_404_and_changes_nothing(browser, runs, engine, htmx):
    paused_on_capture(runs)
    before = snapshot(engine)
    response = browser.post(url("no-such-run", "resume"), htmx=htmx)
    assert response.status_code == 404
    assert "No workflow run has the id no-such-run" in response.get_data(as_text=True)
    assert snapshot(engine) == before
    signal = browser.post("/workflows/no-such-run/signals", {"name": "x"}, htmx=htmx)
    assert signal.status_code == 404


@pytest.mark.parametrize("htmx", [True, False], ids=["htmx", "plain"])
def test_unknown_verb_is_404_and_changes_nothing(browser, runs, engine, htmx):
    workflow_id = paused_on_capture(runs)
    before = snapshot(engine)
    response = browser.post(url(workflow_id, "explode"), htmx=htmx)
    assert response.status_code == 404
    assert "There is no action called explode." in response.get_data(as_text=True)
    assert snapshot(engine) == before


def test_a_verb_is_post_only(browser, runs, engine):
    # A GET acts on nothing: it leads back to the run page.
    workflow_id = paused_on_capture(runs)
    before = snapshot(engine)
    response = browser.client.get(url(workflow_id, "resume"))
    assert response.status_code == 303
    assert response.headers["Location"].endswith(f"/workflows/{workflow_id}")
    assert snapshot(engine) == before


@pytest.mark.parametrize("htmx", [True, False], ids=["htmx", "plain"])
def test_a_verb_the_status_does_not_allow_is_409_with_the_fresh_state(browser, runs, engine, htmx):
    workflow_id = running(runs)
    before = snapshot(engine)
    response = browser.post(url(workflow_id, "resume"), {"reason": "x"}, htmx=htmx)
    assert response.status_code == 409
    assert message(response) == "This run is already running; nothing changed."
    assert soup(response).select_one("#pgbus-run-header [data-status]")["data-status"] == "running"
    assert snapshot(engine) == before


def test_a_lost_race_is_409_already_with_the_fresh_state(app, runs, engine):
    workflow_id = paused_on_capture(runs)
    alice, bob = Browser(app.test_client(), "alice"), Browser(app.test_client(), "bob")
    alice.load(f"/workflows/{workflow_id}")
    bob.load(f"/workflows/{workflow_id}")
    assert alice.post(url(workflow_id, "resume"), htmx=True).status_code == 200
    after_alice = snapshot(engine)
    late = bob.post(url(workflow_id, "resume"), htmx=True)
    assert late.status_code == 409
    assert message(late) == "This run is already ready to run again; nothing changed."
    assert soup(late).select_one("#pgbus-run-header [data-status]")["data-status"] == "ready"
    assert snapshot(engine) == after_alice
    resumed = [e for e in events_of(engine, workflow_id) if e["event"] == "resumed"]
    assert [e["actor"] for e in resumed] == ["dashboard:alice"]


def test_two_operators_posting_at_the_same_moment_exactly_one_wins(app, runs, engine):
    workflow_id = paused_on_capture(runs)
    operators = [Browser(app.test_client(), name) for name in ("alice", "bob", "carol")]
    for operator in operators:
        operator.load(f"/workflows/{workflow_id}")
    start = threading.Barrier(len(operators))
    answers = {}

    def act(operator):
        start.wait()
        answers[operator.user] = operator.post(url(workflow_id, "cancel"), {"reason": operator.user}, htmx=True)

    threads = [threading.Thread(target=act, args=(operator,)) for operator in operators]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    codes = sorted(answer.status_code for answer in answers.values())
    assert codes == [200, 409, 409]
    for answer in answers.values():
        if answer.status_code == 409:
            assert message(answer) == "This run is already cancelled; nothing changed."
    cancelled = [e for e in events_of(engine, workflow_id) if e["event"] == "cancelled"]
    assert len(cancelled) == 1


@pytest.mark.parametrize(
    "value, expected",
    [
        ("2001-01-01T10:00", "2001-01-01T10:00 is not in the future; choose a later time."),
        ("next tuesday", "next tuesday is not a date and time"),
        ("", "Choose a date and a time."),
    ],
)
@pytest.mark.parametrize("htmx", [True, False], ids=["htmx", "plain"])
def test_a_past_or_malformed_time_is_422_with_the_form_shown_back(browser, runs, engine, value, expected, htmx):
    workflow_id = paused_on_capture(runs)
    before = snapshot(engine)
    response = browser.post(url(workflow_id, "resume_at"), {"at": value, "reason": "later"}, htmx=htmx)
    assert response.status_code == 422
    assert message(response).startswith(expected)
    form = soup(response).select_one("details.pgbus-action[data-verb=resume_at]")
    assert form.has_attr("open")
    assert form.select_one("input[name=at]")["value"] == value
    assert form.select_one("input[name=reason]")["value"] == "later"
    assert text_of(form.select_one(".pgbus-field-error")).startswith(expected)
    assert snapshot(engine) == before


def test_reschedule_to_the_past_is_refused(browser, runs, engine):
    workflow_id = ready_later(runs)
    before = snapshot(engine)
    response = browser.post(url(workflow_id, "reschedule"), {"at": "2001-01-01T00:00:00+00:00"}, htmx=True)
    assert response.status_code == 422
    assert snapshot(engine) == before


def test_rerun_from_a_step_the_definition_lacks_is_422(browser, runs, engine):
    workflow_id = completed(runs)
    before = snapshot(engine)
    response = browser.post(url(workflow_id, "rerun"), {"from_step": "teleport"}, htmx=True)
    assert response.status_code == 422
    assert message(response).startswith("There is no step teleport. The steps are: reserve_stock, capture_payment")
    assert snapshot(engine) == before


def test_a_reason_longer_than_the_audit_trail_keeps_is_refused(browser, runs, engine):
    workflow_id = paused_on_capture(runs)
    before = snapshot(engine)
    response = browser.post(url(workflow_id, "resume"), {"reason": "x" * 1001}, htmx=True)
    assert response.status_code == 422
    assert message(response) == "This is too long: at most 1000 characters."
    assert snapshot(engine) == before


def test_a_nul_character_is_refused_not_sent_to_postgres(browser, runs, engine):
    workflow_id = paused_on_capture(runs)
    before = snapshot(engine)
    response = browser.post(url(workflow_id, "cancel"), {"reason": "a\x00b"}, htmx=True)
    assert response.status_code == 422
    assert snapshot(engine) == before


def test_resume_of_a_run_whose_class_is_not_loaded_is_409(browser, runs, engine):
    workflow_id = runs.make(
        states.PAUSED,
        step("mystery", "failed", error_class="KeyError"),
        workflow_class="RetiredWorkflow",
        paused_at=ago(minutes=1),
    )
    before = snapshot(engine)
    response = browser.post(url(workflow_id, "resume"), htmx=True)
    assert response.status_code == 409
    assert "needs the definition of RetiredWorkflow" in message(response)
    assert snapshot(engine) == before


def test_rerun_that_would_make_a_second_ongoing_run_for_the_subject_is_409(browser, runs, engine):
    done = runs.make(
        states.COMPLETED,
        step("send_receipt", "completed", finished_at=ago(minutes=5)),
        subject=("Order", "77"),
        finished_at=ago(minutes=5),
    )
    runs.make(states.READY, step("reserve_stock", "scheduled", scheduled_at=later(hours=1)), subject=("Order", "77"))
    before = snapshot(engine)
    response = browser.post(url(done, "rerun"), htmx=True)
    assert response.status_code == 409
    assert message(response).startswith("OrderWorkflow already has an ongoing run for Order 77")
    assert snapshot(engine) == before


@pytest.mark.parametrize("path, data", [("resume", {}), ("signals", {"name": "any", "payload": "{}"})])
def test_an_htmx_action_draws_the_run_the_verb_returned_without_reading_it_again(browser, runs, engine, path, data):
    """The route reads the run once (its class, for the form), the verb
    locks it and returns it as it left it, and the answer draws that row."""
    import sqlalchemy as sa

    workflow_id = paused_on_capture(runs)
    reads = []

    def count(conn, cursor, statement, parameters, context, executemany):
        if "FROM pgbus_workflows WHERE workflow_id" in statement and "FOR UPDATE" not in statement:
            reads.append(statement)

    sa.event.listen(engine, "before_cursor_execute", count)
    try:
        response = browser.post(url(workflow_id, path), data, htmx=True)
    finally:
        sa.event.remove(engine, "before_cursor_execute", count)
    assert response.status_code == 200
    # The drawn header shows the state the verb left (control: not stale).
    assert soup(response).select_one("#pgbus-run-header [data-status]")["data-status"] in ("ready", "paused")
    # The route's own read and the verb's read-back, no third for the page.
    assert len(reads) == 2, reads
