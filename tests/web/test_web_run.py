"""The run page: header (badge, sentence, subject, arguments, moments,
definition drift), steps with every attempt, signals and who claimed them,
the audit trail as sentences, the timeline, the 404 and the HTMX blocks."""

from __future__ import annotations

from datetime import timedelta

import pytest
from support.web_helpers import every_state, make_app, soup, step, text_of, utcnow

from pgbus_web.rules import states

STATE_BADGES = {
    "ready_due_later": "ready",
    "ready_queued": "ready",
    "overdue": "overdue",
    "running": "running",
    "waiting_signal": "waiting",
    "waiting_overdue": "overdue",
    "waiting_batch": "waiting",
    "paused_error": "paused",
    "stalled": "stalled",
    "paused_manual": "paused",
    "completed": "completed",
    "failed": "failed",
    "cancelled": "cancelled",
    "no_steps": "ready",
}


def test_every_state_renders(client, runs):
    made = every_state(runs)
    assert set(made) == set(STATE_BADGES)
    for name, workflow_id in made.items():
        response = client.get(f"/workflows/{workflow_id}")
        assert response.status_code == 200, name
        page = soup(response)
        header = page.select_one("#pgbus-run-header")
        assert header.select_one(".pgbus-badge")["data-status"] == STATE_BADGES[name], name
        assert text_of(header.select_one(".pgbus-next-sentence")), name
        body = response.get_data(as_text=True)
        assert "pgbus.workflows." not in body and "pgbus.web." not in body, name


def test_unknown_run_is_a_404_that_says_so(client):
    response = client.get("/workflows/no-such-run")
    assert response.status_code == 404
    page = soup(response)
    assert text_of(page.select_one("h1")) == "Run not found"
    assert "no-such-run" in text_of(page.select_one(".pgbus-error-message"))


def test_header_shows_class_subject_arguments_and_moments(database, runs):
    workflow_id = runs.make(
        states.PAUSED,
        step("capture_payment", "failed", error_class="TimeoutError", error_message="late"),
        subject=("Order", "1042"),
        arguments={"order_id": 1042, "amount_cents": 4599, "tags": ["a", "b"]},
        paused_at=utcnow() - timedelta(minutes=5),
        idempotency_key="order-1042",
    )
    app = make_app(database, subject_url=lambda type_, id_: f"/admin/{type_.lower()}s/{id_}")
    page = soup(app.test_client().get(f"/workflows/{workflow_id}"))
    header = page.select_one("#pgbus-run-header")
    assert text_of(header.select_one("h1")) == "OrderWorkflow"
    assert workflow_id in text_of(header.select_one(".pgbus-run-id"))
    assert header.select_one("a.pgbus-subject")["href"] == "/admin/orders/1042"
    sentence = header.select_one(".pgbus-next-sentence")
    assert "TimeoutError" in text_of(sentence) and sentence.select_one("code").get_text() == "capture_payment"
    arguments = {
        text_of(row.select_one("th")): text_of(row.select_one("td")) for row in header.select(".pgbus-arguments tr")
    }
    assert arguments == {"amount_cents": "4599", "order_id": "1042", "tags": '["a","b"]'}
    assert "order-1042" in text_of(header)
    times = header.select(".pgbus-facts time[datetime]")
    assert len(times) >= 4 and all(tag.get("title") for tag in times)


def test_subject_url_that_raises_shows_plain_text(database, runs, caplog):
    workflow_id = runs.make(states.COMPLETED, subject=("Order", "9"))

    def broken(type_, id_):
        raise RuntimeError("no route")

    page = soup(make_app(database, subject_url=broken).test_client().get(f"/workflows/{workflow_id}"))
    subject = page.select_one("#pgbus-run-header .pgbus-subject")
    assert subject.name == "span" and text_of(subject) == "Order 9"


def test_definition_changed_since_the_run_started(client, runs):
    current = runs.make(states.COMPLETED)
    drifted = runs.make(states.COMPLETED, definition_digest="0000000000000000")
    assert soup(client.get(f"/workflows/{current}")).select_one(".pgbus-definition-changed") is None
    notice = soup(client.get(f"/workflows/{drifted}")).select_one(".pgbus-definition-changed")
    assert "Definition changed since this run started" in text_of(notice)


def test_class_not_loaded_here(database, runs):
    workflow_id = runs.make(states.COMPLETED, workflow_class="LegacyWorkflow", definition_digest="abc")
    page = soup(make_app(database, registry=None).test_client().get(f"/workflows/{workflow_id}"))
    assert page.select_one(".pgbus-class-not-loaded") is not None
    assert page.select_one(".pgbus-definition-changed") is None


def test_steps_with_every_attempt_errors_and_backtrace(client, runs):
    now = utcnow()
    workflow_id = runs.make(
        states.PAUSED,
        step(
            "reserve_stock",
            "completed",
            started_at=now - timedelta(minutes=10),
            finished_at=now - timedelta(minutes=10) + timedelta(seconds=2),
            result={"reserved": True},
        ),
        step(
            "capture_payment",
            "failed",
            attempt=1,
            error_class="TimeoutError",
            error_message="first <b>try</b>",
            started_at=now - timedelta(minutes=9),
            finished_at=now - timedelta(minutes=9) + timedelta(seconds=5),
            error_backtrace='File "shop.py", line 3, in capture\n  raise TimeoutError',
        ),
        step(
            "capture_payment",
            "failed",
            attempt=2,
            error_class="TimeoutError",
            error_message="second try",
            started_at=now - timedelta(minutes=5),
            finished_at=now - timedelta(minutes=5) + timedelta(seconds=5),
        ),
        paused_at=now - timedelta(minutes=5),
    )
    page = soup(client.get(f"/workflows/{workflow_id}"))
    groups = page.select("#pgbus-run-steps li.pgbus-step")
    assert [group["data-step"] for group in groups] == [
        "reserve_stock",
        "capture_payment",
        "notify_vendors",
        "await_shipment",
        "send_receipt",
    ]
    capture = groups[1]
    assert "pgbus-step-current" in capture["class"]
    attempts = capture.select("li.pgbus-attempt")
    # Newest attempt first.
    assert [text_of(a.select_one("strong")) for a in attempts] == ["Attempt #2", "Attempt #1"]
    assert [a["data-status"] for a in attempts] == ["failed", "failed"]
    first = attempts[1]
    assert text_of(first.select_one(".pgbus-error-class")) == "TimeoutError"
    # Error text is escaped, never markup.
    assert first.select_one(".pgbus-error-message b") is None
    assert text_of(first.select_one(".pgbus-error-message")) == "first <b>try</b>"
    backtrace = first.select_one("details.pgbus-backtrace")
    assert backtrace is not None and "raise TimeoutError" in backtrace.select_one("pre").get_text()
    assert "ran for 5s" in text_of(first)
    assert attempts[0].select_one("details.pgbus-backtrace") is None
    assert "pgbus-step-pending" in groups[2]["class"] and "not reached yet" in text_of(groups[2])
    assert '{"reserved":true}' in text_of(groups[0].select_one("details.pgbus-result"))


def test_step_no_longer_in_the_definition(client, runs):
    workflow_id = runs.make(states.COMPLETED, step("legacy_step", "completed"))
    page = soup(client.get(f"/workflows/{workflow_id}"))
    legacy = page.select_one('#pgbus-run-steps li[data-step="legacy_step"]')
    assert "no longer in the definition" in text_of(legacy)


def test_signals_with_payload_and_claiming_step(client, runs):
    workflow_id = runs.make(
        states.READY,
        step("await_shipment", "completed", wait_for="shipment_confirmed"),
        step("send_receipt", "scheduled"),
        signals_=[
            {
                "name": "shipment_confirmed",
                "payload": {"carrier": "DHL", "parcels": [1, 2]},
                "idempotency_key": "ship-1",
                "claimed_by": 0,
            },
            {"name": "note", "payload": {"text": "<script>x</script>"}},
        ],
    )
    page = soup(client.get(f"/workflows/{workflow_id}"))
    signals = page.select("#pgbus-run-signals li.pgbus-signal")
    assert [s["data-status"] for s in signals] == ["claimed", "pending"]
    claimed = signals[0]
    assert claimed.select_one(".pgbus-badge")["data-status"] == "claimed"
    assert text_of(claimed.select_one(".pgbus-signal-payload")) == '{"carrier":"DHL","parcels":[1,2]}'
    claimer = claimed.select_one(".pgbus-signal-claimer")
    assert claimer.select_one("code").get_text() == "await_shipment" and "#1" in text_of(claimer)
    assert "ship-1" in text_of(claimed)
    assert page.select_one("#pgbus-run-signals script") is None
    assert "<script>x</script>" in text_of(signals[1].select_one(".pgbus-signal-payload"))


def test_audit_trail_as_sentences_newest_first(client, runs):
    workflow_id = runs.make(
        states.READY,
        step("capture_payment", "failed", attempt=2, error_class="TimeoutError"),
        step("capture_payment", "scheduled", attempt=3),
        events_=[
            {"event": "step_failed", "actor": "system", "step": 0},
            {"event": "paused", "actor": "system"},
            {"event": "resumed", "actor": "dashboard:alice", "reason": "SMTP fixed", "details": {"action": "retry"}},
        ],
    )
    page = soup(client.get(f"/workflows/{workflow_id}"))
    events = page.select("#pgbus-run-audit li.pgbus-event")
    assert [e["data-event"] for e in events] == ["resumed", "paused", "step_failed"]
    # A resume that tried the failed step again is reported as offered: Retry.
    assert text_of(events[0].select_one(".pgbus-event-sentence")) == "Retried by dashboard:alice: SMTP fixed"
    assert text_of(events[2].select_one(".pgbus-event-sentence")) == "Step failed by system (capture_payment #2)"
    details = events[0].select(".pgbus-audit-details dt, .pgbus-audit-details dd")
    # The key in the operator's words, the stored key beside it.
    assert [text_of(node) for node in details] == ["Action", "retry"]
    assert events[0].select_one(".pgbus-audit-details dt")["data-key"] == "action"
    assert all(e.select_one("time[datetime]") for e in events)


def test_event_details_as_a_key_value_list(client, runs):
    workflow_id = runs.make(
        states.WAITING,
        step("notify_vendors", "waiting"),
        events_=[
            {
                "event": "fan_out_opened",
                "actor": "system",
                "step": 0,
                "details": {"batch_id": "b-1", "total_jobs": 12, "flags": {"fast": True}, "done": False},
            }
        ],
    )
    page = soup(client.get(f"/workflows/{workflow_id}"))
    details = page.select_one('#pgbus-run-audit li[data-event="fan_out_opened"] dl.pgbus-audit-details')
    pairs = {text_of(row.select_one("dt")): text_of(row.select_one("dd")) for row in details.select("div")}
    # Known keys in words; one this version does not know, as stored.
    assert pairs == {"Batch": "b-1", "Jobs in all": "12", "flags": '{"fast":true}', "done": "false"}


def test_timeline_is_an_inline_svg(client, runs):
    made = every_state(runs)
    page = soup(client.get(f"/workflows/{made['paused_error']}"))
    svg = page.select_one("#pgbus-run-timeline svg")
    assert svg is not None and svg.get("style") is None
    empty = soup(client.get(f"/workflows/{made['no_steps']}"))
    assert empty.select_one("#pgbus-run-timeline svg") is None


@pytest.mark.parametrize(
    "target", ["pgbus-run-header", "pgbus-run-steps", "pgbus-run-signals", "pgbus-run-timeline", "pgbus-run-audit"]
)
def test_htmx_fragments_are_the_page_blocks(client, runs, target):
    made = every_state(runs)
    path = f"/workflows/{made['paused_error']}"
    fragment = soup(client.get(path, headers={"HX-Request": "true", "HX-Target": target}))
    assert fragment.select_one("html") is None
    assert [section["id"] for section in fragment.select("section")] == [target]
    whole = soup(client.get(path)).select_one(f"#{target}")
    # Same markup as in the page (times aside, rendered a moment apart).
    for tag in fragment.select("time") + whole.select("time"):
        tag.decompose()
    assert text_of(fragment.select_one(f"#{target}")) == text_of(whole)


def test_blocks_render_out_of_band_for_one_answer(app, runs):
    from pgbus_web.core import page_reads
    from pgbus_web.plumbing.state import state
    from pgbus_web.web.answering import pages, render

    made = every_state(runs)
    with app.test_request_context(f"/workflows/{made['paused_error']}"):
        app.preprocess_request()
        with state().database.read() as conn:
            page = page_reads.run_context(conn, state().settings, made["paused_error"])
        page.update(settings=state().settings, can_act=True)
        html = render.fragments(pages.RUN.template, ["run_header", "run_steps", "run_audit"], page)
    sections = soup_from(html).select("section")
    assert [s["id"] for s in sections] == ["pgbus-run-header", "pgbus-run-steps", "pgbus-run-audit"]
    assert all(s["hx-swap-oob"] == "true" for s in sections)


def soup_from(html):
    from bs4 import BeautifulSoup

    return BeautifulSoup(html, "html.parser")
