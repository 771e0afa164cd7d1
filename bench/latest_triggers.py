"""What the latest_* triggers cost the worker's writes: schema version 1
against version 2, side by side on one server.

Two databases, one installed at each version. Each round writes, in one
server-side block per database, what the worker writes for --runs runs of
--steps steps (a run row; per step an insert, an update to in_progress, an
update to completed), then deletes those runs (the prune: their steps go
by cascade). Rounds alternate between the versions; medians are printed.

    python bench/latest_triggers.py [--runs 2000] [--steps 5] [--rounds 7]
"""

from __future__ import annotations

import argparse
import statistics
import time

import scratch  # bench/scratch.py, beside this script

from pgbus_web import db, schema

WRITES = """
DO $$
DECLARE
    run text;
    step bigint;
BEGIN
    FOR r IN 1..{runs} LOOP
        run := 'bench-' || r;
        INSERT INTO pgbus_workflows (workflow_id, workflow_class, status) VALUES (run, 'Bench', 'running');
        FOR s IN 1..{steps} LOOP
            INSERT INTO pgbus_workflow_steps (workflow_id, step_name, status, scheduled_at)
            VALUES (run, 'step_' || s, 'scheduled', now()) RETURNING id INTO step;
            UPDATE pgbus_workflow_steps SET status = 'in_progress', started_at = now() WHERE id = step;
            UPDATE pgbus_workflow_steps SET status = 'completed', finished_at = now(), result = '{{}}'
            WHERE id = step;
        END LOOP;
    END LOOP;
END;
$$
"""
PRUNE = "DELETE FROM pgbus_workflows WHERE workflow_class = 'Bench'"


def timed(engine, statement: str) -> float:
    with engine.begin() as conn:
        began = time.perf_counter()
        conn.exec_driver_sql(statement)
        return time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=7)
    options = parser.parse_args()

    with scratch.server() as url:
        engines = {}
        for version in (1, 2):
            engine = db.create_engine(scratch.create_database(url, f"bench_v{version}"))
            schema.install(engine, target=version)
            engines[version] = engine
        writes = WRITES.format(runs=options.runs, steps=options.steps)
        times = {(version, kind): [] for version in engines for kind in ("writes", "prune")}
        for _ in range(options.rounds):
            for version, engine in engines.items():
                times[version, "writes"].append(timed(engine, writes))
                times[version, "prune"].append(timed(engine, PRUNE))
        for engine in engines.values():
            engine.dispose()
    step_writes = options.runs * options.steps
    print(f"{options.runs} runs of {options.steps} steps, median of {options.rounds} rounds")
    for version in engines:
        write = statistics.median(times[version, "writes"])
        prune = statistics.median(times[version, "prune"])
        print(
            f"schema v{version}: writes {write:.2f} s ({write / step_writes * 1e6:.0f} µs a step: "
            f"insert + 2 updates), prune {prune:.2f} s"
        )


if __name__ == "__main__":
    main()
