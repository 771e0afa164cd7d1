"""``pgbus-web worker``: run workflow steps from a definitions module."""

from __future__ import annotations

import logging
import signal

import click

from .. import db
from ..core import policy, settings_loader
from ..core.settings import moved_to_policy
from ..core.words import command_line
from ..db import describe_url
from ..runtime import definitions as loading
from ..runtime import operation_runner
from ..runtime.definitions import Registry
from ..runtime.heartbeat import INTERVAL as HEARTBEAT_INTERVAL
from ..runtime.heartbeat import WORKER as WORKER_KIND
from ..runtime.heartbeat import Heartbeat
from ..runtime.worker import POLL_INTERVAL, SWEEP_INTERVAL, Worker
from .common import database_url_option, engine_from, friendly_errors, load_settings, main_group

# Every command that takes --definitions reads it from here too (through
# the settings loader), so one environment (a container's) or one settings
# file gives the same definitions to all of them.
DEFINITIONS_ENV = settings_loader.variable(settings_loader.DEFINITIONS)
# The takeover's default, as Settings declares it (shown in --help).
STALE_AFTER = settings_loader.default_of("operation_stale_after")


def load_registry(module_name: str) -> Registry:
    """The Registry that *module_name* exposes as REGISTRY; ClickException otherwise."""
    try:
        return loading.load_registry(module_name)
    except loading.DefinitionError as exc:
        raise click.ClickException(str(exc)) from None


@main_group.command("worker")
@database_url_option
@click.option(
    "--definitions",
    "definitions",
    metavar="MODULE",
    help=f"Python module exposing REGISTRY, e.g. pgbus_web.demo.workflows; else {DEFINITIONS_ENV} "
    "or the settings file's definitions (one of them is needed).",
)
@click.option(
    "--poll-interval",
    type=click.FloatRange(min=0.01),
    default=POLL_INTERVAL,
    show_default=True,
    help="Seconds to wait after a look that found nothing due.",
)
@click.option(
    "--sweep-interval",
    type=click.FloatRange(min=0.01),
    default=SWEEP_INTERVAL,
    show_default=True,
    help="Seconds between two sweeps for timed-out waits and stalled steps.",
)
@click.option("--stall-threshold", hidden=True, help="Gone: the stall threshold is a rule of the policy.")
@click.option(
    "--statement-timeout",
    type=click.FloatRange(min=0.1),
    default=db.WORKER_STATEMENT_TIMEOUT,
    show_default=True,
    metavar="SECONDS",
    help=f"A statement, cancelled by the server; the client gives up {db.ANSWER_GRACE}s later "
    "and the tick is tried again.",
)
@click.option(
    "--operation-stale-after",
    type=click.FloatRange(min=0.1),
    metavar="SECONDS",
    help="Take over an operation whose holder has not renewed its heartbeat for this long "
    f"(the setting operation_stale_after; default {STALE_AFTER.total_seconds():g}).",
)
@click.option(
    "--heartbeat-interval",
    type=click.FloatRange(min=0.1),
    default=HEARTBEAT_INTERVAL,
    show_default=True,
    metavar="SECONDS",
    help="Seconds between two writes of this worker's heartbeat (the Workers page); keep it "
    "well below the dashboard's worker_gone_after.",
)
@click.option(
    "--simulate-batches",
    is_flag=True,
    help="Complete fan-out batch jobs over time (for the demo, which has no job runner).",
)
@click.option("-v", "--verbose", is_flag=True, help="Log every failed step.")
@friendly_errors
def worker(
    database_url,
    definitions,
    poll_interval,
    sweep_interval,
    stall_threshold,
    statement_timeout,
    operation_stale_after,
    heartbeat_interval,
    simulate_batches,
    verbose,
):
    """Run due workflow steps until SIGTERM or Ctrl-C.

    Any number of workers may run against one database side by side."""
    if stall_threshold is not None:
        raise click.UsageError(str(moved_to_policy("stall_threshold")))
    loaded = load_settings(definitions=definitions, operation_stale_after=operation_stale_after)
    registry = loaded.settings.registry
    if registry is None:
        raise click.UsageError(command_line.worker_needs_definitions(DEFINITIONS_ENV))
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING, format="%(asctime)s %(name)s %(levelname)s %(message)s"
    )
    # No ping before each transaction: a worker runs two per step, and a
    # connection the server dropped fails that tick, is discarded by the
    # pool, and the next tick gets a fresh one.
    # Only statements are bounded: a step's own code runs outside any wait
    # on the server, however long it takes.
    bounds = db.Bounds(statement=statement_timeout)
    # An operation's chunk acts on operation_runner.PARALLEL runs at once, each on
    # its own connection.
    engine = engine_from(
        database_url, bounds, pool_size=max(2, operation_runner.PARALLEL), max_overflow=0, pool_pre_ping=False
    )
    runner = Worker(
        engine,
        registry,
        poll_interval=poll_interval,
        sweep_interval=sweep_interval,
        thresholds=lambda: policy.current(engine).thresholds(),
        simulate_batches=simulate_batches,
        operation_stale_after=loaded.settings.operation_stale_after,
        heartbeat=Heartbeat(engine, WORKER_KIND, interval=heartbeat_interval),
    )

    def stop(signum, frame):
        runner.stop()

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    click.echo(command_line.worker_running(registry.names, describe_url(engine)))
    try:
        runner.run()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        engine.dispose()
    click.echo(command_line.worker_stopped(runner.total_steps))
