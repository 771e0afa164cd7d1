"""Exporting every run (docs/search.md, Exporting runs): rows per second and
the exporting process's peak memory at two table sizes, to show the memory
does not grow with the count.

    python bench/export.py [--database-url postgresql://...] [--sizes 100000,1000000]

Without --database-url an embedded PostgreSQL is started in a temporary
directory. The benchmark makes its own database (``pgbus_bench_export``),
seeds runs with arguments by set-based INSERTs (bench/bulk_runs.py, shape
MIXED_WITH_ARGUMENTS) up to each size in turn, and at each size exports
every run once per door, each in a fresh Python process:

- ``cli csv``: ``pgbus-web runs export --format csv -o /dev/null``;
- ``web csv`` and ``web ndjson``: GET /workflows/export.csv (.ndjson)
  through the dashboard's Flask app, the streamed body read chunk by chunk.

For each it prints the rows, the rows per second and the process's peak
resident memory (ru_maxrss) beside its resident memory just before the
export began (the libraries and the app loaded): the growth is what the
export itself held. The figures compare with each other (same run, same
machine), not with a number fixed elsewhere.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bulk_runs  # noqa: E402  (bench/bulk_runs.py)
import scratch

BENCH_DATABASE = "pgbus_bench_export"
DOORS = (("cli", "csv"), ("web", "csv"), ("web", "ndjson"))
TARGET_ROWS_PER_SECOND = 20_000


def _rss_kib() -> int:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def child(url: str, door: str, fmt: str, query_json: str = "", read_only: str = "") -> None:
    """One export in this process; prints a JSON line of what it measured.
    With *read_only* the database is only read (every transaction read
    only) and *query_json* holds the filters."""
    from click.testing import CliRunner  # noqa: F401  (loaded before the baseline, like the rest)

    from pgbus_web import db
    from pgbus_web.app import create_app
    from pgbus_web.launch import main_group

    query = json.loads(query_json) if query_json else {}
    if door == "web":
        database = db.Database(scratch.read_only_engine(url)) if read_only else db.Database.from_urls(url)
        app = create_app({"database": database, "TESTING": True, "run_operations": False})
        client = app.test_client()
    baseline = _rss_kib()
    started = time.perf_counter()
    lines = 0
    if door == "core":
        # The command line's body (cli/runs.py export_runs) on a read-only engine.
        from pgbus_web.core import exports
        from pgbus_web.core.settings import Settings
        from pgbus_web.rules import run_filters

        engine = scratch.read_only_engine(url, pool_size=1, max_overflow=0)
        with open(os.devnull, "wb") as sink:
            for chunk in exports.export(engine.connect, Settings(), run_filters.parse_query(query), fmt).chunks:
                lines += chunk.count(b"\n")
                sink.write(chunk)
        engine.dispose()
        lines -= 1 if fmt == "csv" else 0
        elapsed = time.perf_counter() - started
    elif door == "cli":
        # The command as a shell runs it, in this process: main_group's own code path.
        try:
            main_group.main(
                ["runs", "export", "--database-url", url, "--format", fmt, "-o", os.devnull], standalone_mode=False
            )
        except SystemExit:
            pass
        # Count the rows once more is not the export: ask the database.
        engine = db.create_engine(url)
        with engine.connect() as conn:
            lines = conn.exec_driver_sql("SELECT count(*) FROM pgbus_workflows").scalar_one()
        engine.dispose()
        elapsed = time.perf_counter() - started
    else:
        response = client.get(f"/workflows/export.{fmt}", query_string=query, buffered=False)
        assert response.status_code == 200, response.status_code
        first_byte = None
        for chunk in response.response:
            if first_byte is None:
                first_byte = time.perf_counter() - started
            lines += chunk.count(b"\n")
        response.close()
        elapsed = time.perf_counter() - started
        lines -= 1 if fmt == "csv" else 0  # the header
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"rows": lines, "seconds": elapsed, "baseline_kib": baseline, "peak_kib": peak}))


def measure(url: str, door: str, fmt: str, query: dict | None = None, read_only: bool = False) -> dict:
    answer = subprocess.run(
        [
            sys.executable,
            __file__,
            "--child",
            url,
            door,
            fmt,
            json.dumps(query or {}),
            "read-only" if read_only else "",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if answer.returncode != 0:
        raise SystemExit(f"{door} {fmt} failed:\n{answer.stdout}\n{answer.stderr}")
    return json.loads(answer.stdout.strip().splitlines()[-1])


def bench(url: str, sizes: list[int]) -> None:
    from pgbus_web import db, schema

    engine = db.create_engine(url)
    schema.install(engine)
    engine.dispose()
    seeded = 0
    results = []
    for size in sizes:
        started = time.monotonic()
        bulk_runs.insert(url, size - seeded, bulk_runs.MIXED_WITH_ARGUMENTS)
        seeded = size
        print(f"seeded up to {size:,} runs in {time.monotonic() - started:.1f}s")
        for door, fmt in DOORS:
            found = measure(url, door, fmt)
            rate = found["rows"] / found["seconds"]
            growth = found["peak_kib"] - found["baseline_kib"]
            results.append((size, door, fmt, found["rows"], rate, found["baseline_kib"], found["peak_kib"], growth))
            print(
                f"  {door} {fmt}: {found['rows']:,} rows in {found['seconds']:.1f}s = {rate:,.0f} rows/s; "
                f"RSS {found['baseline_kib'] / 1024:.1f} MiB before, peak {found['peak_kib'] / 1024:.1f} MiB "
                f"(+{growth / 1024:.1f} MiB)",
                flush=True,
            )
    print()
    print(f"{'runs':>10}  {'door':<10} {'rows/s':>9}  {'RSS before':>10}  {'peak':>8}  {'growth':>8}")
    for size, door, fmt, _rows, rate, baseline, peak, growth in results:
        print(
            f"{size:>10,}  {door + ' ' + fmt:<10} {rate:>9,.0f}  {baseline / 1024:>8.1f}MB  {peak / 1024:>6.1f}MB"
            f"  {growth / 1024:>6.1f}MB"
        )
    by_door: dict[tuple[str, str], list[tuple[int, int]]] = {}
    for size, door, fmt, *_, growth in results:
        by_door.setdefault((door, fmt), []).append((size, growth))
    print()
    for (door, fmt), grown in by_door.items():
        if len(grown) > 1:
            (small, small_growth), (large, large_growth) = grown[0], grown[-1]
            print(
                f"{door} {fmt}: memory growth at {large:,} runs / at {small:,} runs = "
                f"{(large_growth + 1) / (small_growth + 1):.2f} for {large / small:.0f}x the rows"
            )
    slowest = min(result[4] for result in results)
    print(f"slowest door: {slowest:,.0f} rows/s (target at least {TARGET_ROWS_PER_SECOND:,})")


def python_csv_floor(url: str, query: dict) -> float:
    """Rows per second of the same rows written by Python's csv writer (the
    export's way before the server wrote the lines), in this process."""
    import csv
    import io

    from pgbus_web.core import exports
    from pgbus_web.core.settings import Settings
    from pgbus_web.models import workflow_export
    from pgbus_web.rules import run_filters

    engine = scratch.read_only_engine(url, pool_size=1, max_overflow=0)
    filters = run_filters.parse_query(query)
    now = exports.utcnow()
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\r\n")
    starts = tuple(workflow_export.CSV_FORMULA_STARTS)
    rows = 0
    started = time.perf_counter()
    with engine.connect() as conn:
        ceiling = conn.exec_driver_sql("SELECT max(id) FROM pgbus_workflows").scalar_one()
        for batch in exports._batches(conn, Settings(), filters, "cells", ceiling, now):
            buffer.seek(0)
            buffer.truncate()
            writer.writerows(
                [("'" + cell) if cell and cell.startswith(starts) else cell for cell in row] for row in batch
            )
            buffer.getvalue().encode("utf-8")
            rows += len(batch)
    engine.dispose()
    return rows / (time.perf_counter() - started)


def read_only_bench(url: str) -> None:
    results = []
    for label, query in (("RefundWorkflow", {"workflow_class": "RefundWorkflow"}), ("every run", {})):
        floor = python_csv_floor(url, query)
        print(f"{label}: Python's csv writer over the same rows: {floor:,.0f} rows/s", flush=True)
        for door, fmt in (("core", "csv"), ("web", "csv"), ("web", "ndjson")):
            found = measure(url, door, fmt, query, read_only=True)
            rate = found["rows"] / found["seconds"]
            growth = found["peak_kib"] - found["baseline_kib"]
            results.append((label, door, fmt, found["rows"], rate, growth, floor))
            print(
                f"  {door} {fmt}: {found['rows']:,} rows in {found['seconds']:.1f}s = {rate:,.0f} rows/s"
                f" ({rate / floor:.1f}x Python's csv writer); peak RSS +{growth / 1024:.1f} MiB",
                flush=True,
            )
    print()
    print(f"{'runs':<16} {'door':<12} {'rows':>9} {'rows/s':>8}  {'/ csv writer':>12}  {'growth':>8}")
    for label, door, fmt, rows, rate, growth, floor in results:
        print(
            f"{label:<16} {door + ' ' + fmt:<12} {rows:>9,} {rate:>8,.0f}  {rate / floor:>11.1f}x"
            f"  {growth / 1024:>6.1f}MB"
        )
    for door, fmt in (("core", "csv"), ("web", "csv"), ("web", "ndjson")):
        small, large = [r for r in results if r[1:3] == (door, fmt)]
        print(
            f"{door} {fmt}: memory growth for {large[3]:,} rows / for {small[3]:,} rows = "
            f"{(large[5] + 1) / (small[5] + 1):.2f} ({large[3] / small[3]:.1f}x the rows)"
        )
    print(f"slowest door: {min(r[4] for r in results):,.0f} rows/s (target at least {TARGET_ROWS_PER_SECOND:,})")


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(*sys.argv[2:7])
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url")
    parser.add_argument("--sizes", default="100000,1000000", help="table sizes, comma-separated, ascending")
    parser.add_argument(
        "--read-only-url",
        help="export from a database `pgbus-web seed` filled instead, only"
        " reading it: one class's runs, then every run",
    )
    args = parser.parse_args()
    if args.read_only_url:
        read_only_bench(args.read_only_url)
        return
    sizes = sorted(int(size) for size in args.sizes.split(","))
    with scratch.server(args.database_url) as url, scratch.scratch_database(url, BENCH_DATABASE) as bench_url:
        bench(bench_url, sizes)


if __name__ == "__main__":
    main()
