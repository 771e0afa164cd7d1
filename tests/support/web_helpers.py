"""Helpers for the page tests: an app on the test database, a maker of runs
in any state (rows written directly, so a test states exactly what it
shows), and HTML parsing."""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa
from bs4 import BeautifulSoup
from flask import Flask, url_for

from pgbus_web.demo.workflows import REGISTRY
from pgbus_web.extension import PgbusWeb
from pgbus_web.models import batches, events, signals, steps, workflow_rows
from pgbus_web.plumbing import security
from pgbus_web.rules import states


def utcnow() -> datetime:
    return datetime.now(UTC)


def soup(response) -> BeautifulSoup:
    return BeautifulSoup(response.get_data(as_text=True), "html.parser")


def text_of(node) -> str:
    """An element's text with runs of whitespace made single spaces."""
    return " ".join(node.get_text(" ").split()) if node is not None else ""


def make_app(database, **settings):
    from pgbus_web.app import create_app

    # No operations thread unless a test asks: it would race the tests'
    # own look at an operation's status.
    values = {"database": database, "registry": REGISTRY, "TESTING": True, "run_operations": False, **settings}
    return create_app(values)


@dataclass
class Step:
    """One step attempt to write: name, status and any step column."""

    name: str
    status: str
    columns: dict[str, Any] = field(default_factory=dict)


def step(name: str, status: str, **columns: Any) -> Step:
    return Step(name, status, columns)


class Runs:
    """Writes runs with their steps, events, signals and batches."""

    _subjects = itertools.count(1000)

    def __init__(self, engine):
        self.engine = engine

    def make(
        self,
        status: str,
        *attempts: Step,
        workflow_class: str = "OrderWorkflow",
        subject: tuple[str, str] | None | bool = True,
        arguments: dict[str, Any] | None = None,
        created_at: datetime | None = None,
        events_: Iterable[dict[str, Any]] = (),
        signals_: Iterable[dict[str, Any]] = (),
        batch: dict[str, Any] | None = None,
        workflow_id: str | None = None,
        **run_columns: Any,
    ) -> str:
        """A run in *status* whose step attempts are *attempts* (oldest
        first); returns its workflow_id (a fresh uuid unless given).
        ``subject=True`` gives a fresh "Order <n>"; a batch dict is opened
        and its id put on the last attempt."""
        workflow_id = workflow_id or str(uuid.uuid4())
        now = utcnow()
        created_at = created_at or now - timedelta(hours=1)
        if subject is True:
            subject = ("Order", str(next(self._subjects)))
        attrs = {
            "workflow_id": workflow_id,
            "workflow_class": workflow_class,
            "status": status,
            "current_step": attempts[-1].name if attempts else None,
            "arguments": arguments or {},
            "created_at": created_at,
            "updated_at": run_columns.pop("updated_at", created_at),
            "started_at": run_columns.pop("started_at", created_at),
            **run_columns,
        }
        if subject:
            attrs["subject_type"], attrs["subject_id"] = subject
        definition = REGISTRY.get(workflow_class)
        if definition is not None:
            attrs.setdefault("definition_digest", definition.digest)
        with self.engine.begin() as conn:
            workflow_rows.insert_run(conn, attrs)
            batch_id = None
            if batch is not None:
                batch_id = batch.get("batch_id") or f"batch-{uuid.uuid4()}"
                batches.insert_batch(
                    conn,
                    batch_id=batch_id,
                    description=batch.get("description"),
                    total_jobs=batch.get("total_jobs", 12),
                    now=created_at,
                )
                done = batch.get("completed_jobs", 0)
                if done:
                    batches.record_jobs(conn, batch_id, completed=done, now=now)
            step_rows = []
            for index, attempt in enumerate(attempts):
                columns = dict(attempt.columns)
                if batch_id and index == len(attempts) - 1:
                    columns.setdefault("batch_id", batch_id)
                step_rows.append(
                    steps.insert_step(
                        conn,
                        workflow_id=workflow_id,
                        step_name=attempt.name,
                        now=columns.pop("created_at", created_at),
                        status=attempt.status,
                        attempt=columns.pop("attempt", 1),
                        **columns,
                    )
                )
            for event in events_:
                event = dict(event)
                step_index = event.pop("step", None)
                events.record(
                    conn,
                    workflow_id=workflow_id,
                    step=step_rows[step_index] if step_index is not None else None,
                    **event,
                )
            for signal in signals_:
                signal = dict(signal)
                claimed_by = signal.pop("claimed_by", None)
                stored = signals.insert_signal(conn, workflow_id=workflow_id, **signal)
                if claimed_by is not None:
                    signals.claim(conn, stored["id"], step_id=step_rows[claimed_by]["id"])
        return workflow_id


# Runs in every state the pages must show, by name: (status, attempts, extra).
def every_state(runs: Runs) -> dict[str, str]:
    now = utcnow()
    ago = lambda **kw: now - timedelta(**kw)  # noqa: E731
    made = {
        "ready_due_later": runs.make(
            states.READY, step("reserve_stock", "scheduled", scheduled_at=now + timedelta(hours=2))
        ),
        "ready_queued": runs.make(states.READY, step("reserve_stock", "scheduled", scheduled_at=ago(minutes=1))),
        "overdue": runs.make(states.READY, step("reserve_stock", "scheduled", scheduled_at=ago(hours=2))),
        "running": runs.make(states.RUNNING, step("capture_payment", "in_progress", started_at=ago(seconds=30))),
        "waiting_signal": runs.make(
            states.WAITING,
            step(
                "await_shipment",
                "waiting",
                wait_for="shipment_confirmed",
                waiting_since=ago(hours=3),
                timeout_at=now + timedelta(days=2),
            ),
        ),
        "waiting_overdue": runs.make(
            states.WAITING,
            step("await_profile", "waiting", wait_for="profile_completed", waiting_since=ago(days=3)),
            workflow_class="OnboardingWorkflow",
            subject=("User", "7"),
        ),
        "waiting_batch": runs.make(
            states.WAITING,
            step("notify_vendors", "waiting", waiting_since=ago(minutes=5)),
            batch={"description": "OrderWorkflow#notify_vendors", "total_jobs": 12, "completed_jobs": 7},
        ),
        "paused_error": runs.make(
            states.PAUSED,
            step(
                "capture_payment",
                "failed",
                error_class="TimeoutError",
                error_message="payment gateway did not answer within 5s",
                finished_at=ago(minutes=5),
            ),
            paused_at=ago(minutes=5),
        ),
        "stalled": runs.make(
            states.PAUSED,
            step(
                "capture_payment",
                "failed",
                error_class=states.STEP_STALLED_ERROR,
                error_message="in progress for 15m",
                finished_at=ago(minutes=2),
            ),
            paused_at=ago(minutes=2),
        ),
        "paused_manual": runs.make(
            states.PAUSED, step("send_receipt", "scheduled", scheduled_at=ago(hours=1)), paused_at=ago(minutes=30)
        ),
        "completed": runs.make(
            states.COMPLETED,
            step("send_receipt", "completed", started_at=ago(minutes=9), finished_at=ago(minutes=8)),
            finished_at=ago(minutes=8),
        ),
        "failed": runs.make(
            states.FAILED,
            step(
                "issue_refund",
                "failed",
                error_class="ValueError",
                error_message="refund exceeds the captured amount",
                finished_at=ago(minutes=3),
            ),
            workflow_class="RefundWorkflow",
            subject=("Refund", "3"),
            finished_at=ago(minutes=3),
        ),
        "cancelled": runs.make(
            states.CANCELLED, step("reserve_stock", "cancelled", finished_at=ago(days=1)), finished_at=ago(days=1)
        ),
        "no_steps": runs.make(states.READY, subject=None),
    }
    return made


def set_column(engine, table: str, column: str, value: str, workflow_id: str, where: str = "") -> None:
    # The table and column names come from this file's parameters, never from input.
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                f"UPDATE {table} SET {column} = CAST(:value AS {_type(column)}) "
                f"WHERE workflow_id = :workflow_id {where}"
            ),
            {"value": value, "workflow_id": workflow_id},
        )


def _type(column: str) -> str:
    return "jsonb" if column in ("arguments", "payload", "result", "details") else "timestamptz"


def make_pair(runs, **b_overrides):
    """A failed refund and one that completed, of one customer but for
    different amounts."""
    ago = utcnow() - timedelta(minutes=10)
    failed = runs.make(
        states.FAILED,
        step("validate_refund", "completed", started_at=ago, finished_at=ago + timedelta(seconds=2)),
        step(
            "issue_refund",
            "failed",
            attempt=1,
            error_class="GatewayTimeout",
            error_message="gateway did not answer\nat line 3",
        ),
        step(
            "issue_refund",
            "failed",
            attempt=2,
            error_class="GatewayTimeout",
            error_message="gateway did not answer\nat line 3",
        ),
        workflow_class="RefundWorkflow",
        arguments={"customer_id": 42, "amount": 100, "items": ["a"]},
    )
    done = runs.make(
        states.COMPLETED,
        step("validate_refund", "completed"),
        step("issue_refund", "completed"),
        step("notify_customer", "completed"),
        workflow_class="RefundWorkflow",
        arguments={"customer_id": 42, "amount": 250, "items": ["a", "b"]},
        **b_overrides,
    )
    return failed, done


def listed(client, q: str) -> list[str]:
    response = client.get("/workflows", query_string={"q": q})
    assert response.status_code == 200, response.get_data(as_text=True)[:500]
    return [row["data-workflow-id"] for row in soup(response).select("tr.pgbus-run-row")]


def run_url(app, workflow_id: str) -> str:
    with app.test_request_context():
        return url_for("pgbus_web.workflow", workflow_id=workflow_id)


CARD = "4111111111111111"


def _card_run(runs, order_id: int) -> str:
    ago = utcnow() - timedelta(minutes=30)
    return runs.make(
        states.PAUSED,
        step(
            "reserve_stock",
            "completed",
            finished_at=ago,
            result={"reserved": True, "card_number": CARD, "payment": {"card_number": CARD, "last4": "1111"}},
        ),
        step("capture_payment", "failed", error_class="TimeoutError", error_message="gateway timeout", finished_at=ago),
        arguments={"order_id": order_id, "card_number": CARD, "customer": {"name": "Ada", "card_number": CARD}},
        signals_=[{"name": "card_updated", "payload": {"card_number": CARD, "note": "new card"}}],
        paused_at=ago,
    )


def host_app(database) -> Flask:
    """A host with a page of its own at /, the dashboard at /ops."""
    host = Flask("host")
    host.config["SECRET_KEY"] = "host secret"

    @host.get("/")
    def home():
        return "host home"

    PgbusWeb(host, url_prefix="/ops", database=database, registry=REGISTRY, actor_name=lambda request: "alice")
    return host


MOUNTS = {"": lambda database: make_app(database), "/ops": host_app}


def assert_dashboard_headers(response) -> None:
    for name, value in security.SECURITY_HEADERS.items():
        assert response.headers.get(name) == value, (response.status_code, name)
    assert "HX-Request" in response.headers.get("Vary", "")
