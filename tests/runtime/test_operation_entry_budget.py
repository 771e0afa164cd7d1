"""The index's "Act on all N matching runs" count has a budget of its own
(core/page_reads.MATCHING_BUDGET, docs/operations.md "The million-run trial"):
on a cold million-run table, status=failed with a time range took 17 s to
count, past the page's statement timeout, and the whole index answered
503 "Database unavailable". Past the budget the page is drawn, the entry
has no count and offers every verb; the connection keeps its own timeout."""

from __future__ import annotations

from datetime import timedelta

import sqlalchemy as sa
from support.action_support import ALICE, operator_app
from support.operation_support import seed_paused
from support.web_helpers import soup, text_of

from pgbus_web.core import page_reads
from pgbus_web.models import workflow_capped_counts, workflow_index
from pgbus_web.rules import verb_table

QUERY = {"status": "paused", "since": "24h"}


def index(client):
    response = client.get("/workflows", query_string=QUERY, headers={"X-User": ALICE})
    return response.status_code, soup(response)


def test_a_count_past_its_budget_leaves_the_entry_without_a_count(client, database, engine, monkeypatch):
    monkeypatch.setattr(page_reads, "MATCHING_CAP", 4_000)
    seed_paused(engine, 5_000)
    # Control: within the budget the entry counts up to its cap.
    status, page = index(client)
    assert status == 200
    assert text_of(page.select_one("form.pgbus-operation-entry label")) == "Act on more than 4,000 matching runs"
    # A budget no count of 10,000 runs meets (one millisecond), asked of a
    # fresh app: the first shows its kept read again while the change marker
    # stands (web/answering/page_cache.py).
    monkeypatch.setattr(page_reads, "MATCHING_BUDGET", 0.001)
    status, page = index(operator_app(database).test_client())
    assert status == 200
    assert text_of(page.select_one("form.pgbus-operation-entry label")) == "Act on all matching runs"
    assert len(page.select("#pgbus-operation-verb option")) == len(verb_table.TABLE)
    assert len(page.select("#pgbus-runs tbody tr")) > 0


def test_the_budget_is_the_count_s_alone(engine):
    seed_paused(engine, 3_000)
    where, binds = workflow_index.page_where(
        status="paused", threshold=timedelta(minutes=10), waiting_threshold=timedelta(hours=1)
    )
    # On an AUTOCOMMIT connection (a page's) and in a transaction, a
    # cancelled count answers None and the connection's timeout is as before.
    for options in ({"isolation_level": "AUTOCOMMIT"}, {}):
        with engine.connect() as conn:
            conn = conn.execution_options(**options)
            before = conn.execute(sa.text("SHOW statement_timeout")).scalar_one()
            assert (
                workflow_capped_counts.status_counts_up_to(conn, where=where, binds=binds, cap=10_000, budget=0.001)
                is None
            )
            assert conn.execute(sa.text("SHOW statement_timeout")).scalar_one() == before
            assert workflow_capped_counts.status_counts_up_to(
                conn, where=where, binds=binds, cap=10_000, budget=30
            ) == {"paused": 3_000}
            assert conn.execute(sa.text("SHOW statement_timeout")).scalar_one() == before
