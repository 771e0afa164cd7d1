"""``pgbus-web bulk VERB --filter NAME=VALUE ... --reason TEXT``: one verb
on every run an index filter matches, as a tracked operation.

It prints the preview the dashboard shows (count, by status, what the verb
fits and skips and why, a sample), asks, then does the operation here with
a progress bar. Ctrl-C leaves it queued for any ``pgbus-web worker`` (or a
serving dashboard) to finish. Exit codes: 0 done (or a dry run), 1 refused,
declined, cancelled or left to the workers, 2 bad usage.
"""

from __future__ import annotations

from typing import Iterable

import click

from .. import db, defaults, progress
from ..rules import states
from ..rules import run_filters as index_filters
from ..runtime import errors, operations
from ..runtime.clock import utcnow
from ..core import acts, checks, operation_reads, operation_runs
from ..core.settings import Settings
from .operations import outcome_lines
from .common import actor, database_url_option, engine_from, friendly_errors, input_refused, main_group
from .worker import DEFINITIONS_ENV, load_registry

# The filters the runs index reads (GET /workflows?NAME=VALUE).
FILTER_NAMES = index_filters.NAMES
THRESHOLDS = {"threshold": defaults.STALL_THRESHOLD, "waiting_threshold": defaults.WAITING_THRESHOLD}
# Seconds between two looks at an operation another process is doing.
WATCH_INTERVAL = 0.5


def filter_values(pairs: Iterable[str]) -> dict[str, str]:
    """The --filter NAME=VALUE pairs by name; what they say is checked by
    the filters' strict parse (an unknown name, an empty value)."""
    values: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep:
            raise click.UsageError(f"--filter takes NAME=VALUE with NAME one of {', '.join(FILTER_NAMES)}; got {pair!r}")
        if name in values:
            raise click.UsageError(f"--filter {name} given twice")
        values[name] = value
    return values


def engine_for(database_url: str | None, statement_timeout: float = db.STATEMENT_TIMEOUT):
    """The command's engine: a chunk acts on operations.PARALLEL runs at
    once, each on its own connection, and one more looks at the operation
    between chunks."""
    return engine_from(database_url, db.Bounds(statement=statement_timeout),
                       pool_size=operations.PARALLEL + 1, max_overflow=0)


def describe(preview: operations.Preview) -> list[str]:
    by_status = ", ".join(f"{status} {runs}" for status, runs in preview.by_status.items()) or "none"
    lines = [
        f"{preview.total} runs match {preview.query or '(no filter)'} (up to run id {preview.ceiling_id}): {by_status}.",
        f"{preview.verb} fits {preview.fits}; skips {preview.skipped}.",
    ]
    for skip in preview.skips:
        if skip["why"] == "status":
            lines.append(f"  skipped: {skip['count']} {skip['status']} ({preview.verb} does not apply)")
        else:
            lines.append(f"  skipped: {skip['count']} {skip['workflow_class']} (definition not loaded: --definitions)")
    if preview.sample:
        lines.append("Sample:")
        for run in preview.sample:
            lines.append(f"  {run['workflow_id']}  {run['workflow_class']}  {run['status']}  {run['current_step'] or ''}")
    return lines


def _bar_total(operation) -> int:
    return int(operation["total"])


@main_group.command("bulk")
@database_url_option
@click.argument("verb", type=click.Choice(operations.VERBS))
@click.option("--filter", "filter_pairs", multiple=True, metavar="NAME=VALUE",
              help=f"An index filter ({', '.join(FILTER_NAMES)}); repeat for more.")
@click.option("--reason", required=True, help="Why: recorded on the operation and on every run's audit trail.")
@click.option("--at", help="resume_at, reschedule: when (ISO 8601 with a zone).")
@click.option("--from-step", help="rerun: the step to rerun from (default: the first step).")
@click.option("--name", "signal_name", help="signal: its name.")
@click.option("--payload", help="signal: a JSON object.")
@click.option("--definitions", metavar="MODULE", envvar=DEFINITIONS_ENV, show_envvar=True,
              help="Module exposing REGISTRY (needed by resume, resume_at, skip and rerun).")
@click.option("--statement-timeout", type=click.FloatRange(min=0.01), default=db.STATEMENT_TIMEOUT,
              show_default=True, metavar="SECONDS",
              help="A statement, cancelled by the server: a chunk that fails is tried again, then left queued.")
@click.option("--dry-run", is_flag=True, help="Print the preview; change nothing.")
@click.option("--yes", "-y", is_flag=True, help="Do not ask before starting.")
@friendly_errors
def bulk(database_url, verb, filter_pairs, reason, at, from_step, signal_name, payload, definitions,
         statement_timeout, dry_run, yes):
    """Act on every run an index filter matches, as a tracked operation."""
    try:
        # The checks of the pages' operation form, before anything is read.
        run_filters, parsed = acts.operation_input(
            verb, filter_values(filter_pairs), reason=reason, require_reason=True, now=utcnow(),
            at=at, from_step=from_step, name=signal_name, payload=payload)
    except (index_filters.FilterError, checks.FormError) as problem:
        raise input_refused(problem) from None
    registry = load_registry(definitions) if definitions else None
    params = parsed.params
    # A chunk acts on operations.PARALLEL runs at once, each on its own
    # connection; one more for the look at the operation between chunks.
    engine = engine_for(database_url, statement_timeout)
    try:
        try:
            shown = operations.preview(engine, run_filters, verb, params, registry=registry, thresholds=THRESHOLDS)
        except (errors.WorkflowError, operations.OperationError) as problem:
            raise click.ClickException(str(problem)) from None
        for line in describe(shown):
            click.echo(line)
        if dry_run:
            click.echo("Dry run: nothing changed.")
            return
        if shown.fits == 0:
            raise click.ClickException(f"{verb} fits none of these runs; nothing changed.")
        if not yes and not click.confirm(f"{verb} {shown.fits} runs?", default=False):
            click.echo("Nothing changed.")
            raise SystemExit(1)
        try:
            operation = operations.create(engine, run_filters, verb, params, reason=parsed.reason,
                                          actor=actor(), expected=shown.total, registry=registry,
                                          thresholds=THRESHOLDS)
        except operations.CountChanged as problem:
            raise click.ClickException(
                f"the filter matches {problem.preview.total} runs now, not {problem.expected}: "
                "run the command again to see the fresh preview; nothing changed.") from None
        except (errors.WorkflowError, operations.OperationError) as problem:
            raise click.ClickException(str(problem)) from None
        click.echo(f"Operation {operation['id']} started.")
        final = _run(engine, registry, operation)
        click.echo(f"Operation {final['id']} {final['status']}: moved {final['moved']}, skipped {final['skipped']}, "
                   f"refused {final['refused']} of {final['total']}.")
        _, outcome = operation_reads.with_outcome(engine, Settings(registry=registry), final["id"], utcnow())
        for line in outcome_lines(outcome, final["id"]):
            click.echo(line)
    finally:
        engine.dispose()
    if final["status"] != states.OPERATION_DONE:
        raise SystemExit(1)


def stopped_line(engine, op_id: int, problem: BaseException) -> str:
    """Why this command stopped doing operation *op_id*, and who finishes
    it, in one line."""
    reason = operations.first_line(problem)
    try:
        status = operations.find(engine, op_id)["status"]
    except Exception:  # noqa: BLE001  (the database is away too)
        status = None
    if status == states.OPERATION_QUEUED:
        left = "it is left queued; any `pgbus-web worker` or serving dashboard finishes it"
    elif status in states.OPERATION_OPEN or status is None:
        left = (f"any `pgbus-web worker` or serving dashboard takes it over once its heartbeat is "
                f"{operations.STALE_AFTER.total_seconds():g}s old")
    else:
        left = f"it is {status}"
    return f"Stopped: operation {op_id} failed here ({reason}); {left}."


def _run(engine, registry, operation):
    """Do *operation* here (or watch another process do it) with a bar."""
    op_id = operation["id"]
    bar = progress.bar(total=_bar_total(operation), unit="run", dynamic_ncols=True)
    shown = 0

    def seen(current):
        nonlocal shown
        handled = current["moved"] + current["skipped"] + current["refused"]
        bar.update(max(min(handled, bar.total) - shown, 0))
        shown = max(shown, min(handled, bar.total))

    try:
        return operation_runs.run_to_end(engine, registry, op_id, poll=WATCH_INTERVAL, seen=seen)
    except KeyboardInterrupt:
        bar.close()
        click.echo(f"\nStopped here: operation {op_id} is left queued; any `pgbus-web worker` "
                   "or serving dashboard finishes it.", err=True)
        raise SystemExit(1)
    except Exception as problem:  # noqa: BLE001  (said in one line; the operation is the workers')
        bar.close()
        click.echo(f"\n{stopped_line(engine, op_id, problem)}", err=True)
        raise SystemExit(1)
    finally:
        bar.close()

