"""The action forms without JavaScript: Skip and Cancel write their
question inside the unfolded form (hx-confirm asks it only with htmx), and
an address bar left on an action URL leads back to the page (303), not to
a 405."""

from __future__ import annotations

from test_actions_support import app, browser, paused_on_capture, runs, snapshot  # noqa: F401
from web_helpers import soup, text_of


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
