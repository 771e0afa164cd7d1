"""The worker's cost per step against two floors, on one server in one run.

Three loops drain the same work (--runs runs of --steps no-op steps each,
started through the runtime, the start not timed), each on a freshly
emptied database:

- worker: pgbus_web's Worker, as the `worker` command runs it;
- bare: the same rows, events and guarded transitions as the worker wrote
  before this file existed (per step: lock the run, read the step,
  complete it, its event, the next attempt number, the next step, its
  event, the run to ready, the step started, the run to running, its
  event), written by a plain psycopg loop with SKIP LOCKED claims: what
  the runtime's own statements cost without Python around them;
- minimal: claim a due step with SKIP LOCKED, mark it completed, schedule
  the next, commit: no run row, no audit event.

For the worker it also counts what one step sends (statements and
commits, through SQLAlchemy's events) and what it costs the server (rows
inserted into tables with a foreign key, i.e. foreign-key checks; run and
step row versions written, and how many of them were HOT updates, from
pg_stat_user_tables; calls of the latest_* trigger from
pg_stat_user_functions).

    python bench/worker.py [--runs 500] [--steps 5] [--rounds 3] [--schema-version N] [--database-url URL]

It writes in a scratch database of its own (bench/scratch.py): on the
server --database-url names, or on an embedded PostgreSQL without one.
--schema-version installs an older schema version there, to compare what
its triggers cost the worker (bench/latest_triggers.py isolates them).
compare() is what bench/scale.py's worker row runs.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import psycopg
import sqlalchemy as sa
from sqlalchemy import event

sys.path.insert(0, str(Path(__file__).resolve().parent))
import scratch  # noqa: E402  (bench/scratch.py)

from pgbus_web import db, schema
from pgbus_web.runtime import system
from pgbus_web.runtime.definitions import Registry, Step, Workflow
from pgbus_web.runtime.worker import Worker

TABLES = ("pgbus_workflows", "pgbus_workflow_steps", "pgbus_workflow_events")
# Tables whose inserts each run one foreign-key check (on the run).
CHILD_TABLES = ("pgbus_workflow_steps", "pgbus_workflow_events", "pgbus_workflow_signals")
LATEST_TRIGGER = "pgbus_workflow_steps_latest_on_run"


def registry_of(steps: int) -> Registry:
    """One workflow, "Bench", of *steps* steps that do nothing."""
    return Registry([Workflow("Bench", [Step(f"step_{n}", lambda ctx: None) for n in range(steps)])])


def libpq_url(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://", 1)


def reset(engine) -> None:
    with engine.begin() as conn:
        # Only the tables the installed version has (--schema-version).
        tables = [
            table
            for table in schema.TABLES
            if conn.execute(sa.text("SELECT to_regclass(:t) IS NOT NULL"), {"t": table}).scalar_one()
        ]
        conn.execute(sa.text(f"TRUNCATE {', '.join(tables)} RESTART IDENTITY CASCADE"))


def start_runs(engine, registry: Registry, runs: int) -> datetime:
    now = datetime.now(UTC)
    for n in range(runs):
        system.start(engine, "Bench", {"n": n}, registry=registry, now=now)
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(sa.text("VACUUM ANALYZE pgbus_workflows, pgbus_workflow_steps, pgbus_workflow_events"))
    return now


def server_counters(url: str) -> dict[str, int]:
    """Cumulative counters, read after every other connection closed (a
    closing backend flushes its statistics)."""
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        conn.execute("SELECT pg_stat_clear_snapshot()")
        counters = {}
        for table, ins, upd, hot in conn.execute(
            "SELECT relname, n_tup_ins, n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables"
        ).fetchall():
            counters[f"{table}.ins"], counters[f"{table}.upd"], counters[f"{table}.hot"] = ins, upd, hot
        calls = conn.execute(
            "SELECT COALESCE(sum(calls), 0) FROM pg_stat_user_functions WHERE funcname = %s",
            (LATEST_TRIGGER,),
        ).fetchone()[0]
        counters["latest_calls"] = int(calls)
    return counters


def delta(after: dict[str, int], before: dict[str, int]) -> dict[str, int]:
    return {key: after.get(key, 0) - before.get(key, 0) for key in after}


# --- the worker ----------------------------------------------------------------


def run_worker(url: str, registry: Registry, runs: int, steps: int) -> dict[str, float]:
    setup = db.create_engine(url, pool_pre_ping=False)
    reset(setup)
    now = start_runs(setup, registry, runs)
    setup.dispose()
    before = server_counters(url)
    engine = db.create_engine(url, pool_pre_ping=False)
    sent = {"statements": 0, "commits": 0}

    @event.listens_for(engine, "connect")
    def track_functions(dbapi_connection, _record):
        with dbapi_connection.cursor() as cursor:
            cursor.execute("SET track_functions = 'pl'")
        dbapi_connection.commit()

    @event.listens_for(engine, "before_cursor_execute")
    def count_statement(*_args):
        sent["statements"] += 1

    @event.listens_for(engine, "commit")
    def count_commit(_conn):
        sent["commits"] += 1

    worker = Worker(engine, registry)
    began = time.perf_counter()
    result = worker.drain(now=now, max_ticks=1_000_000)
    elapsed = time.perf_counter() - began
    engine.dispose()
    total = runs * steps
    assert result.steps == total, f"the worker ran {result.steps} of {total} steps"
    server = delta(server_counters(url), before)
    # drain()'s last tick finds nothing: its look-ups and sweeps are in the
    # counts too, spread over every step, as in a real worker's life.
    upd = {table: server[f"{table}.upd"] for table in TABLES}
    hot = {table: server[f"{table}.hot"] for table in TABLES}
    return {
        "steps_per_s": total / elapsed,
        "statements": sent["statements"] / total,
        "commits": sent["commits"] / total,
        "fk_checks": sum(server.get(f"{table}.ins", 0) for table in CHILD_TABLES) / total,
        "latest_calls": server["latest_calls"] / total,
        "run_versions": upd["pgbus_workflows"] / total,
        "run_hot": hot["pgbus_workflows"] / max(upd["pgbus_workflows"], 1),
        "step_versions": upd["pgbus_workflow_steps"] / total,
        "step_hot": hot["pgbus_workflow_steps"] / max(upd["pgbus_workflow_steps"], 1),
    }


# --- the bare loop ----------------------------------------------------------------

CLAIM = """
SELECT s.id, w.workflow_id, s.step_name
FROM pgbus_workflow_steps s
JOIN pgbus_workflows w ON w.workflow_id = s.workflow_id
WHERE s.status = 'scheduled' AND s.scheduled_at <= %(now)s AND w.status = 'ready'
  AND w.workflow_class = ANY(%(classes)s)
ORDER BY s.scheduled_at, s.id
LIMIT 1
FOR UPDATE OF w SKIP LOCKED
"""
EVENT = """
INSERT INTO pgbus_workflow_events (workflow_id, event, actor, step_id, step_name, attempt, details, created_at)
VALUES (%s, %s, 'system', %s, %s, 1, '{}', %s) RETURNING id
"""


def _start(cur, step_id: int, workflow_id: str, step_name: str, now) -> None:
    cur.execute(
        "UPDATE pgbus_workflow_steps SET status = 'in_progress', started_at = %s, updated_at = %s "
        "WHERE id = %s AND status = ANY(%s) RETURNING id",
        (now, now, step_id, ["scheduled"]),
    )
    cur.execute(
        "UPDATE pgbus_workflows SET status = 'running', updated_at = now() WHERE workflow_id = %s AND status = ANY(%s)",
        (workflow_id, ["ready"]),
    )
    cur.execute(EVENT, (workflow_id, "step_started", step_id, step_name, now))


def run_bare(url: str, steps: int, now) -> int:
    done = 0
    with psycopg.connect(libpq_url(url)) as conn, conn.cursor() as cur:
        while True:
            cur.execute(CLAIM, {"now": now, "classes": ["Bench"]})
            claimed = cur.fetchone()
            if claimed is None:
                conn.commit()
                return done
            step_id, workflow_id, step_name = claimed
            cur.execute("SELECT * FROM pgbus_workflows WHERE workflow_id = %s FOR UPDATE", (workflow_id,))
            cur.execute("SELECT * FROM pgbus_workflow_steps WHERE id = %s", (step_id,))
            _start(cur, step_id, workflow_id, step_name, now)
            conn.commit()
            number = int(step_name.rsplit("_", 1)[1])
            while True:
                cur.execute("SELECT * FROM pgbus_workflows WHERE workflow_id = %s FOR UPDATE", (workflow_id,))
                cur.execute("SELECT * FROM pgbus_workflow_steps WHERE id = %s", (step_id,))
                cur.execute(
                    "UPDATE pgbus_workflow_steps SET status = 'completed', finished_at = %s, updated_at = %s "
                    "WHERE id = %s AND status = ANY(%s) RETURNING id",
                    (now, now, step_id, ["in_progress"]),
                )
                cur.execute(EVENT, (workflow_id, "step_completed", step_id, step_name, now))
                done += 1
                number += 1
                if number == steps:
                    cur.execute(
                        "UPDATE pgbus_workflows SET status = 'completed', finished_at = %s, updated_at = now() "
                        "WHERE workflow_id = %s AND status = ANY(%s)",
                        (now, workflow_id, ["running"]),
                    )
                    cur.execute(EVENT, (workflow_id, "finished", None, None, now))
                    conn.commit()
                    break
                step_name = f"step_{number}"
                cur.execute(
                    "SELECT COALESCE(max(attempt), 0) + 1 FROM pgbus_workflow_steps "
                    "WHERE workflow_id = %s AND step_name = %s",
                    (workflow_id, step_name),
                )
                cur.execute(
                    "INSERT INTO pgbus_workflow_steps (workflow_id, step_name, created_at, updated_at, status, "
                    "attempt, scheduled_at) VALUES (%s, %s, %s, %s, 'scheduled', 1, %s) RETURNING id",
                    (workflow_id, step_name, now, now, now),
                )
                step_id = cur.fetchone()[0]
                cur.execute(EVENT, (workflow_id, "step_scheduled", step_id, step_name, now))
                cur.execute(
                    "UPDATE pgbus_workflows SET status = 'ready', current_step = %s, updated_at = now() "
                    "WHERE workflow_id = %s AND status = ANY(%s)",
                    (step_name, workflow_id, ["running"]),
                )
                _start(cur, step_id, workflow_id, step_name, now)
                conn.commit()


def run_minimal(url: str, steps: int, now) -> int:
    done = 0
    with psycopg.connect(libpq_url(url)) as conn, conn.cursor() as cur:
        while True:
            cur.execute(CLAIM, {"now": now, "classes": ["Bench"]})
            claimed = cur.fetchone()
            if claimed is None:
                conn.commit()
                return done
            step_id, workflow_id, step_name = claimed
            cur.execute("UPDATE pgbus_workflow_steps SET status = 'completed' WHERE id = %s", (step_id,))
            number = int(step_name.rsplit("_", 1)[1]) + 1
            if number < steps:
                cur.execute(
                    "INSERT INTO pgbus_workflow_steps (workflow_id, step_name, status, scheduled_at) "
                    "VALUES (%s, %s, 'scheduled', %s)",
                    (workflow_id, f"step_{number}", now),
                )
            conn.commit()
            done += 1


def timed_loop(url: str, registry: Registry, runs: int, steps: int, loop) -> float:
    setup = db.create_engine(url, pool_pre_ping=False)
    reset(setup)
    now = start_runs(setup, registry, runs)
    setup.dispose()
    began = time.perf_counter()
    done = loop(url, steps, now)
    elapsed = time.perf_counter() - began
    assert done == runs * steps, f"{loop.__name__} ran {done} of {runs * steps} steps"
    return done / elapsed


@dataclass
class Comparison:
    runs: int
    steps: int
    rounds: list[tuple[dict[str, float], float, float]]  # (worker, bare steps/s, minimal steps/s)

    @property
    def worker(self) -> dict[str, float]:
        """What the worker sent and wrote per step: the same in every round."""
        return self.rounds[0][0]

    @property
    def speeds(self) -> list[float]:
        return [worker["steps_per_s"] for worker, _, _ in self.rounds]

    @property
    def bare(self) -> list[float]:
        return [bare for _, bare, _ in self.rounds]

    @property
    def minimal(self) -> list[float]:
        return [minimal for _, _, minimal in self.rounds]

    @property
    def to_bare(self) -> list[float]:
        """Worker / bare loop, per round (target >= 0.5)."""
        return [worker["steps_per_s"] / bare for worker, bare, _ in self.rounds]

    @property
    def to_minimal(self) -> list[float]:
        return [worker["steps_per_s"] / minimal for worker, _, minimal in self.rounds]


def compare(
    server_url: str, *, runs: int = 500, steps: int = 5, rounds: int = 3, schema_version: int = schema.SCHEMA_VERSION
) -> Comparison:
    """The three loops, *rounds* times, in a scratch database on *server_url*."""
    registry = registry_of(steps)
    done = []
    with scratch.scratch_database(server_url) as url:
        install = db.create_engine(url, pool_pre_ping=False)
        schema.install(install, target=schema_version)
        install.dispose()
        for _ in range(rounds):
            # The three loops side by side in each round: the machine's
            # load changes less within a round than between rounds.
            measured = run_worker(url, registry, runs, steps)
            bare = timed_loop(url, registry, runs, steps, run_bare)
            minimal = timed_loop(url, registry, runs, steps, run_minimal)
            done.append((measured, bare, minimal))
    return Comparison(runs, steps, done)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--database-url",
        default=os.environ.get(db.DATABASE_URL_ENV),
        help="a server to make the scratch database on (default: an embedded one)",
    )
    parser.add_argument("--runs", type=int, default=500)
    parser.add_argument("--steps", type=int, default=5, help="no-op steps per run")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of the three loops; medians are printed")
    parser.add_argument(
        "--schema-version", type=int, default=schema.SCHEMA_VERSION, help="install this (older) schema version"
    )
    options = parser.parse_args()

    with scratch.server(options.database_url) as url:
        result = compare(
            url, runs=options.runs, steps=options.steps, rounds=options.rounds, schema_version=options.schema_version
        )
    worker = result.worker
    median = statistics.median
    print(
        f"{options.runs} runs x {options.steps} no-op steps, one process, median of {options.rounds} rounds, "
        f"schema version {options.schema_version}"
    )
    print(f"  worker   {median(result.speeds):7.0f} steps/s  (rounds {', '.join(f'{s:.0f}' for s in result.speeds)})")
    print(
        f"  bare     {median(result.bare):7.0f} steps/s  "
        f"(worker/bare {median(result.to_bare):.0%}, rounds {', '.join(f'{r:.0%}' for r in result.to_bare)}; "
        f"target >= 50%)"
    )
    print(f"  minimal  {median(result.minimal):7.0f} steps/s  (worker/minimal {median(result.to_minimal):.0%})")
    print("  per step, the worker:")
    print(f"    statements sent      {worker['statements']:.1f}")
    print(f"    commits              {worker['commits']:.2f}")
    print(f"    foreign-key checks   {worker['fk_checks']:.1f}")
    print(f"    latest_* trigger calls {worker['latest_calls']:.1f}")
    print(f"    run row versions     {worker['run_versions']:.1f} (HOT {worker['run_hot']:.0%})")
    print(f"    step row versions    {worker['step_versions']:.1f} (HOT {worker['step_hot']:.0%})")


if __name__ == "__main__":
    main()
