"""Runs and steps written by hand, and the check that the runs' latest_* columns
agree with their steps."""

from __future__ import annotations

from datetime import timedelta

import sqlalchemy as sa

from pgbus_web.models import workflow_rows
from support.runtime_support import T0

LATEST = ("step_id", "step_name", "step_status", "error_class", "scheduled_at", "waiting_since", "timeout_at")


def run_columns(engine) -> dict[str, tuple]:
    """{workflow_id: the run's latest_* columns}."""
    with engine.connect() as conn:
        rows = conn.execute(
            sa.text(
                "SELECT workflow_id, latest_step_id, latest_step_name, latest_step_status, latest_error_class, "
                "latest_scheduled_at, latest_waiting_since, latest_timeout_at FROM pgbus_workflows"
            )
        )
        return {row[0]: tuple(row[1:]) for row in rows}


def latest_step_rows(engine) -> dict[str, tuple]:
    """{workflow_id: the same facts read from the run's highest-id step row}
    (all None for a run without steps)."""
    with engine.connect() as conn:
        rows = conn.execute(
            sa.text(
                """
            SELECT w.workflow_id, s.id, s.step_name, s.status, s.error_class,
                   s.scheduled_at, s.waiting_since, s.timeout_at
            FROM pgbus_workflows w
            LEFT JOIN LATERAL (
                SELECT * FROM pgbus_workflow_steps WHERE workflow_id = w.workflow_id
                ORDER BY id DESC LIMIT 1
            ) s ON TRUE
            """
            )
        )
        return {row[0]: tuple(row[1:]) for row in rows}


def assert_columns_match(engine) -> dict[str, dict]:
    columns = run_columns(engine)
    assert columns == latest_step_rows(engine)
    return {workflow_id: dict(zip(LATEST, values, strict=True)) for workflow_id, values in columns.items()}


def add_run(engine, workflow_id: str, status: str = "paused", **attrs) -> str:
    with engine.begin() as conn:
        workflow_rows.insert_run(
            conn,
            {
                "workflow_id": workflow_id,
                "workflow_class": "Hand",
                "status": status,
                "paused_at": T0 - timedelta(hours=1),
                **attrs,
            },
        )
    return workflow_id


def add_step(engine, workflow_id: str, name: str, status: str, **columns) -> int:
    names = ["workflow_id", "step_name", "status", *columns]
    with engine.begin() as conn:
        return conn.execute(
            sa.text(
                f"INSERT INTO pgbus_workflow_steps ({', '.join(names)}) "
                f"VALUES ({', '.join(':' + n for n in names)}) RETURNING id"
            ),
            {"workflow_id": workflow_id, "step_name": name, "status": status, **columns},
        ).scalar_one()


def sql(engine, statement: str, **binds) -> None:
    with engine.begin() as conn:
        conn.execute(sa.text(statement), binds)


def row_versions(engine) -> dict[str, str]:
    """{workflow_id: the run row's version}: unchanged when nothing wrote the row."""
    with engine.connect() as conn:
        return dict(conn.execute(sa.text("SELECT workflow_id, xmin::text FROM pgbus_workflows")).all())
