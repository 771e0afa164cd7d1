"""Helpers the operation tests share: many paused runs written at once."""

from __future__ import annotations

import time

import sqlalchemy as sa

from pgbus_web.demo.workflows import ORDER_WORKFLOW

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


def wait_for_the_dead(engine, operation_id: int, seconds: float = 60) -> None:
    """After a kill -9: wait until the server has ended the killed client's
    backend (on a busy machine it notices the closed socket a moment
    later). Until then a lock that backend held on the operation's row
    makes a claim skip it (SKIP LOCKED), as it should: a taker tries again
    on its next tick, and the test must not take that for no operation."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            with engine.begin() as conn:
                conn.execute(
                    sa.text("SELECT id FROM pgbus_web_operations WHERE id = :id FOR UPDATE NOWAIT"),
                    {"id": int(operation_id)},
                )
            return
        except sa.exc.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
