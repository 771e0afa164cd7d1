"""A run's page shows its newest attempts and events and the older ones a
window at a time, with htmx (one block swapped, the address following)
and without (a plain link to the whole page): the page's size stays the
same whatever the run's history. A bad window position is refused with
400 and changes nothing."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from support.action_support import long_history, operator_app
from support.refusals import everything
from support.web_helpers import soup, step

from pgbus_web.core import page_reads
from pgbus_web.rules import states


@pytest.fixture
def client(database):
    return operator_app(database).test_client()


def attempt_ids(page) -> list[int]:
    return [int(li["id"].rpartition("-")[2]) for li in page.select("#pgbus-run-steps li.pgbus-attempt")]


def event_count(page) -> int:
    return len(page.select("#pgbus-run-audit li.pgbus-event"))


def test_a_long_history_shows_the_newest_and_counts_them_all(client, runs, engine):
    run = long_history(engine, runs, 200, 600)
    response = client.get(f"/workflows/{run}")
    assert response.status_code == 200
    page = soup(response)
    ids = attempt_ids(page)
    assert len(ids) == page_reads.ATTEMPTS_SHOWN
    with engine.connect() as conn:
        newest = (
            conn.execute(
                sa.text("SELECT id FROM pgbus_workflow_steps WHERE workflow_id = :w ORDER BY id DESC LIMIT :n"),
                {"w": run, "n": page_reads.ATTEMPTS_SHOWN},
            )
            .scalars()
            .all()
        )
    assert sorted(ids) == sorted(newest)
    assert event_count(page) == page_reads.EVENTS_SHOWN
    # The counts are the whole history's; the latest attempt's badge is the newest.
    assert "201 attempts" in page.select_one("#pgbus-run-steps .pgbus-card-head").get_text()
    assert "600 events" in page.select_one("#pgbus-run-audit .pgbus-card-head").get_text()
    charge = page.select_one('li.pgbus-step[data-step="capture_payment"]')
    assert "200 attempts" in charge.get_text()
    # reserve_stock's only attempt is not shown, but its step still counts it.
    assert "1 attempt" in page.select_one('li.pgbus-step[data-step="reserve_stock"]').get_text()
    assert "25 of 201 attempts are shown." in page.select_one("#pgbus-run-steps .pgbus-window").get_text()


def test_the_page_stays_the_same_size_whatever_the_history(client, runs, engine):
    small = client.get(f"/workflows/{long_history(engine, runs, 60, 120)}").data
    large = client.get(f"/workflows/{long_history(engine, runs, 600, 1800)}").data
    assert abs(len(large) - len(small)) < 0.05 * len(small)


def test_without_javascript_the_older_link_is_a_whole_page_of_older_ones(client, runs, engine):
    run = long_history(engine, runs, 200, 600)
    first = soup(client.get(f"/workflows/{run}"))
    link = first.select_one("#pgbus-run-steps a.pgbus-window-older")
    href = link["href"]
    assert href.endswith("#pgbus-run-steps") and "attempts_before=" in href
    older = client.get(href.partition("#")[0])
    assert older.status_code == 200
    page = soup(older)
    assert page.select_one("header.pgbus-topbar") is not None  # a whole page
    older_ids = attempt_ids(page)
    assert len(older_ids) == page_reads.ATTEMPTS_SHOWN
    assert max(older_ids) < min(attempt_ids(first))
    # The audit stays at the newest, and a link leads back to the newest attempts.
    assert event_count(page) == page_reads.EVENTS_SHOWN
    back = page.select_one("#pgbus-run-steps a.pgbus-window-newest")["href"]
    assert attempt_ids(soup(client.get(back.partition("#")[0]))) == attempt_ids(first)
    # Walking all the way: the last window has no older link.
    href, seen = href, set(attempt_ids(first))
    while href:
        page = soup(client.get(href.partition("#")[0]))
        seen |= set(attempt_ids(page))
        link = page.select_one("#pgbus-run-steps a.pgbus-window-older")
        href = link["href"] if link else None
    assert len(seen) == 201


def test_with_htmx_the_older_events_swap_the_audit_block_alone(client, runs, engine):
    run = long_history(engine, runs, 10, 600)
    first = soup(client.get(f"/workflows/{run}"))
    assert first.select_one("#pgbus-run-steps .pgbus-window") is None  # control: 11 attempts fit
    link = first.select_one("#pgbus-run-audit a.pgbus-window-older")
    assert (link["hx-target"], link["hx-swap"], link["hx-push-url"]) == ("#pgbus-run-audit", "outerHTML", "true")
    response = client.get(link["hx-get"], headers={"HX-Request": "true", "HX-Target": "pgbus-run-audit"})
    assert response.status_code == 200
    block = soup(response)
    assert block.select_one("#pgbus-run-steps") is None and block.select_one("header.pgbus-topbar") is None
    assert event_count(block) == page_reads.EVENTS_SHOWN
    assert block.select_one("#pgbus-run-audit a.pgbus-window-newest") is not None


def test_a_short_history_has_no_window_links(client, runs):
    run = runs.make(states.FAILED, step("charge", "failed", error_class="Boom"))
    page = soup(client.get(f"/workflows/{run}"))
    assert page.select(".pgbus-window") == []
    assert len(attempt_ids(page)) == 1


@pytest.mark.parametrize("value", ["abc", "-1", "0", "9" * 20, "1.5", "١٢"])
def test_a_bad_window_position_is_refused_and_changes_nothing(client, runs, engine, value):
    run = long_history(engine, runs, 30, 60)
    before = everything(engine)
    response = client.get(f"/workflows/{run}", query_string={"events_before": value})
    assert response.status_code == 400
    assert "events_before" in response.get_data(as_text=True)
    assert everything(engine) == before
