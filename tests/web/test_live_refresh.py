"""Live refresh on the server side: a poll names the fragments it swaps in
HX-Target, and the index reads only those blocks' queries (statements
counted on the engine), for the filters and the page the poll's URL
carries. The browser side (the poll keeps the address bar's list) is in
test_browser_actions.py."""

from __future__ import annotations

from datetime import timedelta

from support.action_support import ago, operator_app, paused_on_capture
from support.statements import statements
from support.web_helpers import soup, step

from pgbus_web.models import workflow_attention, workflow_counts
from pgbus_web.rules import states
from pgbus_web.web.routes import actions


def attention_sql(engine) -> set[str]:
    """The statements that group the stuck runs, as the models send them."""
    with statements() as seen, engine.connect() as conn:
        workflow_attention.attention_groups(conn, threshold=timedelta(minutes=10), waiting_threshold=timedelta(days=1))
    assert seen
    return set(seen)


def count_sql(engine) -> set[str]:
    with statements() as seen, engine.connect() as conn:
        workflow_counts.status_counts(conn)
    return set(seen)


def poll(client, url: str, targets: str):
    return client.get(url, headers={"HX-Request": "true", "HX-Target": targets})


def some_runs(runs) -> dict[str, str]:
    return {
        "failed": runs.make(
            states.FAILED, step("issue_refund", "failed", finished_at=ago(minutes=3)), finished_at=ago(minutes=3)
        ),
        "paused": paused_on_capture(runs),
        "completed": runs.make(
            states.COMPLETED, step("send_receipt", "completed", finished_at=ago(minutes=8)), finished_at=ago(minutes=8)
        ),
    }


def test_a_poll_reads_the_runs_and_counts_but_not_the_attention_groups(database, engine, runs):
    made = some_runs(runs)
    client = operator_app(database).test_client()
    grouping, counting = attention_sql(engine), count_sql(engine)
    with statements() as seen:
        response = poll(client, "/workflows?status=failed", "pgbus-counts,pgbus-runs")
    assert response.status_code == 200
    assert grouping.isdisjoint(seen)
    assert counting & set(seen)
    page = soup(response)
    assert page.select_one("#pgbus-attention") is None
    assert page.select_one("#pgbus-counts") is not None
    # The poll's URL carries the filter: the list stays the failed runs.
    assert [row["data-workflow-id"] for row in page.select("#pgbus-runs tr.pgbus-run-row")] == [made["failed"]]
    # Fragments only, no page frame around them.
    assert page.select_one("header.pgbus-topbar") is None


def test_a_poll_of_the_total_alone_reads_the_counts(database, engine, runs):
    some_runs(runs)
    client = operator_app(database).test_client()
    counting = count_sql(engine)
    with statements() as seen:
        page = soup(poll(client, "/workflows", "pgbus-total"))
    assert counting & set(seen)
    assert [element["id"] for element in page.find_all(id=True)] == ["pgbus-total"]
    assert page.select_one("#pgbus-total").get_text() == "3 runs in all"
    # Control: the runs alone do not read the counts.
    with statements() as seen:
        poll(client, "/workflows", "pgbus-runs")
    assert counting.isdisjoint(seen)


def test_every_sixth_poll_also_reads_the_attention_groups(database, engine, runs):
    made = some_runs(runs)
    client = operator_app(database).test_client()
    grouping = attention_sql(engine)
    with statements() as seen:
        response = poll(client, "/workflows", "pgbus-counts,pgbus-runs,pgbus-attention")
    assert grouping & set(seen)
    page = soup(response)
    assert page.select_one('#pgbus-attention tr.pgbus-attention-group[data-reason="paused_error"]') is not None
    assert len(page.select("#pgbus-runs tr.pgbus-run-row")) == len(made)


def test_a_poll_of_an_older_page_keeps_that_page(database, runs):
    ids = [runs.make(states.COMPLETED, created_at=ago(minutes=60 - minute)) for minute in range(7)]
    client = operator_app(database, page_size=5).test_client()
    first = soup(client.get("/workflows"))
    older = first.select_one('#pgbus-runs a[rel="next"]')["href"]
    page = soup(poll(client, older, "pgbus-counts,pgbus-runs"))
    assert [row["data-workflow-id"] for row in page.select("#pgbus-runs tr.pgbus-run-row")] == ids[1::-1]


def test_a_target_naming_no_fragment_gets_the_whole_page(database, runs):
    some_runs(runs)
    client = operator_app(database).test_client()
    page = soup(poll(client, "/workflows", "pgbus-refresh"))
    for fragment in ("pgbus-counts", "pgbus-attention", "pgbus-runs"):
        assert page.select_one(f"#{fragment}") is not None
    assert page.select_one("header.pgbus-topbar") is not None


def test_the_poller_says_what_it_reads_often_and_seldom(database, runs):
    workflow_id = paused_on_capture(runs)
    client = operator_app(database).test_client()
    index = soup(client.get("/workflows?status=failed")).select_one("#pgbus-refresh")
    # The gone workers' banner on every poll: a worker falls silent between two.
    assert index["data-pgbus-often"] == "pgbus-workers-banner,pgbus-total,pgbus-counts,pgbus-runs"
    assert index["data-pgbus-seldom"] == "pgbus-attention"
    assert index["data-pgbus-seldom-every"] == str(actions.REFRESH_SELDOM_EVERY)
    run = soup(client.get(f"/workflows/{workflow_id}")).select_one("#pgbus-refresh")
    assert run["data-pgbus-often"] == (
        "pgbus-run-header,pgbus-run-steps,pgbus-run-signals,pgbus-run-timeline,pgbus-run-audit"
    )
    assert run["data-pgbus-seldom"] == ""


def test_a_run_poll_gets_every_run_fragment_without_the_frame(database, runs):
    workflow_id = paused_on_capture(runs)
    client = operator_app(database).test_client()
    targets = "pgbus-run-header,pgbus-run-steps,pgbus-run-signals,pgbus-run-timeline,pgbus-run-audit"
    page = soup(poll(client, f"/workflows/{workflow_id}", targets))
    for target in targets.split(","):
        assert page.select_one(f"#{target}") is not None
    assert page.select_one("header.pgbus-topbar") is None
