"""The JSON API (/api/v1): reads and writes over the pages' own domain
functions, bearer tokens, problem+json refusals that write nothing, and
every answer checked against the OpenAPI document (api_support.Api)."""

from __future__ import annotations

from datetime import timedelta

import pytest
import sqlalchemy as sa
from openapi_spec_validator import validate
from support.action_support import (
    Browser,
    completed,
    events_of,
    later,
    operator_app,
    paused_on_capture,
    ready_later,
    run_row,
    signals_of,
    waiting_for_shipment,
)
from support.api_support import DOCUMENT, Api, patch, put, template_of, token_for
from support.operation_support import THRESHOLDS
from support.refusals import everything
from support.web_helpers import set_column

from pgbus_web.core import sessions, tokens
from pgbus_web.i18n import force_locale, t
from pgbus_web.models import operation_rows
from pgbus_web.plumbing import csrf
from pgbus_web.rules import states
from pgbus_web.rules.approval import Approval
from pgbus_web.runtime import operation_policy, operation_record


@pytest.fixture
def operator(app, engine):
    return Api(app.test_client(), token_for(engine, "deploy-bot", "operator"))


@pytest.fixture
def viewer(app, engine):
    return Api(app.test_client(), token_for(engine, "grafana", "viewer"))


def test_the_document_is_valid_openapi_3_1(client):
    validate(DOCUMENT)
    response = Api(client).get("/openapi.json")
    assert response.status_code == 200 and response.json_body["openapi"] == "3.1.0"
    assert set(response.json_body["paths"]) == set(DOCUMENT["paths"])


def test_every_documented_operation_answers_as_documented(app, engine, runs, locks):
    """One real answer (checked against the document) from every path and
    method the document has, each a success (an admin's token: every
    power, the policy's and the approver's included)."""
    operator = Api(app.test_client(), token_for(engine, "deploy-bot", "admin"))
    paused, waiting = paused_on_capture(runs), waiting_for_shipment(runs)
    locks.acquire("k-1")
    operator.get("/openapi.json")
    operator.get("/runs")
    operator.get("/runs/export?format=csv")
    operator.get(f"/runs/{paused}")
    operator.get(f"/runs/compare?a={paused}&b={waiting}")
    operator.get("/counts")
    operator.get("/attention")
    operator.get("/locks")
    operator.get("/workers")
    operator.get("/queues")
    operator.post(f"/runs/{waiting}/signals", {"name": "shipment_confirmed"})
    operator.post(f"/runs/{paused}/resume", {"reason": "tour"})
    # Each verb has its own path, its body the verb table's fields.
    for verb, made, fields in (
        ("resume_at", paused_on_capture, {"at": later(hours=1).isoformat()}),
        ("run_now", ready_later, {}),
        ("reschedule", ready_later, {"at": later(hours=3).isoformat()}),
        ("skip", ready_later, {}),
        ("pause", ready_later, {}),
        ("cancel", ready_later, {}),
        ("rerun", completed, {}),
    ):
        assert operator.post(f"/runs/{made(runs)}/{verb}", fields).status_code == 200, verb
    operator.post("/operations", {"verb": "cancel", "filters": {"status": "ready"}})
    created = operator.post(
        "/operations", {"verb": "cancel", "filters": {"status": "ready"}, "reason": "tour", "confirmed": True}
    )
    operation_id = created.json_body["operation"]["id"]
    operator.get("/operations")
    operator.get(f"/operations/{operation_id}")
    patch(operator, f"/operations/{operation_id}", {"rate": 5})
    operator.post(f"/operations/{operation_id}/pace", {"rate": None})
    operator.post(f"/operations/{operation_id}/pause")
    operator.post(f"/operations/{operation_id}/resume")
    # One another operator asked for, waiting for approval.
    waiting_approval = operation_policy.create(
        operator.client.application.extensions["pgbus_web"].database.primary,
        operation_record.filters_of({"filters": {"status": "ready"}}),
        "cancel",
        None,
        reason="tour",
        actor="dashboard:alice",
        expected=None,
        thresholds=THRESHOLDS,
        approval=Approval(0),
    )
    operator.post(f"/operations/{waiting_approval['id']}/approve", {"reason": "checked the filter"})
    operator.get("/policy")
    operator.get("/policy/history")
    put(operator, "/policy/stall_threshold", {"value": 900, "reason": "tour"})
    operator.post(f"/operations/{operation_id}/cancel")
    # Revealing a run's redacted values (docs/redaction.md).
    operator.post(f"/runs/{paused}/reveal", {"reason": "tour"})
    # Sessions and tokens an admin sees and ends (docs/standalone.md).
    session_id = sessions.start(engine, "ada", address="127.0.0.1", lifetime=timedelta(hours=1))
    token_for(engine, "old-bot", "viewer")
    operator.get("/sessions")
    operator.post(f"/sessions/{session_id}/end")
    operator.post("/sessions/end-all", {"name": "ada"})
    operator.post("/tokens/old-bot/revoke")
    operator.get("/access-log")
    documented = {(path, method) for path, item in DOCUMENT["paths"].items() for method in item}
    answered = {(path, method) for path, method, status in operator.answers if status < 300}
    assert answered == documented
    assert template_of("POST", f"/api/v1/runs/{paused}/signals") == "/runs/{workflow_id}/signals"


def test_the_answer_check_catches_an_answer_that_differs():
    """Control for the check every answer goes through."""
    import jsonschema
    from flask import Response
    from support.api_support import check_answer

    good = Response('{"classes": [], "totals": {}, "total": 0}', 200, mimetype="application/json")
    check_answer("GET", "/api/v1/counts", good)
    for body in (
        '{"classes": [], "totals": {}}',
        '{"classes": [], "totals": {}, "total": "0"}',
        '{"classes": [], "totals": {}, "total": 0, "extra": 1}',
    ):
        with pytest.raises(jsonschema.ValidationError):
            check_answer("GET", "/api/v1/counts", Response(body, 200, mimetype="application/json"))
    with pytest.raises(AssertionError):
        check_answer("GET", "/api/v1/counts", Response("{}", 418, mimetype="application/json"))


# --- reads ---------------------------------------------------------------------------------


def test_runs_filtered_and_paged_by_keyset(database, engine, runs):
    app = operator_app(database, page_size=2)
    api = Api(app.test_client(), token_for(engine, "reader", "viewer"))
    paused = [paused_on_capture(runs) for _ in range(3)]
    ready_later(runs)
    first = api.get("/runs?status=paused")
    assert first.status_code == 200
    assert [run["workflow_id"] for run in first.json_body["runs"]] == paused[::-1][:2]
    assert all(run["stuck_reason"] == states.PAUSED_ERROR for run in first.json_body["runs"])
    assert first.json_body["runs"][0]["latest_step"]["step_name"] == "capture_payment"
    cursor = first.json_body["next_before"]
    assert cursor == first.json_body["runs"][-1]["id"]
    second = api.get(f"/runs?status=paused&before={cursor}")
    assert [run["workflow_id"] for run in second.json_body["runs"]] == [paused[0]]
    assert second.json_body["next_before"] is None
    # Control: unfiltered, the ready run is listed too.
    assert len(api.get("/runs").json_body["runs"]) == 2
    refused = api.get("/runs?status=sleeping")
    assert refused.status_code == 400 and "sleeping" in refused.json_body["detail"]


def test_runs_searched_with_q_by_the_shown_prefix(database, engine, runs):
    api = Api(operator_app(database).test_client(), token_for(engine, "reader", "viewer"))
    wanted, other = paused_on_capture(runs), paused_on_capture(runs)
    assert wanted[:8] != other[:8]
    found = api.get(f"/runs?q={wanted[:8].upper()}")
    assert [run["workflow_id"] for run in found.json_body["runs"]] == [wanted]
    # Control: the other run's prefix finds the other run.
    assert [run["workflow_id"] for run in api.get(f"/runs?q={other[:8]}").json_body["runs"]] == [other]


def test_one_run_in_detail(viewer, runs):
    workflow_id = paused_on_capture(runs)
    shown = viewer.get(f"/runs/{workflow_id}")
    assert shown.status_code == 200
    body = shown.json_body
    assert body["run"]["workflow_id"] == workflow_id and body["run"]["stuck_reason"] == states.PAUSED_ERROR
    assert "resume" in body["available_actions"] and "rerun" not in body["available_actions"]
    assert body["plan"] == {"action": "retry", "step": "capture_payment"}
    missing = viewer.get("/runs/no-such-run")
    assert missing.status_code == 404 and "no-such-run" in missing.json_body["detail"]


def test_a_run_id_with_slashes(viewer, runs):
    paused_on_capture(runs, workflow_id="orders/1042")
    assert viewer.get("/runs/orders/1042").json_body["run"]["workflow_id"] == "orders/1042"


def test_odd_stored_values_answer(viewer, runs, engine):
    workflow_id = waiting_for_shipment(runs)
    set_column(engine, "pgbus_workflows", "started_at", "infinity", workflow_id)
    set_column(engine, "pgbus_workflows", "arguments", "[" * 3000 + "]" * 3000, workflow_id)
    shown = viewer.get(f"/runs/{workflow_id}").json_body
    assert shown["run"]["started_at"] == "infinity" and shown["run"]["raw_json"] == ["arguments"]
    listed = viewer.get("/runs").json_body["runs"]
    assert listed[0]["started_at"] == "infinity"


def test_counts_and_attention(viewer, runs):
    paused_on_capture(runs)
    paused_on_capture(runs)
    completed(runs)
    counts = viewer.get("/counts").json_body
    assert counts["total"] == 3 and counts["totals"]["paused"] == 2 and counts["totals"]["completed"] == 1
    [group] = viewer.get("/attention").json_body["groups"]
    assert group["count"] == 2 and group["step_name"] == "capture_payment" and "resume" in group["actions"]
    # The group's filters list exactly its runs.
    query = "&".join(f"{name}={value}" for name, value in group["filters"].items())
    assert len(viewer.get(f"/runs?{query}").json_body["runs"]) == 2


def test_locks(viewer, locks):
    locks.acquire("k-1", age=timedelta(days=2))
    body = viewer.get("/locks").json_body
    assert [lock["lock_key"] for lock in body["locks"]] == ["k-1"] and body["counts"]["orphan"] == 1
    assert viewer.get("/locks?state=melted").status_code == 400


# --- writes ----------------------------------------------------------------------------------


def test_an_operator_token_resumes_a_run_as_api_name(operator, runs, engine):
    workflow_id = paused_on_capture(runs)
    done = operator.post(f"/runs/{workflow_id}/resume", {"reason": "gateway is back"})
    assert done.status_code == 200, done.json_body
    assert done.json_body["run"]["run"]["status"] == states.READY
    assert done.json_body["message"]
    [event] = [e for e in events_of(engine, workflow_id) if e["event"] == "resumed"]
    assert event["actor"] == "api:deploy-bot" and event["reason"] == "gateway is back"
    with engine.connect() as conn:
        used = conn.execute(sa.text("SELECT last_used_at FROM pgbus_web_api_tokens WHERE name = 'deploy-bot'")).scalar()
    assert used is not None


def test_wrong_state_is_409_and_unknown_verb_404(operator, runs, engine):
    workflow_id = completed(runs)
    before = everything(engine)
    refused = operator.post(f"/runs/{workflow_id}/resume", {"reason": "x"})
    assert refused.status_code == 409 and refused.json_body["detail"] == t("pgbus.workflows.forms.already.completed")
    # No verb: no path of the document.
    explode = operator.client.post(f"/api/v1/runs/{workflow_id}/explode", json={}, headers=operator.headers())
    assert explode.status_code == 404
    assert operator.post("/runs/nobody/cancel", {}).status_code == 404
    assert everything(engine) == before


def test_a_lost_race_is_409_and_writes_once(operator, runs, engine):
    """The run is paused when the request reads it; another writer cancels
    it while the verb waits on its row lock: the verb sees the new status."""
    import threading

    workflow_id = paused_on_capture(runs)
    answers = []
    with engine.connect() as holder:
        with holder.begin():
            holder.execute(
                sa.text("SELECT 1 FROM pgbus_workflows WHERE workflow_id = :w FOR UPDATE"), {"w": workflow_id}
            )
            request = threading.Thread(
                target=lambda: answers.append(operator.post(f"/runs/{workflow_id}/resume", {"reason": "racing"}))
            )
            request.start()
            request.join(1.0)
            assert not answers  # waiting on the row lock
            holder.execute(
                sa.text("UPDATE pgbus_workflows SET status = 'cancelled' WHERE workflow_id = :w"), {"w": workflow_id}
            )
        request.join(10)
    [refused] = answers
    assert refused.status_code == 409 and refused.json_body["detail"] == t("pgbus.workflows.forms.already.cancelled")
    assert run_row(engine, workflow_id)["status"] == states.CANCELLED
    assert not [event for event in events_of(engine, workflow_id) if event["actor"] == "api:deploy-bot"]


def test_reschedule_reads_at_with_its_offset_and_refuses_the_past(operator, runs, engine):
    workflow_id = ready_later(runs)
    before = everything(engine)
    past = operator.post(f"/runs/{workflow_id}/reschedule", {"at": "2001-01-01T00:00:00Z"})
    assert past.status_code == 422 and past.json_body["field"] == "at"
    assert everything(engine) == before
    when = (later(hours=5)).replace(microsecond=0)
    done = operator.post(f"/runs/{workflow_id}/reschedule", {"at": when.isoformat(), "reason": "after the window"})
    assert done.status_code == 200
    assert done.json_body["run"]["run"]["latest_step"]["scheduled_at"] == when.isoformat().replace("+00:00", "Z")


def test_a_signal(operator, runs, engine):
    workflow_id = waiting_for_shipment(runs)
    sent = operator.post(
        f"/runs/{workflow_id}/signals",
        {"name": "shipment_confirmed", "payload": {"carrier": "DHL"}, "idempotency_key": "k1"},
    )
    assert sent.status_code == 200 and sent.json_body["duplicate"] is False
    again = operator.post(f"/runs/{workflow_id}/signals", {"name": "shipment_confirmed", "idempotency_key": "k1"})
    assert again.json_body["duplicate"] is True
    assert len(signals_of(engine, workflow_id)) == 1
    assert signals_of(engine, workflow_id)[0]["payload"] == {"carrier": "DHL"}


def test_an_operation_previewed_started_shown_and_cancelled(operator, runs, engine):
    for _ in range(3):
        paused_on_capture(runs)
    completed(runs)
    body = {"verb": "cancel", "filters": {"status": "paused"}, "reason": "bad deploy"}
    shown = operator.post("/operations", body)
    assert shown.status_code == 200 and shown.json_body["preview"]["total"] == 3
    assert operation_count(engine) == 0
    changed = operator.post("/operations", {**body, "confirmed": True, "expected": 2})
    assert changed.status_code == 409 and changed.json_body["preview"]["total"] == 3
    no_reason = operator.post("/operations", {"verb": "cancel", "filters": {"status": "paused"}, "confirmed": True})
    assert no_reason.status_code == 422 and no_reason.json_body["field"] == "reason"
    assert operation_count(engine) == 0
    created = operator.post("/operations", {**body, "confirmed": True, "expected": 3})
    assert created.status_code == 201
    operation = created.json_body["operation"]
    assert operation["actor"] == "api:deploy-bot" and operation["status"] == "queued"
    assert created.headers["Location"].endswith(f"/api/v1/operations/{operation['id']}")
    assert operator.get(f"/operations/{operation['id']}").json_body["operation"]["total"] == 3
    assert [row["id"] for row in operator.get("/operations").json_body["operations"]] == [operation["id"]]
    cancelled = operator.post(f"/operations/{operation['id']}/cancel")
    assert cancelled.status_code == 200 and cancelled.json_body["operation"]["status"] == "cancelled"
    assert operator.post(f"/operations/{operation['id']}/cancel").status_code == 409
    assert operator.get("/operations/999").status_code == 404


def operation_count(engine) -> int:
    with engine.connect() as conn:
        return len(operation_rows.recent(conn))


# --- who may -----------------------------------------------------------------------------------


def test_a_viewer_token_reads_but_may_not_post(viewer, runs, engine):
    workflow_id = paused_on_capture(runs)
    assert viewer.get(f"/runs/{workflow_id}").status_code == 200
    before = everything(engine)
    for url, body in (
        (f"/runs/{workflow_id}/resume", {"reason": "x"}),
        (f"/runs/{workflow_id}/signals", {"name": "go"}),
        ("/operations", {"verb": "cancel", "filters": {}, "reason": "x", "confirmed": True}),
    ):
        refused = viewer.post(url, body)
        assert refused.status_code == 403, url
        assert refused.json_body["detail"] == t("pgbus.workflows.forms.errors.forbidden")
    assert everything(engine) == before


def test_bad_and_revoked_tokens_are_401_and_change_nothing(app, engine, runs):
    workflow_id = paused_on_capture(runs)
    token = token_for(engine, "old", "operator")
    assert tokens.revoke(engine, "old")
    before = everything(engine)
    for sent in (token, "pgbw_made-up", "", "x" * 5000, "pgbw_é"):
        api = Api(app.test_client(), sent or None)
        if not sent:
            api.headers = lambda extra=None: {"Authorization": "Bearer ", **(extra or {})}
        refused = api.post(f"/runs/{workflow_id}/resume", {"reason": "x"})
        assert refused.status_code == 401, sent
        assert refused.headers["WWW-Authenticate"].startswith("Bearer")
        assert api.get("/runs").status_code == 401
    assert everything(engine) == before
    # Control: a live token of the same role goes through.
    assert Api(app.test_client(), token_for(engine, "new", "operator")).get("/runs").status_code == 200


def test_a_cookie_post_needs_its_csrf_token(app, runs, engine):
    workflow_id = paused_on_capture(runs)
    browser = Browser(app.test_client())
    browser.load()
    api = Api(browser.client)
    before = everything(engine)
    refused = api.post(f"/runs/{workflow_id}/pause", {"reason": "x"}, headers={"X-User": "alice"})
    assert refused.status_code == 400 and refused.json_body["detail"] == t("pgbus.api.errors.csrf")
    assert everything(engine) == before
    done = api.post(
        f"/runs/{workflow_id}/cancel",
        {"reason": "by hand"},
        headers={"X-User": "alice", csrf.HEADER_NAME: browser.token},
    )
    assert done.status_code == 200
    assert events_of(engine, workflow_id)[-1]["actor"] == "dashboard:alice"


@pytest.mark.parametrize("how", ["form", "multipart", "empty form", "text"])
def test_a_cookie_post_that_is_not_json_is_415_and_changes_nothing(app, runs, engine, how):
    workflow_id = paused_on_capture(runs)
    browser = Browser(app.test_client())
    browser.load()
    url = f"/api/v1/runs/{workflow_id}/cancel"
    before = everything(engine)
    # The token in the form, as a page's form carries it, and in the header.
    fields = {"reason": "by hand", csrf.FIELD_NAME: browser.token}
    sent = {
        "form": {"data": fields},
        "multipart": {"data": fields, "content_type": "multipart/form-data"},
        "empty form": {"data": b"", "content_type": "application/x-www-form-urlencoded"},
        "text": {"data": b"reason=by hand", "content_type": "text/plain"},
    }[how]
    refused = browser.client.post(url, headers={"X-User": "alice", csrf.HEADER_NAME: browser.token}, **sent)
    assert refused.status_code == 415, refused.get_data(as_text=True)
    assert refused.json["detail"] == t("pgbus.api.errors.not_json_type")
    assert everything(engine) == before
    # Control: the same caller's JSON body cancels it, with its reason.
    done = Api(browser.client).post(
        f"/runs/{workflow_id}/cancel",
        {"reason": "by hand"},
        headers={"X-User": "alice", csrf.HEADER_NAME: browser.token},
    )
    assert done.status_code == 200
    assert events_of(engine, workflow_id)[-1]["reason"] == "by hand"


def test_a_post_without_a_body_is_an_empty_object(operator, runs, engine):
    workflow_id = paused_on_capture(runs)
    response = operator.client.post(f"/api/v1/runs/{workflow_id}/cancel", headers=operator.headers())
    assert response.status_code == 200, response.json


def test_standalone_sign_in_answers_401_as_a_problem_and_a_token_passes(database, engine, runs, tmp_path):
    from support.auth_support import signed_in_app, write_users

    app = signed_in_app(database, write_users(tmp_path / "users"))
    refused = Api(app.test_client()).get("/runs")
    assert refused.status_code == 401 and refused.headers["WWW-Authenticate"].startswith("Basic")
    assert Api(app.test_client(), token_for(engine, "ci", "viewer")).get("/runs").status_code == 200


def test_a_mounted_app_uses_its_hooks_and_its_api_auth(database, runs, engine):
    from flask import Flask

    from pgbus_web.api import Caller
    from pgbus_web.demo.workflows import REGISTRY
    from pgbus_web.extension import PgbusWeb

    host = Flask(__name__)
    host.config["SECRET_KEY"] = "host"
    PgbusWeb(
        host,
        url_prefix="/ops",
        database=database,
        registry=REGISTRY,
        run_operations=False,
        can_view=lambda request: request.headers.get("X-Staff") == "1",
        api_auth=lambda request, token: Caller("ci", may_act=True) if token == "host-secret" else None,
    )
    workflow_id = paused_on_capture(runs)
    assert Api(host.test_client(), prefix="/ops").get("/runs").status_code == 403
    document = Api(host.test_client(), prefix="/ops").get("/openapi.json", headers={"X-Staff": "1"}).json_body
    assert document["servers"] == [{"url": "/ops/api/v1"}]
    assert Api(host.test_client(), prefix="/ops").get("/runs", headers={"X-Staff": "1"}).status_code == 200
    assert Api(host.test_client(), "wrong", prefix="/ops").get("/runs").status_code == 401
    done = Api(host.test_client(), "host-secret", prefix="/ops").post(f"/runs/{workflow_id}/cancel", {"reason": "x"})
    assert done.status_code == 200 and events_of(engine, workflow_id)[-1]["actor"] == "api:ci"


# --- bad input -------------------------------------------------------------------------------


@pytest.mark.parametrize("raw, content_type, status, field", [
    (b'{"reason": "x", "force": true}', "application/json", 422, "force"),
    (b'{"reason": 42}', "application/json", 422, "reason"),
    (b'["reason"]', "application/json", 422, None),
    (b'{"reason": ', "application/json", 400, None),
    (b'reason=x', "application/x-www-form-urlencoded", 415, None),
    (b'{"reason": "a\\u0000b"}', "application/json", 422, None),
    (b'{"reason": "\\ud800"}', "application/json", 422, None),
    (b'{"reason": "x", "at": NaN}', "application/json", 422, None),
    (b'\xff\xfe', "application/json", 400, None),
    (b'{"reason": "' + b"x" * (300 * 1024) + b'"}', "application/json", 413, None),
])  # fmt: skip
def test_bad_bodies_are_problems_and_change_nothing(operator, runs, engine, raw, content_type, status, field):
    workflow_id = ready_later(runs)
    before = everything(engine)
    refused = operator.post(f"/runs/{workflow_id}/pause", raw=raw, content_type=content_type)
    assert refused.status_code == status, refused.json_body
    assert refused.json_body.get("field") == field
    assert everything(engine) == before
    # Control: the same run takes a good body.
    assert operator.post(f"/runs/{workflow_id}/pause", {"reason": "fine"}).status_code == 200


def test_bad_payloads_and_operation_fields(operator, runs, engine):
    workflow_id = waiting_for_shipment(runs)
    before = everything(engine)
    assert operator.post(f"/runs/{workflow_id}/signals", {"name": "x", "payload": [1]}).status_code == 422
    assert operator.post(f"/runs/{workflow_id}/signals", {"payload": {}}).status_code == 422
    assert operator.post("/operations", {"verb": "explode", "filters": {}}).status_code == 422
    bad_filter = operator.post("/operations", {"verb": "cancel", "filters": {"status": "sleeping"}})
    assert bad_filter.status_code == 422 and bad_filter.json_body["field"] == "filters"
    assert operator.post("/operations", {"verb": "cancel", "filters": {"status": ["paused"]}}).status_code == 422
    assert everything(engine) == before


def test_the_detail_is_in_the_request_language(operator, runs):
    workflow_id = completed(runs)
    german = operator.post(f"/runs/{workflow_id}/resume", {}, headers={"Accept-Language": "de"})
    with force_locale("de"):
        expected = t("pgbus.workflows.forms.already.completed")
    assert german.json_body["detail"] == expected != t("pgbus.workflows.forms.already.completed")
    unknown = operator.post(f"/runs/{workflow_id}/resume", {"force": 1}, headers={"Accept-Language": "ja"})
    with force_locale("ja"):
        assert unknown.json_body["detail"] == t("pgbus.api.errors.unknown_field", field="force", known="reason")


def test_unrouted_and_wrong_method_are_problems(operator):
    response = operator.client.delete("/api/v1/runs", headers=operator.headers({"Accept-Language": "fr"}))
    assert response.status_code == 405 and response.mimetype == "application/problem+json"
    assert "GET" in response.headers["Allow"]
    with force_locale("fr"):
        assert response.json["detail"] == t("pgbus.api.errors.method")
    missing = operator.client.get("/api/v1/nothing-here", headers=operator.headers())
    assert missing.status_code == 404 and missing.json["detail"] == t("pgbus.api.errors.not_found")
    # Control: the pages' own 404 stays a page.
    assert operator.client.get("/nothing-here").mimetype == "text/html"
