"""What the JSON doors spend shaping a page of runs (core/representations.py
``run_row``, every field made plain, and its stuck reason), beside a bare
loop that copies the same fields of the same rows into new dicts, in one
run, as a ratio.

    python bench/shaping.py --database-url postgresql://... [--repeat 200]

The rows are the runs index's first page (models.workflow_index.page, 50
runs and their latest steps) of the database given, only read.
"""

from __future__ import annotations

import argparse
import statistics
import time

from pgbus_web import db, defaults
from pgbus_web.core import representations as rep
from pgbus_web.models import workflow_index
from pgbus_web.runtime.clock import utcnow

THRESHOLDS = {"threshold": defaults.STALL_THRESHOLD, "waiting_threshold": defaults.WAITING_THRESHOLD}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--repeat", type=int, default=200)
    args = parser.parse_args()
    engine = db.create_engine(args.database_url)
    try:
        with engine.connect() as conn:
            rows = workflow_index.page(conn, limit=50, **THRESHOLDS)
    finally:
        engine.dispose()
    now = utcnow()

    def shaped():
        return [
            rep.run_row(
                run,
                stuck=rep.stuck_reason(
                    run,
                    now=now,
                    stall_threshold=THRESHOLDS["threshold"],
                    waiting_threshold=THRESHOLDS["waiting_threshold"],
                ),
            )
            for run in rows
        ]

    def bare():
        return [
            {
                "run": {name: run.get(name) for name in rep.RUN_FIELDS},
                "step": {name: run["step"].get(name) for name in rep.STEP_FIELDS} if run.get("step") else None,
                "batch": {name: run["batch"].get(name) for name in rep.BATCH_FIELDS} if run.get("batch") else None,
            }
            for run in rows
        ]

    shaping, copying = [], []
    for _ in range(args.repeat):  # interleaved: a busy spell weighs on both
        started = time.perf_counter()
        shaped()
        shaping.append(time.perf_counter() - started)
        started = time.perf_counter()
        bare()
        copying.append(time.perf_counter() - started)
    shape_ms, copy_ms = statistics.median(shaping) * 1000, statistics.median(copying) * 1000
    print(
        f"{len(rows)} runs: shaped {shape_ms:.3f} ms, bare copy {copy_ms:.3f} ms (median of {args.repeat}):"
        f" {shape_ms / copy_ms:.1f}x"
    )


if __name__ == "__main__":
    main()
