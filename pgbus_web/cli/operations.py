"""``pgbus-web operations ...``: an operation after it started: show it
(its counts and what became of the runs it acted on: the operation page's
and the API's outcome, from the same core read; ``bulk`` prints the same at
its end), pause it and let it go on, approve one awaiting approval (another
operator than the one who asked), change its pace, cancel it
(docs/operations.md). Refusals in the refusal table's words
(core/problems.py), as the pages and the API say them; exit code 1 for a
missing operation or a refusal of its state, 2 for a bad value."""

from __future__ import annotations

import click

from ..core import checks, operation_acts, operation_reads, permissions, problems
from ..core import representations as rep
from ..core.words import command_line, pace, results
from ..runtime import operation_record
from ..runtime.clock import utcnow
from . import output
from .common import (
    database_url_option,
    engine_from,
    friendly_errors,
    input_refused,
    load_settings,
    main_group,
    principal,
    token_option,
)


def outcome_lines(found: operation_reads.Outcome, operation_id: int) -> list[str]:
    """What became of the runs, a line per group and per part with the
    query that lists its runs (GET /runs?..., /workflows?...), and the
    warning when they mostly fail again."""
    return command_line.outcome_lines(
        rep.operation_outcome(found, operation_id),
        mostly_failing=found.mostly_failing,
        failing=found.failing,
        settled=found.settled,
    )


def describe(operation) -> list[str]:
    """An operation in a few lines: status, counts, pace, who held or
    approved it."""
    return command_line.operation_lines(
        operation, pace.described(operation.get("rate"), operation.get("max_in_flight"))
    )


def _id(value: str) -> int:
    try:
        return checks.operation_id(value)
    except operation_record.OperationNotFound as problem:
        raise click.ClickException(problems.refusal(problem).message) from None


def _change(database_url, operation_id: str, change, said, token: str | None = None) -> None:
    """*change*(engine, principal, id) as the principal of *token*
    (break-glass without one); *said*(the operation): results.py's sentence."""
    op_id = _id(operation_id)
    engine = engine_from(database_url)
    try:
        try:
            changed = change(engine, principal(engine, token), op_id)
        except operation_record.CeilingNotForVerb as problem:
            raise input_refused(problem) from None
        except (operation_record.OperationError, permissions.NotPermitted) as problem:
            raise click.ClickException(problems.refusal(problem).message) from None
    finally:
        engine.dispose()
    click.echo(said(changed))
    for line in describe(changed):
        click.echo(line)


@main_group.group("operations")
def operations_group() -> None:
    """An operation after it started (`pgbus-web bulk` starts one)."""


@operations_group.command("show")
@click.argument("operation_id")
@database_url_option
@click.option("--json", "as_json", is_flag=True, help="One JSON object: the API's operation and outcome.")
@friendly_errors
def show(operation_id, database_url, as_json) -> None:
    """Print operation OPERATION_ID and what became of the runs it acted on."""
    op_id = _id(operation_id)
    engine = engine_from(database_url, pool_size=1, max_overflow=0)
    try:
        found = operation_reads.with_outcome(engine, load_settings(registry=False).settings, op_id, utcnow())
    finally:
        engine.dispose()
    if found is None:
        raise click.ClickException(problems.refusal(operation_record.OperationNotFound(op_id)).message)
    operation, outcome = found
    if as_json:
        output.echo_json_lines(
            [{"operation": rep.operation(operation), "outcome": rep.operation_outcome(outcome, operation["id"])}]
        )
        return
    for line in describe(operation):
        click.echo(line)
    click.echo(command_line.filters_and_reason(operation))
    for line in outcome_lines(outcome, operation["id"]):
        click.echo(line)


def _reasoned_change(name: str, act, said):
    """Registers ``operations NAME OPERATION_ID [--reason]``: *act*(engine,
    principal, id, reason=...) through _change, *said* its sentence; the
    function it decorates gives the command's help and nothing else."""

    def register(described) -> click.Command:
        @operations_group.command(name, help=described.__doc__)
        @click.argument("operation_id")
        @click.option("--reason", default=None, help="Why: kept on the operation with who did it.")
        @database_url_option
        @token_option
        @friendly_errors
        def command(operation_id, reason, database_url, token) -> None:
            _change(
                database_url,
                operation_id,
                lambda engine, who, op: act(engine, who, op, reason=reason),
                said,
                token,
            )

        return command

    return register


@_reasoned_change("pause", operation_acts.pause, results.operation_paused)
def pause() -> None:
    """Hold a queued or running operation: no process claims it until `resume`."""


@_reasoned_change("resume", operation_acts.go_on, results.operation_resumed)
def resume() -> None:
    """Let a paused operation go on (any worker or dashboard takes it)."""


@_reasoned_change("approve", operation_acts.approve, results.operation_approved)
def approve() -> None:
    """Approve an operation awaiting approval: with an approver's token
    (--token), never one that token's principal asked for; a command
    without a token cannot approve."""


@_reasoned_change("cancel", operation_acts.cancel, results.operation_cancelled)
def cancel() -> None:
    """Stop an operation that has not ended (the runs it acted on stay)."""


@operations_group.command("set")
@click.argument("operation_id")
@click.option("--rate", help="Runs per second at most; an empty value (--rate '') removes the limit.")
@click.option("--max-in-flight", help="Runs started and not settled at most; '' removes the limit.")
@database_url_option
@token_option
@friendly_errors
def set_pace(operation_id, rate, max_in_flight, database_url, token) -> None:
    """Change the pace of an operation that has not ended."""
    try:
        pace = checks.parse_pace(checks.as_form(rate=rate, max_in_flight=max_in_flight))
    except checks.FormError as problem:
        raise input_refused(problem) from None
    if not pace:
        raise click.UsageError(command_line.pace_missing())
    _change(
        database_url,
        operation_id,
        lambda engine, who, op: operation_acts.set_pace(engine, who, op, pace),
        results.operation_paced,
        token,
    )
