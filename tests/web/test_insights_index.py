"""Insights' counts of one class over a created_at range: the partial first
hour is read from pgbus_workflows_class_created alone (an index-only scan
with no heap fetch, whatever the status mix; schema/v3.sql), the full
hours from the kept hourly counts."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import sqlalchemy as sa
from support.statements import statements

from pgbus_web.models import workflow_counts


def test_the_range_counts_are_an_index_only_scan(engine):
    now = datetime.now(UTC)
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                "INSERT INTO pgbus_workflows (workflow_id, workflow_class, status, created_at) "
                "SELECT 'r' || g, (ARRAY['Order', 'Refund'])[1 + g % 2], "
                "(ARRAY['completed', 'failed', 'paused'])[1 + g % 3], :now - g * interval '1 minute' "
                "FROM generate_series(1, 5000) g"
            ),
            {"now": now},
        )
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(sa.text("VACUUM ANALYZE pgbus_workflows"))
    since = now - timedelta(days=1)
    with statements() as seen, engine.connect() as conn:
        counts = workflow_counts.class_status_counts(conn, "Order", created_from=since)
    expected: dict[str, int] = {}
    for g in range(1, 1441):  # the runs created within the day
        if g % 2 == 0:
            status = ("completed", "failed", "paused")[g % 3]
            expected[status] = expected.get(status, 0) + 1
    assert counts == expected
    # The first, partial hour from the index; the full hours from the
    # kept counts (the range has no end: no last partial hour).
    (statement,) = [sql for sql in seen if "created_at >= %(start)s" in sql]
    assert len(seen) == 2 and any("pgbus_workflow_hour_counts" in sql for sql in seen)
    first_full = since.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
    with engine.connect() as conn:
        # Without a sequential or bitmap scan to fall back on, the plan shows
        # what the index gives: all of it, without the table.
        conn.execute(sa.text("SET enable_seqscan = off"))
        conn.execute(sa.text("SET enable_bitmapscan = off"))
        conn.execute(sa.text("SET max_parallel_workers_per_gather = 0"))
        plan = conn.exec_driver_sql(
            "EXPLAIN (ANALYZE, FORMAT JSON) "
            + statement.replace("%(workflow_class)s", "'Order'")
            .replace("%(start)s", f"'{since.isoformat()}'")
            .replace("%(end)s", f"'{first_full.isoformat()}'")
        ).scalar_one()
    plan = json.dumps(plan)
    assert '"Node Type": "Index Only Scan"' in plan
    assert '"Index Name": "pgbus_workflows_class_created"' in plan
    assert '"Heap Fetches": 0' in plan
