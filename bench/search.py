"""The index's search box at a million runs: for each form the search
accepts (docs/web.md, Finding a run), the plan PostgreSQL chose for the runs index's own
query (models.workflow_index.page with ``search``), under EXPLAIN (ANALYZE,
BUFFERS), and the median wall time of several calls.

    python bench/search.py [--database-url postgresql://...] [--runs 1000000] [--repeat 7]

Without --database-url an embedded PostgreSQL is started in a temporary
directory. The benchmark makes its own database (``pgbus_bench_search``,
dropped and made again) and seeds --runs runs by set-based INSERTs
(bench/bulk_runs.py, shape MIXED): three classes and their subject types
(so each subject id is shared by three runs of different types), every
status, an idempotency key on every other run, random uuid run ids. No
step rows: the search reads the runs
table; the page's latest-step lookup costs one index probe per listed run
(docs/performance.md). Then it searches for one run near the middle by each
form, prints the plan of each, and checks each found that run; last, the
plan of the failed runs' groups (models.workflow_attention.failed_groups: the
kept counts by key and one probe of the moments index per key).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bulk_runs  # noqa: E402  (bench/bulk_runs.py)
import scratch  # noqa: E402
from queries import capture, timed  # noqa: E402  (bench/queries.py)

from pgbus_web import db, defaults, schema  # noqa: E402
from pgbus_web.models import workflow_attention, workflow_index  # noqa: E402

BENCH_DATABASE = "pgbus_bench_search"
THRESHOLDS = {"threshold": defaults.STALL_THRESHOLD, "waiting_threshold": defaults.WAITING_THRESHOLD}
PAGE_SIZE = 50


def explain_text(engine, statement: str, parameters) -> str:
    with engine.connect() as conn:
        cursor = conn.connection.dbapi_connection.cursor()
        cursor.execute("EXPLAIN (ANALYZE, BUFFERS) " + statement, parameters)
        lines = [row[0] for row in cursor.fetchall()]
        conn.rollback()
    return "\n".join(lines)


def search(bench_url: str, runs: int, repeat: int) -> None:
    engine = db.create_engine(bench_url)
    try:
        schema.install(engine)
        started = time.monotonic()
        bulk_runs.insert(bench_url, runs, bulk_runs.MIXED)
        print(f"seeded {runs:,} runs in {time.monotonic() - started:.1f}s (with VACUUM ANALYZE)\n")

        with engine.connect() as conn:
            target = conn.execute(sa.text(
                "SELECT workflow_id, subject_type, subject_id, idempotency_key FROM pgbus_workflows "
                "WHERE idempotency_key IS NOT NULL AND id >= :middle ORDER BY id LIMIT 1"
            ), {"middle": runs // 2}).mappings().one()
        forms = [
            ("run id, whole", target["workflow_id"]),
            ("run id, upper case", target["workflow_id"].upper()),
            ("run id, the 8 characters the list shows", target["workflow_id"][:8]),
            ("run id, 4-character prefix", target["workflow_id"][:4]),
            ("idempotency key, lower case", target["idempotency_key"].lower()),
            ("subject, type and id", f"{target['subject_type']} {target['subject_id']}"),
            ("subject, lower case", f"{target['subject_type'].lower()} {target['subject_id']}"),
            ("subject id alone", target["subject_id"]),
            ("nothing matches", "no-such-run-anywhere"),
        ]
        summary = []
        for label, text in forms:
            def call(conn, text=text):
                return workflow_index.page(conn, limit=PAGE_SIZE + 1, search=text, **THRESHOLDS)

            rows, statement, parameters = capture(engine, call)
            plan = explain_text(engine, statement, parameters)
            times = timed(engine, call, repeat)
            found = target["workflow_id"] in {row["workflow_id"] for row in rows}
            summary.append((label, text, len(rows), found, statistics.median(times), max(times)))
            print(f"== {label}: q={text!r}: {len(rows)} runs, target {'found' if found else 'NOT found'}; "
                  f"median {statistics.median(times) * 1000:.2f} ms, slowest {max(times) * 1000:.2f} ms")
            print(plan)
            print()
        # The failed runs' groups beside the needs-attention groups (the
        # seed makes a tenth of the runs failed).
        groups, statement, parameters = capture(engine, lambda conn: workflow_attention.failed_groups(conn))
        times = timed(engine, lambda conn: workflow_attention.failed_groups(conn), repeat)
        print(f"== failed runs' groups: {len(groups)} groups of {sum(g['count'] for g in groups):,} runs; "
              f"median {statistics.median(times) * 1000:.2f} ms, slowest {max(times) * 1000:.2f} ms")
        print(explain_text(engine, statement, parameters))
        print()
        print("summary (median / slowest of", repeat, "calls):")
        for label, text, count, found, median, slowest in summary:
            print(f"  {label:<42} {count:>3} runs  {'found' if found else '-':<5}  "
                  f"{median * 1000:7.2f} ms / {slowest * 1000:7.2f} ms")
        missed = [label for label, _, _, found, _, _ in summary if not found and label != "nothing matches"]
        if missed:
            raise SystemExit(f"not found by: {', '.join(missed)}")
    finally:
        engine.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url")
    parser.add_argument("--runs", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=7, help="timed calls per search (after one warm-up)")
    args = parser.parse_args()

    with scratch.server(args.database_url) as url, scratch.scratch_database(url, BENCH_DATABASE) as bench_url:
        search(bench_url, args.runs, args.repeat)


if __name__ == "__main__":
    main()
