"""How long the Locks page and the reaper take with many locks.

    python bench/locks.py [--database-url postgresql://...] [--locks 100000] [--repeat 5]

The URL names a server, not the data (without one, an embedded
PostgreSQL is started in a temporary directory): the benchmark creates its own
database on it (``pgbus_bench_locks``, dropped and made again each run, so
nothing else is touched), installs the schema, seeds --locks locks over
every state on real PGMQ queues (pgbus_web.locks.lock_seeder) and times:

- each of the page's queries (a page per state filter, a queue filter, a
  page deep in the keyset, the counts per state, the queue list);
- the whole ``GET /locks`` request (routing, SQL, templates);
- the reaper: a dry run (what ``locks reap --dry-run`` does) and the real
  reap, on a copy of the seeded locks each time.

Each timing is the median (and the slowest) of --repeat runs after one
warm-up run. The database is dropped at the end unless --keep.
"""

from __future__ import annotations

import argparse
import statistics
import time

import scratch  # bench/scratch.py, beside this script
import sqlalchemy as sa

from pgbus_web import db, defaults, schema
from pgbus_web.locks import STATES, lock_acts
from pgbus_web.locks.lock_seeder import SEED_QUEUES, seed_locks
from pgbus_web.models import uniqueness_keys as queries
from pgbus_web.models.uniqueness_keys import Cursor

BENCH_DATABASE = "pgbus_bench_locks"
PAGE_SIZE = 50
FLOOR = defaults.LOCK_AGE_FLOOR


def timed(label: str, work, repeat: int, results: list) -> None:
    work()  # warm-up: caches, prepared plans
    runs = []
    for _ in range(repeat):
        started = time.perf_counter()
        work()
        runs.append(time.perf_counter() - started)
    results.append((label, statistics.median(runs), max(runs)))
    print(f"  {label:<44} {statistics.median(runs) * 1000:9.1f} ms  (slowest {max(runs) * 1000:.1f} ms)", flush=True)


def bench_queries(engine, repeat: int, results: list) -> None:
    print("Page queries (one page of 50, oldest first):")
    with engine.connect() as conn:

        def page(**kwargs):
            return lambda: queries.list_locks(conn, age_floor=FLOOR, limit=PAGE_SIZE, **kwargs)

        timed("first page, every state", page(), repeat, results)
        for state in STATES:
            timed(f"first page, state={state}", page(state=state), repeat, results)
        timed(f"first page, queue={SEED_QUEUES[1]}", page(queue=SEED_QUEUES[1]), repeat, results)
        middle = conn.execute(
            sa.text(
                "SELECT created_at, lock_key FROM pgbus_uniqueness_keys ORDER BY created_at, lock_key "
                "OFFSET (SELECT count(*) / 2 FROM pgbus_uniqueness_keys) LIMIT 1"
            )
        ).one()
        cursor = Cursor(created_at=middle.created_at, lock_key=middle.lock_key)
        timed("a page halfway down (keyset cursor)", page(after=cursor), repeat, results)
        timed("counts per state", lambda: queries.count_by_state(conn, age_floor=FLOOR), repeat, results)
        timed("queue list", lambda: queries.queue_counts(conn), repeat, results)


def bench_request(database: db.Database, repeat: int, results: list) -> None:
    from pgbus_web.app import create_app

    print("The whole request:")
    # No operations thread: it would hold a connection to the database dropped after.
    client = create_app({"database": database, "page_size": PAGE_SIZE, "run_operations": False}).test_client()

    def get(path):
        def work():
            response = client.get(path)
            assert response.status_code == 200, response.status_code

        return work

    timed("GET /locks", get("/locks"), repeat, results)
    timed("GET /locks?state=orphan", get("/locks?state=orphan"), repeat, results)
    timed("GET /locks?state=live", get("/locks?state=live"), repeat, results)


def bench_reaper(engine, repeat: int, results: list) -> None:
    """The reaper on the seeded locks; the real reap is rolled back each
    time, so every run reaps the same rows."""
    print("The reaper:")
    with engine.connect() as conn:
        plan = lock_acts.plan_reap(conn, age_floor=FLOOR)
        conn.rollback()
    print(
        f"  (it takes {len(plan.orphans)} orphans and {len(plan.gone)} locks whose message is gone; "
        f"spares {plan.parked} parked)"
    )

    def dry_run():
        with engine.connect() as conn:
            lock_acts.reap(conn, age_floor=FLOOR, dry_run=True)
            conn.rollback()

    def reap():
        with engine.connect() as conn:
            result = lock_acts.reap(conn, age_floor=FLOOR)
            assert result.released == result.plan.total, (result.released, result.plan.total)
            conn.rollback()

    timed("reap --dry-run", dry_run, repeat, results)
    timed("reap (deletes, then rolled back)", reap, repeat, results)


def bench(url: str, locks: int, repeat: int) -> None:
    engine = db.create_engine(url)
    results: list = []
    try:
        schema.install(engine)
        started = time.perf_counter()
        made = seed_locks(engine, locks, seed=42)
        with engine.begin() as conn:
            conn.exec_driver_sql("ANALYZE")
        print(
            f"Seeded {sum(made.values())} locks in {time.perf_counter() - started:.1f} s: "
            + ", ".join(f"{state} {count}" for state, count in made.items())
        )
        with engine.connect() as conn:
            version = conn.exec_driver_sql("SHOW server_version").scalar_one()
        print(f"PostgreSQL {version}; median of {repeat} runs after a warm-up")
        bench_queries(engine, repeat, results)
        bench_request(db.Database(engine), repeat, results)
        bench_reaper(engine, repeat, results)
    finally:
        engine.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", help="a PostgreSQL server (any database on it; default: an embedded one)")
    parser.add_argument("--locks", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--keep", action="store_true", help=f"keep the {BENCH_DATABASE} database")
    args = parser.parse_args()

    with (
        scratch.server(args.database_url) as server_url,
        scratch.scratch_database(server_url, BENCH_DATABASE, keep=args.keep) as url,
    ):
        bench(url, args.locks, args.repeat)


if __name__ == "__main__":
    main()
