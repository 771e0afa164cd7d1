"""Random run histories, and the stuck rule read again by hand as the reference
the kept counts and groups are checked against."""

from __future__ import annotations

import random
from collections import Counter
from datetime import UTC, datetime, timedelta

import sqlalchemy as sa

from pgbus_web.models import workflow_rows
from pgbus_web.rules import states

T0 = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)


MINUTE = timedelta(minutes=1)


THRESHOLD = 10 * MINUTE


WAITING_THRESHOLD = 30 * MINUTE


CLASSES = ("Order", "Refund", "Onboarding")


RUN_STATUSES = ("paused", "paused", "ready", "ready", "waiting", "waiting", "running", "completed")


STEP_NAMES = ("charge", "ship", "notify")


# Every step status, weighted towards the ones the stuck rules look for.
STEP_STATUSES = states.STEP + ("scheduled", "waiting", "waiting", "failed")


ERRORS = (None, None, "Boom", "TimeoutError", states.STEP_STALLED_ERROR)


def moment(rng: random.Random):
    """A moment on the minute grid around T0 (so thresholds fall exactly on some), or none."""
    return None if rng.random() < 0.1 else T0 + rng.randint(-50, 10) * MINUTE


def random_step(rng: random.Random) -> dict:
    return {
        "step_name": rng.choice(STEP_NAMES),
        "status": rng.choice(STEP_STATUSES),
        "error_class": rng.choice(ERRORS),
        "error_message": rng.choice((None, f"message {rng.randint(1, 999)}")),
        "scheduled_at": moment(rng),
        "waiting_since": moment(rng),
        "timeout_at": None if rng.random() < 0.6 else moment(rng),
    }


def insert_step(conn, workflow_id: str, values: dict, step_id: int | None = None) -> None:
    names = ["workflow_id", *values] + (["id"] if step_id is not None else [])
    conn.execute(
        sa.text(f"INSERT INTO pgbus_workflow_steps ({', '.join(names)}) VALUES ({', '.join(':' + n for n in names)})"),
        {"workflow_id": workflow_id, **values, "id": step_id},
    )


def build_history(engine, seed: int, runs: int = 50) -> None:
    """Runs in every status with random step rows, then random inserts
    (some with a lower id than the latest), updates, deletes, moves between
    runs and id changes, a few statements per transaction."""
    rng = random.Random(seed)
    ids = [f"run-{seed}-{n:03d}" for n in range(runs)]
    with engine.begin() as conn:
        for workflow_id in ids:
            status = rng.choice(RUN_STATUSES)
            workflow_rows.insert_run(
                conn,
                {
                    "workflow_id": workflow_id,
                    "workflow_class": rng.choice(CLASSES),
                    "status": status,
                    "current_step": rng.choice(STEP_NAMES + (None,)),
                    "paused_at": moment(rng) if status == "paused" else None,
                },
            )
            for _ in range(rng.randint(0, 3)):
                insert_step(conn, workflow_id, random_step(rng))
    for _ in range(runs * 3):
        with engine.begin() as conn:
            step_ids = conn.execute(sa.text("SELECT id FROM pgbus_workflow_steps ORDER BY id")).scalars().all()
            latest_ids = (
                conn.execute(sa.text("SELECT max(id) FROM pgbus_workflow_steps GROUP BY workflow_id ORDER BY 1"))
                .scalars()
                .all()
            )
            # Half of the changes aim at a run's latest step, the one that matters.
            target = rng.choice(latest_ids if latest_ids and rng.random() < 0.5 else step_ids or [0])
            action = rng.choice(
                ("insert", "insert_low", "update", "delete", "delete", "move", "move", "renumber", "run_status")
            )
            if action == "insert" or not step_ids:
                insert_step(conn, rng.choice(ids), random_step(rng))
            elif action == "insert_low":
                free = sorted(set(range(1, max(step_ids))) - set(step_ids))
                if free:
                    insert_step(conn, rng.choice(ids), random_step(rng), step_id=rng.choice(free))
            elif action == "update":
                values = {key: value for key, value in random_step(rng).items() if rng.random() < 0.5}
                if values:
                    assignments = ", ".join(f"{name} = :{name}" for name in values)
                    conn.execute(
                        sa.text(f"UPDATE pgbus_workflow_steps SET {assignments} WHERE id = :id"),
                        {**values, "id": target},
                    )
            elif action == "delete":
                conn.execute(sa.text("DELETE FROM pgbus_workflow_steps WHERE id = :id"), {"id": target})
            elif action == "move":
                conn.execute(
                    sa.text("UPDATE pgbus_workflow_steps SET workflow_id = :w WHERE id = :id"),
                    {"w": rng.choice(ids), "id": target},
                )
            elif action == "renumber":
                free = sorted(set(range(1, max(step_ids) + 20)) - set(step_ids))
                conn.execute(
                    sa.text("UPDATE pgbus_workflow_steps SET id = :new WHERE id = :id"),
                    {"new": rng.choice(free), "id": target},
                )
                # The sequence goes past a raised id, or a later insert would take it.
                conn.execute(
                    sa.text(
                        "SELECT setval(pg_get_serial_sequence('pgbus_workflow_steps', 'id'), "
                        "GREATEST((SELECT max(id) FROM pgbus_workflow_steps), "
                        "(SELECT last_value FROM pgbus_workflow_steps_id_seq)))"
                    )
                )
            else:
                status = rng.choice(RUN_STATUSES)
                conn.execute(
                    sa.text("UPDATE pgbus_workflows SET status = :s, paused_at = :p WHERE workflow_id = :w"),
                    {"s": status, "p": moment(rng) if status == "paused" else None, "w": rng.choice(ids)},
                )
        if rng.random() < 0.05:
            # Every step of one run to another in one statement.
            source, destination = rng.sample(ids, 2)
            with engine.begin() as conn:
                conn.execute(
                    sa.text("UPDATE pgbus_workflow_steps SET workflow_id = :d WHERE workflow_id = :s"),
                    {"d": destination, "s": source},
                )
    # One ready run due and one waiting run without a deadline, so that every
    # history has a run on each threshold (whatever the dice did to the others).
    with engine.begin() as conn:
        for status, step in (
            ("ready", {"status": "scheduled", "scheduled_at": T0 - rng.randint(5, 30) * MINUTE}),
            ("waiting", {"status": "waiting", "waiting_since": T0 - rng.randint(20, 50) * MINUTE}),
        ):
            workflow_id = f"run-{seed}-{status}"
            workflow_rows.insert_run(
                conn,
                {
                    "workflow_id": workflow_id,
                    "workflow_class": rng.choice(CLASSES),
                    "status": status,
                    "current_step": "charge",
                },
            )
            insert_step(conn, workflow_id, {**random_step(rng), "timeout_at": None, **step})


def on_threshold(engine) -> tuple[list[datetime], list[datetime]]:
    """The moments at which a ready run's scheduled latest step, and a
    waiting run's waiting latest step, lie exactly on their threshold (a
    few of each)."""
    with engine.connect() as conn:
        scheduled = (
            conn.execute(
                sa.text(
                    "SELECT DISTINCT s.scheduled_at FROM pgbus_workflows w CROSS JOIN LATERAL ("
                    " SELECT status, scheduled_at FROM pgbus_workflow_steps WHERE workflow_id = w.workflow_id"
                    " ORDER BY id DESC LIMIT 1) s "
                    "WHERE w.status = 'ready' AND s.status = 'scheduled' AND s.scheduled_at IS NOT NULL "
                    "ORDER BY 1 LIMIT 2"
                )
            )
            .scalars()
            .all()
        )
        waiting = (
            conn.execute(
                sa.text(
                    "SELECT DISTINCT s.waiting_since FROM pgbus_workflows w CROSS JOIN LATERAL ("
                    " SELECT status, waiting_since, timeout_at FROM "
                    "pgbus_workflow_steps WHERE workflow_id = w.workflow_id"
                    " ORDER BY id DESC LIMIT 1) s "
                    "WHERE w.status = 'waiting' AND s.status = 'waiting' AND s.timeout_at IS NULL "
                    "AND s.waiting_since IS NOT NULL ORDER BY 1 LIMIT 2"
                )
            )
            .scalars()
            .all()
        )
    return [at + THRESHOLD for at in scheduled], [at + WAITING_THRESHOLD for at in waiting]


def moments(engine) -> list[datetime]:
    """T0, and each moment on a threshold with a minute either side."""
    overdue, waiting = on_threshold(engine)
    return [T0, T0 - 20 * MINUTE] + [at + delta for at in overdue + waiting for delta in (-MINUTE, 0 * MINUTE, MINUTE)]


ORDER_KEY = ("count", "last_seen_at", "workflow_class")


def assert_same_groups(ours: list[dict], reference: list[dict]) -> None:
    """Same groups with the same facts, in the same order: the order is
    only defined up to (count, last seen, class), so ties compare as sets."""
    assert [tuple(g[k] for k in ORDER_KEY) for g in ours] == [tuple(g[k] for k in ORDER_KEY) for g in reference]
    as_items = lambda groups: Counter(tuple(sorted(g.items(), key=lambda kv: kv[0])) for g in groups)  # noqa: E731
    assert as_items(ours) == as_items(reference)
