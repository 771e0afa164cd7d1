"""bench/load.py runs end to end, briefly, so it cannot rot: a real
`pgbus-web serve` process (and, with two processes, nginx in front of
them) on the test database, two clients for a moment per page, and a
table with every row and no error. Nothing here is timed."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from pgbus_web.demo import seed as seeding

BENCH = Path(__file__).resolve().parents[2] / "bench" / "load.py"
ROW = re.compile(
    r"^(first page|filtered page|run page|floor \(file\))\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)"
    r"\s+(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)$"
)


def run_bench(database_url: str, *args: str) -> list[tuple]:
    finished = subprocess.run(
        [sys.executable, str(BENCH), "--database-url", database_url, "--clients", "1,2", "--seconds", "1.5", *args],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert finished.returncode == 0, finished.stderr[-3000:]
    return [ROW.match(line).groups() for line in finished.stdout.splitlines() if ROW.match(line)]


def test_the_load_bench_prints_every_row_without_errors(engine, database_url):
    seeding.seed(engine, runs=200, seed=8)
    rows = run_bench(database_url)
    # Every page at every number of clients, in order, then the floor.
    assert [(page, int(clients)) for page, clients, *_ in rows] == [
        (page, clients) for page in ("first page", "filtered page", "run page", "floor (file)") for clients in (1, 2)
    ]
    for page, clients, rate, p50, p95, p99, errors, rss, _cpu, _per_request in rows:
        assert int(errors) == 0, (page, clients)
        assert float(rate) > 0 and float(p50) <= float(p95) <= float(p99), (page, clients)
        assert int(rss) > 0, page  # the server's memory was read


def test_two_processes_behind_nginx(engine, database_url):
    seeding.seed(engine, runs=50, seed=9)
    rows = run_bench(database_url, "--processes", "2", "--pages", "run page", "--no-floor")
    assert [(page, int(clients)) for page, clients, *_ in rows] == [("run page", 1), ("run page", 2)]
    assert all(int(errors) == 0 and float(rate) > 0 for _, _, rate, _, _, _, errors, _, _, _ in rows)


def test_writes_move_the_marker_while_the_clients_run(engine, database_url):
    seeding.seed(engine, runs=50, seed=10)
    finished = subprocess.run(
        [
            sys.executable,
            str(BENCH),
            "--database-url",
            database_url,
            "--clients",
            "2",
            "--seconds",
            "1.5",
            "--pages",
            "first page",
            "--no-floor",
            "--writes-per-second",
            "20",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert finished.returncode == 0, finished.stderr[-3000:]
    made = re.search(r"; (\d+) writes moved the change marker", finished.stdout)
    assert made is not None and int(made.group(1)) > 0, finished.stdout
    rows = [ROW.match(line).groups() for line in finished.stdout.splitlines() if ROW.match(line)]
    assert [(page, int(clients), int(errors)) for page, clients, _, _, _, _, errors, *_ in rows] == [
        ("first page", 2, 0)
    ]
