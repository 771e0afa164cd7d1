"""pgbus_workflow_signals: idempotent insert, the pending and held queries,
and the single-winner claim and consume."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
import sqlalchemy as sa

from pgbus_web.models import signals, workflow_rows

AT = datetime(2026, 3, 1, 8, 0, tzinfo=UTC)


@pytest.fixture
def run_id(engine, new_id):
    workflow_id = new_id()
    with engine.begin() as conn:
        workflow_rows.insert_run(
            conn, {"workflow_id": workflow_id, "workflow_class": "OrderWorkflow", "status": "waiting"}
        )
    return workflow_id


def add_step(conn, workflow_id, step_name, attempt=1):
    return conn.execute(
        sa.text(
            "INSERT INTO pgbus_workflow_steps (workflow_id, step_name, status, attempt) "
            "VALUES (:workflow_id, :step_name, 'waiting', :attempt) RETURNING id"
        ),
        {"workflow_id": workflow_id, "step_name": step_name, "attempt": attempt},
    ).scalar_one()


def count_signals(engine):
    with engine.connect() as conn:
        return conn.execute(sa.text("SELECT count(*) FROM pgbus_workflow_signals")).scalar_one()


def test_insert_signal_returns_the_pending_signal(engine, run_id):
    with engine.begin() as conn:
        signal = signals.insert_signal(
            conn,
            workflow_id=run_id,
            name="shipment_confirmed",
            payload={"carrier": "DHL", "parcels": 2},
            idempotency_key="ship-1",
            now=AT,
        )
    assert signal["id"] > 0
    assert {
        key: signal[key] for key in ("workflow_id", "name", "payload", "idempotency_key", "status", "created_at")
    } == {
        "workflow_id": run_id,
        "name": "shipment_confirmed",
        "payload": {"carrier": "DHL", "parcels": 2},
        "idempotency_key": "ship-1",
        "status": "pending",
        "created_at": AT,
    }
    assert (signal["claimed_by_step_id"], signal["claimed_at"], signal["consumed_at"]) == (None, None, None)


def test_a_repeated_idempotency_key_inserts_nothing_and_returns_none(engine, run_id):
    with engine.begin() as conn:
        first = signals.insert_signal(
            conn, workflow_id=run_id, name="shipment_confirmed", payload={"n": 1}, idempotency_key="ship-1"
        )
        again = signals.insert_signal(
            conn, workflow_id=run_id, name="shipment_confirmed", payload={"n": 2}, idempotency_key="ship-1"
        )
        assert again is None
        assert signals.find_by_key(conn, run_id, "ship-1")["id"] == first["id"]
        assert signals.find_by_key(conn, run_id, "ship-1")["payload"] == {"n": 1}
    assert count_signals(engine) == 1


def test_the_same_key_on_another_run_and_signals_without_a_key_are_all_stored(engine, run_id, new_id):
    other = new_id()
    with engine.begin() as conn:
        workflow_rows.insert_run(conn, {"workflow_id": other, "workflow_class": "OrderWorkflow", "status": "waiting"})
        assert signals.insert_signal(conn, workflow_id=other, name="s", payload={}, idempotency_key="k") is not None
        assert signals.insert_signal(conn, workflow_id=run_id, name="s", payload={}, idempotency_key="k") is not None
        assert signals.insert_signal(conn, workflow_id=run_id, name="s", payload={}) is not None
        assert signals.insert_signal(conn, workflow_id=run_id, name="s", payload={}) is not None
    assert count_signals(engine) == 4


def test_find_by_key_of_an_unknown_key_is_none(engine, run_id):
    with engine.connect() as conn:
        assert signals.find_by_key(conn, run_id, "nope") is None


def test_pending_for_oldest_first_optionally_by_name(engine, run_id):
    with engine.begin() as conn:
        a = signals.insert_signal(conn, workflow_id=run_id, name="shipment_confirmed", payload={"n": 1})
        b = signals.insert_signal(conn, workflow_id=run_id, name="profile_completed", payload={"n": 2})
        c = signals.insert_signal(conn, workflow_id=run_id, name="shipment_confirmed", payload={"n": 3})
        step_id = add_step(conn, run_id, "await_shipment")
        signals.claim(conn, a["id"], step_id=step_id)
        assert [s["id"] for s in signals.pending_for(conn, run_id)] == [b["id"], c["id"]]
        assert [s["id"] for s in signals.pending_for(conn, run_id, "shipment_confirmed")] == [c["id"]]
        assert signals.pending_for(conn, run_id, "nothing") == []


def test_claim_and_consume_each_have_one_winner(engine, run_id):
    with engine.begin() as conn:
        signal = signals.insert_signal(conn, workflow_id=run_id, name="shipment_confirmed", payload={})
        step_id = add_step(conn, run_id, "await_shipment")
        other_step = add_step(conn, run_id, "await_shipment", attempt=2)
        assert signals.consume(conn, signal["id"]) == 0  # not claimed yet
        assert signals.claim(conn, signal["id"], step_id=step_id, now=AT) == 1
        assert signals.claim(conn, signal["id"], step_id=other_step) == 0
        (claimed,) = signals.for_run(conn, run_id)
        assert (claimed["status"], claimed["claimed_by_step_id"], claimed["claimed_at"]) == ("claimed", step_id, AT)
        assert signals.consume(conn, signal["id"], now=AT) == 1
        assert signals.consume(conn, signal["id"]) == 0
        assert signals.claim(conn, signal["id"], step_id=other_step) == 0
        (done,) = signals.for_run(conn, run_id)
    assert (done["status"], done["claimed_by_step_id"], done["consumed_at"]) == ("consumed", step_id, AT)


def test_held_by_step_is_the_claimed_unconsumed_signal_of_any_attempt(engine, run_id):
    with engine.begin() as conn:
        first_attempt = add_step(conn, run_id, "await_shipment")
        add_step(conn, run_id, "await_shipment", attempt=2)
        signal = signals.insert_signal(conn, workflow_id=run_id, name="shipment_confirmed", payload={"n": 1})
        assert signals.held_by_step(conn, run_id, "await_shipment") is None  # pending, not held
        signals.claim(conn, signal["id"], step_id=first_attempt)
        held = signals.held_by_step(conn, run_id, "await_shipment")
        assert (held["id"], held["payload"]) == (signal["id"], {"n": 1})
        assert signals.held_by_step(conn, run_id, "send_receipt") is None
        signals.consume(conn, signal["id"])
        assert signals.held_by_step(conn, run_id, "await_shipment") is None


def test_held_by_step_ignores_another_runs_step_of_the_same_name(engine, run_id, new_id):
    other = new_id()
    with engine.begin() as conn:
        workflow_rows.insert_run(conn, {"workflow_id": other, "workflow_class": "OrderWorkflow", "status": "waiting"})
        other_step = add_step(conn, other, "await_shipment")
        signal = signals.insert_signal(conn, workflow_id=run_id, name="shipment_confirmed", payload={})
        # A claim by a step id of another run does not make it held here.
        signals.claim(conn, signal["id"], step_id=other_step)
        assert signals.held_by_step(conn, run_id, "await_shipment") is None


@pytest.mark.parametrize(
    "stored, read_back",
    [
        (
            {"carrier": "DHL", "items": [1, 2], "meta": {"a": None}},
            {"carrier": "DHL", "items": [1, 2], "meta": {"a": None}},
        ),
        ({}, {}),
        (None, {}),
    ],
)
def test_payload_reads_back_as_a_dict(engine, run_id, stored, read_back):
    with engine.begin() as conn:
        inserted = signals.insert_signal(conn, workflow_id=run_id, name="s", payload=stored, idempotency_key="k")
        assert inserted["payload"] == read_back
        assert signals.find_by_key(conn, run_id, "k")["payload"] == read_back
        assert signals.for_run(conn, run_id)[0]["payload"] == read_back


def test_a_payload_written_as_a_non_object_reads_back_as_stored(engine, run_id):
    # Another writer stored a JSON array: readers get that array (the page
    # shows it, marked), not an empty dict that would say something else.
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                "INSERT INTO pgbus_workflow_signals (workflow_id, name, payload) "
                "VALUES (:id, 's', CAST(:payload AS jsonb))"
            ),
            {"id": run_id, "payload": json.dumps([1, 2])},
        )
        assert signals.pending_for(conn, run_id)[0]["payload"] == [1, 2]
