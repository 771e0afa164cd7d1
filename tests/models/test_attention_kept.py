"""The needs-attention groups, the counts by reason and the failed runs'
groups, read from what the triggers keep (schema: the version that adds
the needs-attention counts), against the same answers counted from every
run (models.recount, the query the first screen ran
before), after random histories: step inserts, updates, deletes, moves and
renumberings (the reference comparison's histories), then run status and
class changes, failures, deletes, rolled-back savepoints, a TRUNCATE,
writes with the triggers off and ``db repair``; read at moments exactly on
the thresholds and a minute either side.
"""

from __future__ import annotations

import random
from datetime import timedelta

import pytest
import sqlalchemy as sa
from click.testing import CliRunner
from support.fixtures import scratch_database
from support.stuck_reference import (
    CLASSES,
    MINUTE,
    STEP_NAMES,
    T0,
    THRESHOLD,
    WAITING_THRESHOLD,
    assert_same_groups,
    build_history,
    insert_step,
    moments,
    random_step,
)

from pgbus_web.core import page_reads, policy
from pgbus_web.core.settings import Settings
from pgbus_web.demo import history
from pgbus_web.demo import seed as seeding
from pgbus_web.launch import main_group
from pgbus_web.models import (
    attention_counts,
    recount,
    workflow_attention,
    workflow_index,
    workflow_rows,
    workflow_windows,
)
from pgbus_web.rules import run_filters, states

SEEDS = (11, 12, 13, 14)
STATUSES = ("paused", "paused", "failed", "failed", "ready", "waiting", "running", "completed", "cancelled")


def maybe_moment(rng):
    return None if rng.random() < 0.15 else T0 + rng.randint(-50, 10) * MINUTE


def run_ids(conn) -> list[str]:
    """The runs a shake may change: all but the two that build_history
    leaves on the thresholds."""
    ids = conn.execute(sa.text("SELECT workflow_id FROM pgbus_workflows ORDER BY id")).scalars().all()
    return [workflow_id for workflow_id in ids if not workflow_id.endswith(("-ready", "-waiting"))]


def shake(engine, rng: random.Random, rounds: int = 120) -> None:
    """Changes of the runs themselves, a few per transaction, some rolled back."""
    for _ in range(rounds):
        with engine.begin() as conn:
            ids = run_ids(conn)
            action = rng.choice(
                (
                    "status",
                    "status",
                    "status",
                    "class",
                    "step",
                    "delete",
                    "insert",
                    "rolled_back",
                    "insert",
                    "status",
                    "many",
                )
            )
            target = rng.choice(ids) if ids else None
            if action == "insert" or target is None:
                workflow_id = f"extra-{rng.random():.12f}"
                status = rng.choice(STATUSES)
                workflow_rows.insert_run(
                    conn,
                    {
                        "workflow_id": workflow_id,
                        "workflow_class": rng.choice(CLASSES),
                        "status": status,
                        "current_step": rng.choice(STEP_NAMES + (None,)),
                        "paused_at": maybe_moment(rng) if status == "paused" else None,
                        "finished_at": maybe_moment(rng) if status == "failed" else None,
                    },
                )
                for _ in range(rng.randint(0, 2)):
                    insert_step(conn, workflow_id, random_step(rng))
            elif action == "status":
                status = rng.choice(STATUSES)
                conn.execute(
                    sa.text(
                        "UPDATE pgbus_workflows SET status = :s, paused_at "
                        "= :p, finished_at = :f WHERE workflow_id = :w"
                    ),
                    {
                        "s": status,
                        "p": maybe_moment(rng) if status == "paused" else None,
                        "f": maybe_moment(rng) if status == "failed" else None,
                        "w": target,
                    },
                )
            elif action == "class":
                conn.execute(
                    sa.text("UPDATE pgbus_workflows SET workflow_class = :c WHERE workflow_id = :w"),
                    {"c": rng.choice(CLASSES + ("Moved",)), "w": target},
                )
            elif action == "step":
                # current_step is the group's step while the run has no step row.
                conn.execute(
                    sa.text("UPDATE pgbus_workflows SET current_step = :s WHERE workflow_id = :w"),
                    {"s": rng.choice(STEP_NAMES + (None,)), "w": target},
                )
            elif action == "delete":
                conn.execute(sa.text("DELETE FROM pgbus_workflows WHERE workflow_id = :w"), {"w": target})
            elif action == "rolled_back":
                savepoint = conn.begin_nested()
                conn.execute(sa.text("UPDATE pgbus_workflows SET status = 'failed', finished_at = :f"), {"f": T0})
                conn.execute(sa.text("DELETE FROM pgbus_workflows WHERE workflow_id = :w"), {"w": target})
                savepoint.rollback()
            else:
                # One statement over many runs: a bulk resume, a prune.
                if rng.random() < 0.5:
                    conn.execute(
                        sa.text(
                            "UPDATE pgbus_workflows SET status = 'ready', paused_at = NULL WHERE status = 'paused' "
                            "AND id % 3 = :r"
                        ),
                        {"r": rng.randint(0, 2)},
                    )
                else:
                    conn.execute(
                        sa.text("DELETE FROM pgbus_workflows WHERE status = 'failed' AND id % 4 = :r"),
                        {"r": rng.randint(0, 3)},
                    )
    # Runs paused last, each on its own, so that paused groups are left to compare.
    for _ in range(8):
        with engine.begin() as conn:
            conn.execute(
                sa.text("UPDATE pgbus_workflows SET status = 'paused', paused_at = :p WHERE workflow_id = :w"),
                {"p": maybe_moment(rng), "w": rng.choice(run_ids(conn))},
            )


def assert_kept_equals_counted(engine) -> tuple[int, set[str]]:
    """Every reader of the kept counts against its full count, at each
    moment of interest; the number of groups compared and their reasons."""
    compared, reasons = 0, set()
    with engine.connect() as conn:
        assert attention_counts.kept(conn) == recount.attention_key_counts(conn)
        assert workflow_attention.failed_groups(conn) == recount.failed_groups(conn)
        assert workflow_attention.failed_groups(conn, limit=2) == recount.failed_groups(conn, limit=2)
        for now in moments(engine) + [T0 + 90 * MINUTE]:
            for waiting in (None, WAITING_THRESHOLD):
                kwargs = {"threshold": THRESHOLD, "now": now, "waiting_threshold": waiting}
                assert workflow_attention.stuck_reason_summary(conn, **kwargs) == recount.stuck_reason_summary(
                    conn, **kwargs
                )
                groups = recount.attention_groups(conn, **kwargs)
                assert_same_groups(workflow_attention.attention_groups(conn, **kwargs), groups)
                compared += len(groups)
                reasons |= {group["reason"] for group in groups}
                for klass in CLASSES:
                    assert_same_groups(
                        workflow_attention.attention_groups(conn, workflow_class=klass, **kwargs),
                        recount.attention_groups(conn, workflow_class=klass, **kwargs),
                    )
                    assert workflow_attention.stuck_reason_summary(
                        conn, workflow_class=klass, **kwargs
                    ) == recount.stuck_reason_summary(conn, workflow_class=klass, **kwargs)
    return compared, reasons


def assert_filter_counts_equal_the_runs_listed(engine) -> int:
    """Each reason's and each group's count as the index's filter preview
    gives it (reads.matching_statuses, from what is kept) against the runs
    its WHERE clause matches (workflow_windows.count_by_window, every id); how many
    filters were compared with at least one run."""
    # The index reads the policy's thresholds: these, as the reference counts.
    policy.change(engine, "stall_threshold", THRESHOLD.total_seconds(), actor="test", reason="the reference's")
    policy.change(
        engine, "waiting_threshold", WAITING_THRESHOLD.total_seconds(), actor="test", reason="the reference's"
    )
    settings = Settings()
    nonempty = 0
    with engine.connect() as conn:
        for now in moments(engine):
            groups = recount.attention_groups(conn, threshold=THRESHOLD, now=now, waiting_threshold=WAITING_THRESHOLD)
            views = [run_filters.RunFilters(reason=reason) for reason in states.STUCK_REASONS]
            views += [
                run_filters.RunFilters(reason=reason, workflow_class=klass)
                for reason in states.STUCK_REASONS
                for klass in CLASSES
            ]
            views += [run_filters.parse(run_filters.group_query(group)) for group in groups]
            for view in views:
                where, binds = workflow_index.page_where(
                    threshold=THRESHOLD,
                    waiting_threshold=WAITING_THRESHOLD,
                    now=now,
                    **{k: v for k, v in view.page_binds(now).items() if k not in ("before_id", "after_id")},
                )
                listed = {}
                for (_, status), runs in workflow_windows.count_by_window(
                    conn, where=where, binds=binds, ceiling_id=2**62
                )[0].items():
                    listed[status] = listed.get(status, 0) + runs
                assert page_reads.matching_statuses(conn, settings, view, now) == listed, view
                nonempty += bool(listed)
    return nonempty


@pytest.mark.parametrize("seed", SEEDS)
def test_the_kept_groups_equal_a_full_count_after_random_histories(engine, seed):
    build_history(engine, seed, runs=40)
    rng = random.Random(seed)
    shake(engine, rng)
    compared, reasons = assert_kept_equals_counted(engine)
    assert compared > 10
    assert assert_filter_counts_equal_the_runs_listed(engine) > 10
    with engine.connect() as conn:
        failed = workflow_attention.failed_groups(conn)
    # Not vacuous: failed groups, and reasons both kept and read by the clock.
    assert failed and {"paused_manual", "overdue", "waiting_overdue"} <= reasons, reasons


def test_writes_with_the_triggers_off_are_found_by_check_and_refilled_by_repair(engine, database_url):
    build_history(engine, 21, runs=30)
    shake(engine, random.Random(21), rounds=40)
    with engine.begin() as conn:
        # As a restore with its triggers off: nothing kept hears of these.
        conn.execute(sa.text("SET LOCAL session_replication_role = replica"))
        conn.execute(
            sa.text("UPDATE pgbus_workflows SET status = 'failed', finished_at = :f WHERE id % 3 = 0"), {"f": T0}
        )
        conn.execute(
            sa.text("UPDATE pgbus_workflows SET status = 'paused', paused_at = :p WHERE id % 3 = 1"),
            {"p": T0 - 5 * MINUTE},
        )
        conn.execute(sa.text("DELETE FROM pgbus_workflows WHERE id % 7 = 0"))
    with engine.connect() as conn:
        before = attention_counts.kept(conn)
        assert before != recount.attention_key_counts(conn)
    checked = CliRunner().invoke(main_group, ["db", "check", "--database-url", database_url])
    assert checked.exit_code == 1, checked.output
    assert "needs-attention counts by group disagree with the runs" in checked.output
    with engine.connect() as conn:
        assert attention_counts.kept(conn) == before  # check changes nothing
    repaired = CliRunner().invoke(main_group, ["db", "repair", "--database-url", database_url])
    assert repaired.exit_code == 0, repaired.output
    assert repaired.output.splitlines()[-1] != "Refilled 0 needs-attention counts by group."
    assert_kept_equals_counted(engine)
    clean = CliRunner().invoke(main_group, ["db", "check", "--database-url", database_url])
    assert clean.exit_code == 0
    assert "The needs-attention counts agree with the runs." in clean.output.splitlines()
    # And they stay exact through writes after the repair.
    shake(engine, random.Random(22), rounds=30)
    assert_kept_equals_counted(engine)


def test_a_truncate_and_a_fold_keep_them_exact(engine):
    build_history(engine, 31, runs=20)
    with engine.begin() as conn:
        attention_counts.fold(conn)
        folded = conn.execute(sa.text("SELECT count(*) FROM pgbus_workflow_attention_deltas")).scalar_one()
        assert folded == 0
    assert_kept_equals_counted(engine)
    with engine.begin() as conn:
        conn.execute(sa.text("TRUNCATE pgbus_workflows CASCADE"))
    with engine.connect() as conn:
        assert attention_counts.kept(conn) == {} == recount.attention_key_counts(conn)
        assert workflow_attention.failed_groups(conn) == []
    build_history(engine, 32, runs=20)
    shake(engine, random.Random(32), rounds=30)
    assert_kept_equals_counted(engine)


def test_seeded_runs_are_kept_as_the_triggers_would_keep_them(engine):
    seeding.seed(engine, runs=300, seed=3, now=T0)
    seeding.seed(engine, runs=120, seed=4, now=T0 + timedelta(hours=1), chunk_size=50)
    # History: finished runs, some failed, written by INSERT ... SELECT.
    history.seed_history(engine, runs=60, now=T0, chunk_size=25)
    with engine.connect() as conn:
        assert attention_counts.kept(conn) == recount.attention_key_counts(conn)
        assert workflow_attention.failed_groups(conn) == recount.failed_groups(conn)
        kwargs = {"threshold": THRESHOLD, "now": T0, "waiting_threshold": WAITING_THRESHOLD}
        groups = recount.attention_groups(conn, **kwargs)
        assert groups
        assert_same_groups(workflow_attention.attention_groups(conn, **kwargs), groups)


def plan_of(conn, statement: str, binds: dict) -> str:
    return "\n".join(conn.execute(sa.text(f"EXPLAIN {statement}"), binds).scalars().all())


def test_each_part_reads_its_index(engine):
    """The groups' statement reads the kept counts, the moments index for
    the paused keys and each clock-read rule's candidates index (its
    predicate is the rule's condition without the clock, so a change of the
    rule that the index no longer covers fails here), and no other scan of
    the runs. Sequential and bitmap scans are turned off so that the plan
    shows which index can serve each part, whatever the table's size."""
    build_history(engine, 41, runs=20)
    captured = []
    listener = lambda conn, cursor, statement, parameters, context, many: captured.append(  # noqa: E731
        (statement, parameters)
    )
    sa.event.listen(engine, "before_cursor_execute", listener)
    try:
        with engine.connect() as conn:
            workflow_attention.attention_groups(conn, threshold=THRESHOLD, now=T0, waiting_threshold=WAITING_THRESHOLD)
            workflow_attention.failed_groups(conn)
    finally:
        sa.event.remove(engine, "before_cursor_execute", listener)
    (groups, group_binds), (failed, failed_binds) = captured[-2:]
    with engine.begin() as conn:
        conn.execute(sa.text("SET LOCAL enable_seqscan = off"))
        conn.execute(sa.text("SET LOCAL enable_bitmapscan = off"))
        plan = conn.exec_driver_sql(f"EXPLAIN {groups}", group_binds).scalars().all()
        failed_plan = conn.exec_driver_sql(f"EXPLAIN {failed}", failed_binds).scalars().all()
    # Once the visibility map says the pages are all visible (as autovacuum
    # keeps it), each clock-read part is read from its index alone.
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.exec_driver_sql("VACUUM ANALYZE pgbus_workflows")
    with engine.begin() as conn:
        conn.execute(sa.text("SET LOCAL enable_seqscan = off"))
        conn.execute(sa.text("SET LOCAL enable_bitmapscan = off"))
        only = "\n".join(conn.exec_driver_sql(f"EXPLAIN {groups}", group_binds).scalars().all())
    text = "\n".join(plan)
    assert "Index Only Scan using pgbus_workflows_attention_overdue" in only, only
    assert "Index Only Scan using pgbus_workflows_attention_waiting" in only, only
    # The moments index read from the analysed table, whose statistics an
    # autovacuum worker's ANALYZE cannot change under the test.
    assert "pgbus_workflows_attention_moments" in only, only
    # Not the index every ongoing run is in (what the groups read before).
    assert "Seq Scan on pgbus_workflows " not in text and "pgbus_workflows_stuck" not in text
    failed_text = "\n".join(failed_plan)
    assert "pgbus_workflows_attention_moments" in failed_text and "pgbus_workflows_failed" not in failed_text


def test_the_upgrade_counts_the_runs_already_there(_installed_engine, database_url):
    """A database at the version before is upgraded with paused and failed
    runs in it: the kept counts start equal to a full count, and the
    groups read from them equal the groups counted."""
    with scratch_database(_installed_engine, database_url) as (url, scratch):
        from pgbus_web import schema

        # The version before the one that adds the kept groups (found by its
        # script, whatever number it is given).
        adds = next(
            number
            for number, name in enumerate(schema.MIGRATIONS, start=1)
            if "TABLE IF NOT EXISTS pgbus_workflow_attention_counts" in schema._sql(name)
        )
        schema.install(scratch, target=adds - 1)
        build_history(scratch, 51, runs=30)
        shake(scratch, random.Random(51), rounds=40)
        with scratch.connect() as conn:
            assert conn.execute(sa.text("SELECT to_regclass('pgbus_workflow_attention_counts')")).scalar() is None
        assert schema.install(scratch).upgraded_from == adds - 1
        with scratch.connect() as conn:
            assert recount.attention_key_counts(conn)
            assert attention_counts.kept(conn) == recount.attention_key_counts(conn)
        assert_kept_equals_counted(scratch)
