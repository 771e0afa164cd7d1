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

from datetime import datetime

import pytest
import sqlalchemy as sa
from support.stuck_reference import (
    CLASSES,
    MINUTE,
    THRESHOLD,
    WAITING_THRESHOLD,
    assert_same_groups,
    build_history,
    moments,
    on_threshold,
)

from pgbus_web.models import workflow_attention, workflow_index, workflow_upkeep
from pgbus_web.rules import run_filters as filters
from pgbus_web.rules import states

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
               WHEN w.status = 'paused' AND s.status = 'failed' AND
                 s.error_class = 'Pgbus::Workflow::StepStalled' THEN 'stalled'
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


# --- Comparing -----------------------------------------------------------------


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


@pytest.mark.scale
@pytest.mark.parametrize("seed", SEEDS)
def test_the_stuck_queries_match_the_reference_on_random_histories(engine, seed):
    build_history(engine, seed)
    compared = sum(compare_everything(engine, now) for now in moments(engine))
    assert compared > 20
    with engine.connect() as conn:
        wrong, examples = workflow_upkeep.latest_mismatches(conn, after_id=0, last_id=2**62, limit=5)
    assert (wrong, examples) == (0, [])


@pytest.mark.scale
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
