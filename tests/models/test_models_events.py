"""pgbus_workflow_events: the audit trail's caps, its closed list of event
names, and its append-only rule."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
import sqlalchemy as sa

from pgbus_web.models import events, workflow_rows
from pgbus_web.models.text import ELLIPSIS
from pgbus_web.rules import states
from pgbus_web.rules.limits import REASON_LIMIT


@pytest.fixture
def run_id(engine, new_id):
    workflow_id = new_id()
    with engine.begin() as conn:
        workflow_rows.insert_run(
            conn, {"workflow_id": workflow_id, "workflow_class": "OrderWorkflow", "status": "paused"}
        )
    return workflow_id


def count_events(engine):
    with engine.connect() as conn:
        return conn.execute(sa.text("SELECT count(*) FROM pgbus_workflow_events")).scalar_one()


def test_record_stores_who_what_why_and_the_step(engine, run_id):
    step = {"id": 41, "step_name": "capture_payment", "attempt": 3}
    at = datetime(2026, 3, 1, 9, 30, tzinfo=UTC)
    with engine.begin() as conn:
        event_id = events.record(
            conn,
            workflow_id=run_id,
            event="resumed",
            actor="dashboard:alice",
            reason="gateway is back",
            step=step,
            details={"action": "retry", "attempts": 3},
            created_at=at,
        )
        (event,) = events.for_run(conn, run_id)
    assert event == {
        "id": event_id,
        "workflow_id": run_id,
        "event": "resumed",
        "actor": "dashboard:alice",
        "reason": "gateway is back",
        "step_id": 41,
        "step_name": "capture_payment",
        "attempt": 3,
        "details": {"action": "retry", "attempts": 3},
        "created_at": at,
    }


def test_record_without_step_reason_or_details(engine, run_id):
    with engine.begin() as conn:
        events.record(conn, workflow_id=run_id, event="started", actor=states.SYSTEM_ACTOR)
        (event,) = events.for_run(conn, run_id)
    assert (event["reason"], event["step_id"], event["step_name"], event["attempt"], event["details"]) == (
        None,
        None,
        None,
        None,
        {},
    )
    assert event["created_at"] is not None


def test_a_long_reason_is_capped_at_1000_characters(engine, run_id):
    with engine.begin() as conn:
        events.record(conn, workflow_id=run_id, event="paused", actor="dashboard:bob", reason="x" * 5000)
        (event,) = events.for_run(conn, run_id)
    assert len(event["reason"]) == REASON_LIMIT == 1000
    assert event["reason"] == "x" * 999 + ELLIPSIS


def test_a_reason_of_exactly_1000_characters_is_kept_whole(engine, run_id):
    with engine.begin() as conn:
        events.record(conn, workflow_id=run_id, event="paused", actor="dashboard:bob", reason="y" * 1000)
        (event,) = events.for_run(conn, run_id)
    assert event["reason"] == "y" * 1000


def test_string_details_are_capped_and_other_values_kept(engine, run_id):
    details = {
        "error_message": "e" * 1500,
        "short": "ok",
        "attempts": 3,
        "retryable": False,
        "nested": {"message": "n" * 1500},
        "missing": None,
    }
    with engine.begin() as conn:
        events.record(conn, workflow_id=run_id, event="step_failed", actor="system", details=details)
        (event,) = events.for_run(conn, run_id)
    stored = event["details"]
    assert stored["error_message"] == "e" * 999 + ELLIPSIS
    assert len(stored["error_message"]) == events.DETAIL_LIMIT == 1000
    assert stored["short"] == "ok"
    assert (stored["attempts"], stored["retryable"], stored["missing"]) == (3, False, None)
    # Only top-level strings are capped, as pgbus does.
    assert stored["nested"] == {"message": "n" * 1500}


def test_detail_keys_are_stored_as_strings(engine, run_id):
    with engine.begin() as conn:
        events.record(conn, workflow_id=run_id, event="rescheduled", actor="app", details={1: "one"})
        (event,) = events.for_run(conn, run_id)
    assert event["details"] == {"1": "one"}


def test_an_unknown_event_is_refused_and_nothing_is_written(engine, run_id):
    with engine.begin() as conn:
        with pytest.raises(ValueError, match="unknown workflow event 'exploded'"):
            events.record(conn, workflow_id=run_id, event="exploded", actor="system")
    assert count_events(engine) == 0


def test_every_pgbus_event_name_is_accepted(engine, run_id):
    with engine.begin() as conn:
        for name in states.EVENTS:
            events.record(conn, workflow_id=run_id, event=name, actor="system")
        assert [e["event"] for e in events.for_run(conn, run_id)] == list(states.EVENTS)


def test_events_cannot_be_updated(engine, run_id):
    with engine.begin() as conn:
        event_id = events.record(conn, workflow_id=run_id, event="paused", actor="dashboard:alice", reason="why")
    for assignment in ("actor = 'mallory'", "reason = NULL", "details = '{}'::jsonb"):
        with pytest.raises(sa.exc.DBAPIError, match="append-only"):
            with engine.begin() as conn:
                conn.execute(sa.text(f"UPDATE pgbus_workflow_events SET {assignment} WHERE id = :id"), {"id": event_id})
    with engine.connect() as conn:
        (event,) = events.for_run(conn, run_id)
    assert (event["actor"], event["reason"]) == ("dashboard:alice", "why")


def test_the_database_refuses_an_uncapped_reason(engine, run_id):
    # Writers that skip record() still cannot store an uncapped reason.
    with pytest.raises(sa.exc.IntegrityError):
        with engine.begin() as conn:
            conn.execute(
                sa.text(
                    "INSERT INTO pgbus_workflow_events (workflow_id, event, actor, reason) "
                    "VALUES (:id, 'paused', 'app', :reason)"
                ),
                {"id": run_id, "reason": "z" * 1001},
            )
    assert count_events(engine) == 0


def test_for_run_is_oldest_first_and_only_that_run(engine, run_id, new_id):
    other = new_id()
    with engine.begin() as conn:
        workflow_rows.insert_run(conn, {"workflow_id": other, "workflow_class": "OrderWorkflow", "status": "ready"})
        events.record(conn, workflow_id=run_id, event="started", actor="system")
        events.record(conn, workflow_id=other, event="started", actor="system")
        events.record(conn, workflow_id=run_id, event="paused", actor="dashboard:bob")
        assert [e["event"] for e in events.for_run(conn, run_id)] == ["started", "paused"]


def test_newest_for_run_gives_a_window_and_the_runs_whole_count(engine, run_id, new_id):
    other, empty = new_id(), new_id()
    names = list(states.EVENTS)[:7]
    with engine.begin() as conn:
        for workflow_id in (other, empty):
            workflow_rows.insert_run(
                conn, {"workflow_id": workflow_id, "workflow_class": "OrderWorkflow", "status": "ready"}
            )
        ids = []
        for name in names:
            ids.append(events.record(conn, workflow_id=run_id, event=name, actor="system"))
            # Another run's events in between count for that run alone.
            events.record(conn, workflow_id=other, event="started", actor="system")
    with engine.connect() as conn:
        everything = events.for_run(conn, run_id)
        rows, total = events.newest_for_run(conn, run_id, limit=3)
        assert [row["id"] for row in rows] == ids[-3:]
        assert rows == everything[-3:]  # the same columns as the whole trail, nothing extra
        assert total == 7
        rows, total = events.newest_for_run(conn, run_id, limit=3, before_id=ids[2])
        assert [row["id"] for row in rows] == ids[:2]
        assert total == 7
        # Below every event: no row carries the count, which is still the run's.
        assert events.newest_for_run(conn, run_id, limit=3, before_id=ids[0]) == ([], 7)
        assert events.newest_for_run(conn, empty, limit=3) == ([], 0)
        assert events.newest_for_run(conn, other, limit=50)[1] == 7
