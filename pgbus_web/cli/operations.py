"""``pgbus-web operations ...``: an operation after it started: show it,
pause it and let it go on, approve one awaiting approval (another
operator than the one who asked), change its pace, cancel it
(docs/operations.md). Refusals in the refusal table's words
(core/problems.py), as the pages and the API say them."""

from __future__ import annotations

import click

from ..core import checks, problems
from ..i18n import t
from ..runtime import operations
from ..runtime.clock import utcnow
from .common import actor, database_url_option, engine_from, friendly_errors, input_refused, main_group


def describe(operation) -> list[str]:
    """An operation in a few lines: status, counts, pace, who held or
    approved it."""
    lines = [
        f"Operation {operation['id']}: {operation['verb']} {operation['status']}, asked by {operation['actor']}: "
        f"moved {operation['moved']}, skipped {operation['skipped']}, refused {operation['refused']} "
        f"of {operation['total']}.",
        "Pace: " + (f"{operation['rate']:g} runs/s" if operation.get("rate") else "as fast as it goes")
        + (f", at most {operation['max_in_flight']} in flight" if operation.get("max_in_flight") else "") + ".",
    ]
    for who, when, words in (("approved_by", "approved_at", "Approved"), ("paused_by", "paused_at", "Paused"),
                             ("resumed_by", "resumed_at", "Went on")):
        if operation.get(who):
            lines.append(f"{words} by {operation[who]} at {operation[when]:%Y-%m-%d %H:%M:%S} UTC.")
    return lines


def _id(value: str) -> int:
    try:
        return checks.operation_id(value)
    except operations.OperationNotFound as problem:
        raise click.ClickException(problems.refusal(problem).message) from None


def _change(database_url, operation_id: str, change, done_key: str) -> None:
    op_id = _id(operation_id)
    engine = engine_from(database_url)
    try:
        try:
            changed = change(engine, op_id)
        except operations.CeilingNotForVerb as problem:
            raise input_refused(problem) from None
        except operations.OperationError as problem:
            raise click.ClickException(problems.refusal(problem).message) from None
    finally:
        engine.dispose()
    click.echo(t(done_key, operation_id=changed["id"]))
    for line in describe(changed):
        click.echo(line)


@main_group.group("operations")
def operations_group() -> None:
    """An operation after it started (`pgbus-web bulk` starts one)."""


@operations_group.command("show")
@click.argument("operation_id")
@database_url_option
@friendly_errors
def show(operation_id, database_url) -> None:
    """Print operation OPERATION_ID."""
    engine = engine_from(database_url)
    try:
        found = operations.find(engine, _id(operation_id))
    except operations.OperationNotFound as problem:
        raise click.ClickException(problems.refusal(problem).message) from None
    finally:
        engine.dispose()
    for line in describe(found):
        click.echo(line)


@operations_group.command("pause")
@click.argument("operation_id")
@database_url_option
@friendly_errors
def pause(operation_id, database_url) -> None:
    """Hold a queued or running operation: no process claims it until `resume`."""
    _change(database_url, operation_id, lambda engine, op: operations.pause(engine, op, actor=actor(), now=utcnow()),
            "pgbus.operations.paused")


@operations_group.command("resume")
@click.argument("operation_id")
@database_url_option
@friendly_errors
def resume(operation_id, database_url) -> None:
    """Let a paused operation go on (any worker or dashboard takes it)."""
    _change(database_url, operation_id, lambda engine, op: operations.go_on(engine, op, actor=actor(), now=utcnow()),
            "pgbus.operations.resumed")


@operations_group.command("approve")
@click.argument("operation_id")
@database_url_option
@friendly_errors
def approve(operation_id, database_url) -> None:
    """Approve an operation awaiting approval (not one you asked for)."""
    _change(database_url, operation_id, lambda engine, op: operations.approve(engine, op, actor=actor(), now=utcnow()),
            "pgbus.operations.approved")


@operations_group.command("cancel")
@click.argument("operation_id")
@database_url_option
@friendly_errors
def cancel(operation_id, database_url) -> None:
    """Stop an operation that has not ended (the runs it acted on stay)."""
    _change(database_url, operation_id, lambda engine, op: operations.cancel(engine, op, now=utcnow()),
            "pgbus.operations.cancelled")


@operations_group.command("set")
@click.argument("operation_id")
@click.option("--rate", help="Runs per second at most; an empty value (--rate '') removes the limit.")
@click.option("--max-in-flight", help="Runs started and not settled at most; '' removes the limit.")
@database_url_option
@friendly_errors
def set_pace(operation_id, rate, max_in_flight, database_url) -> None:
    """Change the pace of an operation that has not ended."""
    try:
        pace = checks.parse_pace(checks.as_form(rate=rate, max_in_flight=max_in_flight))
    except checks.FormError as problem:
        raise input_refused(problem) from None
    if not pace:
        raise click.UsageError("give --rate or --max-in-flight (or both)")
    _change(database_url, operation_id, lambda engine, op: operations.set_pace(engine, op, pace),
            "pgbus.operations.pace_set")
