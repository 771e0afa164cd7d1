"""Who may act, and the guards before any action runs: the CSRF token (400
without a good one), viewers (no buttons, 403 on every POST), the actor
name, the body size limit (413), the security headers on every answer, and
the live refresh poller. Each refusal leaves the database exactly as before."""

from __future__ import annotations

import json
import logging

import pytest
from flask import Flask
from itsdangerous import URLSafeTimedSerializer
from support.action_support import (
    Browser,
    events_of,
    message,
    operator_app,
    paused_on_capture,
    run_row,
)
from support.runtime_support import snapshot
from support.web_helpers import soup

from pgbus_web.demo.workflows import REGISTRY
from pgbus_web.extension import PgbusWeb
from pgbus_web.plumbing import csrf, security

GROUP = {
    "workflow_class": "OrderWorkflow",
    "step_name": "capture_payment",
    "reason": "paused_error",
    "error_class": "TimeoutError",
    "confirmed": "1",
}


def posts(workflow_id: str) -> list[tuple[str, dict]]:
    """One POST of every kind the blueprint takes."""
    return [
        (f"/workflows/{workflow_id}/resume", {"reason": "x"}),
        (f"/workflows/{workflow_id}/cancel", {}),
        (f"/workflows/{workflow_id}/signals", {"name": "shipment_confirmed", "payload": "{}"}),
        ("/workflows/bulk/retry", GROUP),
    ]


# --- CSRF ---------------------------------------------------------------------------


@pytest.mark.parametrize("htmx", [True, False], ids=["htmx", "plain"])
def test_a_post_without_a_token_is_400_and_changes_nothing(browser, runs, engine, htmx):
    workflow_id = paused_on_capture(runs)
    browser.load()
    before = snapshot(engine)
    for path, data in posts(workflow_id):
        response = browser.post(path, data, token="", htmx=htmx)
        assert response.status_code == 400, path
        assert "This form has expired or did not come from this dashboard" in response.get_data(as_text=True)
    assert snapshot(engine) == before


def test_a_forged_token_is_400(browser, runs, engine):
    workflow_id = paused_on_capture(runs)
    browser.load()
    forged = URLSafeTimedSerializer("not the key", salt=csrf.SALT).dumps(
        browser.client.get_cookie(csrf.COOKIE_NAME).value
    )
    before = snapshot(engine)
    assert browser.post(f"/workflows/{workflow_id}/resume", token=forged, htmx=True).status_code == 400
    assert browser.post(f"/workflows/{workflow_id}/resume", token="garbage", htmx=True).status_code == 400
    assert snapshot(engine) == before


def test_another_browsers_token_is_400(app, runs, engine):
    workflow_id = paused_on_capture(runs)
    mallory, alice = Browser(app.test_client(), "mallory"), Browser(app.test_client(), "alice")
    mallory.load()
    alice.load()
    before = snapshot(engine)
    # Mallory's page gave her a good token, but for her cookie, not Alice's.
    response = alice.post(f"/workflows/{workflow_id}/resume", token=mallory.token, htmx=True)
    assert response.status_code == 400
    assert snapshot(engine) == before


def test_a_post_without_the_cookie_is_400(browser, runs, engine):
    workflow_id = paused_on_capture(runs)
    browser.load()
    browser.client.delete_cookie(csrf.COOKIE_NAME)
    before = snapshot(engine)
    assert browser.post(f"/workflows/{workflow_id}/resume", htmx=True).status_code == 400
    assert snapshot(engine) == before


def test_an_expired_token_is_400(browser, runs, engine, monkeypatch):
    workflow_id = paused_on_capture(runs)
    browser.load()
    monkeypatch.setattr(csrf, "TOKEN_MAX_AGE", -1)
    before = snapshot(engine)
    assert browser.post(f"/workflows/{workflow_id}/resume", htmx=True).status_code == 400
    assert snapshot(engine) == before


def test_the_token_in_the_htmx_header_is_enough(browser, runs, engine):
    workflow_id = paused_on_capture(runs)
    browser.load()
    response = browser.post(
        f"/workflows/{workflow_id}/resume", token="", htmx=True, headers={csrf.HEADER_NAME: browser.token}
    )
    assert response.status_code == 200
    assert run_row(engine, workflow_id)["status"] == "ready"


def test_every_form_carries_the_token_and_the_body_carries_it_for_htmx(browser, runs):
    workflow_id = paused_on_capture(runs)
    for path in ("/workflows", f"/workflows/{workflow_id}"):
        page = soup(browser.load(path))
        forms = page.select("form[method=post]")
        assert forms, path
        for form in forms:
            assert form.select_one("input[name=csrf_token]")["value"], form.get("action")
        assert json.loads(page.select_one("body")["hx-headers"])[csrf.HEADER_NAME]


def test_the_cookie_is_httponly_lax_and_scoped_to_the_mount(database, runs):
    host = Flask("host")
    host.config["SECRET_KEY"] = "host secret"
    PgbusWeb(host, url_prefix="/ops", database=database, registry=REGISTRY)
    response = host.test_client().get("/ops/workflows")
    cookie = next(value for value in response.headers.getlist("Set-Cookie") if value.startswith(csrf.COOKIE_NAME))
    assert "HttpOnly" in cookie and "SameSite=Lax" in cookie and "Path=/ops" in cookie
    # The host's own pages are not touched.
    assert host.test_client().get("/nothing").headers.get("Set-Cookie") is None


def test_a_mounted_dashboard_acts_with_the_hosts_secret(database, runs, engine):
    workflow_id = paused_on_capture(runs)
    host = Flask("host")
    host.config["SECRET_KEY"] = "host secret"
    PgbusWeb(host, url_prefix="/ops", database=database, registry=REGISTRY)
    operator = Browser(host.test_client())
    operator.load("/ops/workflows")
    assert operator.post(f"/ops/workflows/{workflow_id}/resume", htmx=True).status_code == 200
    assert run_row(engine, workflow_id)["status"] == "ready"


# --- viewers and operators ------------------------------------------------------------


@pytest.fixture
def viewer(database):
    return Browser(operator_app(database, can_act=lambda request: False).test_client(), "victor")


def test_viewers_see_no_buttons(viewer, runs):
    workflow_id = paused_on_capture(runs)
    index = soup(viewer.load())
    assert index.select_one("#pgbus-attention tr.pgbus-attention-group") is not None
    assert index.select("form.pgbus-group-action") == []
    run_page = soup(viewer.load(f"/workflows/{workflow_id}"))
    assert run_page.select_one("#pgbus-run-header") is not None
    assert run_page.select_one("#pgbus-run-actions") is None
    assert run_page.select("form[method=post]") == []


@pytest.mark.parametrize("htmx", [True, False], ids=["htmx", "plain"])
def test_a_viewer_posting_gets_403_and_nothing_changes(viewer, runs, engine, htmx):
    workflow_id = paused_on_capture(runs)
    viewer.load()
    before = snapshot(engine)
    for path, data in posts(workflow_id):
        response = viewer.post(path, data, htmx=htmx)
        assert response.status_code == 403, path
        assert "You may look at this dashboard but not change runs" in response.get_data(as_text=True)
    assert snapshot(engine) == before


def test_a_viewer_hook_that_refuses_refuses_posts_too(database, runs, engine):
    workflow_id = paused_on_capture(runs)
    client = operator_app(database, can_view=lambda request: False).test_client()
    before = snapshot(engine)
    assert client.post(f"/workflows/{workflow_id}/resume").status_code == 403
    assert snapshot(engine) == before


def test_the_operator_hook_is_given_the_request(database, runs, engine):
    workflow_id = paused_on_capture(runs)
    app = operator_app(database, can_act=lambda request: request.headers.get("X-User") == "olga")
    olga, victor = Browser(app.test_client(), "olga"), Browser(app.test_client(), "victor")
    assert victor.post(f"/workflows/{workflow_id}/resume", htmx=True).status_code == 403
    assert olga.post(f"/workflows/{workflow_id}/resume", htmx=True).status_code == 200
    assert [e["actor"] for e in events_of(engine, workflow_id) if e["event"] == "resumed"] == ["dashboard:olga"]


def test_the_actor_defaults_to_remote_user_then_anonymous(database, runs, engine):
    from support.web_helpers import make_app

    first, second = paused_on_capture(runs), paused_on_capture(runs)
    client = make_app(database).test_client()
    operator = Browser(client)
    operator.load()
    operator.post(f"/workflows/{first}/cancel", environ_base={"REMOTE_USER": "rita"})
    operator.post(f"/workflows/{second}/cancel")
    actors = [next(e["actor"] for e in events_of(engine, w) if e["event"] == "cancelled") for w in (first, second)]
    assert actors == ["dashboard:rita", "dashboard:anonymous"]


def test_an_open_dashboard_warns_once(database, runs, caplog, monkeypatch):
    monkeypatch.setattr(security, "_warned_open", False)
    client = operator_app(database).test_client()
    with caplog.at_level(logging.WARNING, logger=security.log.name):
        client.get("/workflows")
        client.get("/workflows")
    warnings = [record for record in caplog.records if "no can_view hook" in record.getMessage()]
    assert len(warnings) == 1


# --- size, headers ---------------------------------------------------------------------


def test_a_request_body_over_the_limit_is_413_and_changes_nothing(browser, runs, engine):
    workflow_id = paused_on_capture(runs)
    before = snapshot(engine)
    response = browser.post(f"/workflows/{workflow_id}/resume", {"reason": "x" * (csrf.MAX_BODY + 1)}, htmx=True)
    assert response.status_code == 413
    assert message(response) == "That request is too large (at most 256 KiB); nothing changed."
    assert snapshot(engine) == before


@pytest.mark.parametrize("htmx", [True, False], ids=["htmx", "plain"])
def test_every_answer_carries_the_security_headers(browser, runs, htmx):
    workflow_id = paused_on_capture(runs)
    answers = [
        browser.post(f"/workflows/{workflow_id}/resume", htmx=htmx),  # 200 / 303
        browser.post(f"/workflows/{workflow_id}/resume", htmx=htmx),  # 409
        browser.post(f"/workflows/{workflow_id}/resume", token="", htmx=htmx),  # 400
        browser.post("/workflows/nope/resume", htmx=htmx),  # 404
    ]
    for response in answers:
        for name, value in security.SECURITY_HEADERS.items():
            assert response.headers[name] == value, (response.status_code, name)
        assert "HX-Request" in response.headers["Vary"]


def test_the_pages_have_no_inline_script_or_style(browser, runs):
    workflow_id = paused_on_capture(runs)
    for path in ("/workflows", f"/workflows/{workflow_id}"):
        page = soup(browser.load(path))
        assert all(script.get("src") for script in page.select("script"))
        assert page.select("[style]") == [] and page.select("style") == []
        assert not [tag for tag in page.find_all(True) if any(attr.startswith("on") for attr in tag.attrs)]


# --- live refresh ------------------------------------------------------------------------


def test_index_and_run_page_poll_their_own_fragments(browser, runs):
    workflow_id = paused_on_capture(runs)
    index = soup(browser.load("/workflows?workflow_class=OrderWorkflow")).select_one("#pgbus-refresh")
    assert index["hx-get"] == "/workflows?workflow_class=OrderWorkflow"
    assert index["hx-trigger"] == "every 10s"
    assert index["hx-swap"] == "none"
    assert index["hx-select-oob"] == "#pgbus-workers-banner,#pgbus-total,#pgbus-counts,#pgbus-attention,#pgbus-runs"
    run = soup(browser.load(f"/workflows/{workflow_id}")).select_one("#pgbus-refresh")
    assert run["hx-get"] == f"/workflows/{workflow_id}"
    assert run["hx-select-oob"] == (
        "#pgbus-run-header,#pgbus-run-steps,#pgbus-run-signals,#pgbus-run-timeline,#pgbus-run-audit"
    )


def test_a_refused_plain_post_page_polls_the_run_page_not_the_post(browser, runs):
    workflow_id = paused_on_capture(runs)
    page = soup(browser.post(f"/workflows/{workflow_id}/resume_at", {"at": "yesterday"}))
    assert page.select_one("#pgbus-refresh")["hx-get"] == f"/workflows/{workflow_id}"


def test_the_interval_is_a_setting_and_zero_turns_it_off(database, runs):
    workflow_id = paused_on_capture(runs)
    fast = operator_app(database, refresh_interval=3).test_client()
    assert soup(fast.get("/workflows")).select_one("#pgbus-refresh")["hx-trigger"] == "every 3s"
    off = operator_app(database, refresh_interval=0).test_client()
    assert soup(off.get("/workflows")).select_one("#pgbus-refresh") is None
    assert soup(off.get(f"/workflows/{workflow_id}")).select_one("#pgbus-refresh") is None


def test_error_pages_do_not_poll(browser):
    response = browser.load("/workflows/no-such-run")
    assert response.status_code == 404
    assert soup(response).select_one("#pgbus-refresh") is None


def test_the_poll_gets_the_page_with_every_fragment(browser, runs):
    workflow_id = paused_on_capture(runs)
    response = browser.client.get(
        f"/workflows/{workflow_id}", headers={"HX-Request": "true", "HX-Target": "pgbus-refresh"}
    )
    page = soup(response)
    for fragment in ("pgbus-run-header", "pgbus-run-steps", "pgbus-run-audit"):
        assert page.select_one(f"#{fragment}") is not None
