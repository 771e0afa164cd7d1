"""What keeping the step durations per day costs a step write, with and
without it, in one run on one server.

One scratch database at the current schema version. Each round measures
three configurations in turn (ALTER TABLE ... DISABLE TRIGGER, nothing
else changes): both step-duration triggers, only the row trigger on the
UPDATE that finishes an attempt, and none:

- writes: one server-side block writing what the worker writes for --runs
  runs of --steps steps (a run row; per step an insert scheduled, an
  update to in_progress with started_at, an update to completed with
  finished_at), then the prune (its steps go by cascade);
- worker: pgbus_web's Worker draining --runs runs of --steps no-op steps
  (bench/worker.py's run_worker).

Medians and the ratios to "none" are printed (1.00 costs nothing; for the
worker, under 1.00 is slower).

    python bench/step_durations.py [--runs 2000] [--steps 5] [--worker-runs 300] [--rounds 5] [--database-url URL]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import scratch  # noqa: E402
import worker as worker_bench  # noqa: E402  (bench/worker.py)

from pgbus_web import db, schema  # noqa: E402

TRIGGERS = ("pgbus_workflow_steps_durations_on_insert", "pgbus_workflow_steps_durations_on_update")

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
            UPDATE pgbus_workflow_steps SET status = 'in_progress', started_at = clock_timestamp()
            WHERE id = step;
            UPDATE pgbus_workflow_steps SET status = 'completed', finished_at = clock_timestamp(),
                   result = '{{}}'
            WHERE id = step;
        END LOOP;
    END LOOP;
END;
$$
"""
PRUNE = "DELETE FROM pgbus_workflows WHERE workflow_class = 'Bench'"


# What each configuration enables: both triggers, only the row trigger on
# the UPDATE that finishes an attempt (no statement trigger on INSERT), none.
CONFIGURATIONS = {"both": TRIGGERS, "update only": TRIGGERS[1:], "none": ()}


def set_triggers(engine, enabled: tuple[str, ...]) -> None:
    with engine.begin() as conn:
        present = {name for (name,) in conn.exec_driver_sql(
            "SELECT tgname FROM pg_trigger WHERE tgrelid = 'pgbus_workflow_steps'::regclass")}
        for trigger in TRIGGERS:
            if trigger in present:
                verb = "ENABLE" if trigger in enabled else "DISABLE"
                conn.exec_driver_sql(f"ALTER TABLE pgbus_workflow_steps {verb} TRIGGER {trigger}")


def timed(engine, statement: str) -> float:
    with engine.begin() as conn:
        began = time.perf_counter()
        conn.exec_driver_sql(statement)
        return time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", default=os.environ.get(db.DATABASE_URL_ENV))
    parser.add_argument("--runs", type=int, default=2000, help="runs of the write block")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--worker-runs", type=int, default=300, help="runs the worker drains (0: skip)")
    parser.add_argument("--rounds", type=int, default=5)
    options = parser.parse_args()
    median = statistics.median
    registry = worker_bench.registry_of(options.steps)
    writes = WRITES.format(runs=options.runs, steps=options.steps)
    names = list(CONFIGURATIONS)
    times: dict[tuple[str, str], list[float]] = {(name, kind): [] for name in names
                                                 for kind in ("writes", "worker")}
    with scratch.server(options.database_url) as server, scratch.scratch_database(server) as url:
        engine = db.create_engine(url, db.UNBOUNDED_STATEMENTS, pool_pre_ping=False)
        schema.install(engine)
        timed(engine, writes)  # warm: plans, caches
        timed(engine, PRUNE)
        for round_number in range(options.rounds):
            # A different configuration first in each round, so a drift in
            # the machine's load falls on all of them.
            for name in names[round_number % 3:] + names[:round_number % 3]:
                set_triggers(engine, CONFIGURATIONS[name])
                times[name, "writes"].append(timed(engine, writes) / (options.runs * options.steps))
                timed(engine, PRUNE)
                if options.worker_runs:
                    measured = worker_bench.run_worker(url, registry, options.worker_runs, options.steps)
                    times[name, "worker"].append(measured["steps_per_s"])
        set_triggers(engine, TRIGGERS)
        engine.dispose()
        report(options, times)


def report(options, times) -> None:
    median = statistics.median
    print(f"schema version {schema.SCHEMA_VERSION}, median of {options.rounds} rounds, configurations in turn")
    print(f"  step writes ({options.runs} runs x {options.steps} steps: insert + 2 updates, server-side):")
    none = times["none", "writes"]
    for name in CONFIGURATIONS:
        these = times[name, "writes"]
        print(f"    {name:12} {median(these) * 1e6:8.1f} µs a step   / none {median(these) / median(none):6.3f}"
              f"  (rounds {', '.join(f'{a / b:.3f}' for a, b in zip(these, none))})")
    if options.worker_runs:
        none = times["none", "worker"]
        print(f"  worker ({options.worker_runs} runs x {options.steps} no-op steps):")
        for name in CONFIGURATIONS:
            these = times[name, "worker"]
            print(f"    {name:12} {median(these):8.0f} steps/s   / none {median(these) / median(none):6.3f}"
                  f"  (rounds {', '.join(f'{a / b:.3f}' for a, b in zip(these, none))})")


if __name__ == "__main__":
    main()
