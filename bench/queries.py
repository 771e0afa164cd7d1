"""How the needs-attention queries behave on a big database: for each one,
the plan PostgreSQL chose (which indexes, how many buffers) and the median
wall time of several calls.

Run it on a seeded database (``pgbus-web seed --runs 1000000``, then
``VACUUM ANALYZE``):

    python bench/queries.py --database-url postgresql://... [--repeat 7]

The queries are the models' own: each is called once while SQLAlchemy's
cursor events capture its statement and parameters, which are then run
under ``EXPLAIN (ANALYZE, BUFFERS)``. Each is then called --repeat more
times; the median and the slowest are shown (the first, warming call is
not counted).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa

from pgbus_web import db, defaults
from pgbus_web.models import workflow_attention, workflow_counts


def capture(engine, call: Callable[[Any], Any]) -> tuple[Any, str, Any]:
    """Run call(conn) and return its result and the one statement it sent."""
    seen: list[tuple[str, Any]] = []

    def before(conn, cursor, statement, parameters, context, executemany):
        seen.append((statement, parameters))

    sa.event.listen(engine, "before_cursor_execute", before)
    try:
        with engine.connect() as conn:
            result = call(conn)
    finally:
        sa.event.remove(engine, "before_cursor_execute", before)
    # Not the pool's ping, nor the savepoint and statement timeout round a
    # statement given a budget (models/statement_budget.within).
    statements = [
        (s, p)
        for s, p in seen
        if not s.lstrip().upper().startswith(("SELECT 1", "ROLLBACK", "SAVEPOINT", "RELEASE"))
        and "set_config('statement_timeout'" not in s
    ]
    statement, parameters = statements[-1]
    return result, statement, parameters


def explain(engine, statement: str, parameters: Any) -> dict:
    with engine.connect() as conn:
        cursor = conn.connection.dbapi_connection.cursor()
        cursor.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + statement, parameters)
        (plan,) = cursor.fetchone()
        conn.rollback()
    return plan[0] if isinstance(plan, list) else json.loads(plan)[0]


def scans(node: dict, found: list[str]) -> list[str]:
    """The plan's scans, as 'Index Only Scan pgbus_workflows_class_status' lines."""
    kind = node.get("Node Type", "")
    if "Scan" in kind:
        target = node.get("Index Name") or node.get("Relation Name") or node.get("Alias") or ""
        loops = node.get("Actual Loops", 1)
        rows = node.get("Actual Rows", 0)  # per loop, an average since PostgreSQL 18
        line = f"{kind} {target} (rows {rows:,.0f} x {loops:,} loops)"
        if line not in found:
            found.append(line)
    for child in node.get("Plans", ()):
        scans(child, found)
    return found


def buffers(node: dict) -> tuple[int, int]:
    return node.get("Shared Hit Blocks", 0), node.get("Shared Read Blocks", 0)


def timed(engine, call: Callable[[Any], Any], repeat: int) -> list[float]:
    times = []
    with engine.connect() as conn:
        call(conn)  # warm-up, not counted
        for _ in range(repeat):
            started = time.perf_counter()
            call(conn)
            times.append(time.perf_counter() - started)
            conn.rollback()
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--repeat", type=int, default=7, help="timed calls per query (after one warm-up)")
    args = parser.parse_args()

    engine = db.create_engine(args.database_url)
    now = datetime.now(UTC)
    stuck = {"threshold": defaults.STALL_THRESHOLD, "now": now, "waiting_threshold": defaults.WAITING_THRESHOLD}

    with engine.connect() as conn:
        runs, steps = conn.execute(
            sa.text("SELECT (SELECT count(*) FROM pgbus_workflows), (SELECT count(*) FROM pgbus_workflow_steps)")
        ).one()
    if not runs:
        raise SystemExit("the database has no runs: seed it first (pgbus-web seed --runs N)")
    print(
        f"{runs:,} runs, {steps:,} step rows; thresholds: stall {defaults.STALL_THRESHOLD}, "
        f"waiting {defaults.WAITING_THRESHOLD}; {args.repeat} timed calls each\n"
    )

    groups, _, _ = capture(engine, lambda conn: workflow_attention.attention_groups(conn, **stuck))
    biggest = groups[0] if groups else None
    queries: list[tuple[str, Callable[[Any], Any]]] = [
        ("status_counts", lambda conn: workflow_counts.status_counts(conn)),
        ("stuck_reason_counts", lambda conn: workflow_attention.stuck_reason_counts(conn, **stuck)),
        ("attention_groups", lambda conn: workflow_attention.attention_groups(conn, **stuck)),
    ]
    if biggest is not None:
        label = (
            f"attention_ids ({biggest['workflow_class']} {biggest['step_name']} {biggest['reason']} "
            f"{biggest['error_class'] or '-'}: {biggest['count']:,} runs)"
        )
        queries.append((label, lambda conn: workflow_attention.attention_ids(conn, biggest, **stuck)))

    for label, call in queries:
        result, statement, parameters = capture(engine, call)
        plan = explain(engine, statement, parameters)
        times = timed(engine, call, args.repeat)
        hit, read = buffers(plan["Plan"])
        size = len(result) if hasattr(result, "__len__") else result
        print(f"== {label}")
        print(
            f"   median {statistics.median(times) * 1000:.1f} ms, slowest {max(times) * 1000:.1f} ms "
            f"(EXPLAIN ANALYZE: execution {plan['Execution Time']:.1f} ms, planning {plan['Planning Time']:.1f} ms)"
        )
        print(f"   buffers: {hit:,} hit, {read:,} read; {size:,} result rows")
        for line in scans(plan["Plan"], []):
            print(f"   - {line}")
        print()
    engine.dispose()


if __name__ == "__main__":
    main()
