"""``pgbus-web workers``: the workers and serving processes with their
heartbeat (alive, gone, stopped), then the PGMQ queues' depth."""

from __future__ import annotations

import click

from ..core import worker_reads
from ..core.settings_loader import default_of
from ..core.words import command_line
from . import output
from .common import database_url_option, engine_from, friendly_errors, load_settings, main_group


@main_group.command("workers")
@database_url_option
@click.option("--json", "as_json", is_flag=True, help="JSON Lines for scripts (a worker or a queue a line).")
@click.option(
    "--gone-after",
    type=click.FloatRange(min=0.1),
    metavar="SECONDS",
    help="A heartbeat older than this is gone (the setting worker_gone_after; default "
    f"{default_of('worker_gone_after').total_seconds():g}).",
)
@friendly_errors
def workers(database_url, as_json, gone_after):
    """Workers and serving processes, alive first, and the PGMQ queues."""
    settings = load_settings(
        worker_gone_after=gone_after, flags={"worker_gone_after": "--gone-after"}, registry=False
    ).settings
    engine = engine_from(database_url, pool_size=1, max_overflow=0)
    try:
        found = worker_reads.listing(engine, settings)
    finally:
        engine.dispose()
    if as_json:
        output.echo_json_lines(
            [{"worker": row} for row in found["workers"]] + [{"queue": row} for row in found["queues"]]
        )
        return
    if found["workers"]:
        output.echo_table(
            ("ID", "KIND", "STATE", "HOST", "PID", "STARTED", "LAST HEARTBEAT", "STEPS", "OPERATION", "RUNS HELD"),
            (
                (
                    row["id"],
                    row["kind"],
                    row["state"],
                    row["host"],
                    row["pid"],
                    row["started_at"],
                    row["heartbeat_at"],
                    row["steps_done"],
                    row["operation_id"],
                    row["holding"],
                )
                for row in found["workers"]
            ),
        )
    else:
        click.echo(command_line.no_workers())
    click.echo("")
    if found["queues"]:
        output.echo_table(
            ("QUEUE", "MESSAGES", "VISIBLE", "OLDEST", "OLDEST AGE (S)"),
            (
                (
                    row["queue_name"],
                    row["depth"],
                    row["visible"],
                    row["oldest_enqueued_at"],
                    None if row["oldest_age_seconds"] is None else round(row["oldest_age_seconds"]),
                )
                for row in found["queues"]
            ),
        )
    else:
        click.echo(command_line.no_queues())
