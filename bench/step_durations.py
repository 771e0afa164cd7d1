"""What keeping the step durations per day costs a step write, with and
without it, in one run on one server.

Three scratch databases at the current schema version, the same in every
way but one: "row" as installed (row triggers whose WHEN skips every write
that does not finish an attempt), "statement" with the INSERT trigger as
first written (per statement, over a transition table), "none" with both
step-duration triggers disabled (ALTER TABLE ... DISABLE TRIGGER). The
machine's load moves a lot from one second to the next, so the work is cut
into short blocks run in rounds, one block in each database (which goes
first rotates), and the ratio to "none" is taken per round; the median of
the rounds is printed.

- writes: a server-side block writing what the worker writes for --runs
  runs of 5 steps (a run row; per step an insert scheduled, an update to
  in_progress with started_at, an update to completed with finished_at),
  then the prune (its steps go by cascade), --pairs times;
- explained: the same three statements per step, each under EXPLAIN
  ANALYZE in "row" and in "statement", --explained runs: the share of their execution time
  spent in each trigger on the steps (the server's own clock, whatever
  the load);
- worker: pgbus_web's Worker draining --worker-runs runs of 5 no-op steps
  (bench/worker.py's run_worker), --worker-pairs times.

    python bench/step_durations.py [--runs 40] [--pairs 15] [--explained 100]
                                   [--worker-runs 30] [--worker-pairs 5] [--database-url URL]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))

import scratch
import worker as worker_bench  # noqa: E402  (bench/worker.py)

from pgbus_web import db, schema

TRIGGERS = ("pgbus_workflow_steps_durations_on_insert", "pgbus_workflow_steps_durations_on_update")
STEPS = 5

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

# The INSERT trigger as first written: per statement, over the statement's
# new rows (a transition table), called for every INSERT of a step.
STATEMENT_FORM = """
CREATE OR REPLACE FUNCTION pgbus_workflow_steps_durations_on_insert() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO pgbus_workflow_step_duration_deltas (workflow_class, step_name, day, bucket, attempts)
    SELECT w.workflow_class, s.step_name, (s.finished_at AT TIME ZONE 'UTC')::date,
           pgbus_step_duration_bucket(EXTRACT(EPOCH FROM s.finished_at - s.started_at)::float8), count(*)
    FROM durations_inserted_steps s
    JOIN pgbus_workflows w ON w.workflow_id = s.workflow_id
    WHERE s.started_at IS NOT NULL AND s.finished_at IS NOT NULL
      AND isfinite(s.started_at) AND isfinite(s.finished_at)
    GROUP BY 1, 2, 3, 4;
    IF FOUND AND random() < 1.0 / 32 THEN
        PERFORM pgbus_workflow_step_durations_fold();
    END IF;
    RETURN NULL;
END;
$$;
DROP TRIGGER pgbus_workflow_steps_durations_on_insert ON pgbus_workflow_steps;
CREATE TRIGGER pgbus_workflow_steps_durations_on_insert
    AFTER INSERT ON pgbus_workflow_steps
    REFERENCING NEW TABLE AS durations_inserted_steps
    FOR EACH STATEMENT EXECUTE FUNCTION pgbus_workflow_steps_durations_on_insert();
"""
# The databases: the schema as installed ("row": row triggers whose WHEN
# skips every write that does not finish an attempt), the INSERT trigger
# as first written ("statement"), and neither trigger ("none").
DATABASES = ("row", "statement", "none")


def timed(url: str, statement: str) -> float:
    with psycopg.connect(worker_bench.libpq_url(url)) as conn:
        began = time.perf_counter()
        conn.execute(statement)
        conn.commit()
        return time.perf_counter() - began


def explained(url: str, runs: int) -> tuple[float, dict[str, float], dict[str, int]]:
    """(the statements' execution time in ms, {trigger: ms}, {trigger: calls})
    for *runs* runs of STEPS steps written one statement at a time."""
    total = 0.0
    spent: dict[str, float] = defaultdict(float)
    calls: dict[str, int] = defaultdict(int)

    def explain(cur, statement: str, binds: tuple) -> None:
        nonlocal total
        cur.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) {statement}", binds)
        plan = cur.fetchone()[0][0]
        total += plan["Execution Time"]
        for trigger in plan.get("Triggers", []):
            spent[trigger["Trigger Name"]] += trigger["Time"]
            calls[trigger["Trigger Name"]] += trigger["Calls"]

    with psycopg.connect(worker_bench.libpq_url(url)) as conn, conn.cursor() as cur:
        for r in range(runs):
            run = f"explained-{r}"
            cur.execute(
                "INSERT INTO pgbus_workflows (workflow_id, workflow_class, status) VALUES (%s, 'Bench', 'running')",
                (run,),
            )
            for s in range(STEPS):
                explain(
                    cur,
                    "INSERT INTO pgbus_workflow_steps (workflow_id, step_name, status, scheduled_at)"
                    " VALUES (%s, %s, 'scheduled', now())",
                    (run, f"step_{s}"),
                )
                cur.execute("SELECT max(id) FROM pgbus_workflow_steps WHERE workflow_id = %s", (run,))
                step = cur.fetchone()[0]
                explain(
                    cur,
                    "UPDATE pgbus_workflow_steps SET status = 'in_progress', started_at = clock_timestamp()"
                    " WHERE id = %s",
                    (step,),
                )
                explain(
                    cur,
                    "UPDATE pgbus_workflow_steps SET status = 'completed', finished_at = clock_timestamp(),"
                    " result = '{}' WHERE id = %s",
                    (step,),
                )
            conn.commit()
        cur.execute(PRUNE)
        conn.commit()
    return total, spent, calls


def rotations(names: tuple[str, ...], index: int) -> tuple[str, ...]:
    """*names*, starting from a different one at each *index*."""
    start = index % len(names)
    return names[start:] + names[:start]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", default=os.environ.get(db.DATABASE_URL_ENV))
    parser.add_argument("--runs", type=int, default=40, help="runs of one write block")
    parser.add_argument("--pairs", type=int, default=15, help="rounds of write blocks (one in each database)")
    parser.add_argument("--explained", type=int, default=100, help="runs written under EXPLAIN ANALYZE")
    parser.add_argument("--worker-runs", type=int, default=30, help="runs of one worker drain")
    parser.add_argument("--worker-pairs", type=int, default=5, help="rounds of worker drains (0: none)")
    options = parser.parse_args()
    registry = worker_bench.registry_of(STEPS)
    writes = WRITES.format(runs=options.runs, steps=STEPS)
    times: dict[tuple[str, str], list[float]] = defaultdict(list)
    # On an embedded server of its own the databases go with the server
    # (dropping three on a busy machine can outlast the statement timeout).
    keep = options.database_url is None
    with (
        scratch.server(options.database_url) as server,
        scratch.scratch_database(server, keep=keep) as row_url,
        scratch.scratch_database(server, keep=keep) as statement_url,
        scratch.scratch_database(server, keep=keep) as none_url,
    ):
        urls = {"row": row_url, "statement": statement_url, "none": none_url}
        for url in urls.values():
            engine = db.create_engine(url, db.UNBOUNDED_STATEMENTS, pool_pre_ping=False)
            schema.install(engine)
            engine.dispose()
        with psycopg.connect(worker_bench.libpq_url(statement_url), autocommit=True) as conn:
            conn.execute(STATEMENT_FORM)
        with psycopg.connect(worker_bench.libpq_url(none_url), autocommit=True) as conn:
            for trigger in TRIGGERS:
                conn.execute(f"ALTER TABLE pgbus_workflow_steps DISABLE TRIGGER {trigger}")
        for url in urls.values():  # warm: plans, caches
            timed(url, writes)
            timed(url, PRUNE)
        for pair in range(options.pairs):
            for name in rotations(DATABASES, pair):
                times[name, "writes"].append(timed(urls[name], writes) / (options.runs * STEPS))
                timed(urls[name], PRUNE)
        shares = {name: explained(urls[name], options.explained) for name in ("row", "statement")}
        for pair in range(options.worker_pairs):
            for name in rotations(DATABASES, pair):
                measured = worker_bench.run_worker(urls[name], registry, options.worker_runs, STEPS)
                times[name, "worker"].append(measured["steps_per_s"])
        report(options, times, shares)


def report(options, times, shares) -> None:
    median = statistics.median
    print(f"schema version {schema.SCHEMA_VERSION}; medians over rounds of one block in each database")
    print(
        f"  step writes, {options.pairs} rounds of {options.runs} runs x {STEPS} steps"
        f" (insert + 2 updates, server-side):"
    )
    none = times["none", "writes"]
    for name in DATABASES:
        ratios = [a / b for a, b in zip(times[name, "writes"], none, strict=True)]
        print(
            f"    {name:10} {median(times[name, 'writes']) * 1e6:8.1f} µs a step   / none {median(ratios):6.3f}"
            f"  (rounds {min(ratios):.3f} to {max(ratios):.3f})"
        )
    steps = options.explained * STEPS
    for name, (total, spent, calls) in shares.items():
        print(
            f"  explained ({name}), {options.explained} runs x {STEPS} steps:"
            f" {total / steps * 1000:.1f} µs of execution a step; its triggers:"
        )
        for trigger in sorted(spent, key=spent.get, reverse=True):
            print(
                f"    {trigger:46} {spent[trigger] / total:6.1%}  {calls[trigger] / steps:4.1f} calls a step"
                f"  {spent[trigger] / max(calls[trigger], 1) * 1000:6.1f} µs a call"
            )
    if options.worker_pairs:
        none = times["none", "worker"]
        print(f"  worker, {options.worker_pairs} rounds of {options.worker_runs} runs x {STEPS} no-op steps:")
        for name in DATABASES:
            ratios = [a / b for a, b in zip(times[name, "worker"], none, strict=True)]
            print(
                f"    {name:10} {median(times[name, 'worker']):8.0f} steps/s   / none {median(ratios):6.3f}"
                f"  (rounds {min(ratios):.3f} to {max(ratios):.3f})"
            )


if __name__ == "__main__":
    main()
