"""The scale issue's table in one run: each row measured against its floor,
as a ratio, beside its target, with a verdict.

| what                                 | floor                             | target                      |
| status counts                        | one index read (a primary key)    | < 5 ms at 10M runs, exact   |
| runs fragment, 50 rows               | its SQL                           | <= 3x its SQL               |
| run page, 8 attempts                 | its SQL                           | <= 3x its SQL               |
| run page, 200 attempts / 600 events  | its SQL                           | < 60 ms at any size         |
| worker, no-op steps                  | a bare SKIP LOCKED loop           | >= 50 % of the bare loop    |
| seed, 1M runs                        | -                                 | < 300 s                     |
| an unchanged live-refresh poll       | one indexed read (change marker)  | < 1 ms of SQL, 304, no body |

Everything, on an embedded PostgreSQL seeded here (the seed row is that
seeding, `pgbus-web seed --runs N`, timed):

    python bench/scale.py [--seed-runs 20000] [--worker-runs 200]

On a database seeded beforehand (pgbus-web seed --runs N [--history M]):
the page rows on it; --worker adds the worker row, --seed-runs N the seed
row, each in a scratch database of its own on the same server (dropped
after); rows not asked for are printed as not run:

    python bench/scale.py --database-url URL [--worker] [--seed-runs N] [--repeat 15] [--contention]

The worker row is bench/worker.py's three loops (worker, bare, minimal).
The seed row gives the time for N runs and, when N is not a million, the
time per million extrapolated linearly from it, labelled as such.
--contention adds 4 concurrent writers changing run statuses with the
count triggers on, off, and with a single counter row per (class, status)
instead of the appended deltas (in a scratch database).

After it, every page of docs/performance.md's table (bench/pages.py's
pages) with its target: the index's first page under 50 ms, every other
page under 100 ms, and each within 3x its SQL where that SQL is more than
index reads of a few milliseconds (SCREEN_SQL_FLOOR_MS); the index's first
page and a run's page, kept once per change (web/answering/page_cache.py),
also with nothing kept, as the first request after a change pays them
("read and drawn anew"). Only those pages,
with the load average at the start and the end, and under each page that
misses its target its slowest statements explained (server time, buffers,
scans):

    python bench/scale.py --database-url URL --pages [--explain] [--repeat 15]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).resolve().parent))
import scratch  # noqa: E402  (bench/scratch.py)
import worker as worker_bench  # noqa: E402  (bench/worker.py)
from pages import SqlTimer, pick_targets  # noqa: E402  (bench/pages.py)
from queries import buffers, capture, explain, scans  # noqa: E402  (bench/queries.py)

from pgbus_web import db, schema
from pgbus_web.app import create_app
from pgbus_web.demo import embedded_server
from pgbus_web.demo.seed import seed
from pgbus_web.demo.workflows import REGISTRY
from pgbus_web.models import changes, recount, workflow_counts, workflow_rows
from pgbus_web.web.answering import page_cache
from pgbus_web.web.drawing import cells

LONG_RUN = "bench-scale-long-history"
# A search no run matches (an id prefix no uuid has).
EMPTY_SEARCH = "zzzz-no-such-run"
MILLION = 1_000_000
EMBEDDED_SEED_RUNS = 20_000
# The first screen's targets (docs/performance.md, "The first screen").
FIRST_PAGE_MS = 50.0
PAGE_MS = 100.0
SCREEN_RATIO = 3.0
# A page whose SQL takes less is a few index reads: its ratio to its SQL
# measures only what every request costs around it, so it is printed but
# not held to SCREEN_RATIO.
SCREEN_SQL_FLOOR_MS = 5.0
# Pages read once per change marker and clock bucket and drawn once per
# kind of viewer (web/answering/page_cache.py): each also timed with nothing
# kept, as the first request after a change pays it.
DRAWN_ANEW = ("index, first page", "run page (paused)")


@dataclass
class Row:
    what: str
    target: str
    measured: str = "-"
    floor: str = "-"
    ratio: str = ""
    verdict: str = "not run"
    notes: list[str] = field(default_factory=list)


def table() -> dict[str, Row]:
    """The issue's rows, in its order, none measured yet."""
    rows = (
        ("counts", "status counts", "< 5 ms at 10M runs, exact"),
        ("fragment", "runs fragment, 50 rows", "<= 3x its SQL"),
        ("page", "run page, 8 attempts", "<= 3x its SQL"),
        ("long", "run page, 200 attempts / 600 events", "< 60 ms at any size"),
        ("worker", "worker, no-op steps", ">= 50 % of the bare loop"),
        ("seed", "seed, 1M runs", "< 300 s"),
        ("poll", "unchanged live-refresh poll", "< 1 ms of SQL, 304, no body"),
    )
    return {key: Row(what, target) for key, what, target in rows}


def verdict(met: bool) -> str:
    return "met" if met else "NOT met"


def print_table(rows: dict[str, Row]) -> None:
    print(f"{'what':<37} {'measured':<20} {'floor':<26} {'ratio':<8} {'target':<28} verdict")
    for row in rows.values():
        print(f"{row.what:<37} {row.measured:<20} {row.floor:<26} {row.ratio:<8} {row.target:<28} {row.verdict}")
        for note in row.notes:
            print(f"    {note}")


def timed(function, repeat: int) -> float:
    """Median milliseconds of *function* after one warm-up call."""
    function()
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        function()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def sql_time(timer: SqlTimer, function, repeat: int) -> float:
    """Median milliseconds *function*'s statements took to execute, after
    one warm-up call: what SqlTimer counts in a request, alone."""
    function()
    times = []
    for _ in range(repeat):
        with timer.measure():
            function()
            times.append(timer.total * 1000)
    return statistics.median(times)


def request(client, timer, path, headers, repeat, before=None):
    """(median request ms, median SQL ms, status, bytes, statements) of GET
    *path*; *before* is called ahead of each request, untimed."""
    response = client.get(path, headers=headers)
    requests, sqls = [], []
    for _ in range(repeat):
        if before is not None:
            before()
        with timer.measure():
            started = time.perf_counter()
            response = client.get(path, headers=headers)
            requests.append((time.perf_counter() - started) * 1000)
            sqls.append(timer.total * 1000)
    return (
        statistics.median(requests),
        statistics.median(sqls),
        response.status_code,
        len(response.data),
        timer.statements,
    )


def write_long_run(engine) -> None:
    with engine.begin() as conn:
        conn.execute(sa.text("DELETE FROM pgbus_workflows WHERE workflow_id = :w"), {"w": LONG_RUN})
        workflow_rows.insert_run(
            conn,
            {
                "workflow_id": LONG_RUN,
                "workflow_class": "OrderWorkflow",
                "status": "paused",
                "current_step": "capture_payment",
            },
        )
        conn.execute(
            sa.text(
                "INSERT INTO pgbus_workflow_steps (workflow_id, step_name, status, attempt, error_class, "
                "error_message, started_at, finished_at) SELECT :w, 'capture_payment', 'failed', g, "
                "'GatewayError', 'card declined', now(), now() FROM generate_series(1, 200) g"
            ),
            {"w": LONG_RUN},
        )
        conn.execute(
            sa.text(
                "INSERT INTO pgbus_workflow_events (workflow_id, event, actor, step_name, attempt) "
                "SELECT :w, (ARRAY['step_scheduled', 'step_started', 'step_failed'])[1 + g % 3], 'system', "
                "'capture_payment', 1 + g / 3 FROM generate_series(0, 599) g"
            ),
            {"w": LONG_RUN},
        )


def against_sql(row: Row, measured: tuple, limit_ratio: float | None = None, limit_ms: float | None = None) -> None:
    """Fill *row* with a request's time against its SQL's."""
    request_ms, sql_ms, status, size, statements = measured
    row.measured = f"{request_ms:.1f} ms"
    row.floor = f"{sql_ms:.1f} ms its SQL"
    ratio = request_ms / sql_ms if sql_ms else float("inf")
    row.ratio = f"{ratio:.1f}x"
    row.verdict = verdict(ratio <= limit_ratio if limit_ratio is not None else request_ms < limit_ms)
    if status != 200:
        row.verdict = f"HTTP {status}"
    row.notes.append(f"{size / 1000:.1f} kB, {statements} statements")


def page_rows(url: str, repeat: int, rows: dict[str, Row]) -> int:
    """Rows 1 to 4 and 7 on the seeded database at *url*; its number of runs."""
    database = db.Database.from_urls(url)
    engine = database.primary
    timer = SqlTimer(engine)
    app = create_app({"database": database, "registry": REGISTRY, "run_operations": False})
    client = app.test_client()
    with engine.connect() as conn:
        total = workflow_counts.count_runs(conn)
        some_id = conn.execute(sa.text("SELECT max(id) FROM pgbus_workflows")).scalar_one()
        eight = conn.execute(
            sa.text(
                # The newest steps by the primary key first: grouped directly, the
                # planner may walk the whole (workflow_id, ...) index instead.
                "SELECT workflow_id FROM (SELECT workflow_id FROM pgbus_workflow_steps ORDER BY id DESC "
                "LIMIT 200000) recent GROUP BY workflow_id HAVING count(*) = 8 LIMIT 1"
            )
        ).scalar()
        if eight is None:
            # The newest steps are a history's (`seed --history` after the
            # runs: one attempt a step): a sample of all runs instead.
            eight = conn.execute(
                sa.text(
                    "SELECT w.workflow_id FROM pgbus_workflows w TABLESAMPLE SYSTEM (0.5) REPEATABLE (1) "
                    "WHERE (SELECT count(*) FROM pgbus_workflow_steps s WHERE s.workflow_id = w.workflow_id) = 8 "
                    "LIMIT 1"
                )
            ).scalar()

    def counts():
        with engine.connect() as conn:
            workflow_counts.status_counts(conn)

    def one_row():
        with engine.connect() as conn:
            conn.execute(sa.text("SELECT id FROM pgbus_workflows WHERE id = :id"), {"id": some_id}).all()

    row = rows["counts"]
    counts_ms, floor_ms = timed(counts, repeat), timed(one_row, repeat)
    with engine.connect() as conn:
        wrong = recount.count_mismatches(conn)
    _, statement, parameters = capture(engine, lambda conn: workflow_counts.status_counts(conn))
    server_ms = explain(engine, statement, parameters)["Execution Time"]
    row.measured, row.floor = f"{counts_ms:.2f} ms", f"{floor_ms:.2f} ms one PK read"
    row.ratio = f"{counts_ms / floor_ms:.1f}x"
    row.verdict = verdict(counts_ms < 5 and not wrong) + f" at {total:,} runs"
    row.notes.append(
        f"whole call through the pool; the server's execution time (EXPLAIN ANALYZE) "
        f"{server_ms:.2f} ms; exact: {'yes, equal to count(*)' if not wrong else f'NO, {wrong}'}"
    )

    hx = {"HX-Request": "true"}
    fragment = {**hx, "HX-Target": "pgbus-runs"}
    against_sql(rows["fragment"], request(client, timer, "/workflows", fragment, repeat), limit_ratio=3)
    # The rows are remembered between requests (cells.run_rows): the figure
    # above is a refresh of an unchanged page; this one redraws every row.
    afresh_ms, afresh_sql_ms = request(client, timer, "/workflows", fragment, repeat, cells._drawn_rows.clear)[:2]
    rows["fragment"].notes.append(
        f"every row drawn afresh (as if all 50 runs had changed): {afresh_ms:.1f} ms, "
        f"{afresh_ms / afresh_sql_ms:.1f}x its SQL ({afresh_sql_ms:.1f} ms)"
    )
    # The same request with no row to draw: what it costs beside its SQL
    # before any run is drawn (Flask, the pool, the marker, the empty table).
    empty_ms, empty_sql_ms = request(client, timer, f"/workflows?q={EMPTY_SEARCH}", fragment, repeat)[:2]
    rows["fragment"].notes.append(
        f"a search that matches nothing (no row to draw): {empty_ms:.1f} ms, "
        f"{empty_ms / empty_sql_ms:.1f}x its SQL ({empty_sql_ms:.1f} ms)"
    )
    if eight:
        against_sql(rows["page"], request(client, timer, f"/workflows/{eight}", {}, repeat), limit_ratio=3)
    else:
        rows["page"].verdict = "not run: no run with 8 attempts"
    write_long_run(engine)
    try:
        against_sql(rows["long"], request(client, timer, f"/workflows/{LONG_RUN}", {}, repeat), limit_ms=60)
    finally:
        with engine.begin() as conn:
            conn.execute(sa.text("DELETE FROM pgbus_workflows WHERE workflow_id = :w"), {"w": LONG_RUN})

    poll_headers = {**hx, "HX-Target": "pgbus-counts,pgbus-runs"}
    first = client.get("/workflows", headers=poll_headers)
    tagged = {**poll_headers, "If-None-Match": first.headers.get("ETag", "")}
    poll_ms, poll_sql_ms, status, size, statements = request(client, timer, "/workflows", tagged, repeat)
    full_ms = request(client, timer, "/workflows", poll_headers, repeat)[0]

    def marker():
        with engine.connect() as conn:
            changes.marker(conn)

    marker_ms = sql_time(timer, marker, repeat)
    _, statement, parameters = capture(engine, lambda conn: changes.marker(conn))
    server_ms = explain(engine, statement, parameters)["Execution Time"]
    row = rows["poll"]
    row.measured, row.floor = f"{poll_sql_ms:.3f} ms of SQL", f"{marker_ms:.3f} ms marker read"
    row.ratio = f"{poll_sql_ms / marker_ms:.1f}x" if marker_ms else ""
    row.verdict = verdict(poll_sql_ms < 1 and status == 304 and size == 0)
    row.notes.append(
        f"HTTP {status}, {size} bytes, {statements} statement(s); SQL timed through the client, "
        f"the marker's server execution time (EXPLAIN ANALYZE) {server_ms:.3f} ms"
    )
    row.notes.append(f"the whole request {poll_ms:.1f} ms, a full poll {full_ms:.1f} ms")
    database.dispose()
    return total


def screen_rows(url: str, repeat: int, *, explain_missed: bool = False) -> list[tuple[str, float, float, int, str]]:
    """Every page of the performance table: (label, request ms, SQL ms,
    statements, verdict), medians of *repeat* after one warm request.
    With *explain_missed*, each page that misses its target has each of
    its statements explained (explain_statements) under its row."""
    database = db.Database.from_urls(url)
    timer = SqlTimer(database.primary)
    app = create_app({"database": database, "registry": REGISTRY, "run_operations": False})
    client = app.test_client()
    measured = []
    targets = []
    for label, path, headers in pick_targets(database.primary):
        targets.append((label, path, headers, None))
        if label in DRAWN_ANEW:
            # What the first request of a change or a clock bucket costs:
            # every read and drawing forgotten before each request.
            targets.append((f"{label}, read and drawn anew", path, headers, page_cache.forget_all))
    try:
        for label, path, headers, before in targets:
            request_ms, sql_ms, status, _, statements = request(client, timer, path, headers, repeat, before)
            limit = FIRST_PAGE_MS if label.startswith("index, first page") else PAGE_MS
            checks = [request_ms < limit]
            ratio = request_ms / sql_ms if sql_ms else float("inf")
            # A kept page's one statement is the change marker (a primary
            # key and the marker's few log rows): index reads, however long
            # the machine makes them.
            held = sql_ms >= SCREEN_SQL_FLOOR_MS and statements > 1
            if held:
                checks.append(ratio <= SCREEN_RATIO)
            said = verdict(all(checks)) if status == 200 else f"HTTP {status}"
            said += f" (< {limit:.0f} ms" + (
                f", <= {SCREEN_RATIO:g}x its SQL)"
                if held
                else "; its SQL is index reads)"
                if statements > 1
                else "; its SQL is the change marker alone)"
            )
            measured.append((label, request_ms, sql_ms, statements, said))
            if explain_missed and not all(checks):
                print(f"\n{label}: {request_ms:.1f} ms, SQL {sql_ms:.1f} ms: {said}")
                if before is not None:
                    before()
                explain_statements(database.primary, client, path, headers)
    finally:
        database.dispose()
    return measured


def explain_statements(engine, client, path: str, headers: dict, shown: int = 3) -> None:
    """The statements of one GET *path*, each run again under EXPLAIN
    (ANALYZE, BUFFERS): the *shown* slowest by server time, with their
    buffers and scans."""
    seen: list[tuple[str, object]] = []

    def before(conn, cursor, statement, parameters, context, executemany):
        seen.append((statement, parameters))

    sa.event.listen(engine, "before_cursor_execute", before)
    try:
        client.get(path, headers=headers)
    finally:
        sa.event.remove(engine, "before_cursor_execute", before)
    plans = []
    for statement, parameters in seen:
        if not statement.lstrip().upper().startswith(("SELECT", "WITH")) or statement.strip() == "SELECT 1":
            continue
        plan = explain(engine, statement, parameters)
        plans.append((plan["Execution Time"], plan, statement))
    for execution, plan, statement in sorted(plans, key=lambda item: -item[0])[:shown]:
        hit, read = buffers(plan["Plan"])
        first = " ".join(statement.split())[:110]
        print(f"    {execution:8.1f} ms server time, buffers {hit:,} hit {read:,} read: {first}")
        for line in scans(plan["Plan"], []):
            print(f"        - {line}")


def print_screen(measured) -> None:
    print("\nEvery page of the performance table, medians (ms)")
    print(f"{'page':<62} {'request':>8} {'SQL':>7} {'ratio':>6} {'stmts':>5}  verdict")
    for label, request_ms, sql_ms, statements, said in measured:
        ratio = f"{request_ms / sql_ms:.1f}x" if sql_ms else "-"
        print(f"{label:<62} {request_ms:8.1f} {sql_ms:7.1f} {ratio:>6} {statements:5d}  {said}")


def worker_row(server_url: str, runs: int, steps: int, rounds: int, row: Row) -> None:
    """bench/worker.py's loops, in a scratch database on *server_url*."""
    result = worker_bench.compare(server_url, runs=runs, steps=steps, rounds=rounds)
    median = statistics.median
    share = median(result.to_bare)
    row.measured = f"{median(result.speeds):.0f} steps/s"
    row.floor = f"{median(result.bare):.0f} steps/s bare loop"
    row.ratio = f"{share:.0%}"
    row.verdict = verdict(share >= 0.5)
    row.notes.append(
        f"{runs} runs x {steps} steps, median of {rounds} rounds (worker/bare per round: "
        f"{', '.join(f'{r:.0%}' for r in result.to_bare)})"
    )
    row.notes.append(
        f"minimal loop {median(result.minimal):.0f} steps/s (worker/minimal "
        f"{median(result.to_minimal):.0%}); per step the worker sends "
        f"{result.worker['statements']:.1f} statements, {result.worker['commits']:.2f} commits"
    )


def timed_seed(url: str, runs: int, row: Row) -> None:
    """`pgbus-web seed --runs *runs*` into the installed, empty database at
    *url*, timed as the command times it."""
    engine = db.create_engine(url, db.UNBOUNDED_STATEMENTS)
    try:
        result = seed(engine, runs=runs, seed=1)
    finally:
        engine.dispose()
    per_million = result.seconds * MILLION / runs
    row.measured = f"{result.seconds:.1f} s, {runs:,} runs"
    row.verdict = verdict(per_million < 300)
    if runs != MILLION:
        row.ratio = ""
        row.verdict += " (extrapolated)"
        row.notes.append(f"EXTRAPOLATED, not measured: {per_million:.0f} s per 1M runs, linearly from {runs:,} runs")
    row.notes.append(f"{result.steps:,} steps, {result.events:,} events, {result.signals:,} signals written")


def seed_row(server_url: str, runs: int, row: Row) -> None:
    """The seed row in a scratch database on *server_url*."""
    with scratch.scratch_database(server_url) as url:
        install = db.create_engine(url)
        schema.install(install)
        install.dispose()
        timed_seed(url, runs, row)


def vacuum_analyze(url: str) -> None:
    engine = db.create_engine(url, db.UNBOUNDED_STATEMENTS)
    try:
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.exec_driver_sql("VACUUM ANALYZE")
    finally:
        engine.dispose()


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
                    workflow_rows.lock_for(conn, run)
                    now_ready = flip // 50 % 2 == 0
                    workflow_rows.transition(
                        conn, run, from_="ready" if now_ready else "running", to="running" if now_ready else "ready"
                    )
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
    with scratch.scratch_database(url) as scratch_url:
        engine = db.create_engine(scratch_url, pool_size=8)
        try:
            schema.install(engine)
            with engine.begin() as conn:
                conn.execute(
                    sa.text(
                        "INSERT INTO pgbus_workflows (workflow_id, workflow_class, status) "
                        "SELECT 'w' || t || '-' || g, 'OrderWorkflow', 'ready' "
                        "FROM generate_series(0, 3) t, generate_series(0, 49) g"
                    )
                )
            print(f"\n4 writers, {seconds:.0f} s each (transactions/s: lock the run, change its status, commit)")
            results = {}
            for label, setup in (
                ("count triggers off", "ALTER TABLE pgbus_workflows DISABLE TRIGGER pgbus_workflows_count_on_update"),
                (
                    "appended deltas (this schema)",
                    "ALTER TABLE pgbus_workflows ENABLE TRIGGER pgbus_workflows_count_on_update",
                ),
                ("one counter row per class and status", HOT_ROW),
            ):
                with engine.begin() as conn:
                    conn.exec_driver_sql(setup)
                results[label], deadlocks = writers(engine, seconds)
                print(f"  {label:<40} {results[label]:8.0f}   deadlocks: {deadlocks}")
            # No counts printed after: the first variant wrote without
            # counting and the last replaced the trigger, so the scratch
            # database's kept counts are not this schema's (tests prove those).
        finally:
            engine.dispose()


def load_average() -> str:
    """The machine's 1, 5 and 15 minute load averages: the figures beside
    every wall time here (other work on the same cores moves them)."""
    return " / ".join(f"{value:.2f}" for value in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--database-url",
        default=os.environ.get(db.DATABASE_URL_ENV),
        help="a seeded database (default: an embedded server, seeded here)",
    )
    parser.add_argument("--repeat", type=int, default=15, help="timed requests per page row")
    parser.add_argument("--worker", action="store_true", help="with a URL: also the worker row (always on without one)")
    parser.add_argument("--worker-runs", type=int, default=200)
    parser.add_argument("--worker-steps", type=int, default=5)
    parser.add_argument("--worker-rounds", type=int, default=3)
    parser.add_argument(
        "--seed-runs",
        type=int,
        default=None,
        help=f"runs the seed row writes (default without a URL: {EMBEDDED_SEED_RUNS:,}, which the page rows then read)",
    )
    parser.add_argument("--contention", action="store_true", help="also time 4 writers (scratch database)")
    parser.add_argument("--seconds", type=float, default=10.0, help="per contention round")
    parser.add_argument(
        "--pages", action="store_true", help="with a URL: only every page of the performance table, with its target"
    )
    parser.add_argument(
        "--explain",
        action="store_true",
        help="under each page that misses its target, its slowest statements explained",
    )
    options = parser.parse_args()

    if options.database_url and options.pages:
        print(f"load average {load_average()} at the start")
        print_screen(screen_rows(options.database_url, options.repeat, explain_missed=options.explain))
        print(f"load average {load_average()} at the end")
        return
    if options.database_url:
        report(options.database_url, options, seeded_here=False)
        return
    with scratch.server() as server_url:
        # The demo's database, as the demo makes it (its collation).
        url = embedded_server.ensure(server_url)
        engine = db.create_engine(url)
        schema.install(engine)
        engine.dispose()
        report(url, options, seeded_here=True)


def report(url: str, options, *, seeded_here: bool) -> None:
    """Measure the rows asked for on *url*'s server and print the table;
    *seeded_here*: *url* is an empty, installed database that the seed
    row fills for the page rows."""
    rows = table()
    if seeded_here:
        timed_seed(url, options.seed_runs or EMBEDDED_SEED_RUNS, rows["seed"])
        vacuum_analyze(url)
    elif options.seed_runs:
        seed_row(url, options.seed_runs, rows["seed"])
    else:
        rows["seed"].verdict = "not run (--seed-runs N)"
    total = page_rows(url, options.repeat, rows)
    if seeded_here or options.worker:
        worker_row(url, options.worker_runs, options.worker_steps, options.worker_rounds, rows["worker"])
    else:
        rows["worker"].verdict = "not run (--worker)"
    where = "an embedded PostgreSQL seeded here" if seeded_here else "the given database"
    print(f"The scale issue's table: page rows on {where} ({total:,} runs), medians of {options.repeat}")
    print_table(rows)
    print_screen(screen_rows(url, options.repeat, explain_missed=options.explain))
    print(f"load average {load_average()}")
    if options.contention:
        contention(url, options.seconds)


if __name__ == "__main__":
    main()
