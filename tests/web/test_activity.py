"""Insights over time: the hourly rollup the triggers keep equals a full
recount of the runs, folded or not; pruning runs leaves it; the worker's
hourly stuck snapshot; the insights page draws the series as SVG with the
same numbers in its table."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import sqlalchemy as sa
from support.web_helpers import Runs, make_app, soup, text_of

from pgbus_web.demo import workflows as demo
from pgbus_web.models import recount, workflow_activity
from pgbus_web.runtime import system
from pgbus_web.runtime.worker import Worker

LONG_AGO = datetime(2000, 1, 1, tzinfo=UTC)


def _hour(moment: datetime) -> datetime:
    return moment.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


def _history(engine):
    """Runs started and ended over the last days, written directly (another
    writer, an import), then live runs done by a worker (two complete, one
    fails)."""
    now = datetime.now(UTC)
    runs = Runs(engine)
    for hours in (1, 1, 5, 30, 200):
        runs.make(
            "completed",
            workflow_class=demo.REFUND,
            created_at=now - timedelta(hours=hours, minutes=10),
            updated_at=now - timedelta(hours=hours - 1),
        )
    runs.make(
        "failed", workflow_class=demo.REFUND, created_at=now - timedelta(hours=3), updated_at=now - timedelta(hours=2)
    )
    runs.make("running", workflow_class=demo.REFUND, created_at=now - timedelta(hours=2))
    runs.make("completed", workflow_class=demo.ORDER, created_at=now - timedelta(hours=1))
    for number, fails in ((1, False), (2, False), (3, True)):
        system.start(
            engine,
            demo.REFUND,
            {"refund_id": number, "fail_refund": fails} if fails else {"refund_id": number},
            registry=demo.REGISTRY,
        )
    worker = Worker(engine, demo.REGISTRY)
    worker.drain()
    # Past the failing refund's backoff: its second attempt fails the run.
    worker.drain(now=datetime.now(UTC) + timedelta(minutes=1))


def _kept_and_recounted(engine, workflow_class):
    with engine.connect() as conn:
        return (
            workflow_activity.kept(conn, workflow_class, since=LONG_AGO),
            recount.activity_hours(conn, workflow_class, since=LONG_AGO),
        )


def test_the_rollup_equals_a_full_recount_before_and_after_folding(engine):
    _history(engine)
    kept, recounted = _kept_and_recounted(engine, demo.REFUND)
    with engine.connect() as conn:
        statuses = dict(
            conn.execute(
                sa.text("SELECT status, count(*) FROM pgbus_workflows WHERE workflow_class = :c GROUP BY 1"),
                {"c": demo.REFUND},
            ).all()
        )
    # The control: the history has starts, completions and a failure in several hours.
    assert statuses == {"completed": 7, "failed": 2, "running": 1}
    assert sum(started for started, _, _ in recounted.values()) == 10
    assert len(recounted) >= 5
    assert kept == recounted
    with engine.begin() as conn:
        workflow_activity.fold(conn)
        left = conn.execute(sa.text("SELECT count(*) FROM pgbus_workflow_activity_deltas")).scalar()
    assert left == 0
    assert _kept_and_recounted(engine, demo.REFUND) == (recounted, recounted)
    # Another class's runs are its own.
    kept_orders, recounted_orders = _kept_and_recounted(engine, demo.ORDER)
    assert kept_orders == recounted_orders and sum(s for s, _, _ in kept_orders.values()) == 1


def test_pruning_runs_leaves_the_history(engine):
    _history(engine)
    before, _ = _kept_and_recounted(engine, demo.REFUND)
    with engine.begin() as conn:
        conn.execute(
            sa.text("DELETE FROM pgbus_workflows WHERE workflow_class = :c AND status = 'completed'"),
            {"c": demo.REFUND},
        )
    after, recounted = _kept_and_recounted(engine, demo.REFUND)
    assert after == before
    assert recounted != before  # the control: the runs themselves are gone


def test_a_series_has_every_bucket_with_zeros_and_sums_the_hours_of_a_day(engine):
    _history(engine)
    now = datetime.now(UTC)
    with engine.connect() as conn:
        hours = workflow_activity.series(conn, demo.REFUND, bucket="hour", now=now)
        days = workflow_activity.series(conn, demo.REFUND, bucket="day", now=now)
        recounted = recount.activity_hours(conn, demo.REFUND, since=LONG_AGO)
    assert len(hours) == 24 and len(days) == 30
    assert hours[-1]["start"] == _hour(now) and hours[0]["start"] == _hour(now) - timedelta(hours=23)
    for row in hours:
        assert (row["started"], row["completed"], row["failed"]) == recounted.get(row["start"], (0, 0, 0))
    first_day = days[0]["start"]
    in_days = [value for hour, value in recounted.items() if hour >= first_day]
    assert sum(row["started"] for row in days) == sum(started for started, _, _ in in_days)
    assert sum(row["failed"] for row in days) == 2


def test_the_worker_records_the_stuck_runs_once_an_hour(engine):
    runs = Runs(engine)
    for _ in range(3):
        runs.make("paused", workflow_class=demo.ORDER, paused_at=datetime.now(UTC) - timedelta(hours=1))
    worker = Worker(engine, demo.REGISTRY)
    now = datetime.now(UTC)
    assert worker.record_stuck(now=now) is True
    assert worker.record_stuck(now=now) is False
    with engine.connect() as conn:
        stuck = dict(
            conn.execute(
                sa.text("SELECT workflow_class, stuck FROM pgbus_workflow_activity WHERE hour = :h"), {"h": _hour(now)}
            ).all()
        )
    assert stuck == {demo.ORDER: 3, demo.ONBOARDING: 0, demo.REFUND: 0}


def test_the_insights_page_draws_the_series_and_its_table(engine, database):
    _history(engine)
    client = make_app(database).test_client()
    page = soup(client.get(f"/workflows/insights/{demo.REFUND}"))
    hourly = page.select_one('.pgbus-activity-range[data-bucket="hour"]')
    daily = page.select_one('.pgbus-activity-range[data-bucket="day"]')
    assert hourly is not None and daily is not None
    charts = hourly.select("svg.pgbus-chart")
    assert len(charts) == 4 and all(chart["aria-hidden"] == "true" for chart in charts)
    rows = hourly.select("tbody tr")
    assert len(rows) == 24 and len(daily.select("tbody tr")) == 30
    with engine.connect() as conn:
        recounted = recount.activity_hours(conn, demo.REFUND, since=LONG_AGO)
    for row in rows:
        start = datetime.fromisoformat(row["data-start"])
        cells = [text_of(cell) for cell in row.select("td")]
        assert tuple(int(cell) for cell in cells[:3]) == recounted.get(start, (0, 0, 0))
    failed_bars = hourly.select('figure[data-series="failed"] rect')
    assert len(failed_bars) == 24
