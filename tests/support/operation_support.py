"""Helpers the operation tests share: many paused runs written at once,
and `pgbus-web bulk cancel` of them."""

from __future__ import annotations

from datetime import datetime, timedelta
from urllib.parse import urlencode

import sqlalchemy as sa
from click.testing import CliRunner, Result

from pgbus_web import defaults
from pgbus_web.demo.workflows import ORDER_WORKFLOW, REGISTRY
from pgbus_web.launch import main_group
from pgbus_web.models import operation_rows
from pgbus_web.rules import run_filters as filters
from pgbus_web.runtime import operation_policy
from support.waiting import wait_until

SEED = [
    sa.text(
        """
        INSERT INTO pgbus_workflows (workflow_id, workflow_class, status, current_step, paused_at,
                                     started_at, created_at, updated_at, definition_digest)
        SELECT gen_random_uuid()::text, 'OrderWorkflow', 'paused', 'capture_payment',
               now() - interval '5 minutes', now() - interval '1 hour', now() - interval '1 hour',
               now() - interval '5 minutes', :digest
        FROM generate_series(1, :n)
        """
    ),
    sa.text(
        """
        INSERT INTO pgbus_workflow_steps (workflow_id, step_name, status, attempt, finished_at, created_at)
        SELECT workflow_id, 'reserve_stock', 'completed', 1, now() - interval '50 minutes',
               now() - interval '1 hour'
        FROM pgbus_workflows WHERE id > :above ORDER BY id
        """
    ),
    sa.text(
        """
        INSERT INTO pgbus_workflow_steps (workflow_id, step_name, status, attempt, error_class,
                                          error_message, finished_at, created_at)
        SELECT workflow_id, 'capture_payment', 'failed', 3, 'TimeoutError',
               'payment gateway did not answer within 5s', now() - interval '5 minutes',
               now() - interval '6 minutes'
        FROM pgbus_workflows WHERE id > :above ORDER BY id
        """
    ),
]


def seed_paused(engine, n: int) -> None:
    """*n* OrderWorkflow runs paused after capture_payment failed."""
    with engine.begin() as conn:
        above = conn.execute(sa.text("SELECT COALESCE(max(id), 0) FROM pgbus_workflows")).scalar_one()
        for statement in SEED:
            conn.execute(statement, {"n": n, "above": above, "digest": ORDER_WORKFLOW.digest})


def bulk_cancel_paused(database_url: str, *options: str, **invoke) -> Result:
    """`pgbus-web bulk cancel` of the paused runs, for an incident, asked
    no question, with *options* (a rate, a statement timeout), in this
    process; *invoke* goes to CliRunner.invoke."""
    return CliRunner().invoke(
        main_group,
        [
            "bulk",
            "cancel",
            "--filter",
            "status=paused",
            "--reason",
            "incident",
            "--yes",
            *options,
            "--database-url",
            database_url,
        ],
        **invoke,
    )


def wait_for_the_dead(engine, operation_id: int, seconds: float = 60) -> None:
    """After a kill -9: wait until the server has ended the killed client's
    backend (on a busy machine it notices the closed socket a moment
    later). Until then a lock that backend held on the operation's row
    makes a claim skip it (SKIP LOCKED), as it should: a taker tries again
    on its next tick, and the test must not take that for no operation."""

    def free():
        with engine.begin() as conn:
            conn.execute(
                sa.text("SELECT id FROM pgbus_web_operations WHERE id = :id FOR UPDATE NOWAIT"),
                {"id": int(operation_id)},
            )
        return True

    wait_until(free, timeout=seconds, ignoring=(sa.exc.OperationalError,), what="the dead holder's row lock let go")


THRESHOLDS = {"threshold": defaults.STALL_THRESHOLD, "waiting_threshold": defaults.WAITING_THRESHOLD}


def query(**values):
    return filters.parse(values)


def create(engine, verb="resume", expected=None, reason="gateway back", params=None, **filter_values):
    return operation_policy.create(
        engine,
        query(**filter_values),
        verb,
        params,
        reason=reason,
        actor="dashboard:alice",
        expected=expected,
        registry=REGISTRY,
        thresholds=THRESHOLDS,
    )


URL = "/workflows/operations"


PAUSED = urlencode({"status": "paused"})


def operations_of(engine):
    with engine.connect() as conn:
        return operation_rows.recent(conn)


def ask(browser, verb="resume", query=PAUSED, **fields):
    return browser.post(URL, {"verb": verb, "query": query, **fields}, htmx=fields.pop("htmx", False))


def acted_at(engine, operation_id) -> list[datetime]:
    """When each run was acted on: its event of this operation (one per run)."""
    with engine.connect() as conn:
        return list(
            conn.execute(
                sa.text(
                    "SELECT min(created_at) FROM pgbus_workflow_events WHERE details ->> 'operation_id' = :op "
                    "GROUP BY workflow_id ORDER BY 1"
                ),
                {"op": str(operation_id)},
            ).scalars()
        )


def busiest_second(moments: list[datetime]) -> int:
    """The most moments in any window [t, t + 1 s), t one of them."""
    best = 0
    for i, start in enumerate(moments):
        best = max(best, sum(1 for moment in moments[i:] if moment - start < timedelta(seconds=1)))
    return best
