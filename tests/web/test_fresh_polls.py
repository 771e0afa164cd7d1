"""Unchanged live-refresh polls are answered 304 with no body, after one
read of the change marker; any write the fragments could show, the clock
moving into the next time bucket, another locale or other fragments answer
in full (web/answering/not_modified.py, schema/v3.sql's change marker)."""

from __future__ import annotations

import time

import pytest
import sqlalchemy as sa
from support.action_support import ago, operator_app
from support.statements import statements
from support.web_helpers import soup, step

from pgbus_web.models import changes
from pgbus_web.rules import states
from pgbus_web.web.answering import not_modified as fresh

RUNS = "pgbus-counts,pgbus-runs"
RUN_PAGE = "pgbus-run-header,pgbus-run-steps,pgbus-run-signals,pgbus-run-timeline,pgbus-run-audit"


def poll(client, url: str, targets: str, tag: str | None = None, **headers):
    headers = {"HX-Request": "true", "HX-Target": targets, **headers}
    if tag:
        headers["If-None-Match"] = f'"{tag}"'
    return client.get(url, headers=headers)


@pytest.fixture
def client(database, monkeypatch):
    # The clock stands still (mid-bucket) unless a test moves it: a poll
    # and the next must not straddle a bucket's end by chance.
    still = (time.time() // fresh.TIME_BUCKET + 0.5) * fresh.TIME_BUCKET
    monkeypatch.setattr(fresh, "_now", lambda: still)
    return operator_app(database).test_client()


def listed(response) -> list[str]:
    return [row["data-workflow-id"] for row in soup(response).select("#pgbus-runs tr.pgbus-run-row")]


def test_an_unchanged_runs_poll_is_304_with_no_body_and_one_read(client, runs):
    first_run = runs.make(states.RUNNING, step("charge", "in_progress", started_at=ago(minutes=1)))
    first = poll(client, "/workflows", RUNS)
    assert first.status_code == 200 and listed(first) == [first_run]
    tag = first.headers["ETag"].strip('"')
    assert "no-cache" in first.headers["Cache-Control"] and "private" in first.headers["Cache-Control"]

    with statements() as seen:
        again = poll(client, "/workflows", RUNS, tag)
    assert (again.status_code, again.data) == (304, b"")
    assert again.headers["ETag"].strip('"') == tag
    assert len(seen) == 1 and "pgbus_web_change_total" in seen[0]

    # Control: a poll without the tag is answered in full.
    assert poll(client, "/workflows", RUNS).status_code == 200


@pytest.mark.parametrize("write", ["new run", "status", "step", "event", "delete", "truncate"])
def test_any_write_the_fragments_show_answers_in_full(client, runs, engine, write):
    run = runs.make(states.RUNNING, step("charge", "in_progress", started_at=ago(minutes=1)))
    tag = poll(client, "/workflows", RUNS).headers["ETag"].strip('"')
    run_tag = poll(client, f"/workflows/{run}", RUN_PAGE).headers["ETag"].strip('"')
    assert poll(client, "/workflows", RUNS, tag).status_code == 304
    statements_by_write = {
        "status": "UPDATE pgbus_workflows SET status = 'completed' WHERE workflow_id = :w",
        "step": "UPDATE pgbus_workflow_steps SET status = 'completed' WHERE workflow_id = :w",
        "event": "INSERT INTO pgbus_workflow_events (workflow_id, event, actor) VALUES (:w, 'note', 'x')",
        "delete": "DELETE FROM pgbus_workflow_steps WHERE workflow_id = :w",
        "truncate": "TRUNCATE pgbus_workflow_events",
    }
    if write == "new run":
        made = runs.make(states.FAILED)
    else:
        with engine.begin() as conn:
            conn.execute(sa.text(statements_by_write[write]), {"w": run})
    answer = poll(client, "/workflows", RUNS, tag)
    assert answer.status_code == 200
    if write == "new run":
        assert listed(answer)[0] == made
    if write == "status":
        assert soup(answer).select_one(f'tr[data-workflow-id="{run}"]')["data-badge"] == "completed"
    assert poll(client, f"/workflows/{run}", RUN_PAGE, run_tag).status_code == 200


def test_a_write_rolled_back_changes_nothing(client, runs, engine):
    run = runs.make(states.RUNNING)
    tag = poll(client, "/workflows", RUNS).headers["ETag"].strip('"')
    with engine.connect() as conn:
        with conn.begin():
            conn.execute(sa.text("UPDATE pgbus_workflows SET status = 'failed' WHERE workflow_id = :w"), {"w": run})
            conn.rollback()
    assert poll(client, "/workflows", RUNS, tag).status_code == 304


def test_the_next_time_bucket_answers_in_full(client, runs, monkeypatch):
    runs.make(states.PAUSED)
    tag = poll(client, "/workflows", RUNS).headers["ETag"].strip('"')
    assert poll(client, "/workflows", RUNS, tag).status_code == 304
    later = fresh._now() + fresh.TIME_BUCKET
    monkeypatch.setattr(fresh, "_now", lambda: later)
    assert poll(client, "/workflows", RUNS, tag).status_code == 200


def test_other_fragments_filters_or_locale_answer_in_full(client, runs):
    runs.make(states.PAUSED)
    tag = poll(client, "/workflows", RUNS).headers["ETag"].strip('"')
    assert poll(client, "/workflows", "pgbus-runs", tag).status_code == 200
    assert poll(client, "/workflows?status=paused", RUNS, tag).status_code == 200
    assert poll(client, "/workflows", RUNS, tag, **{"Accept-Language": "de"}).status_code == 200
    assert poll(client, "/workflows", RUNS, tag).status_code == 304


def test_a_whole_page_is_never_answered_304(client, runs):
    run = runs.make(states.PAUSED)
    tag = poll(client, "/workflows", RUNS).headers["ETag"].strip('"')
    whole = client.get("/workflows", headers={"If-None-Match": f'"{tag}"'})
    assert whole.status_code == 200 and "ETag" not in whole.headers
    assert client.get(f"/workflows/{run}", headers={"If-None-Match": f'"{tag}"'}).status_code == 200


def test_the_run_page_fragments_poll_and_a_missing_run_is_not_tagged(client, runs):
    run = runs.make(states.PAUSED)
    first = poll(client, f"/workflows/{run}", RUN_PAGE)
    tag = first.headers["ETag"].strip('"')
    assert poll(client, f"/workflows/{run}", RUN_PAGE, tag).status_code == 304
    missing = poll(client, "/workflows/nobody-here", RUN_PAGE)
    assert missing.status_code == 404 and "ETag" not in missing.headers


def test_the_marker_grows_once_per_committed_transaction(engine, runs):
    with engine.connect() as conn:
        before = changes.marker(conn)
    with engine.begin() as conn:
        for n in range(3):
            conn.execute(
                sa.text("INSERT INTO pgbus_workflows (workflow_id, workflow_class, status) VALUES (:w, 'C', 'ready')"),
                {"w": f"m{n}"},
            )
    with engine.connect() as conn:
        assert changes.marker(conn) == before + 1
        conn.execute(sa.text("SELECT pgbus_web_change_fold()"))
        conn.commit()
        assert changes.marker(conn) == before + 1
