"""Helpers the action tests share (imported by them): an operator's browser
(a test client that carries the CSRF cookie and token, and posts as htmx
or as a plain form), runs in the states the verbs start from, and the
database snapshot that proves a refusal wrote nothing."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import sqlalchemy as sa

from pgbus_web.plumbing import csrf
from pgbus_web.rules import states
from support.web_helpers import Runs, make_app, soup, step, text_of, utcnow

ALICE = "alice"


class Browser:
    """A test client as an operator's browser: it has loaded a page (so it
    holds the CSRF cookie and a token), and posts forms with that token,
    either as htmx does (HX-Request, fragments back) or as a plain form."""

    def __init__(self, client, user: str = ALICE):
        self.client = client
        self.user = user
        self.token = ""

    def load(self, url: str = "/workflows"):
        response = self.client.get(url, headers={"X-User": self.user})
        headers = soup(response).select_one("body").get("hx-headers")
        if headers:
            self.token = json.loads(headers)[csrf.HEADER_NAME]
        return response

    def post(
        self,
        url: str,
        data: dict[str, Any] | None = None,
        *,
        htmx: bool = False,
        token: str | None = None,
        current_url: str | None = None,
        **kwargs,
    ):
        if not self.token:
            self.load()
        data = dict(data or {})
        if token is None:
            data.setdefault(csrf.FIELD_NAME, self.token)
        elif token:
            data[csrf.FIELD_NAME] = token
        headers = {"X-User": self.user, **kwargs.pop("headers", {})}
        if htmx:
            headers.update({"HX-Request": "true", "HX-Current-URL": current_url or f"http://localhost{url}"})
        return self.client.post(url, data=data, headers=headers, **kwargs)


def operator_app(database, **settings):
    """The standalone app with the demo definitions, naming its actor from
    the X-User header (as a host's login would)."""
    settings.setdefault("actor_name", lambda request: request.headers.get("X-User"))
    return make_app(database, **settings)


def ago(**delta) -> Any:
    return utcnow() - timedelta(**delta)


def later(**delta) -> Any:
    return utcnow() + timedelta(**delta)


# --- runs in the states the verbs start from -------------------------------------


def paused_on_capture(runs: Runs, **columns) -> str:
    """An OrderWorkflow paused after capture_payment ran out of attempts."""
    return runs.make(
        states.PAUSED,
        step("reserve_stock", "completed", finished_at=ago(minutes=20)),
        step(
            "capture_payment",
            "failed",
            error_class="TimeoutError",
            error_message="payment gateway did not answer within 5s",
            finished_at=ago(minutes=5),
        ),
        paused_at=columns.pop("paused_at", ago(minutes=5)),
        **columns,
    )


def ready_later(runs: Runs) -> str:
    return runs.make(states.READY, step("reserve_stock", "scheduled", scheduled_at=later(hours=2)))


def running(runs: Runs) -> str:
    return runs.make(states.RUNNING, step("reserve_stock", "in_progress", started_at=ago(seconds=20)))


def waiting_for_shipment(runs: Runs) -> str:
    return runs.make(
        states.WAITING,
        step("reserve_stock", "completed", finished_at=ago(hours=4)),
        step("capture_payment", "completed", finished_at=ago(hours=4)),
        step("notify_vendors", "completed", finished_at=ago(hours=3)),
        step(
            "await_shipment",
            "waiting",
            wait_for="shipment_confirmed",
            waiting_since=ago(hours=3),
            timeout_at=later(days=2),
        ),
    )


def completed(runs: Runs) -> str:
    return runs.make(
        states.COMPLETED,
        step("send_receipt", "completed", started_at=ago(minutes=9), finished_at=ago(minutes=8)),
        finished_at=ago(minutes=8),
    )


def run_row(engine, workflow_id: str) -> dict[str, Any]:
    from pgbus_web.models import workflow_rows

    with engine.connect() as conn:
        return workflow_rows.find(conn, workflow_id)


def steps_of(engine, workflow_id: str) -> list[dict[str, Any]]:
    from pgbus_web.models import steps

    with engine.connect() as conn:
        return steps.for_run(conn, workflow_id)


def events_of(engine, workflow_id: str) -> list[dict[str, Any]]:
    from pgbus_web.models import events

    with engine.connect() as conn:
        return events.for_run(conn, workflow_id)


def signals_of(engine, workflow_id: str) -> list[dict[str, Any]]:
    from pgbus_web.models import signals

    with engine.connect() as conn:
        return signals.for_run(conn, workflow_id)


def message(response) -> str:
    """The text of the messages area of an answer (a page, or htmx's oob part)."""
    return text_of(soup(response).select_one("#pgbus-messages"))


def long_history(engine, runs, attempts: int, events: int) -> str:
    """A paused run with *attempts* failed attempts of capture_payment (the
    last one is its latest step) and *events* audit events."""
    run = runs.make(
        states.PAUSED, step("reserve_stock", "completed", finished_at=ago(hours=2)), paused_at=ago(minutes=5)
    )
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                "INSERT INTO pgbus_workflow_steps (workflow_id, step_name, status, attempt, error_class, "
                "error_message, created_at, started_at, finished_at) "
                "SELECT :w, 'capture_payment', 'failed', g, 'GatewayError', 'declined ' || g, "
                "now() - interval '1 hour' + g * interval '1 second', "
                "now() - interval '1 hour' + g * interval '1 second', "
                "now() - interval '1 hour' + g * interval '2 second' FROM generate_series(1, :n) g"
            ),
            {"w": run, "n": attempts},
        )
        conn.execute(
            sa.text(
                "INSERT INTO pgbus_workflow_events (workflow_id, event, actor, step_name, attempt, created_at) "
                "SELECT :w, 'step_failed', 'system', 'capture_payment', "
                "g, now() - interval '1 hour' + g * interval '1 second' "
                "FROM generate_series(1, :n) g"
            ),
            {"w": run, "n": events},
        )
    return run
