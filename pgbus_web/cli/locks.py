"""``pgbus-web locks ...``: the uniqueness-lock reaper."""

from __future__ import annotations

import click

from .. import db
from ..core.settings_loader import default_of
from ..core.words import command_line
from ..locks import lock_acts
from .common import database_url_option, engine_from, friendly_errors, load_settings, main_group

# A dry run lists this many of the locks it would release, then a count.
LISTED = 20


@main_group.group("locks")
def locks_group() -> None:
    """Inspect and reap uniqueness locks."""


def _listing(plan: lock_acts.ReapPlan) -> list[str]:
    rows = [("orphan", row) for row in plan.orphans] + [("gone", row) for row in plan.gone]
    return command_line.reap_listing(rows, LISTED)


@locks_group.command("reap")
@database_url_option
@click.option("--dry-run", is_flag=True, help="Report what would be released; change nothing.")
@click.option(
    "--older-than",
    type=click.IntRange(min=1),
    metavar="SECONDS",
    help="Age floor: locks acquired more recently are never reaped (the setting lock_age_floor; default "
    f"{default_of('lock_age_floor').total_seconds():g}).",
)
@friendly_errors
def reap(database_url: str | None, dry_run: bool, older_than: int | None) -> None:
    """Release orphaned uniqueness locks.

    Takes locks acquired more than --older-than seconds ago that are unbound
    and carried by no parked job, or bound to a PGMQ message that no longer
    exists. Never a parked job's lock, never one bound to a live message.
    """
    age_floor = load_settings(
        lock_age_floor=older_than, flags={"lock_age_floor": "--older-than"}, registry=False
    ).settings.lock_age_floor
    engine = engine_from(database_url, db.Bounds(statement=db.WORKER_STATEMENT_TIMEOUT))
    try:
        with engine.begin() as conn:
            result = lock_acts.reap(conn, age_floor=age_floor, dry_run=dry_run)
    finally:
        engine.dispose()
    plan = result.plan
    for line in command_line.reap_lines(
        plan,
        floor=command_line.span(age_floor.total_seconds()),
        dry_run=dry_run,
        released=result.released,
        kept=result.kept,
        listing=_listing(plan) if dry_run else (),
    ):
        click.echo(line)
