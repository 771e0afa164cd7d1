"""``pgbus-web locks ...``: the uniqueness-lock reaper."""

from __future__ import annotations

import click

from .. import db
from ..core.settings_loader import default_of
from ..locks import actions
from .common import database_url_option, engine_from, friendly_errors, load_settings, main_group

# A dry run lists this many of the locks it would release, then a count.
LISTED = 20


@main_group.group("locks")
def locks_group() -> None:
    """Inspect and reap uniqueness locks."""


def _describe(seconds: float) -> str:
    seconds = int(seconds)
    for unit, size in (("day", 86_400), ("hour", 3_600), ("minute", 60)):
        if seconds >= size and seconds % size == 0:
            count = seconds // size
            return f"{count} {unit}{'s' if count != 1 else ''}"
    return f"{seconds} second{'s' if seconds != 1 else ''}"


def _listing(plan: actions.ReapPlan) -> list[str]:
    rows = [("orphan", row) for row in plan.orphans] + [("gone", row) for row in plan.gone]
    lines = []
    for kind, row in rows[:LISTED]:
        where = row["queue_name"] if kind == "orphan" else f"{row['queue_name']} #{row['msg_id']}"
        lines.append(f"  {kind:<6}  {row['lock_key']}  ({where}, acquired {row['created_at']:%Y-%m-%d %H:%M:%S} UTC)")
    if len(rows) > LISTED:
        lines.append(f"  ... and {len(rows) - LISTED} more")
    return lines


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
            result = actions.reap(conn, age_floor=age_floor, dry_run=dry_run)
    finally:
        engine.dispose()
    plan = result.plan
    floor = _describe(age_floor.total_seconds())
    detail = (
        f"{len(plan.orphans)} unbound with no parked job, {len(plan.gone)} bound to a message that no longer exists"
    )
    if dry_run:
        click.echo(f"Dry run: would release {plan.total} lock(s) older than {floor} ({detail}).")
        for line in _listing(plan):
            click.echo(line)
    else:
        click.echo(f"Released {result.released} lock(s) older than {floor} ({detail}).")
        if result.kept:
            click.echo(f"Kept {result.kept} that moved on while reaping (bound, re-acquired or handed to a retry).")
    if plan.parked:
        click.echo(f"Spared {plan.parked} unbound lock(s) past the floor that a parked job carries.")
