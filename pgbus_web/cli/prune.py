"""``pgbus-web prune``: delete finished runs past a retention period."""

from __future__ import annotations

import re
import sys
from datetime import UTC, datetime, timedelta

import click

from .. import db, progress
from ..core import checks, sessions
from ..core.words import command_line
from ..runtime import retention
from .common import database_url_option, engine_from, friendly_errors, main_group

# The access log is kept a year unless told otherwise: long enough to look
# back on a whole audit period, short enough not to grow without end.
ACCESS_LOG_RETENTION = "365d"
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
_DURATION = re.compile(r"^\s*(\d{1,7})\s*([smhdw])\s*$")


class Duration(click.ParamType):
    """A duration: a whole number and a unit, e.g. 90d, 12h, 30m, 2w."""

    name = "DURATION"

    def convert(self, value, param, ctx):
        if isinstance(value, timedelta):
            return value
        match = _DURATION.match(str(value))
        if not match:
            self.fail(command_line.not_a_duration(value), param, ctx)
        amount, unit = int(match.group(1)), match.group(2)
        if amount == 0:
            self.fail(command_line.duration_zero(), param, ctx)
        period = timedelta(**{_UNITS[unit]: amount})
        try:
            return checks.duration(period, str(value).strip())
        except checks.FormError as problem:
            self.fail(problem.message, param, ctx)


@main_group.command("prune")
@database_url_option
@click.option(
    "--older-than",
    type=Duration(),
    required=True,
    help="Delete finished runs last updated longer ago than this (e.g. 90d, 12h, 2w).",
)
@click.option(
    "--access-log-older-than",
    type=Duration(),
    default=ACCESS_LOG_RETENTION,
    show_default=True,
    help="Also delete access log lines, and ended or expired sessions, older than this.",
)
@click.option("--dry-run", is_flag=True, help="Count what would go; delete nothing.")
@click.option(
    "--batch",
    type=click.IntRange(min=1),
    default=retention.BATCH,
    show_default=True,
    help="Runs deleted per transaction.",
)
@friendly_errors
def prune(database_url, older_than, access_log_older_than, dry_run, batch):
    """Delete finished runs (completed, failed, cancelled) last updated
    before the cutoff, with their steps, events and signals. Never an
    ongoing run."""
    now = datetime.now(UTC)
    before = now - older_than
    cutoff = command_line.moment(before)
    log_before = now - access_log_older_than
    log_cutoff = command_line.moment(log_before)
    engine = engine_from(database_url, db.UNBOUNDED_STATEMENTS)
    try:
        if dry_run:
            result = retention.prune(engine, before=before, dry_run=True)
            lines, old_sessions = sessions.prune(engine, before=log_before, dry_run=True)
            click.echo(command_line.pruned(result.found, cutoff, dry_run=True))
            click.echo(command_line.access_log_pruned(lines, old_sessions, log_cutoff, dry_run=True))
            return
        # A progress bar only on a terminal: in a log it is noise.
        with progress.bar(unit="run", desc="Pruning", disable=not sys.stderr.isatty()) as bar:
            result = retention.prune(engine, before=before, batch=batch, progress=bar.update)
        lines, old_sessions = sessions.prune(engine, before=log_before, batch=batch)
    finally:
        engine.dispose()
    click.echo(command_line.pruned(result.deleted, cutoff, dry_run=False))
    click.echo(command_line.access_log_pruned(lines, old_sessions, log_cutoff, dry_run=False))
