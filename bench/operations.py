"""How fast an operation acts on many runs, what it costs the dashboard
meanwhile, and how long the preview of a huge filter takes.

    python bench/operations.py [--database-url postgresql://...] [--runs 100000] [--preview-runs 1000000]

Without --database-url an embedded PostgreSQL is started in a temporary
directory. The benchmark makes its own database (``pgbus_bench_operations``,
dropped and made again), seeds --runs OrderWorkflow runs paused after a
failed capture_payment (bench/bulk_runs.py, shape PAUSED_AFTER_FAILURE),
then:

1. the index's runs fragment (``GET /workflows?status=paused`` as htmx asks
   for #pgbus-runs) idle: p50/p95 of 40 requests;
2. one separate process resumes all of them as one operation (a Runner,
   chunks of runtime.operations.CHUNK): runs/s; meanwhile the same fragment
   is timed again (p95 during);
3. the preview of ``status=paused`` over --preview-runs paused runs (seeded
   up to that many first): median of 5, after one warm-up.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bulk_runs  # noqa: E402  (bench/bulk_runs.py)
import scratch  # noqa: E402

from pgbus_web import db, defaults, schema  # noqa: E402
from pgbus_web.demo.workflows import REGISTRY  # noqa: E402
from pgbus_web.runtime import operations  # noqa: E402
from pgbus_web.rules import run_filters as filters  # noqa: E402

BENCH_DATABASE = "pgbus_bench_operations"
THRESHOLDS = {"threshold": defaults.STALL_THRESHOLD, "waiting_threshold": defaults.WAITING_THRESHOLD}

RUNNER = """
import sys, time
from pgbus_web import db
from pgbus_web.demo.workflows import REGISTRY
from pgbus_web.runtime import operations
engine = db.create_engine(sys.argv[1])
runner = operations.Runner(engine, REGISTRY)
started = time.monotonic()
while runner.step(int(sys.argv[2])) is not None:
    pass
print(time.monotonic() - started, flush=True)
"""


def fragment_times(client, count: int, stop=None) -> list[float]:
    times = []
    for _ in range(count):
        if stop is not None and stop():
            break
        started = time.perf_counter()
        response = client.get("/workflows?status=paused", headers={"HX-Request": "true", "HX-Target": "pgbus-runs"})
        assert response.status_code == 200
        times.append(time.perf_counter() - started)
    return times


def p95(values: list[float]) -> float:
    return sorted(values)[max(int(len(values) * 0.95) - 1, 0)] if values else float("nan")


def bench(bench_url: str, runs: int, preview_runs: int) -> None:
    engine = db.create_engine(bench_url)
    try:
        schema.install(engine)
        started = time.monotonic()
        bulk_runs.insert(bench_url, runs, bulk_runs.PAUSED_AFTER_FAILURE)
        print(f"seeded {runs} paused runs in {time.monotonic() - started:.1f}s")

        from pgbus_web.app import create_app

        app = create_app({"database": db.Database(engine), "registry": REGISTRY, "run_operations": False})
        client = app.test_client()
        fragment_times(client, 5)
        idle = fragment_times(client, 40)
        print(f"runs fragment idle: p50 {statistics.median(idle) * 1000:.1f} ms, p95 {p95(idle) * 1000:.1f} ms")

        shown = operations.preview(engine, filters.parse({"status": "paused"}), "resume", registry=REGISTRY,
                                   thresholds=THRESHOLDS)
        operation = operations.create(engine, filters.parse({"status": "paused"}), "resume", None, reason="bench",
                                      actor="bench", expected=shown.total, registry=REGISTRY,
                                      thresholds=THRESHOLDS)
        runner = subprocess.Popen([sys.executable, "-c", RUNNER, bench_url, str(operation["id"])],
                                  stdout=subprocess.PIPE, text=True)
        during = fragment_times(client, 10_000, stop=lambda: runner.poll() is not None)
        elapsed = float(runner.communicate()[0].strip())
        done = operations.find(engine, operation["id"])
        print(f"operation: {done['status']}, moved {done['moved']} of {done['total']} in {elapsed:.1f}s: "
              f"{done['moved'] / elapsed:.0f} runs/s (one process)")
        rate = done["moved"] / elapsed
        ratio = p95(during) / p95(idle)
        print(f"runs fragment during: p50 {statistics.median(during) * 1000:.1f} ms, "
              f"p95 {p95(during) * 1000:.1f} ms ({len(during)} requests; {ratio:.2f}x idle p95)")
        print(f"targets: >= 500 runs/s {'met' if rate >= 500 else 'NOT met'} ({rate:.0f}); "
              f"fragment p95 within 2x idle {'met' if ratio <= 2 else 'NOT met'} ({ratio:.2f}x)")

        if preview_runs:
            with engine.connect() as conn:
                paused = conn.execute(sa.text("SELECT count(*) FROM pgbus_workflows WHERE status = 'paused'")).scalar_one()
            if preview_runs > paused:
                started = time.monotonic()
                bulk_runs.insert(bench_url, preview_runs - paused, bulk_runs.PAUSED_AFTER_FAILURE)
                print(f"seeded {preview_runs - paused} more paused runs in {time.monotonic() - started:.1f}s")
            run_filters = filters.parse({"status": "paused"})
            operations.preview(engine, run_filters, "resume", registry=REGISTRY, thresholds=THRESHOLDS)
            times = []
            for _ in range(5):
                started = time.perf_counter()
                shown = operations.preview(engine, run_filters, "resume", registry=REGISTRY, thresholds=THRESHOLDS)
                times.append(time.perf_counter() - started)
            print(f"preview of status=paused over {shown.total} runs: median {statistics.median(times) * 1000:.0f} ms,"
                  f" slowest {max(times) * 1000:.0f} ms (target < 1 s "
                  f"{'met' if max(times) < 1 else 'NOT met'})")
    finally:
        engine.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url")
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--preview-runs", type=int, default=0, help="also time the preview over this many")
    args = parser.parse_args()

    with scratch.server(args.database_url) as url, scratch.scratch_database(url, BENCH_DATABASE) as bench_url:
        bench(bench_url, args.runs, args.preview_runs)


if __name__ == "__main__":
    main()
