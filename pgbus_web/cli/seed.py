"""``pgbus-web seed``: fill a database with generated runs of the demo workflows."""

from __future__ import annotations

import sys

import click

from .. import db
from ..core.words import command_line
from ..demo import seed as seeding
from ..demo.history import seed_history
from .common import database_url_option, engine_from, friendly_errors, main_group


@main_group.command("seed")
@database_url_option
@click.option("--runs", type=click.IntRange(min=1), default=None, help="How many runs to write.")
@click.option(
    "--history",
    type=click.IntRange(min=1),
    default=None,
    help="How many finished runs to add before the last 31 days, by set-based SQL (fast).",
)
@click.option(
    "--history-events/--no-history-events",
    default=True,
    show_default=True,
    help="Whether the --history runs get their events (most of their disk).",
)
@click.option(
    "--seed", "seed_value", type=int, default=None, help="Random seed, for the same runs again (relative to now)."
)
@friendly_errors
def seed(
    database_url: str | None, runs: int | None, history: int | None, history_events: bool, seed_value: int | None
) -> None:
    """Write realistic runs in every status and stuck reason, with their
    steps, events, signals and batches, spread over the last 30 days
    (--runs), and/or finished runs before them (--history)."""
    if runs is None and history is None:
        raise click.UsageError(command_line.runs_or_history())
    engine = engine_from(database_url, db.UNBOUNDED_STATEMENTS)
    try:
        if history is not None:
            past = seed_history(engine, runs=history, progress=sys.stderr.isatty(), events=history_events)
            click.echo(command_line.history_seeded(past))
        if runs is not None:
            result = seeding.seed(engine, runs=runs, seed=seed_value, progress=sys.stderr.isatty())
            click.echo(command_line.runs_seeded(result))
    except seeding.SeedError as exc:
        raise click.ClickException(str(exc)) from None
    finally:
        engine.dispose()
