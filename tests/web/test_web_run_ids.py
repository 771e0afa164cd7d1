"""Run ids another writer chose: with slashes, equal to a word the
dashboard's own routes use, starting with the escape character, with dot
segments or characters a URL must encode. Each run's page and every verb
work through the links the dashboard itself writes (url_for)."""

from __future__ import annotations

import pytest
from flask import url_for
from support.action_support import (
    completed,
    events_of,
    later,
    message,
    paused_on_capture,
    run_row,
)
from support.web_helpers import soup, step, text_of

from pgbus_web.plumbing import run_ids
from pgbus_web.rules import states

IDS = [
    "orders/1042",
    "a/b/c",
    "bulk",
    "insights",
    "operations",
    "locks",
    "pgbus-static",
    "health",
    "bulk/cancel",
    "insights/OrderWorkflow",
    "x/signals",
    "x/cancel",
    "~tilde",
    "/leading",
    "trailing/",
    "a//b",
    "..",
    "a/./b",
    "what? #1 100% ü",
]

# Each verb, the state its run starts in, its form fields and its audit event.
VERBS = {
    "resume": (paused_on_capture, {}, "resumed"),
    "resume_at": (paused_on_capture, {"at": later(days=1).strftime("%Y-%m-%dT%H:%M"), "tz": "UTC"}, "resumed"),
    "skip": (paused_on_capture, {}, "step_skipped"),
    "cancel": (paused_on_capture, {"reason": "r"}, "cancelled"),
    "run_now": ("ready", {}, "run_now"),
    "reschedule": ("ready", {"at": later(days=1).strftime("%Y-%m-%dT%H:%M"), "tz": "UTC"}, "rescheduled"),
    "pause": ("ready", {}, "paused"),
    "rerun": (completed, {}, "rerun"),
    "signals": (paused_on_capture, {"name": "shipment_confirmed"}, "signal_received"),
}


def make(runs, how, workflow_id: str) -> str:
    if how == "ready":
        return runs.make(
            states.READY, step("reserve_stock", "scheduled", scheduled_at=later(hours=2)), workflow_id=workflow_id
        )
    if how is completed:
        return runs.make(
            states.COMPLETED,
            step("send_receipt", "completed", finished_at=later(minutes=-8)),
            workflow_id=workflow_id,
        )
    return how(runs, workflow_id=workflow_id)


def link(app, endpoint: str, **values) -> str:
    with app.test_request_context():
        return url_for(endpoint, **values)


@pytest.mark.parametrize("workflow_id", IDS)
def test_the_run_page_opens_from_the_index_link(browser, runs, workflow_id):
    paused_on_capture(runs, workflow_id=workflow_id)
    index = soup(browser.client.get("/workflows"))
    row = index.select_one("tr.pgbus-run-row")
    assert row["data-workflow-id"] == workflow_id
    href = row.select_one("a.pgbus-class")["href"]
    response = browser.client.get(href)
    assert response.status_code == 200, href
    assert text_of(soup(response).select_one(".pgbus-run-id")) == workflow_id
    # The page's own forms post to this run.
    forms = soup(response).select("form[data-pgbus-action]")
    assert forms
    for form in forms:
        assert form["action"].startswith(href + "/"), (form["action"], href)


# The ids the verbs are tried on: slashes, each route word, the escape.
VERB_IDS = [
    "orders/1042",
    "bulk",
    "insights",
    "operations",
    "locks",
    "pgbus-static",
    "health",
    "x/signals",
    "~tilde",
    "a//b",
    "what? #1 100% ü",
]


@pytest.mark.parametrize("verb", list(VERBS))
@pytest.mark.parametrize("workflow_id", VERB_IDS)
def test_every_verb_works_on_the_run(browser, app, runs, engine, workflow_id, verb):
    how, data, event = VERBS[verb]
    make(runs, how, workflow_id)
    if verb == "signals":
        url = link(app, "pgbus_web.send_signal", workflow_id=workflow_id)
    else:
        url = link(app, "pgbus_web.run_action", workflow_id=workflow_id, verb=verb)
    response = browser.post(url, data, htmx=True)
    assert response.status_code == 200, (url, message(response))
    assert [row["event"] for row in events_of(engine, workflow_id)].count(event) == 1
    # The answer is this run's fragments.
    assert text_of(soup(response).select_one(".pgbus-run-id")) == workflow_id


@pytest.mark.parametrize("workflow_id", ["orders/1042", "bulk", "a//b"])
def test_a_plain_form_is_sent_back_to_the_run(browser, app, runs, engine, workflow_id):
    paused_on_capture(runs, workflow_id=workflow_id)
    url = link(app, "pgbus_web.run_action", workflow_id=workflow_id, verb="cancel")
    response = browser.post(url, {"reason": "r"})
    assert response.status_code == 303
    assert response.headers["Location"] == link(app, "pgbus_web.workflow", workflow_id=workflow_id)
    assert run_row(engine, workflow_id)["status"] == states.CANCELLED
    page = browser.client.get(response.headers["Location"])
    assert text_of(soup(page).select_one(".pgbus-run-id")) == workflow_id


@pytest.mark.parametrize("workflow_id", ["orders/1042", "bulk", "plain-id"])
@pytest.mark.parametrize("verb", ["cancel", "resume_at", "signals"])
def test_a_get_on_the_action_url_leads_to_the_run(browser, app, runs, workflow_id, verb):
    paused_on_capture(runs, workflow_id=workflow_id)
    if verb == "signals":
        url = link(app, "pgbus_web.send_signal", workflow_id=workflow_id)
    else:
        url = link(app, "pgbus_web.run_action", workflow_id=workflow_id, verb=verb)
    response = browser.client.get(url)
    assert response.status_code == 303
    assert response.headers["Location"] == link(app, "pgbus_web.workflow", workflow_id=workflow_id)


def test_a_run_whose_id_ends_in_a_verb_keeps_its_page(browser, runs):
    paused_on_capture(runs, workflow_id="x")
    paused_on_capture(runs, workflow_id="x/cancel")
    response = browser.client.get("/workflows/x/cancel")
    assert response.status_code == 200
    assert text_of(soup(response).select_one(".pgbus-run-id")) == "x/cancel"


def test_an_unknown_id_is_404_also_when_it_looks_like_an_action(browser, runs):
    assert browser.client.get("/workflows/nobody/cancel").status_code == 404
    assert browser.client.get("/workflows/~not-base64!").status_code == 404


@pytest.mark.parametrize("workflow_id", IDS)
def test_the_link_reads_back_as_the_id(app, workflow_id):
    href = link(app, "pgbus_web.workflow", workflow_id=workflow_id)
    with app.test_request_context(href):
        from flask import request

        assert request.url_rule.endpoint == "pgbus_web.workflow"
        assert request.view_args == {"workflow_id": workflow_id}


def test_ids_that_would_be_misread_are_escaped_and_others_are_not(app):
    assert link(app, "pgbus_web.workflow", workflow_id="orders/1042") == "/workflows/orders/1042"
    assert link(app, "pgbus_web.workflow", workflow_id="bulk") == "/workflows/~YnVsaw"
    assert link(app, "pgbus_web.run_action", workflow_id="bulk", verb="cancel") == "/workflows/~YnVsaw/cancel"


def test_every_route_word_after_workflows_is_reserved(app):
    # A new route under /workflows/<word>/ must add its word to RESERVED,
    # or a run named <word> would be shadowed by it.
    words = set()
    for rule in app.url_map.iter_rules():
        parts = rule.rule.split("/")
        if len(parts) > 2 and parts[1] == "workflows" and not parts[2].startswith("<"):
            words.add(parts[2])
    assert words and words <= run_ids.RESERVED


@pytest.mark.parametrize("workflow_id", IDS + ["plain-id", "6ced4f1b-0000"])
def test_the_runs_table_link_is_url_for_s(app, workflow_id):
    # The runs table writes its links with template_helpers.run_url (url_for's
    # prefix, the route's converter); every id must come out as url_for's.
    from pgbus_web.web.drawing import template_helpers

    with app.test_request_context():
        assert template_helpers.run_url(workflow_id) == url_for("pgbus_web.workflow", workflow_id=workflow_id)
        # A second id in the same request reuses the prefix and still matches.
        assert template_helpers.run_url("orders/7") == url_for("pgbus_web.workflow", workflow_id="orders/7")
