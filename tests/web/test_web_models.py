"""The pages' SQL (models.workflow_index.page and friends) against PostgreSQL:
keyset pages in both directions, every filter, the stuck-reason filter
agreeing with the attention queries, per-class counts and step durations."""

from __future__ import annotations

from datetime import timedelta

import pytest
from support.web_helpers import Runs, every_state, step, utcnow

from pgbus_web.models import batches, steps, workflow_attention, workflow_counts, workflow_index
from pgbus_web.rules import states

THRESHOLD = timedelta(minutes=10)
WAITING_THRESHOLD = timedelta(hours=24)


@pytest.fixture
def runs(engine):
    return Runs(engine)


def page(engine, **kwargs):
    kwargs.setdefault("limit", 100)
    with engine.connect() as conn:
        return workflow_index.page(conn, threshold=THRESHOLD, waiting_threshold=WAITING_THRESHOLD, **kwargs)


def ids(rows):
    return [row["workflow_id"] for row in rows]


def test_page_lists_newest_first_with_latest_step_and_batch(engine, runs):
    first = runs.make(states.READY, step("reserve_stock", "completed"), step("capture_payment", "scheduled"))
    second = runs.make(
        states.WAITING,
        step("notify_vendors", "waiting"),
        batch={"description": "OrderWorkflow#notify_vendors", "total_jobs": 12, "completed_jobs": 7},
    )
    rows = page(engine)
    assert ids(rows) == [second, first]
    assert rows[1]["step"]["step_name"] == "capture_payment"
    assert rows[0]["batch"]["completed_jobs"] == 7 and rows[0]["batch"]["total_jobs"] == 12
    assert rows[1]["batch"] is None


def test_page_of_a_run_without_steps_has_no_step(engine, runs):
    runs.make(states.READY)
    assert page(engine)[0]["step"] is None


def test_keyset_pages_walk_older_and_newer(engine, runs):
    made = [runs.make(states.COMPLETED, step("send_receipt", "completed")) for _ in range(7)]
    newest_first = list(reversed(made))
    first = page(engine, limit=3)
    assert ids(first) == newest_first[:3]
    second = page(engine, limit=3, before_id=first[-1]["id"])
    assert ids(second) == newest_first[3:6]
    back = page(engine, limit=3, after_id=second[0]["id"])
    assert ids(back) == newest_first[:3]


@pytest.mark.parametrize(
    "filters, expected",
    [
        ({"workflow_class": "RefundWorkflow"}, ["failed"]),
        ({"status": states.CANCELLED}, ["cancelled"]),
        ({"subject_type": "User"}, ["waiting_overdue"]),
        ({"subject_type": "Refund", "subject_id": "3"}, ["failed"]),
        ({"step_name": "issue_refund"}, ["failed"]),
        ({"error_class": "TimeoutError"}, ["paused_error"]),
    ],
)
def test_page_filters(engine, runs, filters, expected):
    made = every_state(runs)
    names = {workflow_id: name for name, workflow_id in made.items()}
    assert [names[workflow_id] for workflow_id in ids(page(engine, **filters))] == expected


def test_page_created_range(engine, runs):
    now = utcnow()
    old = runs.make(states.COMPLETED, created_at=now - timedelta(days=3))
    recent = runs.make(states.COMPLETED, created_at=now - timedelta(hours=2))
    assert ids(page(engine, created_from=now - timedelta(days=1))) == [recent]
    assert ids(page(engine, created_to=now - timedelta(days=1))) == [old]


@pytest.mark.parametrize("reason", states.STUCK_REASONS)
def test_reason_filter_agrees_with_the_attention_queries(engine, runs, reason):
    every_state(runs)
    now = utcnow()
    with engine.connect() as conn:
        expected = set()
        for group in workflow_attention.attention_groups(
            conn, threshold=THRESHOLD, waiting_threshold=WAITING_THRESHOLD, now=now
        ):
            if group["reason"] == reason:
                expected |= set(
                    workflow_attention.attention_ids(
                        conn, group, threshold=THRESHOLD, waiting_threshold=WAITING_THRESHOLD, now=now
                    )
                )
    listed = set(ids(page(engine, reason=reason, now=now)))
    assert listed == expected and listed


def test_reason_filter_narrows_by_group(engine, runs):
    made = every_state(runs)
    rows = page(
        engine,
        reason=states.PAUSED_ERROR,
        workflow_class="OrderWorkflow",
        step_name="capture_payment",
        error_class="TimeoutError",
    )
    assert ids(rows) == [made["paused_error"]]
    assert page(engine, reason=states.PAUSED_ERROR, step_name="reserve_stock") == []


def test_unknown_reason_is_refused(engine):
    with pytest.raises(ValueError, match="unknown stuck reason"):
        page(engine, reason="bored")


def test_class_status_counts_and_class_exists(engine, runs):
    now = utcnow()
    runs.make(states.COMPLETED, created_at=now - timedelta(days=40))
    runs.make(states.COMPLETED)
    runs.make(states.PAUSED, step("capture_payment", "failed"))
    runs.make(states.COMPLETED, workflow_class="RefundWorkflow", subject=("Refund", "1"))
    with engine.connect() as conn:
        assert workflow_counts.class_status_counts(conn, "OrderWorkflow") == {"completed": 2, "paused": 1}
        recent = workflow_counts.class_status_counts(conn, "OrderWorkflow", created_from=now - timedelta(days=7))
        assert recent == {"completed": 1, "paused": 1}
        assert workflow_counts.class_exists(conn, "RefundWorkflow")
        assert not workflow_counts.class_exists(conn, "NoSuchWorkflow")


def test_duration_percentiles_per_step(engine, runs):
    now = utcnow()
    # capture_payment ran 10s, 20s, 30s, 40s and 100s; reserve_stock 1s once.
    for seconds in (10, 20, 30, 40, 100):
        started = now - timedelta(hours=1)
        runs.make(
            states.COMPLETED,
            step(
                "reserve_stock",
                "completed",
                started_at=started - timedelta(seconds=5),
                finished_at=started - timedelta(seconds=4),
            )
            if seconds == 10
            else step("reserve_stock", "scheduled"),
            step(
                "capture_payment",
                "failed" if seconds == 100 else "completed",
                started_at=started,
                finished_at=started + timedelta(seconds=seconds),
            ),
            created_at=started - timedelta(minutes=1),
        )
    # A run started before the range: left out.
    runs.make(
        states.COMPLETED,
        step(
            "capture_payment",
            "completed",
            started_at=now - timedelta(days=9),
            finished_at=now - timedelta(days=9) + timedelta(seconds=999),
        ),
        created_at=now - timedelta(days=9),
    )
    with engine.connect() as conn:
        result = steps.duration_percentiles(conn, "OrderWorkflow", created_from=now - timedelta(days=7), run_limit=100)
    assert result["runs"] == 5
    rows = result["steps"]
    by_step = {row["step_name"]: row for row in rows}
    assert [row["step_name"] for row in rows] == ["reserve_stock", "capture_payment"]
    capture = by_step["capture_payment"]
    assert capture["attempts"] == 5 and capture["failed"] == 1
    assert capture["median_seconds"] == pytest.approx(30)
    # percentile_cont interpolates: 40 + 0.8 * (100 - 40)
    assert capture["p95_seconds"] == pytest.approx(88)
    assert by_step["reserve_stock"]["median_seconds"] == pytest.approx(1)


def test_duration_percentiles_read_the_newest_runs_only(engine, runs):
    now = utcnow()
    for seconds in (10, 20, 30):
        runs.make(
            states.COMPLETED,
            step(
                "capture_payment",
                "completed",
                started_at=now - timedelta(minutes=5),
                finished_at=now - timedelta(minutes=5) + timedelta(seconds=seconds),
            ),
        )
    with engine.connect() as conn:
        result = steps.duration_percentiles(conn, "OrderWorkflow", created_from=now - timedelta(days=1), run_limit=2)
    assert result["runs"] == 2
    # The two newest runs ran 20s and 30s.
    assert result["steps"][0]["attempts"] == 2
    assert result["steps"][0]["median_seconds"] == pytest.approx(25)


def test_batches_find_many(engine):
    now = utcnow()
    with engine.begin() as conn:
        batches.insert_batch(conn, batch_id="b1", description="one", total_jobs=3, now=now)
        batches.insert_batch(conn, batch_id="b2", description="two", total_jobs=4, now=now)
        found = batches.find_many(conn, ["b1", "b2", "missing", None])
        assert set(found) == {"b1", "b2"} and found["b2"]["total_jobs"] == 4
        assert batches.find_many(conn, []) == {}
