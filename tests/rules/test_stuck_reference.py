"""The stuck-run queries against the reference's own SQL, on random histories.

The reference (pgbus 0.20's WorkflowEntry) reads each run's latest step row
with ``LEFT JOIN LATERAL (... ORDER BY id DESC LIMIT 1)``; the project reads
the run's latest_* columns that the steps' triggers keep. Random histories
of step inserts, updates, deletes, moves between runs and id changes, read
at moments that fall exactly on the thresholds, must give the same counts,
the same groups in the same order and the same runs, through the model
functions and through each group's "N runs" link of the index.
"""

from __future__ import annotations

import random
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa

from pgbus_web.models import workflow_attention, workflow_index, workflow_rows, workflow_upkeep
from pgbus_web.rules import run_filters as filters
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
SEEDS = (1, 2, 3, 4, 5, 6)

# The reference's stuck runs (WorkflowEntry.stuck_runs_sql), with named binds.
REFERENCE_STUCK = """
    SELECT w.id, w.workflow_id, w.workflow_class, COALESCE(s.step_name, w.current_step) AS step_name,
           s.error_class, s.error_message, stuck_reason.reason,
           CASE
             WHEN stuck_reason.reason IN ('stalled', 'paused_error', 'paused_manual') THEN w.paused_at
             WHEN stuck_reason.reason = 'overdue' THEN s.scheduled_at
             {waiting_since}
           END AS since
    FROM pgbus_workflows w
    LEFT JOIN LATERAL (
      SELECT step_name, status, error_class, error_message, scheduled_at, timeout_at, waiting_since
      FROM pgbus_workflow_steps
      WHERE workflow_id = w.workflow_id ORDER BY id DESC LIMIT 1
    ) s ON TRUE
    CROSS JOIN LATERAL (
      SELECT CASE
               WHEN w.status = 'paused' AND s.status = 'failed' AND s.error_class = 'Pgbus::Workflow::StepStalled' THEN 'stalled'
               WHEN w.status = 'paused' AND s.status = 'failed' THEN 'paused_error'
               WHEN w.status = 'paused' THEN 'paused_manual'
               WHEN w.status = 'ready' AND s.status = 'scheduled' AND s.scheduled_at < :overdue_before THEN 'overdue'
               {waiting_reason}
             END AS reason
    ) stuck_reason
    WHERE w.status IN ('paused', 'ready'{waiting_status}) {class_filter}
"""


def reference_stuck(waiting: bool, by_class: bool) -> str:
    return REFERENCE_STUCK.format(
        waiting_since="WHEN stuck_reason.reason = 'waiting_overdue' THEN s.waiting_since" if waiting else "",
        waiting_reason=(
            "WHEN w.status = 'waiting' AND s.status = 'waiting' AND s.timeout_at IS NULL "
            "AND s.waiting_since < :waiting_before THEN 'waiting_overdue'"
            if waiting
            else ""
        ),
        waiting_status=", 'waiting'" if waiting else "",
        class_filter="AND w.workflow_class = :workflow_class" if by_class else "",
    )


def reference_binds(now, waiting, workflow_class=None):
    binds = {"overdue_before": now - THRESHOLD}
    if waiting:
        binds["waiting_before"] = now - WAITING_THRESHOLD
    if workflow_class is not None:
        binds["workflow_class"] = workflow_class
    return binds


def reference_counts(conn, now, waiting, workflow_class=None):
    rows = conn.execute(
        sa.text(f"""
        SELECT stuck.workflow_class, stuck.reason, COUNT(*) AS runs
        FROM ({reference_stuck(waiting, workflow_class is not None)}) stuck
        WHERE stuck.reason IS NOT NULL
        GROUP BY stuck.workflow_class, stuck.reason
    """),
        reference_binds(now, waiting, workflow_class),
    )
    return {(klass, reason): runs for klass, reason, runs in rows}


def reference_groups(conn, now, waiting, workflow_class=None):
    rows = conn.execute(
        sa.text(f"""
        SELECT stuck.workflow_class, stuck.step_name, stuck.reason, stuck.error_class, COUNT(*) AS count,
               MIN(stuck.since) AS first_seen_at, MAX(stuck.since) AS last_seen_at,
               (ARRAY_AGG(stuck.error_message ORDER BY stuck.since DESC NULLS LAST, stuck.id DESC))[1] AS error_message
        FROM ({reference_stuck(waiting, workflow_class is not None)}) stuck
        WHERE stuck.reason IS NOT NULL
        GROUP BY stuck.workflow_class, stuck.step_name, stuck.reason, stuck.error_class
        ORDER BY count DESC, last_seen_at DESC NULLS LAST, stuck.workflow_class
        LIMIT 200
    """),
        reference_binds(now, waiting, workflow_class),
    )
    return [dict(row._mapping) for row in rows]


def reference_ids(conn, group, now, waiting, limit=500):
    rows = conn.execute(
        sa.text(f"""
        SELECT stuck.workflow_id
        FROM ({reference_stuck(waiting, False)}) stuck
        WHERE stuck.workflow_class = :g_class AND stuck.step_name = :g_step AND stuck.reason = :g_reason
          AND stuck.error_class IS NOT DISTINCT FROM CAST(:g_error AS text)
        ORDER BY stuck.since NULLS LAST, stuck.id
        LIMIT :limit
    """),
        {
            **reference_binds(now, waiting),
            "g_class": group["workflow_class"],
            "g_step": group["step_name"],
            "g_reason": group["reason"],
            "g_error": group["error_class"],
            "limit": limit,
        },
    )
    return [workflow_id for (workflow_id,) in rows]


# --- Random histories ----------------------------------------------------------


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
                    " SELECT status, waiting_since, timeout_at FROM pgbus_workflow_steps WHERE workflow_id = w.workflow_id"
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


# --- Comparing -----------------------------------------------------------------

ORDER_KEY = ("count", "last_seen_at", "workflow_class")


def assert_same_groups(ours: list[dict], reference: list[dict]) -> None:
    """Same groups with the same facts, in the same order: the order is
    only defined up to (count, last seen, class), so ties compare as sets."""
    assert [tuple(g[k] for k in ORDER_KEY) for g in ours] == [tuple(g[k] for k in ORDER_KEY) for g in reference]
    as_items = lambda groups: Counter(tuple(sorted(g.items(), key=lambda kv: kv[0])) for g in groups)  # noqa: E731
    assert as_items(ours) == as_items(reference)


def listed_by_link(conn, group: dict, now: datetime) -> list[str]:
    """The runs the group's "N runs" link lists on the index: its query
    parsed as the index parses it, every page."""
    run_filters = filters.parse(filters.group_query(group))
    listed = workflow_index.page(
        conn,
        limit=10_000,
        threshold=THRESHOLD,
        waiting_threshold=WAITING_THRESHOLD,
        now=now,
        **run_filters.page_binds(now),
    )
    return [run["workflow_id"] for run in listed]


def compare_everything(engine, now: datetime) -> int:
    """Every function that reads the latest_* columns against the reference
    at *now*; the number of groups compared (so a test can see it compared some)."""
    compared = 0
    with engine.connect() as conn:
        for waiting in (False, True):
            kwargs = {"threshold": THRESHOLD, "now": now, "waiting_threshold": WAITING_THRESHOLD if waiting else None}
            assert workflow_attention.stuck_reason_counts(conn, **kwargs) == reference_counts(conn, now, waiting)
            for klass in CLASSES:
                assert workflow_attention.stuck_reason_counts(conn, workflow_class=klass, **kwargs) == reference_counts(
                    conn, now, waiting, klass
                )
                assert_same_groups(
                    workflow_attention.attention_groups(conn, workflow_class=klass, **kwargs),
                    reference_groups(conn, now, waiting, klass),
                )
            groups = reference_groups(conn, now, waiting)
            assert_same_groups(workflow_attention.attention_groups(conn, **kwargs), groups)
            for group in groups:
                ids = reference_ids(conn, group, now, waiting)
                assert workflow_attention.attention_ids(conn, group, **kwargs) == ids
                assert workflow_attention.attention_ids(conn, group, limit=2, **kwargs) == ids[:2]
                if waiting and group["step_name"] is not None:
                    # The index always knows the waiting threshold. A group
                    # without a step has no runs to act on in either (the
                    # reference compares its step with =).
                    assert sorted(listed_by_link(conn, group, now)) == sorted(ids)
                    assert len(ids) == group["count"]
                compared += 1
    return compared


@pytest.mark.parametrize("seed", SEEDS)
def test_the_stuck_queries_match_the_reference_on_random_histories(engine, seed):
    build_history(engine, seed)
    compared = sum(compare_everything(engine, now) for now in moments(engine))
    assert compared > 20
    with engine.connect() as conn:
        wrong, examples = workflow_upkeep.latest_mismatches(conn, after_id=0, last_id=2**62, limit=5)
    assert (wrong, examples) == (0, [])


def test_the_histories_hold_what_the_comparison_needs(engine):
    """The random histories are not vacuous: across the seeds, every stuck
    reason and groups with and without an error class occur, and each seed
    has runs exactly on both thresholds, which are not overdue there and
    are a minute later."""
    reasons: set[str] = set()
    error_classes: set[bool] = set()
    for seed in SEEDS:
        build_history(engine, seed)
        overdue, waiting = on_threshold(engine)
        assert overdue and waiting, seed
        with engine.connect() as conn:
            for now in moments(engine):
                for group in reference_groups(conn, now, True):
                    reasons.add(group["reason"])
                    error_classes.add(group["error_class"] is None)
            for now in overdue + waiting:
                assert reference_counts(conn, now, True) != reference_counts(conn, now + MINUTE, True)
        with engine.begin() as conn:
            conn.execute(sa.text("TRUNCATE pgbus_workflows, pgbus_workflow_steps RESTART IDENTITY CASCADE"))
    assert reasons == set(states.STUCK_REASONS)
    assert error_classes == {True, False}
