"""Small things every page gets right: the dashboard's own favicon, the
"gives up" time only on an attempt still open, a forbidden page that
offers no link into what it forbids, the durations hint naming what the
durations read."""

from __future__ import annotations

from datetime import timedelta

from support.web_helpers import make_app, soup, step, text_of, utcnow

from pgbus_web.rules import states


def test_every_page_links_the_favicon_the_blueprint_serves(client):
    page = soup(client.get("/workflows"))
    icon = page.select_one('link[rel="icon"]')
    assert icon["type"] == "image/svg+xml"
    response = client.get(icon["href"])
    assert response.status_code == 200
    assert response.mimetype == "image/svg+xml"
    assert response.get_data(as_text=True).lstrip().startswith("<svg")


def test_gives_up_shows_only_on_an_open_attempt(client, runs):
    now = utcnow()
    workflow_id = runs.make(
        states.WAITING,
        step(
            "await_shipment",
            "completed",
            wait_for="shipment_confirmed",
            timeout_at=now - timedelta(hours=21),
            finished_at=now - timedelta(hours=22),
        ),
        step("await_delivery", "waiting", wait_for="delivered", timeout_at=now + timedelta(days=2)),
    )
    page = soup(client.get(f"/workflows/{workflow_id}"))
    attempts = page.select("#pgbus-run-steps .pgbus-attempt")
    texts = [text_of(attempt) for attempt in attempts]
    assert len(texts) == 2
    assert "gives up" not in texts[0]
    assert "gives up" in texts[1]


def test_a_forbidden_page_offers_no_link_to_the_workflows(database):
    response = make_app(database, can_view=lambda request: False).test_client().get("/workflows")
    assert response.status_code == 403
    assert soup(response).select(".pgbus-error-page a") == []


def test_a_missing_run_offers_the_way_back(client):
    response = client.get("/workflows/no-such-run")
    assert response.status_code == 404
    assert soup(response).select_one(".pgbus-error-page a")["href"] == "/workflows"


def test_the_durations_hint_says_the_runs_started_in_the_range(client, runs):
    runs.make(
        states.COMPLETED,
        step(
            "send_receipt",
            "completed",
            started_at=utcnow() - timedelta(minutes=2),
            finished_at=utcnow() - timedelta(minutes=1),
        ),
    )
    page = soup(client.get("/workflows/insights/OrderWorkflow"))
    hint = text_of(page.select_one('[aria-labelledby="pgbus-insights-durations-title"] .pgbus-card-head p'))
    assert "runs started in this period" in hint


def test_a_batchs_progress_counts_failed_and_discarded_jobs_as_done_on_both_pages(client, runs, engine):
    import sqlalchemy as sa

    workflow_id = runs.make(
        states.WAITING,
        step("notify_vendors", "waiting", waiting_since=utcnow() - timedelta(minutes=5)),
        batch={"description": "OrderWorkflow#notify_vendors", "total_jobs": 12, "completed_jobs": 3},
    )
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE pgbus_batches SET failed_jobs = 2, discarded_jobs = 1"))
    run_page = text_of(soup(client.get(f"/workflows/{workflow_id}")).select_one("#pgbus-run-steps"))
    index_row = text_of(soup(client.get("/workflows")).select_one(".pgbus-next-sentence"))
    # 3 completed + 2 failed + 1 discarded: not 3 (completed only), not 12.
    assert "6 of 12 jobs done" in run_page
    assert "6 of 12 jobs done" in index_row
