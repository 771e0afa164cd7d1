"""Insights over time at 100,000 and at 1,000,000 runs: the per-hour (24 h)
and per-day (30 d) series of one class, read from the kept rollup, and its
steps' median and 95th percentile per day over 30 days, read from the kept
histograms (each run has two finished steps), next to a floor measured in
the same run (a one-row SELECT). None of them should grow with the number
of runs.

    python bench/activity.py            # an embedded server of its own
    python bench/activity.py --database-url postgresql://...   # a scratch database there
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).resolve().parent))

import scratch

from pgbus_web import db, schema
from pgbus_web.models import step_durations, workflow_activity

CLASS = "OrderWorkflow"
CLASSES = ["OrderWorkflow", "RefundWorkflow", "OnboardingWorkflow"]
BATCH = 100_000

# Runs spread evenly over the last 30 days, whatever their number, so both
# sizes fill the same hours: 80% completed, 10% failed, 10% running.
RUNS = """
INSERT INTO pgbus_workflows (workflow_id, workflow_class, status, current_step, started_at, created_at, updated_at)
SELECT gen_random_uuid()::text, (CAST(:classes AS text[]))[1 + g % 3],
       CASE WHEN g % 10 = 0 THEN 'failed' WHEN g % 10 = 1 THEN 'running' ELSE 'completed' END,
       'step', moment, moment, moment + interval '2 minutes'
FROM generate_series(CAST(:first AS bigint), CAST(:last AS bigint)) AS g,
     LATERAL (SELECT now() - interval '30 days' * (g::float8 / CAST(:total AS bigint)) AS moment) AS spread
RETURNING workflow_id, created_at
"""
# Each run's two steps, finished with run times from 10 ms to about 100 s.
RUNS_WITH_STEPS = f"""
WITH runs AS ({RUNS})
INSERT INTO pgbus_workflow_steps (workflow_id, step_name, status, started_at, finished_at)
SELECT runs.workflow_id, name, 'completed', runs.created_at,
       runs.created_at + interval '1 millisecond' * power(10, 1 + 4 * random())
FROM runs, unnest(ARRAY['reserve', 'charge']) AS name
"""


def insert(url: str, first: int, last: int, total: int) -> None:
    engine = db.create_engine(url, db.UNBOUNDED_STATEMENTS, pool_size=1, max_overflow=0)
    try:
        for start in range(first, last + 1, BATCH):
            with engine.begin() as conn:
                conn.execute(
                    sa.text(RUNS_WITH_STEPS),
                    {"classes": CLASSES, "first": start, "last": min(start + BATCH - 1, last), "total": total},
                )
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.execute(sa.text("VACUUM ANALYZE"))
    finally:
        engine.dispose()


def median_ms(engine, work, repeat: int) -> float:
    times = []
    with engine.connect() as conn:
        work(conn)  # warm: plans, caches
        for _ in range(repeat):
            started = time.perf_counter()
            work(conn)
            times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def every_bucket(conn, now: datetime) -> list[tuple[float | None, float | None]]:
    since = now.astimezone(UTC).date() - timedelta(days=step_durations.DAYS - 1)
    return [
        (step_durations.percentile(histogram, 0.5), step_durations.percentile(histogram, 0.95))
        for histogram in step_durations.histograms(conn, CLASS, since=since).values()
    ]


def measure(url: str, repeat: int) -> dict[str, float]:
    engine = db.create_engine(url, db.UNBOUNDED_STATEMENTS, pool_size=1, max_overflow=0)
    now = datetime.now(UTC)
    with engine.connect() as conn:
        runs = conn.execute(sa.text("SELECT count(*) FROM pgbus_workflows")).scalar()
        kept_steps = conn.execute(sa.text("SELECT to_regclass('pgbus_workflow_step_durations') IS NOT NULL")).scalar()
    try:
        return {
            "floor": median_ms(engine, lambda conn: conn.execute(sa.text("SELECT 1")).scalar(), repeat),
            "hour": median_ms(
                engine, lambda conn: workflow_activity.series(conn, CLASS, bucket="hour", now=now), repeat
            ),
            "day": median_ms(engine, lambda conn: workflow_activity.series(conn, CLASS, bucket="day", now=now), repeat),
            "steps": median_ms(engine, lambda conn: step_durations.per_day(conn, CLASS, now=now), repeat)
            if kept_steps
            else float("nan"),
            # The read before the server picked the buckets: every bucket
            # row of 30 days fetched, the percentiles taken in Python.
            "step_rows": median_ms(engine, lambda conn: every_bucket(conn, now), repeat)
            if kept_steps
            else float("nan"),
            "runs": runs,
        }
    finally:
        engine.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", default=os.environ.get(db.DATABASE_URL_ENV))
    parser.add_argument("--repeat", type=int, default=25)
    parser.add_argument(
        "--existing",
        action="append",
        default=[],
        metavar="URL",
        help="measure these seeded databases as they are (read only; repeatable) instead",
    )
    options = parser.parse_args()
    if options.existing:
        print_rows([measure(url, options.repeat) for url in options.existing])
        return
    with scratch.server(options.database_url) as server, scratch.scratch_database(server) as url:
        schema.install(db.create_engine(url, db.UNBOUNDED_STATEMENTS))
        rows = []
        # 100,000 runs over 30 days, then nine times as many again over
        # the same days (1,000,000 in all, the same hours filled).
        insert(url, 1, 100_000, 100_000)
        rows.append(measure(url, options.repeat))
        insert(url, 100_001, 1_000_000, 900_000)
        rows.append(measure(url, options.repeat))
        print_rows(rows)


def print_rows(rows: list[dict[str, float]]) -> None:
    print(
        f"{'runs':>10} {'floor ms':>9} {'24 h ms':>8} {'30 d ms':>8} {'steps ms':>9} {'bucket rows ms':>14}"
        f" {'24 h/floor':>10} {'30 d/floor':>10} {'steps/floor':>11}"
    )
    for row in rows:
        print(
            f"{row['runs']:>10,} {row['floor']:9.3f} {row['hour']:8.3f} {row['day']:8.3f} {row['steps']:9.3f}"
            f" {row['step_rows']:14.3f} {row['hour'] / row['floor']:10.1f} {row['day'] / row['floor']:10.1f}"
            f" {row['steps'] / row['floor']:11.1f}"
        )
    if len(rows) == 2:
        small, large = sorted(rows, key=lambda row: row["runs"])
        print(
            f"{large['runs']:,} / {small['runs']:,} runs: 24 h {large['hour'] / small['hour']:.2f}x,"
            f" 30 d {large['day'] / small['day']:.2f}x,"
            f" step p50/p95 per day {large['steps'] / small['steps']:.2f}x"
        )


if __name__ == "__main__":
    main()
