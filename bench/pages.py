"""How fast the dashboard's pages answer on a big database: for each page,
the whole request (routing, SQL, templates) against the time its SQL
alone took inside that same request.

Run it on a seeded database (``pgbus-web seed --runs 1000000``):

    python bench/pages.py --database-url postgresql://... [--repeat 7]

Each page is requested once to warm the caches, then --repeat times; the
table shows the median and the slowest of those, for the request and for
its SQL (every statement's execute, timed by SQLAlchemy's cursor events).
"""

from __future__ import annotations

import argparse
import os
import statistics
import threading
import time
from contextlib import contextmanager

import sqlalchemy as sa

from pgbus_web import db
from pgbus_web.app import create_app
from pgbus_web.demo.workflows import REGISTRY
from pgbus_web.models import workflow_counts

# The comparison page answers within this at a million runs (docs/compare.md).
COMPARE_TARGET_MS = 60


class SqlTimer:
    """Adds up the time spent executing statements on *engine* while on."""

    def __init__(self, engine) -> None:
        self.total = 0.0
        self.statements = 0
        self._local = threading.local()
        sa.event.listen(engine, "before_cursor_execute", self._before)
        sa.event.listen(engine, "after_cursor_execute", self._after)

    def _before(self, *args) -> None:
        self._local.started = time.perf_counter()

    def _after(self, *args) -> None:
        self.total += time.perf_counter() - self._local.started
        self.statements += 1

    @contextmanager
    def measure(self):
        self.total, self.statements = 0.0, 0
        yield self


def pick_targets(engine) -> list[tuple[str, str, dict]]:
    """(label, path, headers) of the pages to time, chosen from the data."""
    with engine.connect() as conn:
        # The kept counts and the primary key's two ends: no pass over the runs.
        total = workflow_counts.count_runs(conn)
        low, high = conn.execute(
            sa.text("SELECT (SELECT min(id) FROM pgbus_workflows), (SELECT max(id) FROM pgbus_workflows)")
        ).one()
        if not total:
            raise SystemExit("the database has no runs: seed it first (pgbus-web seed --runs N)")
        # A page near the oldest runs: the far end of a million-run index.
        deep = low + max((high - low) // 50, 1)
        run = conn.execute(
            sa.text(
                """
                SELECT workflow_id FROM pgbus_workflow_steps
                WHERE workflow_id = (
                    SELECT workflow_id FROM pgbus_workflows
                    WHERE status = 'paused' ORDER BY id DESC LIMIT 1)
                LIMIT 1
                """
            )
        ).scalar()
        busiest = conn.execute(
            sa.text(
                """
                SELECT workflow_id FROM (
                    SELECT workflow_id FROM pgbus_workflow_steps ORDER BY id DESC LIMIT 20000
                ) recent GROUP BY workflow_id ORDER BY count(*) DESC LIMIT 1
                """
            )
        ).scalar()
        group = conn.execute(
            sa.text(
                "SELECT workflow_class, current_step FROM pgbus_workflows "
                "WHERE status = 'paused' ORDER BY id DESC LIMIT 1"
            )
        ).first()
        # The group of the newest run paused on an error, as its link names it.
        failed_on = conn.execute(
            sa.text(
                "SELECT workflow_class, COALESCE(latest_step_name, current_step), latest_error_class "
                "FROM pgbus_workflows WHERE status = 'paused' AND latest_step_status = 'failed' "
                "AND latest_error_class IS NOT NULL AND latest_error_class <> 'Pgbus::Workflow::StepStalled' "
                "ORDER BY id DESC LIMIT 1"
            )
        ).first()
    print(f"{total:,} runs (ids {low:,} to {high:,})")
    hx = {"HX-Request": "true"}
    targets = [
        ("index, first page", "/workflows", {}),
        (f"index, deep page (before={deep})", f"/workflows?before={deep}", {}),
        (
            f"index runs fragment, deep page (before={deep})",
            f"/workflows?before={deep}",
            {**hx, "HX-Target": "pgbus-runs"},
        ),
        ("index runs fragment, status=completed", "/workflows?status=completed", {**hx, "HX-Target": "pgbus-runs"}),
        (
            "index runs fragment, reason=paused_error",
            "/workflows?reason=paused_error",
            {**hx, "HX-Target": "pgbus-runs"},
        ),
        ("index runs fragment, reason=stalled", "/workflows?reason=stalled", {**hx, "HX-Target": "pgbus-runs"}),
        (
            "index runs fragment, reason=waiting_overdue",
            "/workflows?reason=waiting_overdue",
            {**hx, "HX-Target": "pgbus-runs"},
        ),
        ("attention groups fragment", "/workflows", {**hx, "HX-Target": "pgbus-attention"}),
        ("counts fragment", "/workflows", {**hx, "HX-Target": "pgbus-counts"}),
    ]
    # Two runs compared: the newest failed run and the newest completed one of its class.
    with engine.connect() as conn:
        pair = conn.execute(
            sa.text(
                "SELECT f.workflow_id, (SELECT c.workflow_id FROM pgbus_workflows c"
                " WHERE c.workflow_class = f.workflow_class AND c.status = 'completed' ORDER BY c.id DESC LIMIT 1)"
                " FROM pgbus_workflows f WHERE f.status = 'failed' ORDER BY f.id DESC LIMIT 1"
            )
        ).first()
    if pair is not None and pair[1] is not None:
        targets.append(
            ("compare, a failed run with the last completed", f"/workflows/compare?a={pair[0]}&b={pair[1]}", {})
        )
    if group is not None:
        klass, step_name = group
        targets.append(
            (
                f"index runs fragment, group {klass}/{step_name}",
                f"/workflows?workflow_class={klass}&step={step_name}&reason=paused_error",
                {**hx, "HX-Target": "pgbus-runs"},
            )
        )
    if failed_on is not None:
        klass, step_name, error_class = failed_on
        targets.append(
            (
                f"index runs fragment, group {klass}/{step_name}/{error_class}",
                f"/workflows?workflow_class={klass}&step={step_name}&reason=paused_error&error_class={error_class}",
                {**hx, "HX-Target": "pgbus-runs"},
            )
        )
    for workflow_id, label in ((run, "run page (paused)"), (busiest, "run page (most attempts)")):
        if workflow_id:
            targets.append((label, f"/workflows/{workflow_id}", {}))
    targets.append(("insights, OrderWorkflow, 24h", "/workflows/insights/OrderWorkflow?since=24h", {}))
    targets.append(("insights, OrderWorkflow, 7d", "/workflows/insights/OrderWorkflow?since=7d", {}))
    targets.append(("insights, OrderWorkflow, 30d", "/workflows/insights/OrderWorkflow?since=30d", {}))
    return targets


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", default=os.environ.get(db.DATABASE_URL_ENV))
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument(
        "--read-only",
        action="store_true",
        help="only read the database: every transaction read only, no operations run",
    )
    parser.add_argument("--only", help="time only the pages whose label holds this text (e.g. compare)")
    options = parser.parse_args()

    if options.read_only:
        import sys
        from pathlib import Path

        sys.path.insert(0, str(Path(__file__).resolve().parent))
        import scratch  # bench/scratch.py

        database = db.Database(scratch.read_only_engine(options.database_url))
    else:
        database = db.Database.from_urls(options.database_url)
    timer = SqlTimer(database.primary)
    app = create_app(
        {"database": database, "registry": REGISTRY, **({"run_operations": False} if options.read_only else {})}
    )
    client = app.test_client()

    print(f"{'page':<58} {'request ms':>16} {'SQL ms':>16} {'stmts':>5}")
    print(f"{'':<58} {'median   max':>16} {'median   max':>16}")
    for label, path, headers in pick_targets(database.primary):
        if options.only and options.only not in label:
            continue
        response = client.get(path, headers=headers)  # warm: plans, caches, templates
        if response.status_code != 200:
            print(f"{label:<58} HTTP {response.status_code}")
            continue
        requests, sqls = [], []
        for _ in range(options.repeat):
            with timer.measure():
                started = time.perf_counter()
                client.get(path, headers=headers)
                requests.append((time.perf_counter() - started) * 1000)
                sqls.append(timer.total * 1000)
                statements = timer.statements
        print(
            f"{label:<58} {statistics.median(requests):7.1f} {max(requests):7.1f}"
            f"  {statistics.median(sqls):7.1f} {max(sqls):7.1f} {statements:5d}"
            + (
                f"  fastest {min(requests):.1f} ms, {min(requests) / COMPARE_TARGET_MS:.2f} of the"
                f" {COMPARE_TARGET_MS} ms target"
                if label.startswith("compare")
                else ""
            )
        )
    database.dispose()


if __name__ == "__main__":
    main()
