"""What rendering costs on top of the SQL: the runs fragment (50 rows) and a
run page with about 8 attempts, each as its whole request against the time
its SQL alone took inside that same request, as a ratio (target: <= 3x).

    python bench/render.py [--database-url postgresql://...] [--runs 3000] [--repeat 15]

Without --database-url it starts an embedded PostgreSQL in a temporary
directory and seeds --runs runs there (the demo's generator), so one
command gives the figures. Each page is asked in English with no time zone,
and in German with a browser time zone (Europe/Berlin: the zone name is
written out in every moment's title), once to warm the caches, then
--repeat times; the medians are shown, and the least CPU time (the
steadiest figure on a shared machine). A third row asks the runs fragment
for a search that matches nothing: the same request without rows, i.e.
what the request costs beside its SQL before anything is drawn. A fourth
asks the fragment with its rows drawn afresh each time: the rows are
remembered between requests (cells.run_rows), which is what a live refresh
of an unchanged page meets, so this row is a page whose every run changed.
"""

from __future__ import annotations

import argparse
import statistics
import time

import scratch  # bench/scratch.py, beside this script
import sqlalchemy as sa
from pages import SqlTimer  # bench/pages.py

from pgbus_web import db, schema
from pgbus_web.app import create_app
from pgbus_web.demo.seed import seed
from pgbus_web.demo.workflows import REGISTRY
from pgbus_web.web.drawing import cells

TARGET_RATIO = 3.0
VIEWERS = (
    ("en, UTC", {}),
    ("de, Europe/Berlin", {"pgbus_locale": "de", "pgbus_tz": "Europe/Berlin"}),
)


def run_with_attempts(engine, attempts: int) -> str:
    """A run whose number of step attempts is nearest *attempts*."""
    with engine.connect() as conn:
        return conn.execute(
            sa.text(
                """
                SELECT workflow_id FROM pgbus_workflow_steps
                GROUP BY workflow_id ORDER BY abs(count(*) - :n), workflow_id LIMIT 1
                """
            ),
            {"n": attempts},
        ).scalar_one()


def attempts_of(engine, workflow_id: str) -> int:
    with engine.connect() as conn:
        return conn.execute(
            sa.text("SELECT count(*) FROM pgbus_workflow_steps WHERE workflow_id = :w"), {"w": workflow_id}
        ).scalar_one()


def measure(client, timer: SqlTimer, path: str, headers: dict, cookies: dict, repeat: int, before=None):
    """(median request ms, median SQL ms, statements, median and least
    request CPU ms) of *path*. The CPU time (this thread's: the test client runs the
    app in it) is the page's own cost without the database's, and stays
    meaningful on a busy machine where wall times swell. *before* is
    called ahead of each request, untimed."""
    for name, value in cookies.items():
        client.set_cookie(name, value)
    response = client.get(path, headers=headers)  # warm: plans, catalogs, templates
    if response.status_code != 200:
        raise SystemExit(f"{path}: HTTP {response.status_code}")
    requests, sqls, cpus = [], [], []
    for _ in range(repeat):
        if before is not None:
            before()
        with timer.measure():
            started, cpu = time.perf_counter(), time.thread_time()
            client.get(path, headers=headers)
            requests.append((time.perf_counter() - started) * 1000)
            cpus.append((time.thread_time() - cpu) * 1000)
            sqls.append(timer.total * 1000)
    for name in cookies:
        client.delete_cookie(name)
    return statistics.median(requests), statistics.median(sqls), timer.statements, statistics.median(cpus), min(cpus)


def bench(database_url: str, repeat: int) -> None:
    database = db.Database.from_urls(database_url)
    timer = SqlTimer(database.primary)
    app = create_app({"database": database, "registry": REGISTRY, "run_operations": False})
    client = app.test_client()
    run = run_with_attempts(database.primary, 8)
    fragment = {"HX-Request": "true", "HX-Target": "pgbus-runs"}
    pages = (
        ("runs fragment, 50 rows", "/workflows", fragment, None),
        (f"run page, {attempts_of(database.primary, run)} attempts", f"/workflows/{run}", {}, None),
        # The same request with no row to draw: what the framework, the
        # pool's ping, and the change marker cost by themselves.
        ("runs fragment, no rows (floor)", "/workflows?q=no-run-has-this-subject", fragment, None),
        # Every row drawn as if its run had changed since the last poll.
        ("runs fragment, rows afresh", "/workflows", fragment, cells._drawn_rows.clear),
    )
    print(
        f"{'page':<30} {'viewer':<18} {'request ms':>10} {'SQL ms':>7} {'stmts':>5} {'ratio':>6}"
        f" {'CPU ms':>7} {'min CPU':>7}"
    )
    worst = 0.0
    for label, path, headers, before in pages:
        for viewer, cookies in VIEWERS:
            request_ms, sql_ms, statements, cpu_ms, least = measure(
                client, timer, path, headers, cookies, repeat, before
            )
            ratio = request_ms / sql_ms if sql_ms else float("inf")
            if "(floor)" not in label and "afresh" not in label:
                worst = max(worst, ratio)
            print(
                f"{label:<30} {viewer:<18} {request_ms:10.1f} {sql_ms:7.1f} {statements:5d} {ratio:5.1f}x"
                f" {cpu_ms:7.1f} {least:7.1f}"
            )
    verdict = "within" if worst <= TARGET_RATIO else "over"
    print(f"worst ratio {worst:.1f}x: {verdict} the target of {TARGET_RATIO:.0f}x its SQL")
    database.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", help="a seeded database (default: an embedded one, seeded here)")
    parser.add_argument("--runs", type=int, default=3000, help="runs to seed into the embedded database")
    parser.add_argument("--repeat", type=int, default=15)
    options = parser.parse_args()
    if options.database_url:
        bench(options.database_url, options.repeat)
        return

    with scratch.server() as url:
        engine = db.create_engine(url)
        schema.install(engine)
        seed(engine, runs=options.runs, seed=1)
        engine.dispose()
        print(f"embedded PostgreSQL, {options.runs:,} seeded runs")
        bench(url, options.repeat)


if __name__ == "__main__":
    main()
