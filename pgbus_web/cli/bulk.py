"""``pgbus-web bulk VERB --filter NAME=VALUE ... --reason TEXT``: one verb
on every run an index filter matches, as a tracked operation.

It prints the preview the dashboard shows (count, by status, what the verb
fits and skips and why, a sample), asks, then does the operation here with
a progress bar. Ctrl-C leaves it queued for any ``pgbus-web worker`` (or a
serving dashboard) to finish. Exit codes: 0 done (or a dry run), 1 refused,
declined, cancelled or left to the workers, 2 bad usage.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterable

import click

from .. import db, progress
from ..core import acts, checks, operation_acts, operation_reads, operation_runs, permissions
from ..core.settings_loader import default_of
from ..core.words import command_line, pace, results
from ..rules import run_filters as index_filters
from ..rules import states
from ..runtime import errors, operation_preview, operation_record, operation_runner
from ..runtime.clock import utcnow
from .common import (
    database_url_option,
    engine_from,
    friendly_errors,
    input_refused,
    load_settings,
    main_group,
    principal,
    refused,
    token_option,
)
from .operations import outcome_lines
from .worker import DEFINITIONS_ENV

# The filters the runs index reads (GET /workflows?NAME=VALUE).
FILTER_NAMES = index_filters.NAMES
# Seconds between two looks at an operation another process is doing.
WATCH_INTERVAL = 0.5


def filter_values(pairs: Iterable[str]) -> dict[str, str]:
    """The --filter NAME=VALUE pairs by name; what they say is checked by
    the filters' strict parse (an unknown name, an empty value)."""
    values: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep:
            raise click.UsageError(command_line.filter_pair_malformed(FILTER_NAMES, pair))
        if name in values:
            raise click.UsageError(command_line.filter_twice(name))
        values[name] = value
    return values


def engine_for(database_url: str | None, statement_timeout: float = db.STATEMENT_TIMEOUT):
    """The command's engine: a chunk acts on operation_runner.PARALLEL runs at
    once, each on its own connection, and one more looks at the operation
    between chunks."""
    return engine_from(
        database_url, db.Bounds(statement=statement_timeout), pool_size=operation_runner.PARALLEL + 1, max_overflow=0
    )


def describe(preview: operation_preview.Preview) -> list[str]:
    return command_line.preview_lines(preview)


def pace_words(asked, runs: int) -> list[str]:
    """The pace asked for, as the preview says it (the page's and the API's words)."""
    return pace.pace_lines(asked.get("rate"), asked.get("max_in_flight"), runs)


def _bar_total(operation) -> int:
    return int(operation["total"])


@main_group.command("bulk")
@database_url_option
@click.argument("verb", type=click.Choice(operation_record.VERBS))
@click.option(
    "--filter",
    "filter_pairs",
    multiple=True,
    metavar="NAME=VALUE",
    help=f"An index filter ({', '.join(FILTER_NAMES)}); repeat for more.",
)
@click.option("--reason", required=True, help="Why: recorded on the operation and on every run's audit trail.")
@click.option("--at", help="resume_at, reschedule: when (ISO 8601 with a zone).")
@click.option("--from-step", help="rerun: the step to rerun from (default: the first step).")
@click.option("--name", "signal_name", help="signal: its name.")
@click.option("--payload", help="signal: a JSON object.")
@click.option(
    "--definitions",
    metavar="MODULE",
    help=f"Module exposing REGISTRY (needed by resume, resume_at, skip and rerun); else {DEFINITIONS_ENV} "
    "or the settings file's definitions.",
)
@click.option(
    "--statement-timeout",
    type=click.FloatRange(min=0.01),
    metavar="SECONDS",
    help="A statement, cancelled by the server: a chunk that fails is tried again, then left queued "
    f"(the setting statement_timeout; default {default_of('statement_timeout'):g}).",
)
@click.option("--rate", help="Runs per second at most (e.g. 50 or 0.5); changeable later (`pgbus-web operations set`).")
@click.option("--max-in-flight", help="Runs it started whose step is still scheduled or running, at most.")
@click.option(
    "--approval-threshold",
    type=int,
    help="Also wait for another principal's approval above this many runs of --approval-verbs (the "
    "policy's approval rule applies in any case).",
)
@click.option(
    "--approval-verbs",
    metavar="VERB,...",
    help="The verbs --approval-threshold applies to (default: every verb).",
)
@click.option("--dry-run", is_flag=True, help="Print the preview; change nothing.")
@click.option("--yes", "-y", is_flag=True, help="Do not ask before starting.")
@token_option
@friendly_errors
def bulk(
    database_url,
    verb,
    filter_pairs,
    reason,
    at,
    from_step,
    signal_name,
    payload,
    definitions,
    statement_timeout,
    dry_run,
    yes,
    rate=None,
    max_in_flight=None,
    approval_threshold=None,
    approval_verbs=None,
    token=None,
):
    """Act on every run an index filter matches, as a tracked operation."""
    try:
        # The checks of the pages' operation form, before anything is read.
        run_filters, parsed = acts.operation_input(
            verb,
            filter_values(filter_pairs),
            reason=reason,
            require_reason=True,
            now=utcnow(),
            at=at,
            from_step=from_step,
            name=signal_name,
            payload=payload,
            rate=rate,
            max_in_flight=max_in_flight,
        )
    except (index_filters.FilterError, checks.FormError) as problem:
        raise input_refused(problem) from None
    # The approval options (or PGBUS_WEB_APPROVAL_*, or the settings file)
    # add to the policy's approval: they can make an operation wait, never
    # spare it the policy's wait.
    command_settings = load_settings(
        definitions=definitions,
        statement_timeout=statement_timeout,
        approval_threshold=approval_threshold,
        approval_verbs=approval_verbs,
    ).settings
    own_threshold, own_verbs = command_settings.approval_threshold, command_settings.approval_verbs
    params = parsed.params
    # A chunk acts on operation_runner.PARALLEL runs at once, each on its own
    # connection; one more for the look at the operation between chunks.
    engine = engine_for(database_url, command_settings.statement_timeout)
    try:
        who = principal(engine, token)
        approval = operation_acts.approval(engine, threshold=own_threshold, verbs=own_verbs)
        try:
            shown = operation_acts.preview(engine, command_settings, who, run_filters, verb, params)
        except permissions.NotPermitted as problem:
            raise refused(problem) from None
        except (errors.WorkflowError, operation_record.OperationError) as problem:
            raise click.ClickException(str(problem)) from None
        for line in describe(shown):
            click.echo(line)
        for line in pace_words(parsed.pace, shown.fits):
            click.echo(line)
        if approval.needed(shown.verb, shown.fits):
            click.echo(command_line.will_wait_for_approval())
        if dry_run:
            click.echo(command_line.dry_run_done())
            return
        if shown.fits == 0:
            raise click.ClickException(command_line.fits_none(verb))
        if not yes and not click.confirm(command_line.confirm(verb, shown.fits), default=False):
            click.echo(command_line.nothing_done())
            raise SystemExit(1)
        try:
            operation = operation_acts.start(
                engine,
                command_settings,
                who,
                run_filters,
                verb,
                params,
                reason=parsed.reason,
                expected=shown.total,
                approval_threshold=own_threshold,
                approval_verbs=own_verbs,
                **parsed.pace,
            )
        except operation_record.CeilingNotForVerb as problem:
            raise input_refused(problem) from None
        except (operation_record.CountChanged, permissions.NotPermitted, operation_acts.RateAbovePolicy) as problem:
            raise refused(problem) from None
        except (errors.WorkflowError, operation_record.OperationError) as problem:
            raise click.ClickException(str(problem)) from None
        if operation["status"] == states.OPERATION_AWAITING_APPROVAL:
            click.echo(results.operation_created(operation))
            click.echo(command_line.how_to_approve(operation["id"]))
            raise SystemExit(1)
        click.echo(results.operation_created(operation))
        final = _run(engine, command_settings.registry, operation)
        click.echo(command_line.operation_counts(final))
        held = held_line(final)
        if held:
            click.echo(held)
        found = operation_reads.with_outcome(engine, command_settings, final["id"], utcnow())
        if found is not None:  # None only when pruned meanwhile
            for line in outcome_lines(found[1], final["id"]):
                click.echo(line)
    finally:
        engine.dispose()
    if final["status"] != states.OPERATION_DONE:
        raise SystemExit(1)


def held_line(operation) -> str | None:
    """What a command whose operation was paused or cancelled by someone
    else says: by whom, and for a pause how it goes on and who finishes it
    (not this command, which has ended)."""
    if operation["status"] in (states.OPERATION_PAUSED, states.OPERATION_CANCELLED):
        return command_line.held_elsewhere(operation, paused=operation["status"] == states.OPERATION_PAUSED)
    return None


def stopped_line(engine, op_id: int, problem: BaseException) -> str:
    """Why this command stopped doing operation *op_id*, and who finishes
    it, in one line."""
    reason = operation_runner.first_line(problem)
    try:
        status = operation_record.find(engine, op_id)["status"]
    except Exception:  # noqa: BLE001  (the database is away too)
        status = None
    return command_line.stopped(
        op_id,
        reason,
        status,
        queued=status == states.OPERATION_QUEUED,
        open_=status in states.OPERATION_OPEN or status is None,
        stale_after=operation_runner.STALE_AFTER.total_seconds(),
    )


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

    # The first Ctrl-C asks for a stop between chunks: the chunk in hand
    # commits, then the operation is handed back. The handler is installed
    # here rather than left to Python's, which a process started in the
    # background never gets (SIGINT arrives ignored, and stays so): the
    # command then ran its operation to the end. A second Ctrl-C
    # interrupts at once.
    interrupted = threading.Event()
    previous = None
    if threading.current_thread() is threading.main_thread():

        def ask_stop(signum, frame):
            interrupted.set()
            signal.signal(signal.SIGINT, signal.default_int_handler)

        previous = signal.signal(signal.SIGINT, ask_stop)
    try:
        return operation_runs.run_to_end(
            engine, registry, op_id, poll=WATCH_INTERVAL, seen=seen, stopping=interrupted.is_set
        )
    except KeyboardInterrupt:
        bar.close()
        click.echo("\n" + command_line.interrupted(op_id), err=True)
        raise SystemExit(1) from None
    except Exception as problem:  # noqa: BLE001  (said in one line; the operation is the workers')
        bar.close()
        click.echo("\n" + stopped_line(engine, op_id, problem), err=True)
        raise SystemExit(1) from None
    finally:
        bar.close()
        if threading.current_thread() is threading.main_thread():
            # What was there before (None: a handler not set from Python).
            signal.signal(signal.SIGINT, previous if previous is not None else signal.default_int_handler)
