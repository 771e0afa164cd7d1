"""``pgbus-web db ...``: the schema, and the run columns it keeps.

``check`` and ``repair`` also compare the kept run counts (schema/v3.sql)
with count(*) and refill them.

They are for runs whose latest_* columns were written
while the steps' triggers did not fire: a bulk load or a restore with
``session_replication_role = replica``, or a database used under schema
version 1 (which missed deleted and moved steps). Both walk the runs in
batches by id; ``repair`` writes each batch in its own short transaction,
so it can run beside the workers.
"""

from __future__ import annotations

import sys

import click
from sqlalchemy.engine import Engine

from .. import db, progress, schema
from ..core import policy
from ..core.words import command_line
from ..runtime import upkeep
from ..runtime.upkeep import BATCH_SIZE
from .common import database_url_option, engine_from, friendly_errors, main_group

# Example runs `db check` names.
EXAMPLES = 10

batch_size_option = click.option(
    "--batch-size",
    type=click.IntRange(min=1),
    default=BATCH_SIZE,
    show_default=True,
    help="Runs per batch (each batch of a repair is its own transaction).",
)


@main_group.group("db")
def db_group() -> None:
    """Install the schema; check and repair the runs' latest-step columns and counts."""


def _repair(engine: Engine, batch_size: int) -> tuple[int, int]:
    """Fix every run's latest_* columns, with a progress bar on a terminal:
    (runs fixed, runs seen)."""
    with progress.bar(
        total=upkeep.total_runs(engine), unit="run", desc="Repairing", disable=None, file=sys.stderr
    ) as bar:
        return upkeep.repair_latest(engine, batch_size, done=bar.update)


@db_group.command("install")
@database_url_option
@batch_size_option
@friendly_errors
def install(database_url: str | None, batch_size: int) -> None:
    """Install PGMQ and the pgbus tables, or upgrade an older schema (idempotent)."""
    engine = engine_from(database_url, db.UNBOUNDED_STATEMENTS)
    try:
        try:
            result = schema.install(engine)
        except schema.SchemaVersionError as exc:
            raise click.ClickException(str(exc)) from None
        if result.upgraded_from is not None:
            click.echo(command_line.schema_upgraded(result.upgraded_from, result.version))
            # Version 1 missed deleted and moved steps: its runs may carry
            # columns that version 2 would not have left.
            if result.upgraded_from < 2:
                fixed, seen = _repair(engine, batch_size)
                click.echo(command_line.latest_steps_repaired(fixed, seen))
        elif result.installed:
            click.echo(command_line.schema_installed(result.version))
        else:
            click.echo(command_line.schema_current(result.version))
    finally:
        engine.dispose()


@db_group.command("check")
@database_url_option
@batch_size_option
@click.option(
    "--examples",
    type=click.IntRange(min=0),
    default=EXAMPLES,
    show_default=True,
    help="How many of the disagreeing runs to name.",
)
@friendly_errors
def check(database_url: str | None, batch_size: int, examples: int) -> None:
    """Report runs whose latest-step columns disagree with their latest step,
    and run counts that disagree with the runs (exit status 1 when any do).
    Changes nothing."""
    engine = engine_from(database_url, db.UNBOUNDED_STATEMENTS)
    try:
        with progress.bar(
            total=upkeep.total_runs(engine), unit="run", desc="Checking", disable=None, file=sys.stderr
        ) as bar:
            found = upkeep.check(engine, batch_size, examples, done=bar.update)
    finally:
        engine.dispose()
    seen, wrong, named, counts = found.seen, found.wrong, found.named, found.counts
    click.echo(command_line.latest_steps_checked(seen, wrong))
    if wrong:
        for workflow_id in named:
            click.echo(f"  {workflow_id}")
    if not counts:
        click.echo(command_line.counts_agree())
    else:
        click.echo(command_line.counts_disagree(len(counts)))
        for (klass, status), (kept, counted) in counts.items():
            click.echo(command_line.run_count_kept(klass, status, kept, counted))
    attention = found.attention
    if not attention:
        click.echo(command_line.attention_agrees())
    else:
        click.echo(command_line.attention_disagrees(len(attention)))
        for key, (kept, counted) in attention.items():
            click.echo(command_line.count_kept(key, kept, counted))
    engine = engine_from(database_url)
    try:
        broken = policy.stored_problems(engine)
    finally:
        engine.dispose()
    if not broken:
        click.echo(command_line.policy_readable())
    else:
        click.echo(command_line.policy_unreadable(len(broken)))
        for key, problem in broken:
            click.echo(f"  {key}: {problem}")
    if wrong or counts or attention or broken:
        sys.exit(1)


@db_group.command("repair")
@database_url_option
@batch_size_option
@friendly_errors
def repair(database_url: str | None, batch_size: int) -> None:
    """Recompute the latest-step columns of every run that disagrees with its
    latest step, in batches, then refill the run counts that disagree with
    the runs (idempotent)."""
    engine = engine_from(database_url, db.UNBOUNDED_STATEMENTS)
    try:
        fixed, seen = _repair(engine, batch_size)
        counts = upkeep.repair_counts(engine)
        attention = upkeep.repair_attention(engine)
    finally:
        engine.dispose()
    click.echo(command_line.latest_steps_repaired(fixed, seen))
    click.echo(command_line.counts_refilled(counts))
    click.echo(command_line.attention_refilled(attention))
