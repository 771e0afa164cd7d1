"""The batch page (GET /batches/<batch_id>): its jobs by state, the run
that waits for it; linked from the run's next sentence (run page and
index) and from its step list, as the reference's batch link; a batch id
that names no batch is the dashboard's translated 404, changing nothing."""

from __future__ import annotations

from urllib.parse import quote

import pytest
from support.refusals import everything
from support.web_helpers import Runs, make_app, soup, step, text_of, utcnow

from pgbus_web.i18n import force_locale, t
from pgbus_web.rules import states


@pytest.fixture
def runs(engine) -> Runs:
    return Runs(engine)


@pytest.fixture
def client(database):
    return make_app(database).test_client()


def waiting_on(runs, batch_id, **batch):
    return runs.make(
        states.WAITING,
        step("notify_vendors", "waiting", waiting_since=utcnow()),
        batch={
            "batch_id": batch_id,
            "description": "OrderWorkflow#notify_vendors",
            "total_jobs": 12,
            "completed_jobs": 7,
            **batch,
        },
    )


def batch_href(batch_id: str) -> str:
    return "/batches/" + quote(batch_id, safe="/")


def test_the_batch_page_shows_its_jobs_and_the_run_that_waits(client, runs):
    waiter = waiting_on(runs, "batch-a")
    other = waiting_on(runs, "batch-b")
    response = client.get("/batches/batch-a")
    assert response.status_code == 200
    page = soup(response)
    assert "OrderWorkflow#notify_vendors" in text_of(page.h1)
    assert text_of(page.select_one(".pgbus-batch-progress")) == "7 of 12 jobs done"
    jobs = {
        node["data-jobs"]: text_of(node.select_one(".pgbus-stat-value"))
        for node in page.select(".pgbus-batch-jobs [data-jobs]")
    }
    assert jobs == {"completed": "7", "failed": "0", "discarded": "0", "pending": "5"}
    rows = page.select("tr.pgbus-batch-waiter")
    assert [row["data-workflow-id"] for row in rows] == [waiter]  # not the other batch's run
    assert other not in response.get_data(as_text=True)
    assert rows[0].a["href"] == f"/workflows/{waiter}"
    assert rows[0].select_one('[data-status="waiting"]') is not None


def test_the_run_page_and_the_index_link_the_batch(client, runs):
    waiter = waiting_on(runs, "orders/42")  # a batch id with a slash
    run_page = soup(client.get(f"/workflows/{waiter}"))
    links = {a["href"] for a in run_page.select("a") if a["href"].startswith("/batches/")}
    assert links == {batch_href("orders/42")}
    # Both places: the next sentence and the step list.
    assert run_page.select_one('.pgbus-run-next a[href^="/batches/"]') is not None
    assert len([a for a in run_page.select("a") if a["href"] == batch_href("orders/42")]) == 2
    index = soup(client.get("/workflows"))
    row = index.select_one(f'tr[data-workflow-id="{waiter}"]')
    assert row.select_one(".pgbus-next a")["href"] == batch_href("orders/42")
    # The link leads to the batch.
    assert client.get(batch_href("orders/42")).status_code == 200


def test_a_run_not_waiting_on_a_batch_has_no_batch_link(client, runs):
    run = runs.make(
        states.WAITING, step("await_shipment", "waiting", wait_for="shipment_confirmed", waiting_since=utcnow())
    )
    page = soup(client.get(f"/workflows/{run}"))
    assert not [a for a in page.select("a") if a["href"].startswith("/batches/")]


def test_a_finished_batch_and_one_no_run_waits_for(client, runs, engine):
    from pgbus_web.models import batches

    with engine.begin() as conn:
        batches.insert_batch(conn, batch_id="lonely", description=None, total_jobs=2, now=utcnow())
        batches.record_jobs(conn, "lonely", completed=1, failed=1, now=utcnow())
    page = soup(client.get("/batches/lonely"))
    assert page.select_one('[data-status="finished"]') is not None
    assert text_of(page.select_one(".pgbus-batch-progress")) == "2 of 2 jobs done"
    assert text_of(page.select_one(".pgbus-empty")) == t("pgbus.batches.no_waiters")


@pytest.mark.parametrize("locale", ["de", "ja"])
@pytest.mark.parametrize("path", ["/batches/no-such-batch", "/batches/bad%00id", "/batches/" + "x" * 2000, "/batches/"])
def test_a_bad_batch_id_is_the_translated_404_page(client, runs, engine, path, locale):
    waiting_on(runs, "batch-a")
    before = everything(engine)
    response = client.get(path, headers={"Accept-Language": locale})
    assert response.status_code == 404
    page = soup(response)
    assert page.html["lang"] == locale
    with force_locale(locale):
        titles = {t("pgbus.batches.not_found_title"), t("pgbus.web.errors.not_found_title")}
    assert text_of(page.select_one("#pgbus-error-title")) in titles
    assert everything(engine) == before
