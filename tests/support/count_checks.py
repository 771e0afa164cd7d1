"""Random writes to the runs, for checking the kept counts against a full count."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import sqlalchemy as sa

from pgbus_web.models import workflow_rows, workflow_upkeep
from pgbus_web.rules import states

CLASSES = ("Order", "Refund", "Onboarding")


T0 = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)


def insert_runs(conn, rng, prefix: str, n: int) -> None:
    conn.execute(
        sa.text(
            "INSERT INTO pgbus_workflows (workflow_id, workflow_class, status, updated_at) "
            "SELECT :prefix || '-' || g, (CAST(:classes AS text[]))[1 + (g * 7 + :salt) % 3], "
            "(CAST(:statuses AS text[]))[1 + (g * 5 + :salt) % 7], :updated FROM generate_series(1, :n) g"
        ),
        {
            "prefix": prefix,
            "classes": list(CLASSES),
            "statuses": list(states.RUN),
            "n": n,
            "salt": rng.randrange(100),
            "updated": T0 - timedelta(days=rng.randrange(0, 20)),
        },
    )


def random_step(conn, rng, step: str) -> None:
    ids = conn.execute(sa.text("SELECT workflow_id FROM pgbus_workflows")).scalars().all()
    pick = lambda: rng.choice(ids)  # noqa: E731
    action = rng.randrange(9)
    if action == 0 or not ids:
        insert_runs(conn, rng, f"s{step}", rng.randrange(1, 30))
    elif action == 1:
        workflow_rows.insert_run(
            conn, {"workflow_id": f"one{step}", "workflow_class": rng.choice(CLASSES), "status": rng.choice(states.RUN)}
        )
    elif action in (2, 3):
        # The runtime's single-winner transition.
        run = workflow_rows.find(conn, pick())
        workflow_rows.transition(conn, run["workflow_id"], from_=run["status"], to=rng.choice(states.RUN))
    elif action == 4:
        # A many-row status change, some rows changing nothing.
        conn.execute(
            sa.text("UPDATE pgbus_workflows SET status = :to WHERE id % 4 = :k"),
            {"to": rng.choice(states.RUN), "k": rng.randrange(4)},
        )
    elif action == 5:
        conn.execute(
            sa.text("UPDATE pgbus_workflows SET workflow_class = :c WHERE workflow_id = :w"),
            {"c": rng.choice(CLASSES + ("Moved",)), "w": pick()},
        )
    elif action == 6:
        conn.execute(
            sa.text("DELETE FROM pgbus_workflows WHERE workflow_id = ANY(:w)"),
            {"w": rng.sample(ids, min(len(ids), rng.randrange(1, 5)))},
        )
    elif action == 7:
        workflow_upkeep.delete_stale(conn, before=T0 - timedelta(days=rng.randrange(0, 20)), limit=rng.randrange(1, 50))
    else:
        # Written, then rolled back: the deltas go with it.
        with conn.begin_nested() as savepoint:
            conn.execute(sa.text("UPDATE pgbus_workflows SET status = 'failed'"))
            insert_runs(conn, rng, f"gone{step}", 5)
            savepoint.rollback()
