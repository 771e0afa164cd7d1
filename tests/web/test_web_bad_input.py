"""Input PostgreSQL cannot store or Python cannot place on the calendar, in
every filter, path value and form field: the dashboard answers 400, 404 or
422 with its own translated page or message, never a 500, and writes
nothing. And what is left, an error nobody expected, is the dashboard's
own translated 500 page, with no traceback, and the exception logged."""

from __future__ import annotations

import logging
from datetime import UTC

import pytest
from support.action_support import (
    message,
    operator_app,
    paused_on_capture,
    ready_later,
)
from support.lock_support import QUEUE
from support.refusals import everything, page_message
from support.web_helpers import soup, text_of

from pgbus_web.i18n import force_locale, t
from pgbus_web.web.routes import views

NUL = "a\x00b"


def nul_filter(name: str) -> str:
    return t("pgbus.workflows.filters.errors.nul_character", name=name)


@pytest.fixture
def a_run(runs):
    return paused_on_capture(runs)


# --- GET: filters and path values -----------------------------------------------------


@pytest.mark.parametrize("url, status, expected", [
    *[(f"/workflows?{name}=a%00b", 400, nul_filter(name))
      for name in ("workflow_class", "subject", "step", "error_class", "from", "to")],
    ("/workflows?before=%C2%B2", 400, t("pgbus.workflows.filters.errors.cursor", name="before", value="²")),
    ("/workflows?from=0001-01-01T00:30%2B01:00", 400,
     t("pgbus.workflows.filters.errors.moment", name="from", value="0001-01-01T00:30+01:00")),
    ("/workflows?to=9999-12-31T23:59-05:00", 400,
     t("pgbus.workflows.filters.errors.moment", name="to", value="9999-12-31T23:59-05:00")),
    ("/workflows/a%00b", 404, t("pgbus.workflows.show.not_found", workflow_id="a\ufffdb")),
    ("/workflows/insights/a%00b", 404, t("pgbus.workflows.insights.not_found", workflow_class="a\ufffdb")),
    ("/workflows/insights/OrderWorkflow?since=a%00b", 400, None),
    ("/locks?queue=a%00b", 400, nul_filter("queue")),
    ("/locks?after_key=a%00b&after_at=2026-01-01T00:00:00%2B00:00", 400, nul_filter("after_key")),
    ("/locks?after_key=k&after_at=0001-01-01T00:30%2B01:00", 400,
     t("pgbus.workflows.filters.errors.cursor", name="after_at", value="0001-01-01T00:30+01:00")),
])  # fmt: skip
def test_a_value_postgresql_cannot_hold_in_a_get_is_refused_with_the_page(
    browser, engine, a_run, url, status, expected
):
    before = everything(engine)
    response = browser.client.get(url, headers={"X-User": "alice"})
    assert response.status_code == status
    assert "<html" in response.get_data(as_text=True)
    assert "\x00" not in response.get_data(as_text=True)
    if expected is not None:
        assert page_message(response) == expected
    assert everything(engine) == before


def test_the_refusal_is_in_the_operators_language(browser, a_run):
    response = browser.client.get("/workflows?subject=a%00b", headers={"Accept-Language": "de"})
    assert response.status_code == 400
    with force_locale("de"):
        assert page_message(response) == nul_filter("subject")
    assert "NUL-Zeichen" in page_message(response)


# --- POST: path values and form fields ---------------------------------------------------


def run_not_found(workflow_id: str = "a\ufffdb") -> str:
    return t("pgbus.workflows.show.not_found", workflow_id=workflow_id)


@pytest.mark.parametrize("htmx", [True, False], ids=["htmx", "plain"])
@pytest.mark.parametrize("path, data, status, expected", [
    ("/workflows/a%00b/cancel", {"reason": "r"}, 404, run_not_found()),
    ("/workflows/a%00b/resume", {}, 404, run_not_found()),
    ("/workflows/a%00b/resume_at", {"at": "2028-01-01T10:00"}, 404, run_not_found()),
    ("/workflows/a%00b/signals", {"name": "shipped"}, 404, run_not_found()),
    ("/workflows/{run}/a%00b", {}, 404, t("pgbus.workflows.forms.errors.unknown_verb", verb=NUL)),
    ("/workflows/bulk/a%00b", {}, 404, t("pgbus.workflows.forms.errors.unknown_verb", verb=NUL)),
    ("/workflows/{run}/cancel", {"reason": NUL}, 422, t("pgbus.workflows.forms.errors.nul_character")),
    ("/workflows/{run}/resume_at", {"at": "2028-01-01T10:00", "reason": NUL}, 422,
     t("pgbus.workflows.forms.errors.nul_character")),
    ("/workflows/{run}/signals", {"name": NUL}, 422, t("pgbus.workflows.forms.errors.nul_character")),
    ("/workflows/{run}/signals", {"name": "shipped", "payload": '{"a": "\\u0000"}'}, 422,
     t("pgbus.workflows.forms.errors.nul_character")),
    ("/workflows/{run}/signals", {"name": "shipped", "idempotency_key": NUL}, 422,
     t("pgbus.workflows.forms.errors.nul_character")),
    ("/workflows/bulk/resume", {"workflow_class": NUL, "step_name": "s", "reason": "failed"}, 422,
     t("pgbus.workflows.forms.errors.nul_character")),
    ("/workflows/bulk/resume", {"workflow_class": "OrderWorkflow", "step_name": "capture_payment",
                                "reason": "paused_error", "error_class": NUL}, 422,
     t("pgbus.workflows.forms.errors.nul_character")),
    ("/workflows/bulk/resume", {"workflow_class": "OrderWorkflow", "step_name": "capture_payment",
                                "reason": "paused_error", "note": NUL}, 422,
     t("pgbus.workflows.forms.errors.nul_character")),
])  # fmt: skip
def test_a_value_postgresql_cannot_hold_in_a_post_is_refused(
    browser, engine, a_run, path, data, status, expected, htmx
):
    before = everything(engine)
    response = browser.post(path.replace("{run}", a_run), data, htmx=htmx)
    assert response.status_code == status
    assert expected in page_message(response) or expected in message(response)
    assert everything(engine) == before


@pytest.mark.parametrize("path, data, expected", [
    ("/locks/release", {"lock_key": NUL}, nul_filter("lock_key")),
    ("/locks/discard", {"lock_key": NUL, "queue_name": QUEUE, "msg_id": "1"}, nul_filter("lock_key")),
    ("/locks/discard", {"lock_key": "k", "queue_name": NUL, "msg_id": "1"}, nul_filter("queue_name")),
    ("/locks/discard", {"lock_key": "k", "queue_name": QUEUE, "msg_id": "²"},
     t("pgbus.locks.errors.bad_message_id", value="²")),
    ("/locks/release?queue=a%00b", {"lock_key": NUL}, nul_filter("lock_key")),
])  # fmt: skip
def test_a_lock_form_that_postgresql_cannot_hold_is_400(browser, engine, locks, path, data, expected):
    locks.live("k")
    before = everything(engine)
    response = browser.post(path, data)
    assert response.status_code == 400
    assert page_message(response) == expected
    assert everything(engine) == before


# --- times past the calendar's edge and too far ahead ----------------------------------


@pytest.mark.parametrize("at, cookie", [
    ("9999-12-31T23:59-05:00", None),
    ("0001-01-01T00:30+01:00", None),
    ("9999-12-31T23:59", "America/New_York"),
])  # fmt: skip
@pytest.mark.parametrize("verb, make", [("resume_at", paused_on_capture), ("reschedule", ready_later)])
def test_a_time_past_the_calendars_edge_is_unreadable_not_a_500(browser, runs, engine, at, cookie, verb, make):
    workflow_id = make(runs)
    if cookie:
        browser.client.set_cookie("pgbus_tz", cookie)
    before = everything(engine)
    response = browser.post(f"/workflows/{workflow_id}/{verb}", {"at": at}, htmx=True)
    assert response.status_code == 422
    assert message(response) == t("pgbus.workflows.forms.errors.time_unreadable", value=at)
    assert everything(engine) == before


@pytest.mark.parametrize("at", ["9999-12-31T23:59", "2099-01-01T00:00+00:00"])
@pytest.mark.parametrize("htmx", [True, False], ids=["htmx", "plain"])
def test_a_time_further_ahead_than_the_horizon_is_refused(browser, runs, engine, at, htmx):
    workflow_id = paused_on_capture(runs)
    before = everything(engine)
    response = browser.post(f"/workflows/{workflow_id}/resume_at", {"at": at}, htmx=htmx)
    assert response.status_code == 422
    # The time as the page writes times (the operator's zone: UTC here),
    # not as the field sent it; the field keeps what was sent.
    from datetime import datetime

    from pgbus_web.core.words import timefmt

    sent = datetime.fromisoformat(at)
    shown = " ".join(timefmt.absolute(sent if sent.tzinfo else sent.replace(tzinfo=UTC), locale="en", tz=UTC).split())
    assert message(response).startswith(f"{shown} is too far ahead; choose a time before ")
    assert at not in message(response)
    form = soup(response).select_one("details.pgbus-action[data-verb=resume_at]")
    assert form.has_attr("open") and form.select_one("input[name=at]")["value"] == at
    assert everything(engine) == before


def test_a_time_just_inside_the_horizon_is_taken(browser, runs, engine):
    from datetime import timedelta

    from pgbus_web.core import checks
    from pgbus_web.runtime.clock import utcnow

    workflow_id = paused_on_capture(runs)
    at = (utcnow() + checks.MAX_AHEAD - timedelta(days=1)).strftime(checks.LOCAL_FORMAT)
    response = browser.post(f"/workflows/{workflow_id}/resume_at", {"at": at, "tz": "UTC"}, htmx=True)
    assert response.status_code == 200, message(response)


# --- what nobody expected ----------------------------------------------------------------


@pytest.fixture
def failing_app(database, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("secret detail of the failure")

    monkeypatch.setattr(views.page_reads, "index_context", broken)
    # Flask's testing mode re-raises errors to the test; here the app
    # answers as it does in production.
    return operator_app(database, PROPAGATE_EXCEPTIONS=False)


@pytest.mark.parametrize("locale", ["en", "ja"])
def test_an_unexpected_error_is_the_dashboards_500_page_and_is_logged(failing_app, caplog, locale):
    with caplog.at_level(logging.ERROR):
        response = failing_app.test_client().get(f"/workflows?locale={locale}")
    assert response.status_code == 500
    body = response.get_data(as_text=True)
    assert "secret detail" not in body and "Traceback" not in body
    with force_locale(locale):
        assert text_of(soup(response).select_one("h1")) == t("pgbus.web.errors.server_title")
        assert page_message(response) == t("pgbus.web.errors.server")
    assert soup(response).select_one("link[rel=stylesheet]") is not None
    assert any("secret detail of the failure" in (record.exc_text or str(record.exc_info)) for record in caplog.records)


# --- JSON PostgreSQL cannot store as typed, a NUL in a time ------------------------------


def payload_number(value: str) -> str:
    return t("pgbus.workflows.forms.errors.payload_number", value=value)


@pytest.mark.parametrize("payload, expected", [
    ('{"a": "\\ud800"}', t("pgbus.workflows.forms.errors.payload_surrogate", value="\\ud800")),
    ('{"\\udfff": 1}', t("pgbus.workflows.forms.errors.payload_surrogate", value="\\udfff")),
    ('{"a": ["x\\udbff"]}', t("pgbus.workflows.forms.errors.payload_surrogate", value="\\udbff")),
    ('{"a": 1e400}', payload_number("1e400")),
    ('{"a": -1E+400}', payload_number("-1E+400")),
    ('{"a": 1e-400}', payload_number("1e-400")),
    ('{"a": NaN}', payload_number("NaN")),
    ('{"a": Infinity}', payload_number("Infinity")),
    ('{"a": -Infinity}', payload_number("-Infinity")),
    ('{"a": 1' + "0" * 5000 + "}", payload_number("1" + "0" * 39 + "…")),
    ('{"a": ' + "[" * 600 + "]" * 600 + "}", t("pgbus.workflows.forms.errors.payload_too_deep", max=500)),
    ('{"a": ' + "[" * 5000 + "]" * 5000 + "}", t("pgbus.workflows.forms.errors.payload_too_deep", max=500)),
])  # fmt: skip
@pytest.mark.parametrize("htmx", [True, False], ids=["htmx", "plain"])
def test_a_payload_jsonb_cannot_hold_as_typed_is_422_and_stores_nothing(
    browser, engine, a_run, payload, expected, htmx
):
    before = everything(engine)
    response = browser.post(f"/workflows/{a_run}/signals", {"name": "shipped", "payload": payload}, htmx=htmx)
    assert response.status_code == 422
    assert message(response) == expected
    assert everything(engine) == before


def test_the_payload_refusal_is_in_the_operators_language(browser, engine, a_run):
    before = everything(engine)
    response = browser.post(f"/workflows/{a_run}/signals?locale=fr", {"name": "s", "payload": '{"a": 1e400}'})
    assert response.status_code == 422
    with force_locale("fr"):
        assert message(response) == payload_number("1e400")
    assert message(response) != payload_number("1e400")
    assert everything(engine) == before


@pytest.mark.parametrize(
    "payload", ['{"a": 1e300}', '{"a": 0.0}', '{"a": 0e-400}', '{"a": 1' + "0" * 300 + "}", '{"a": "\\ud83d\\ude00"}']
)
def test_numbers_and_text_jsonb_holds_are_taken(browser, engine, a_run, payload):
    # Controls: a large float, zeros, a long integer, an emoji written as a surrogate pair.
    response = browser.post(f"/workflows/{a_run}/signals", {"name": "shipped", "payload": payload}, htmx=True)
    assert response.status_code == 200, message(response)


@pytest.mark.parametrize(
    "payload", [{"a": float("inf")}, {"a": float("nan")}, {"a": "\ud800"}, {"\udc00": 1}, {"a": "x\x00"}]
)
def test_the_runtime_refuses_a_payload_jsonb_cannot_hold(engine, a_run, payload):
    from pgbus_web.runtime import errors, verbs

    before = everything(engine)
    with pytest.raises(errors.InvalidPayload):
        verbs.signal(engine, a_run, "shipped", payload)
    assert everything(engine) == before


@pytest.mark.parametrize("at", ["2030-01-01T10:00\x00", "2030-01-01T10:00:00\x00+00:00", "\x002030-01-01T10:00"])
@pytest.mark.parametrize("verb, make", [("resume_at", paused_on_capture), ("reschedule", ready_later)])
@pytest.mark.parametrize("htmx", [True, False], ids=["htmx", "plain"])
def test_a_time_holding_a_nul_is_422(browser, runs, engine, at, verb, make, htmx):
    workflow_id = make(runs)
    before = everything(engine)
    response = browser.post(f"/workflows/{workflow_id}/{verb}", {"at": at}, htmx=htmx)
    assert response.status_code == 422
    assert message(response) == t("pgbus.workflows.forms.errors.nul_character")
    assert everything(engine) == before
