"""The short id the pages print (a run id's first eight characters) as an
address: /workflows/<short id> opens the one run it names, lists the runs
when it names several, and is the run-not-found page when it names none;
the lookup reads the run id search index, two rows at most."""

from __future__ import annotations

import sqlalchemy as sa
from flask import url_for
from support.web_helpers import soup

from pgbus_web.models import run_lookups
from pgbus_web.rules import states

RUN_ID = "649197be-1c2d-4e5f-8a9b-0c1d2e3f4a5b"
# Shares seven characters with RUN_ID.
NEIGHBOUR_ID = "649197bf-0000-4000-8000-000000000000"


def link(app, endpoint: str, **values) -> str:
    with app.test_request_context():
        return url_for(endpoint, **values)


def test_a_short_id_of_one_run_opens_its_page(app, client, runs):
    runs.make(states.PAUSED, workflow_id=RUN_ID)
    runs.make(states.COMPLETED, workflow_id=NEIGHBOUR_ID)
    for short in (RUN_ID[:8], RUN_ID[:8].upper(), RUN_ID[:13]):
        response = client.get(f"/workflows/{short}")
        assert response.status_code == 303, short
        assert response.headers["Location"] == link(app, "pgbus_web.workflow", workflow_id=RUN_ID)
    assert client.get(response.headers["Location"]).status_code == 200


def test_a_short_id_of_several_runs_lists_them(app, client, runs):
    runs.make(states.PAUSED, workflow_id=RUN_ID)
    runs.make(states.COMPLETED, workflow_id=NEIGHBOUR_ID)
    response = client.get("/workflows/649197b")
    assert response.status_code == 303
    assert response.headers["Location"] == link(app, "pgbus_web.workflows", q="649197b")
    listed = soup(client.get(response.headers["Location"])).select("tr.pgbus-run-row")
    assert {row["data-workflow-id"] for row in listed} == {RUN_ID, NEIGHBOUR_ID}


def test_a_short_id_of_no_run_is_not_found(client, runs):
    runs.make(states.PAUSED, workflow_id=RUN_ID)
    # Too short to be taken as a prefix, no run's prefix, or not text at all.
    for missing in ("649", "649197bx", "0000000a", "649197be%00"):
        assert client.get(f"/workflows/{missing}").status_code == 404, missing


def test_a_whole_id_wins_over_a_longer_one_it_starts(app, client, runs):
    runs.make(states.PAUSED, workflow_id=RUN_ID[:8])
    runs.make(states.PAUSED, workflow_id=RUN_ID)
    assert client.get(f"/workflows/{RUN_ID[:8]}").status_code == 200


def test_the_prefix_lookup_reads_the_search_index(engine, runs):
    runs.make(states.PAUSED, workflow_id=RUN_ID)
    sent = []

    def grab(conn, cursor, statement, parameters, context, executemany):
        sent.append((statement, parameters))

    # Listened to on this connection only: the session's engine is shared
    # with threads of earlier tests' apps, whose statements are not this one.
    with engine.connect() as conn:
        sa.event.listen(conn, "before_cursor_execute", grab)
        assert run_lookups.ids_starting_with(conn, RUN_ID[:8]) == [RUN_ID]
    statement, parameters = sent[-1]
    with engine.connect() as conn:
        cursor = conn.connection.driver_connection.cursor()
        # A table this small is cheaper to read whole; with that ruled out,
        # a plan that could not use the index would still be a Seq Scan.
        cursor.execute("SET LOCAL enable_seqscan = off")
        # Nor a bitmap scan, which the planner may pick on the stale
        # statistics earlier tests leave: it reads the same index but drops
        # its order, and the Sort it adds would hide whether the order serves.
        cursor.execute("SET LOCAL enable_bitmapscan = off")
        cursor.execute("EXPLAIN " + statement, parameters)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "pgbus_workflows_search_id" in plan and "Seq Scan" not in plan, plan
    assert "Limit" in plan and "Sort" not in plan, plan
