"""Helpers the runtime and worker tests share (imported by them).

A ``Driver`` holds a clock the test moves by hand, so retries, timers,
wait timeouts and stalls happen without sleeping.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa

from pgbus_web.demo import workflows as demo
from pgbus_web.models import events, signals, steps, workflow_rows
from pgbus_web.runtime import system
from pgbus_web.runtime.worker import Worker

T0 = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)

# Every table a verb or the worker writes, with the order its rows compare in.
WORKFLOW_TABLES = {
    "pgbus_workflows": "id",
    "pgbus_workflow_steps": "id",
    "pgbus_workflow_events": "id",
    "pgbus_workflow_signals": "id",
    "pgbus_batches": "id",
}


def snapshot(engine) -> dict[str, list[tuple]]:
    """Every row of every workflow table: compared before and after a
    refused verb to prove it wrote nothing."""
    with engine.connect() as conn:
        return {
            table: [tuple(row) for row in conn.execute(sa.text(f"SELECT * FROM {table} ORDER BY {key}"))]
            for table, key in WORKFLOW_TABLES.items()
        }


class Driver:
    """A run-driving helper: a worker over the demo registry (or another)
    and a hand-moved clock."""

    def __init__(self, engine, registry=demo.REGISTRY, now: datetime = T0):
        self.engine = engine
        self.registry = registry
        self.now = now
        self.worker = Worker(engine, registry, simulate_batches=True, rng=random.Random(7), clock=lambda: self.now)

    def start(self, workflow_class: str, arguments: dict[str, Any] | None = None, **options) -> str:
        run = system.start(
            self.engine, workflow_class, arguments or {}, registry=self.registry, now=self.now, **options
        )
        return run["workflow_id"]

    def later(self, **delta) -> datetime:
        self.now = self.now + timedelta(**delta)
        return self.now

    def drain(self):
        """Run everything due now (and finish demo batches) until idle."""
        return self.worker.drain(now=self.now)

    def run(self, workflow_id: str) -> dict[str, Any]:
        with self.engine.connect() as conn:
            return workflow_rows.find(conn, workflow_id)

    def status(self, workflow_id: str) -> str:
        return self.run(workflow_id)["status"]

    def steps(self, workflow_id: str) -> list[tuple]:
        """(step_name, attempt, status, error_class) of every row, oldest first."""
        with self.engine.connect() as conn:
            return [
                (row["step_name"], row["attempt"], row["status"], row["error_class"])
                for row in steps.for_run(conn, workflow_id)
            ]

    def step_rows(self, workflow_id: str) -> list[dict[str, Any]]:
        with self.engine.connect() as conn:
            return steps.for_run(conn, workflow_id)

    def latest(self, workflow_id: str) -> dict[str, Any]:
        with self.engine.connect() as conn:
            return steps.latest(conn, workflow_id)

    def events(self, workflow_id: str) -> list[tuple]:
        """(event, actor, reason, step_name, attempt) of every event, oldest first."""
        with self.engine.connect() as conn:
            return [
                (row["event"], row["actor"], row["reason"], row["step_name"], row["attempt"])
                for row in events.for_run(conn, workflow_id)
            ]

    def event_rows(self, workflow_id: str) -> list[dict[str, Any]]:
        with self.engine.connect() as conn:
            return events.for_run(conn, workflow_id)

    def signals(self, workflow_id: str) -> list[dict[str, Any]]:
        with self.engine.connect() as conn:
            return signals.for_run(conn, workflow_id)

    # Runs brought to a status through the demo workflows themselves.

    def paused_on_capture(self, **arguments) -> str:
        """An order paused after capture_payment failed all 3 attempts."""
        workflow_id = self.start(demo.ORDER, {"order_id": 1, "fail_capture": True, "vendors": 2, **arguments})
        self.drain()
        self.later(seconds=10)
        self.drain()
        self.later(seconds=20)
        self.drain()
        assert self.status(workflow_id) == "paused"
        return workflow_id

    def waiting_for_shipment(self, **arguments) -> str:
        workflow_id = self.start(demo.ORDER, {"order_id": 2, "vendors": 2, **arguments})
        self.drain()
        assert self.status(workflow_id) == "waiting"
        assert self.latest(workflow_id)["step_name"] == "await_shipment"
        return workflow_id

    def ready_with_timer(self) -> str:
        """An onboarding run ready, its send_tips step due in a day."""
        workflow_id = self.start(demo.ONBOARDING, {"user_id": 1})
        self.drain()
        assert self.status(workflow_id) == "ready"
        assert self.latest(workflow_id)["step_name"] == "send_tips"
        return workflow_id

    def completed(self) -> str:
        workflow_id = self.start(demo.REFUND, {"refund_id": 1})
        self.drain()
        assert self.status(workflow_id) == "completed"
        return workflow_id
