"""Many operators at once: concurrent clients against a real `pgbus-web
serve` (waitress) process, or several behind one nginx address.

    python bench/load.py --database-url URL [--clients 8,32,100] [--seconds 30]
                         [--processes 1] [--threads 19]

For each page (the index's first page, a filtered page, a run page) and
each number of clients, the clients request the page as fast as it
answers, each on its own keep-alive connection, for --seconds; then, as
the floor beside them, the same for a small file the same servers serve
(Flask and waitress with no database and no template: what any answer
costs). The table
gives requests per second, the median, 95th and 99th percentile latency,
the errors (anything but 200, and failed connections), the serving
processes' resident memory (the largest seen), the CPU seconds they used
and that CPU time per request: the steadier figure on a shared machine,
where the latencies follow what else runs (a process that got a fifth of
a core serves a fifth of the requests).

With --processes N > 1, N serve processes listen on their own ports and
nginx (started here, from a configuration in a temporary directory)
spreads the requests over them from one address, as docs/standalone.md
sets it up. The database must be seeded (`pgbus-web seed --runs N`).
The servers read it; each writes its own heartbeat and takes queued
operations (`serve` does), so run it on a database of its own, never on
one that must stay read-only.

With --writes-per-second N, a writer touches one run N times a second
(`updated_at` set to itself: nothing changes but the change marker), so
the pages kept for every viewer alike (web/answering/page_cache.py) are read
and drawn again as during an incident, when workers write all the time.

The machine's load average is printed at the start and the end.
"""

from __future__ import annotations

import argparse
import http.client
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import sqlalchemy as sa

from pgbus_web import db

HERE = Path(__file__).resolve().parent
PAGES = ("first page", "filtered page", "run page")
# The floor: a small file of the dashboard's, through the same servers.
FLOOR = "floor (file)"
FLOOR_PATH = "/pgbus-static/favicon.svg"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_until_up(port: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            conn.request("GET", "/health")
            if conn.getresponse().status == 200:
                return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise SystemExit(f"nothing answered /health on port {port} within {timeout:.0f} s")
        time.sleep(0.2)


def serve_command(url: str, port: int, threads: int) -> list[str]:
    executable = shutil.which("pgbus-web", path=str(Path(sys.executable).parent)) or "pgbus-web"
    return [
        executable,
        "serve",
        "--database-url",
        url,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--threads",
        str(threads),
        "--no-access-log",
    ]


NGINX = """
worker_processes 1;
pid {root}/nginx.pid;
error_log {root}/error.log warn;
events {{ worker_connections 1024; }}
http {{
  access_log off;
  client_body_temp_path {root}/body;
  proxy_temp_path {root}/proxy;
  fastcgi_temp_path {root}/fastcgi;
  uwsgi_temp_path {root}/uwsgi;
  scgi_temp_path {root}/scgi;
  upstream dash {{ {servers} keepalive 64; }}
  server {{
    listen 127.0.0.1:{port};
    location / {{
      proxy_pass http://dash;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Host $host:$server_port;
    }}
  }}
}}
"""


@contextmanager
def servers(url: str, processes: int, threads: int) -> Iterator[tuple[int, list[subprocess.Popen]]]:
    """The port to send requests to, and the serve processes behind it."""
    ports = [free_port() for _ in range(processes)]
    started = [
        subprocess.Popen(
            serve_command(url, port, threads), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )
        for port in ports
    ]
    nginx = None
    root = None
    try:
        for port, process in zip(ports, started, strict=True):
            try:
                wait_until_up(port)
            except SystemExit:
                process.terminate()
                raise SystemExit(f"serve did not start: {process.communicate(timeout=10)[1][-2000:]}") from None
        front = ports[0]
        if processes > 1:
            binary = shutil.which("nginx") or "/usr/sbin/nginx"
            root = Path(tempfile.mkdtemp(prefix="pgbus-web-load-"))
            front = free_port()
            (root / "nginx.conf").write_text(
                NGINX.format(root=root, port=front, servers=" ".join(f"server 127.0.0.1:{p};" for p in ports))
            )
            nginx = subprocess.Popen(
                [binary, "-p", str(root), "-c", str(root / "nginx.conf"), "-g", "daemon off;"],
                stderr=subprocess.DEVNULL,
            )
            wait_until_up(front)
        yield front, started
    finally:
        if nginx is not None:
            nginx.send_signal(signal.SIGQUIT)
            nginx.wait(timeout=10)
        for process in started:
            process.send_signal(signal.SIGTERM)
        for process in started:
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
        if root is not None:
            shutil.rmtree(root, ignore_errors=True)


def rss_kb(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def cpu_seconds(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except OSError:
        return 0.0


@dataclass
class Result:
    page: str
    clients: int
    seconds: float
    latencies: list[float] = field(default_factory=list)
    errors: int = 0
    rss_kb: int = 0
    cpu: float = 0.0

    def percentile(self, share: float) -> float:
        if not self.latencies:
            return float("nan")
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(share * len(ordered)))] * 1000


def hammer(port: int, path: str, clients: int, seconds: float, pids: list[int], page: str) -> Result:
    """*clients* threads requesting *path* for *seconds*, each on its own
    keep-alive connection."""
    result = Result(page, clients, seconds)
    lock = threading.Lock()
    start = threading.Barrier(clients + 1)
    stop_at = [0.0]

    def client() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        mine, errors = [], 0
        start.wait()
        while time.monotonic() < stop_at[0]:
            began = time.perf_counter()
            try:
                conn.request("GET", path)
                response = conn.getresponse()
                response.read()
                if response.status != 200:
                    errors += 1
                else:
                    mine.append(time.perf_counter() - began)
                if response.getheader("Connection", "").lower() == "close":
                    conn.close()
                    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            except (OSError, http.client.HTTPException):
                errors += 1
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        conn.close()
        with lock:
            result.latencies += mine
            result.errors += errors

    threads = [threading.Thread(target=client, daemon=True) for _ in range(clients)]
    for thread in threads:
        thread.start()
    cpu_before = sum(cpu_seconds(pid) for pid in pids)
    stop_at[0] = time.monotonic() + seconds
    start.wait()
    while any(thread.is_alive() for thread in threads):
        result.rss_kb = max(result.rss_kb, sum(rss_kb(pid) for pid in pids))
        time.sleep(0.25)
    for thread in threads:
        thread.join()
    result.cpu = sum(cpu_seconds(pid) for pid in pids) - cpu_before
    return result


def warm(port: int, path: str, requests: int) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        for _ in range(requests):
            conn.request("GET", path)
            conn.getresponse().read()
    finally:
        conn.close()


def targets(url: str) -> dict[str, str]:
    """The path of each page, chosen from the data."""
    engine = db.create_engine(url)
    try:
        with engine.connect() as conn:
            run = (
                conn.execute(
                    sa.text("SELECT workflow_id FROM pgbus_workflows WHERE status = 'paused' ORDER BY id DESC LIMIT 1")
                ).scalar()
                or conn.execute(sa.text("SELECT workflow_id FROM pgbus_workflows ORDER BY id DESC LIMIT 1")).scalar()
            )
    finally:
        engine.dispose()
    if run is None:
        raise SystemExit("the database has no runs: seed it first (pgbus-web seed --runs N)")
    return {"first page": "/workflows", "filtered page": "/workflows?reason=stalled", "run page": f"/workflows/{run}"}


@contextmanager
def writer(url: str, per_second: float) -> Iterator[list[int]]:
    """A thread moving the change marker *per_second* times a second; the
    list it yields holds the number of writes made."""
    made = [0]
    if per_second <= 0:
        yield made
        return
    stop = threading.Event()
    engine = db.create_engine(url)

    def write() -> None:
        with engine.connect() as conn:
            # One status, so the (status, id) index answers: with a long
            # history written after the ongoing runs, a walk of the ids
            # for several statuses read millions of finished runs first.
            ids = [
                row[0]
                for row in conn.execute(
                    sa.text("SELECT id FROM pgbus_workflows WHERE status = 'ready' ORDER BY id DESC LIMIT 100")
                )
            ]
        if not ids:
            return
        while not stop.wait(1.0 / per_second):
            with engine.begin() as conn:
                conn.execute(
                    sa.text("UPDATE pgbus_workflows SET updated_at = updated_at WHERE id = :id"),
                    {"id": ids[made[0] % len(ids)]},
                )
            made[0] += 1

    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    try:
        yield made
    finally:
        stop.set()
        thread.join(timeout=10)
        engine.dispose()


def load_average() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "unknown"


def print_table(results: list[Result], processes: int, threads: int) -> None:
    print(f"{processes} serve process(es), {threads} threads each" + (", behind nginx" if processes > 1 else ""))
    header = (
        f"{'page':<14} {'clients':>7} {'req/s':>8} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8} "
        f"{'errors':>6} {'RSS MB':>7} {'CPU s':>6} {'CPU ms/req':>10}"
    )
    print(header)
    print("-" * len(header))
    for r in results:
        rate = len(r.latencies) / r.seconds
        print(
            f"{r.page:<14} {r.clients:>7} {rate:>8.1f} {r.percentile(0.5):>8.1f} {r.percentile(0.95):>8.1f} "
            f"{r.percentile(0.99):>8.1f} {r.errors:>6} {r.rss_kb / 1024:>7.0f} {r.cpu:>6.1f} "
            f"{r.cpu * 1000 / max(len(r.latencies), 1):>10.1f}"
        )
    # Each page's median and CPU per request against the floor's at the same clients.
    floors = {r.clients: r for r in results if r.page == FLOOR and r.latencies}
    ratios = [(r, floors[r.clients]) for r in results if r.page != FLOOR and r.clients in floors and r.latencies]
    if ratios:
        print("against the floor at the same clients (times the floor's)")
        print(f"{'page':<14} {'clients':>7} {'req/s':>8} {'p50':>8} {'p95':>8} {'CPU/req':>8}")
        for r, floor in ratios:
            cpu = (r.cpu / len(r.latencies)) / max(floor.cpu / len(floor.latencies), 1e-9)
            print(
                f"{r.page:<14} {r.clients:>7} {len(r.latencies) / len(floor.latencies):>8.2f} "
                f"{r.percentile(0.5) / floor.percentile(0.5):>8.1f} "
                f"{r.percentile(0.95) / floor.percentile(0.95):>8.1f} {cpu:>8.1f}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", default=os.environ.get(db.DATABASE_URL_ENV), required=False)
    parser.add_argument("--clients", default="8,32,100", help="comma-separated numbers of concurrent clients")
    parser.add_argument("--seconds", type=float, default=30.0, help="per page and number of clients")
    parser.add_argument("--processes", type=int, default=1, help="serve processes (more than 1: behind nginx)")
    parser.add_argument("--threads", type=int, default=19, help="each serve process's threads")
    parser.add_argument("--pages", default=",".join(PAGES), help=f"comma-separated, of: {', '.join(PAGES)}")
    parser.add_argument("--no-floor", action="store_true", help="leave out the floor's rows")
    parser.add_argument(
        "--writes-per-second",
        type=float,
        default=0.0,
        help="move the change marker this often while the clients run (a database of its own!)",
    )
    options = parser.parse_args()
    if not options.database_url:
        parser.error("--database-url (or PGBUS_DATABASE_URL) names the seeded database")
    clients = [int(n) for n in options.clients.split(",") if n.strip()]
    pages = [p.strip() for p in options.pages.split(",") if p.strip()]
    unknown = sorted(set(pages) - set(PAGES))
    if unknown:
        parser.error(f"unknown page(s): {', '.join(unknown)}")
    paths = {**targets(options.database_url), FLOOR: FLOOR_PATH}
    if not options.no_floor:
        pages.append(FLOOR)
    results = []
    began = load_average()
    with (
        servers(options.database_url, options.processes, options.threads) as (port, started),
        writer(options.database_url, options.writes_per_second) as writes,
    ):
        pids = [process.pid for process in started]
        for page in pages:
            # A few requests first, so each process has drawn the page once
            # (its templates compiled, its catalogs read) before the clock runs.
            warm(port, paths[page], 3 * options.processes)
            for n in clients:
                results.append(hammer(port, paths[page], n, options.seconds, pids, page))
    print(
        f"{len(results)} rows: {', '.join(pages)} x {', '.join(map(str, clients))} clients, "
        f"{options.seconds:g} s each; load average {began} at the start, {load_average()} at the end"
        + (f"; {writes[0]} writes moved the change marker" if options.writes_per_second > 0 else "")
    )
    print_table(results, options.processes, options.threads)


if __name__ == "__main__":
    main()
