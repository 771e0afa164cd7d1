"""The stuck rule read as SQL and read as Python agree, on random runs.

rules/stuck.py writes each stuck reason once; the needs-attention queries
and the index's reason filter read it as SQL over the run's latest_*
columns, a run's badge and stuck_reason read it as Python over its latest
step row. Random runs (any status, no step or a few, NULL and ±infinity
timestamps, moments exactly on each cutoff and a second either side) go
into the real table in one transaction, rolled back after, and every run
must get the same reason (or none) from each reader.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pgbus_web.core import representations as rep
from pgbus_web.core.words import presenters
from pgbus_web.models import workflow_attention, workflow_index
from pgbus_web.models.values import INFINITY, MINUS_INFINITY
from pgbus_web.rules import states, stuck

NOW = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)
THRESHOLD = timedelta(minutes=10)
WAITING_THRESHOLD = timedelta(minutes=30)
SECOND = timedelta(seconds=1)

# The moments where a rule's answer turns: each cutoff exactly, and a
# second either side of it.
EDGES = [
    cutoff + shift for cutoff in (NOW - THRESHOLD, NOW - WAITING_THRESHOLD) for shift in (-SECOND, timedelta(0), SECOND)
]
edges = st.sampled_from(EDGES)
# Weighted towards the edges and the statuses the rules look at, so that
# every turn of every rule is met many times in a run of the test.
moments = st.one_of(
    st.none(),
    st.sampled_from([INFINITY, MINUS_INFINITY]),
    edges,
    edges,
    edges,
    st.datetimes(min_value=datetime(1900, 1, 1), max_value=datetime(2200, 1, 1), timezones=st.just(UTC)),
)
step_rows = st.fixed_dictionaries(
    {
        "status": st.sampled_from(states.STEP + (states.STEP_FAILED, states.STEP_SCHEDULED, states.STEP_WAITING) * 2),
        "error_class": st.sampled_from([None, states.STEP_STALLED_ERROR, states.WAIT_TIMED_OUT_ERROR, "Boom"]),
        "scheduled_at": moments,
        "waiting_since": moments,
        "timeout_at": st.one_of(st.none(), st.none(), moments),
    }
)
run_rows = st.fixed_dictionaries(
    {
        "status": st.sampled_from(states.RUN + (states.PAUSED, states.READY, states.WAITING) * 2),
        "paused_at": moments,
        "steps": st.lists(step_rows, max_size=2),
    }
)


def _text(moment):
    # As text, so ±infinity and finite moments go through one text[] bind
    # (a list bind takes one dumper for all its items).
    return None if moment is None else moment.isoformat()


def _insert(conn, runs) -> list[str]:
    ids = [f"run-{n:04d}" for n in range(len(runs))]
    conn.execute(
        sa.text(
            "INSERT INTO pgbus_workflows (workflow_id, workflow_class, status, current_step, paused_at) "
            "SELECT id, 'Order', status, 'charge', CAST(paused_at AS timestamptz) "
            "FROM unnest(CAST(:ids AS text[]), CAST(:statuses AS text[]), CAST(:paused AS text[])) "
            "AS r(id, status, paused_at)"
        ),
        {"ids": ids, "statuses": [run["status"] for run in runs], "paused": [_text(run["paused_at"]) for run in runs]},
    )
    steps = [(workflow_id, step) for workflow_id, run in zip(ids, runs, strict=True) for step in run["steps"]]
    if steps:
        conn.execute(
            sa.text(
                "INSERT INTO pgbus_workflow_steps "
                "(workflow_id, step_name, status, error_class, scheduled_at, waiting_since, timeout_at) "
                "SELECT id, 'charge', status, error_class, CAST(scheduled_at AS timestamptz), "
                "CAST(waiting_since AS timestamptz), CAST(timeout_at AS timestamptz) "
                "FROM unnest(CAST(:ids AS text[]), CAST(:statuses AS text[]), CAST(:errors AS text[]), "
                "CAST(:scheduled AS text[]), CAST(:waiting AS text[]), CAST(:timeouts AS text[])) "
                "WITH ORDINALITY AS s(id, status, error_class, scheduled_at, waiting_since, timeout_at, n) "
                "ORDER BY n"
            ),
            {
                "ids": [workflow_id for workflow_id, _ in steps],
                "statuses": [step["status"] for _, step in steps],
                "errors": [step["error_class"] for _, step in steps],
                "scheduled": [_text(step["scheduled_at"]) for _, step in steps],
                "waiting": [_text(step["waiting_since"]) for _, step in steps],
                "timeouts": [_text(step["timeout_at"]) for _, step in steps],
            },
        )
    return ids


def _sql_reasons(conn, waiting_threshold) -> dict[str, str]:
    """Each stuck run's reason as the needs-attention queries give it."""
    binds = workflow_attention.stuck_binds(THRESHOLD, NOW, waiting_threshold)
    inner = workflow_attention.stuck_runs_sql(stuck.rules_for(binds), by_class=False)
    rows = conn.execute(sa.text(f"SELECT workflow_id, reason FROM ({inner}) s WHERE reason IS NOT NULL"), binds)
    return dict(rows.all())


def _filter_reasons(conn) -> dict[str, str]:
    """Each stuck run's reason as the index's reason filter finds it."""
    found: dict[str, str] = {}
    for reason in states.STUCK_REASONS:
        where, binds = workflow_index.page_where(
            threshold=THRESHOLD, waiting_threshold=WAITING_THRESHOLD, now=NOW, reason=reason
        )
        for (workflow_id,) in conn.execute(
            sa.text(f"SELECT w.workflow_id FROM pgbus_workflows w WHERE {where}"), binds
        ):
            assert workflow_id not in found, f"{workflow_id} matches {found.get(workflow_id)} and {reason}"
            found[workflow_id] = reason
    return found


def _python_reasons(conn, count: int, waiting_threshold) -> dict[str, str]:
    """Each stuck run's reason as its badge and stuck_reason give it, from
    the run and its latest step as the index page reads them."""
    runs = workflow_index.page(conn, limit=count, threshold=THRESHOLD, waiting_threshold=WAITING_THRESHOLD, now=NOW)
    assert len(runs) == count
    found: dict[str, str] = {}
    for run in runs:
        badge = presenters.run_state(run, now=NOW, stall_threshold=THRESHOLD, waiting_threshold=waiting_threshold).stuck
        api = rep.stuck_reason(run, now=NOW, stall_threshold=THRESHOLD, waiting_threshold=waiting_threshold)
        assert badge == api, run
        if badge is not None:
            found[run["workflow_id"]] = badge
    return found


def _column_reasons(conn, waiting_threshold) -> dict[str, str]:
    """Each stuck run's reason by the Python predicate over the run's own
    latest_* columns (what the SQL reads), not its step row."""
    given_ = stuck.params(NOW, THRESHOLD, waiting_threshold)
    rows = (
        conn.execute(sa.text(f"SELECT workflow_id, status, {', '.join(stuck.STEP_FIELD_OF)} FROM pgbus_workflows"))
        .mappings()
        .all()
    )
    found = {}
    for row in rows:
        reason = stuck.reason_of(row["status"], row, given_)
        if reason is not None:
            found[row["workflow_id"]] = reason
    return found


@settings(
    max_examples=50,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)
@pytest.mark.scale
@given(runs=st.lists(run_rows, min_size=50, max_size=300), waiting=st.booleans())
def test_sql_and_python_give_every_run_the_same_stuck_reason(engine, runs, waiting):
    waiting_threshold = WAITING_THRESHOLD if waiting else None
    with engine.connect() as conn:
        with conn.begin() as transaction:
            _insert(conn, runs)
            sql = _sql_reasons(conn, waiting_threshold)
            assert _python_reasons(conn, len(runs), waiting_threshold) == sql
            assert _column_reasons(conn, waiting_threshold) == sql
            # The filter always has a waiting threshold.
            assert _filter_reasons(conn) == _sql_reasons(conn, WAITING_THRESHOLD)
            transaction.rollback()


def test_a_waiting_run_without_waiting_since_is_in_no_group_and_has_no_overdue_badge(engine):
    # The case the two readings once answered differently: the badge fell
    # back to updated_at, the groups left the run out.
    runs = [
        {
            "status": states.WAITING,
            "paused_at": None,
            "steps": [
                {
                    "status": states.STEP_WAITING,
                    "error_class": None,
                    "scheduled_at": None,
                    "waiting_since": None,
                    "timeout_at": None,
                },
            ],
        }
    ]
    with engine.connect() as conn:
        with conn.begin() as transaction:
            _insert(conn, runs)
            conn.execute(sa.text("UPDATE pgbus_workflows SET updated_at = :old"), {"old": NOW - timedelta(days=30)})
            assert _sql_reasons(conn, WAITING_THRESHOLD) == {}
            assert _python_reasons(conn, 1, WAITING_THRESHOLD) == {}
            transaction.rollback()
