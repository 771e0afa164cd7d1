"""The action forms without JavaScript: Skip and Cancel write their
question inside the unfolded form (hx-confirm asks it only with htmx), and
an address bar left on an action URL leads back to the page (303), not to
a 405."""

from __future__ import annotations

from support.action_support import paused_on_capture, run_row
from support.runtime_support import snapshot
from support.web_helpers import soup, text_of

from pgbus_web.demo.workflows import REGISTRY
from pgbus_web.runtime import operation_runner


def test_skip_and_cancel_write_their_question_inside_the_form(browser, runs):
    workflow_id = paused_on_capture(runs)
    page = soup(browser.load(f"/workflows/{workflow_id}"))
    for verb in ("skip", "cancel"):
        form = page.select_one(f'details.pgbus-action[data-verb="{verb}"] form')
        sentence = form.select_one(".pgbus-action-confirm")
        assert sentence is not None, verb
        assert text_of(sentence) == form["hx-confirm"]
    resume = page.select_one('details.pgbus-action[data-verb="resume"] form')
    assert resume.select_one(".pgbus-action-confirm") is None


def test_a_get_on_a_run_action_url_leads_to_the_run_page(browser, runs, engine):
    workflow_id = paused_on_capture(runs)
    before = snapshot(engine)
    for verb in ("cancel", "resume_at", "signals"):
        response = browser.client.get(f"/workflows/{workflow_id}/{verb}")
        assert response.status_code == 303, verb
        assert response.headers["Location"].endswith(f"/workflows/{workflow_id}")
    assert snapshot(engine) == before


def test_a_get_on_a_bulk_action_url_leads_to_the_index(browser, runs, engine):
    paused_on_capture(runs)
    before = snapshot(engine)
    response = browser.client.get("/workflows/bulk/retry")
    assert response.status_code == 303
    assert response.headers["Location"].endswith("/workflows")
    assert snapshot(engine) == before


def test_the_insights_page_is_not_taken_for_an_action(browser, runs):
    paused_on_capture(runs)
    assert browser.client.get("/workflows/insights/OrderWorkflow").status_code == 200


def test_a_plain_bulk_action_leads_to_the_preview_then_the_operation_page(browser, runs, engine):
    # A group's button is an operation on the group's filter: without
    # JavaScript its preview is a page, and confirming leads to the
    # operation's page (it used to come back to the filtered index).
    ids = [paused_on_capture(runs) for _ in range(2)]
    index = soup(browser.load("/workflows?workflow_class=OrderWorkflow&status=paused"))
    form = index.select_one('#pgbus-attention tr.pgbus-attention-group form[data-verb="retry"]')
    fields = {field["name"]: field.get("value", "") for field in form.select("input")}
    ask = soup(browser.post(form["action"], fields))
    confirm = ask.select_one("form.pgbus-operation-form")
    confirm_fields = {field["name"]: field.get("value", "") for field in confirm.select("input")}
    done = browser.post(confirm["action"], {**confirm_fields, "reason": "gateway back"})
    assert done.status_code == 303
    assert "/workflows/operations/" in done.headers["Location"]
    runner = operation_runner.Runner(engine, REGISTRY)
    while runner.step() is not None:
        pass
    assert {run_row(engine, workflow_id)["status"] for workflow_id in ids} == {"ready"}
