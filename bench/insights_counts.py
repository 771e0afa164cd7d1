"""Insights' counts by status of one class over 30 days, at 100,000 and at
1,000,000 runs: the read before (count(*) of the runs created in the range,
an index-only scan of pgbus_workflows_class_created) and now (the kept
hourly counts for the full hours, the index for the partial first hour),
with the shared buffers each touches, next to a floor measured in the same
run (a one-row SELECT). Then the cost a status-changing write pays for the
hourly counts: the run count trigger's time (EXPLAIN ANALYZE) of single-row
status updates before the schema version that adds them and after it, in
one database.

    python bench/insights_counts.py            # an embedded server of its own
    python bench/insights_counts.py --database-url postgresql://...   # a scratch database there
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).resolve().parent))

import scratch

from pgbus_web import db, schema
from pgbus_web.models import workflow_counts

CLASS = "OrderWorkflow"
CLASSES = ["OrderWorkflow", "RefundWorkflow", "OnboardingWorkflow"]
BATCH = 100_000

# Runs spread evenly over the last 30 days, whatever their number.
RUNS = """
INSERT INTO pgbus_workflows (workflow_id, workflow_class, status, created_at, updated_at)
SELECT 'r' || g, (CAST(:classes AS text[]))[1 + g % 3],
       CASE WHEN g % 10 = 0 THEN 'failed' WHEN g % 10 = 1 THEN 'running' ELSE 'completed' END,
       moment, moment
FROM generate_series(CAST(:first AS bigint), CAST(:last AS bigint)) AS g,
     LATERAL (SELECT CAST(:now AS timestamptz) - interval '30 days' * (g::float8 / CAST(:total AS bigint))
              AS moment) AS spread
"""

# The read as it was: every run of the class created in the range.
BEFORE = (
    "SELECT status, count(*) FROM pgbus_workflows WHERE workflow_class = :c AND created_at >= :since GROUP BY status"
)


def insert(engine, first: int, last: int, total: int, now: datetime) -> None:
    for start in range(first, last + 1, BATCH):
        with engine.begin() as conn:
            conn.execute(
                sa.text(RUNS),
                {"classes": CLASSES, "first": start, "last": min(last, start + BATCH - 1), "total": total, "now": now},
            )
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.exec_driver_sql("VACUUM ANALYZE pgbus_workflows")
        if conn.execute(sa.text("SELECT to_regclass('pgbus_workflow_hour_counts') IS NOT NULL")).scalar_one():
            conn.exec_driver_sql("VACUUM ANALYZE pgbus_workflow_hour_counts")


def median_ms(engine, work, repeat: int) -> float:
    times = []
    with engine.connect() as conn:
        for _ in range(repeat):
            started = time.perf_counter()
            work(conn)
            times.append((time.perf_counter() - started) * 1000)
            conn.rollback()
    return statistics.median(times)


def buffers(conn, sql: str, binds: dict) -> int:
    (plan,) = conn.execute(sa.text("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + sql), binds).scalar_one()
    top = plan["Plan"]
    return top.get("Shared Hit Blocks", 0) + top.get("Shared Read Blocks", 0)


def measure(engine, now: datetime, repeat: int) -> dict[str, float]:
    since = now - timedelta(days=30)
    binds = {"c": CLASS, "since": since}
    with engine.connect() as conn:
        first_full = since.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
        new_buffers = buffers(
            conn, workflow_counts._COUNTED_PART, {"workflow_class": CLASS, "start": since, "end": first_full}
        ) + buffers(conn, workflow_counts._KEPT_HOURS, {"workflow_class": CLASS, "start": first_full, "end": None})
        old_buffers = buffers(conn, BEFORE, binds)
        assert workflow_counts.class_status_counts(conn, CLASS, created_from=since) == dict(
            conn.execute(sa.text(BEFORE), binds).all()
        )
    return {
        "floor": median_ms(engine, lambda conn: conn.execute(sa.text("SELECT 1")).scalar(), repeat),
        "before": median_ms(engine, lambda conn: conn.execute(sa.text(BEFORE), binds).all(), repeat),
        "now": median_ms(
            engine, lambda conn: workflow_counts.class_status_counts(conn, CLASS, created_from=since), repeat
        ),
        "before_buffers": old_buffers,
        "now_buffers": new_buffers,
    }


def trigger_ms(engine, runs: int, repeat: int) -> tuple[float, float]:
    """Median (run count trigger ms, whole statement ms) of single-run status
    changes, each in a transaction of its own, rolled back."""
    trigger, total = [], []
    with engine.connect() as conn:
        for number in range(repeat):
            plan = conn.execute(
                sa.text(
                    "EXPLAIN (ANALYZE, FORMAT JSON) UPDATE pgbus_workflows SET status = "
                    "CASE status WHEN 'failed' THEN 'completed' ELSE 'failed' END WHERE workflow_id = :w"
                ),
                {"w": f"r{1 + (number * 7919) % runs}"},
            ).scalar_one()
            conn.rollback()
            (top,) = plan if isinstance(plan, list) else json.loads(plan)
            trigger.append(
                sum(
                    t["Time"] for t in top.get("Triggers", []) if t["Trigger Name"] == "pgbus_workflows_count_on_update"
                )
            )
            total.append(top["Execution Time"])
    return statistics.median(trigger), statistics.median(total)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database-url", default=None)
    parser.add_argument("--sizes", default="100000,1000000")
    parser.add_argument("--repeat", type=int, default=30)
    options = parser.parse_args()
    sizes = [int(size) for size in options.sizes.split(",")]
    now = datetime.now(UTC).replace(minute=37, second=11)
    with scratch.server(options.database_url) as server:
        with scratch.scratch_database(server) as url:
            engine = db.create_engine(url, db.UNBOUNDED_STATEMENTS, pool_size=1, max_overflow=0)
            schema.install(engine, target=schema.SCHEMA_VERSION - 1)
            insert(engine, 1, 20_000, 20_000, now)
            before = trigger_ms(engine, 20_000, options.repeat * 10)
            schema.install(engine)
            after = trigger_ms(engine, 20_000, options.repeat * 10)
            print(f"{'status write':>14} {'trigger ms':>10} {'statement ms':>12}")
            print(f"{'before':>14} {before[0]:10.4f} {before[1]:12.4f}")
            print(f"{'after':>14} {after[0]:10.4f} {after[1]:12.4f}")
            print(f"{'after/before':>14} {after[0] / before[0]:10.2f} {after[1] / before[1]:12.2f}")
            engine.dispose()
        with scratch.scratch_database(server) as url:
            engine = db.create_engine(url, db.UNBOUNDED_STATEMENTS, pool_size=1, max_overflow=0)
            schema.install(engine)
            rows, written = [], 0
            for size in sizes:
                # Each size spread over the same 30 days: the first size's
                # runs are emptied first.
                with engine.begin() as conn:
                    conn.exec_driver_sql("TRUNCATE pgbus_workflows CASCADE")
                insert(engine, 1, size, size, now)
                written = size
                rows.append({"runs": written, **measure(engine, now, options.repeat)})
            engine.dispose()
    print(
        f"{'runs':>10} {'floor ms':>9} {'before ms':>9} {'now ms':>7} {'before/floor':>12} {'now/floor':>9}"
        f" {'before buffers':>14} {'now buffers':>11}"
    )
    for row in rows:
        print(
            f"{row['runs']:>10,} {row['floor']:9.3f} {row['before']:9.3f} {row['now']:7.3f}"
            f" {row['before'] / row['floor']:12.1f} {row['now'] / row['floor']:9.1f}"
            f" {row['before_buffers']:>14,} {row['now_buffers']:>11,}"
        )


if __name__ == "__main__":
    main()
