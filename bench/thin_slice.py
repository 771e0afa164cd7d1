"""An operation's statements on a thin slice of a big table: the matching
runs a few percent of millions, bunched at one end of the id range, as an
incident leaves them (the failed runs of the last hour among two million).

    python bench/thin_slice.py [--database-url URL] [--runs 2000000]

Without --database-url an embedded PostgreSQL is started; the benchmark
seeds its own database (bench/bulk_runs.py): 1% paused RefundWorkflow runs
at the low end of the ids, the bulk completed (and some ongoing), 4%
failed OrderWorkflow runs at the high end. For each filter it runs every
statement an operation sends over the runs (the preview's count and
sample, the first chunk's walk) as EXPLAIN (ANALYZE, BUFFERS), twice: as
one walk of the whole id range (the statements before the bounded walks:
one window as wide as the table) and window by window (now), after a
restart of the server (its shared buffers empty), and prints the slowest
statement of each, its buffers and the rows it read.
"""

from __future__ import annotations

import argparse
import getpass
import json
import subprocess
import sys
from pathlib import Path

import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bulk_runs
import scratch

from pgbus_web import db, defaults, schema
from pgbus_web.models import workflow_index, workflow_rows, workflow_windows
from pgbus_web.rules import run_filters
from pgbus_web.runtime import operation_preview, operation_runner
from pgbus_web.runtime.clock import utcnow

BENCH_DATABASE = "pgbus_bench_thin_slice"
THRESHOLDS = {"threshold": defaults.STALL_THRESHOLD, "waiting_threshold": defaults.WAITING_THRESHOLD}
FILTERS = (
    {"status": "failed"},
    {"status": "failed", "workflow_class": "OrderWorkflow", "step_name": "capture_payment"},
    {"workflow_class": "RefundWorkflow", "status": "paused"},
    {"step_name": "refund"},
)
# Wider than any table: one window, the walks before they were bounded.
WHOLE = 10**15


def seed(url: str, runs: int) -> None:
    early, late = runs // 100, runs // 25
    bulk_runs.insert(
        url,
        early,
        bulk_runs.Shape(
            classes=("RefundWorkflow",), subject_types=("LegacyRefund",), statuses=("paused",), steps=("refund",)
        ),
    )
    bulk_runs.insert(
        url,
        runs - early - late,
        bulk_runs.Shape(
            classes=("OrderWorkflow", "RefundWorkflow", "OnboardingWorkflow"),
            subject_types=("Order", "Refund", "User"),
            statuses=("completed",) * 6 + ("cancelled", "ready", "waiting", "running"),
            steps=tuple(f"step_{n}" for n in range(7)),
        ),
    )
    bulk_runs.insert(
        url,
        late,
        bulk_runs.Shape(
            classes=("OrderWorkflow",), subject_types=("Order",), statuses=("failed",), steps=("capture_payment",)
        ),
    )


def explained(engine, call) -> list[dict]:
    """Each statement *call* sends over pgbus_workflows, run again as
    EXPLAIN (ANALYZE, BUFFERS): its time, buffers and rows read."""
    sent = []

    def grab(conn, cursor, statement, parameters, context, executemany):
        if "pgbus_workflows w" in statement and not statement.lstrip().startswith("EXPLAIN"):
            sent.append((statement, parameters))

    sa.event.listen(engine, "before_cursor_execute", grab)
    try:
        with engine.connect() as conn:
            call(conn)
    finally:
        sa.event.remove(engine, "before_cursor_execute", grab)
    found = []
    with engine.connect() as conn:
        cursor = conn.connection.driver_connection.cursor()
        for statement, parameters in sent:
            cursor.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + statement, parameters)
            plan = cursor.fetchone()[0][0]
            found.append(
                {"ms": plan["Execution Time"], "buffers": _buffers(plan["Plan"]), "read": rows_read(plan["Plan"])}
            )
    return found


def _buffers(node: dict) -> int:
    return node.get("Shared Hit Blocks", 0) + node.get("Shared Read Blocks", 0)


def rows_read(node: dict) -> int:
    """Index and heap entries the scans of a plan read: each scan's rows
    and the rows its filter removed, times its loops."""
    here = 0
    if "Scan" in node["Node Type"]:
        here = (
            node.get("Actual Rows", 0)
            + node.get("Rows Removed by Filter", 0)
            + node.get("Rows Removed by Index Recheck", 0)
        ) * node.get("Actual Loops", 1)
    return here + sum(rows_read(child) for child in node.get("Plans", []))


def statements(conn, values: dict, window: int) -> None:
    """The preview's count and sample and the first chunk's walk."""
    parsed = run_filters.parse(values)
    now = utcnow()
    binds = operation_preview.filter_binds(parsed, now)
    ceiling = workflow_rows.highest_id(conn)
    where, where_binds = workflow_index.page_where(now=now, ceiling_id=ceiling, **THRESHOLDS, **binds)
    _, holding = workflow_windows.count_by_window(
        conn, where=where, binds=where_binds, ceiling_id=ceiling, window=window
    )
    workflow_windows.sample_in(conn, holding, limit=operation_preview.SAMPLE_SIZE, now=now, **THRESHOLDS, **binds)
    where, binds = workflow_index.page_where(now=now, **THRESHOLDS, **binds)
    workflow_windows.walk(
        conn,
        where=where,
        binds=binds,
        after_id=0,
        ceiling_id=ceiling,
        limit=operation_runner.CHUNK,
        window=window,
        windows=operation_runner.WINDOWS_PER_CHUNK if window < WHOLE else 1,
    )


def restarter(pg_ctl: str | None, data: str | None):
    """A function restarting the server in *data* (its shared buffers
    empty, the OS cache kept), or None."""
    if not (pg_ctl and data):
        return None

    def restart() -> None:
        owner = Path(data).owner()
        command = [pg_ctl, "-D", data, "-l", str(Path(data) / "restart.log"), "restart", "-m", "fast", "-w"]
        if owner != getpass.getuser():  # pg_ctl refuses root: as the owner of the data
            command = ["runuser", "-u", owner, "--"] + command
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    return restart


def report(url: str, restart_server) -> None:
    engine = db.create_engine(url, db.UNBOUNDED_STATEMENTS)
    with engine.connect() as conn:
        print(f"{workflow_rows.highest_id(conn):,} runs; window {workflow_windows.WINDOW:,} ids")
    for values in FILTERS:
        for label, window in (("one walk (before)", WHOLE), ("by window (now)", workflow_windows.WINDOW)):
            if restart_server is not None:
                engine.dispose()
                restart_server()
            found = explained(engine, lambda conn, values=values, window=window: statements(conn, values, window))
            worst = max(found, key=lambda item: item["ms"])
            print(
                f"{json.dumps(values):90} {label:18} statements {len(found):4}  slowest {worst['ms']:8.1f} ms"
                f"  {worst['buffers']:7} buffers  {int(worst['read']):9,} rows read"
                f"  (all: {sum(i['ms'] for i in found):8.1f} ms,"
                f" most rows read by one {int(max(i['read'] for i in found)):,})"
            )
    engine.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", help="A server to use (a scratch database is made on it).")
    parser.add_argument("--existing", help="A database already seeded: measure only.")
    parser.add_argument("--runs", type=int, default=2_000_000)
    parser.add_argument("--pg-ctl", help="With --data: restart the server before each measurement (cold).")
    parser.add_argument("--data", help="The server's data directory, for --pg-ctl.")
    options = parser.parse_args()
    if options.existing:
        report(options.existing, restarter(options.pg_ctl, options.data))
        return
    with scratch.server(options.database_url) as server_url:
        url = scratch.create_database(server_url, BENCH_DATABASE)
        try:
            engine = db.create_engine(url)
            schema.install(engine)
            engine.dispose()
            seed(url, options.runs)
            report(url, None)
        finally:
            scratch.drop_database(server_url, BENCH_DATABASE)


if __name__ == "__main__":
    main()
