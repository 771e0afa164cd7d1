"""The rows of the scale issue's table in one run, as measured/floor:

- status counts (the kept counts) against one primary-key lookup;
- the runs fragment (50 rows) against its own SQL;
- a run page of 8 attempts against its SQL;
- a run page of 200 attempts and 600 events (a run this script writes,
  and deletes at the end), absolute and in bytes;
- an unchanged live-refresh poll (304): its SQL, and the whole request;
- with --contention: 4 concurrent writers changing run statuses with the
  count triggers on, off, and with a single counter row per (class,
  status) instead of the appended deltas (in a scratch database).

Run on a seeded database (pgbus-web seed --runs N [--history M]):

    python bench/scale.py --database-url postgresql://... [--repeat 15] [--contention]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
import uuid

import sqlalchemy as sa

sys.path.insert(0, os.path.dirname(__file__))
from pages import SqlTimer  # noqa: E402

from pgbus_web import db, schema  # noqa: E402
from pgbus_web.app import create_app  # noqa: E402
from pgbus_web.demo.workflows import REGISTRY  # noqa: E402
from pgbus_web.models import changes, workflows  # noqa: E402

LONG_RUN = "bench-scale-long-history"


def timed(function, repeat: int) -> float:
    """Median milliseconds of *function* after one warm-up call."""
    function()
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        function()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def request(client, timer, path, headers, repeat):
    """(median request ms, median SQL ms, status, bytes) of GET *path*."""
    response = client.get(path, headers=headers)
    requests, sqls = [], []
    for _ in range(repeat):
        with timer.measure():
            started = time.perf_counter()
            response = client.get(path, headers=headers)
            requests.append((time.perf_counter() - started) * 1000)
            sqls.append(timer.total * 1000)
    return statistics.median(requests), statistics.median(sqls), response.status_code, len(response.data)


def write_long_run(engine) -> None:
    with engine.begin() as conn:
        conn.execute(sa.text("DELETE FROM pgbus_workflows WHERE workflow_id = :w"), {"w": LONG_RUN})
        workflows.insert_run(conn, {"workflow_id": LONG_RUN, "workflow_class": "OrderWorkflow",
                                    "status": "paused", "current_step": "capture_payment"})
        conn.execute(sa.text(
            "INSERT INTO pgbus_workflow_steps (workflow_id, step_name, status, attempt, error_class, "
            "error_message, started_at, finished_at) SELECT :w, 'capture_payment', 'failed', g, "
            "'GatewayError', 'card declined', now(), now() FROM generate_series(1, 200) g"), {"w": LONG_RUN})
        conn.execute(sa.text(
            "INSERT INTO pgbus_workflow_events (workflow_id, event, actor, step_name, attempt) "
            "SELECT :w, (ARRAY['step_scheduled', 'step_started', 'step_failed'])[1 + g % 3], 'system', "
            "'capture_payment', 1 + g / 3 FROM generate_series(0, 599) g"), {"w": LONG_RUN})


def row(label, measured, floor, unit="ms", target=""):
    ratio = f"{measured / floor:6.1f}x" if floor else "      "
    floor_text = f"{floor:9.2f}" if floor is not None else " " * 9
    print(f"{label:<46} {measured:9.2f} {floor_text} {ratio}  {unit:<4} {target}")


def pages_table(url: str, repeat: int) -> None:
    database = db.Database.from_urls(url)
    engine = database.primary
    timer = SqlTimer(engine)
    app = create_app({"database": database, "registry": REGISTRY})
    client = app.test_client()
    with engine.connect() as conn:
        total = workflows.count_runs(conn)
        some_id = conn.execute(sa.text("SELECT max(id) FROM pgbus_workflows")).scalar_one()
        eight = conn.execute(sa.text(
            # The newest steps by the primary key first: grouped directly, the
            # planner may walk the whole (workflow_id, ...) index instead.
            "SELECT workflow_id FROM (SELECT workflow_id FROM pgbus_workflow_steps ORDER BY id DESC "
            "LIMIT 200000) recent GROUP BY workflow_id HAVING count(*) = 8 LIMIT 1")).scalar()
    print(f"{total:,} runs\n")
    print(f"{'what':<46} {'measured':>9} {'floor':>9} {'ratio':>7}  unit target")

    def counts():
        with engine.connect() as conn:
            workflows.status_counts(conn)

    def one_row():
        with engine.connect() as conn:
            conn.execute(sa.text("SELECT id FROM pgbus_workflows WHERE id = :id"), {"id": some_id}).all()

    row("status counts (vs one primary-key read)", timed(counts, repeat), timed(one_row, repeat),
        target="< 5 ms, exact")
    hx = {"HX-Request": "true"}
    fragment = request(client, timer, "/workflows", {**hx, "HX-Target": "pgbus-runs"}, repeat)
    row("runs fragment, 50 rows (vs its SQL)", fragment[0], fragment[1], target="<= 3x its SQL")
    if eight:
        page = request(client, timer, f"/workflows/{eight}", {}, repeat)
        row("run page, 8 attempts (vs its SQL)", page[0], page[1], target="<= 3x its SQL")
    write_long_run(engine)
    try:
        long = request(client, timer, f"/workflows/{LONG_RUN}", {}, repeat)
        row("run page, 200 attempts / 600 events", long[0], long[1], target="< 60 ms at any size")
        row("  its size", long[3] / 1000, None, unit="kB")
    finally:
        with engine.begin() as conn:
            conn.execute(sa.text("DELETE FROM pgbus_workflows WHERE workflow_id = :w"), {"w": LONG_RUN})
    poll_headers = {**hx, "HX-Target": "pgbus-counts,pgbus-runs"}
    first = client.get("/workflows", headers=poll_headers)
    tagged = {**poll_headers, "If-None-Match": first.headers.get("ETag", "")}
    poll = request(client, timer, "/workflows", tagged, repeat)

    def marker():
        with engine.connect() as conn:
            changes.marker(conn)

    row(f"unchanged poll: SQL (HTTP {poll[2]}, {poll[3]} bytes)", poll[1], None, target="< 1 ms, 304, no body")
    row("unchanged poll: whole request (vs full poll)", poll[0],
        request(client, timer, "/workflows", poll_headers, repeat)[0])
    row("  marker read alone", timed(marker, repeat), None)
    database.dispose()


# --- 4 writers, with and without the count triggers ----------------------------

HOT_ROW = """
CREATE OR REPLACE FUNCTION pgbus_workflows_count_on_update() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE pgbus_workflow_counts SET runs = runs - 1
    WHERE workflow_class = OLD.workflow_class AND status = OLD.status;
    INSERT INTO pgbus_workflow_counts AS c VALUES (NEW.workflow_class, NEW.status, 1)
    ON CONFLICT (workflow_class, status) DO UPDATE SET runs = c.runs + 1;
    RETURN NULL;
END;
$$;
"""


def writers(engine, seconds: float, workers: int = 4) -> float:
    """Transactions per second of *workers* threads, each moving its own
    runs between ready and running (lock, transition, commit)."""
    done = [0] * workers
    failed = [0] * workers
    stop = time.monotonic() + seconds

    def work(n: int) -> None:
        flip = 0
        while time.monotonic() < stop:
            try:
                with engine.begin() as conn:
                    run = f"w{n}-{flip % 50}"
                    workflows.lock_for(conn, run)
                    now_ready = flip // 50 % 2 == 0
                    workflows.transition(conn, run, from_="ready" if now_ready else "running",
                                         to="running" if now_ready else "ready")
            except sa.exc.OperationalError:
                failed[n] += 1  # a deadlock: the transaction is lost, tried again
                continue
            flip += 1
            done[n] += 1

    threads = [threading.Thread(target=work, args=(n,)) for n in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(done) / seconds, sum(failed)


def contention(url: str, seconds: float) -> None:
    name = f"pgbus_bench_{uuid.uuid4().hex[:10]}"
    admin = db.create_engine(url).execution_options(isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    scratch_url = sa.engine.make_url(db.normalize_url(url)).set(database=name).render_as_string(
        hide_password=False)
    engine = db.create_engine(scratch_url, pool_size=8)
    try:
        schema.install(engine)
        with engine.begin() as conn:
            conn.execute(sa.text(
                "INSERT INTO pgbus_workflows (workflow_id, workflow_class, status) "
                "SELECT 'w' || t || '-' || g, 'OrderWorkflow', 'ready' "
                "FROM generate_series(0, 3) t, generate_series(0, 49) g"))
        print(f"\n4 writers, {seconds:.0f} s each (transactions/s: lock the run, change its status, commit)")
        results = {}
        for label, setup in (
            ("count triggers off", "ALTER TABLE pgbus_workflows DISABLE TRIGGER pgbus_workflows_count_on_update"),
            ("appended deltas (this schema)", "ALTER TABLE pgbus_workflows ENABLE TRIGGER pgbus_workflows_count_on_update"),
            ("one counter row per class and status", HOT_ROW),
        ):
            with engine.begin() as conn:
                conn.exec_driver_sql(setup)
            results[label], deadlocks = writers(engine, seconds)
            print(f"  {label:<40} {results[label]:8.0f}   deadlocks: {deadlocks}")
        with engine.begin() as conn:
            kept = workflows.status_counts(conn)
        print(f"  kept counts afterwards: {dict(kept)}")
    finally:
        engine.dispose()
        with admin.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE "{name}" WITH (FORCE)'))
        admin.engine.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", default=os.environ.get(db.DATABASE_URL_ENV))
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--contention", action="store_true", help="also time 4 writers (scratch database)")
    parser.add_argument("--seconds", type=float, default=10.0, help="per contention round")
    options = parser.parse_args()
    pages_table(options.database_url, options.repeat)
    if options.contention:
        contention(options.database_url, options.seconds)


if __name__ == "__main__":
    main()
