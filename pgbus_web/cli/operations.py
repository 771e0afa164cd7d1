"""``pgbus-web operations show ID``: one operation, its counts and what
became of the runs it acted on (the operation page's and the API's
outcome, from the same core read). ``bulk`` prints the same at its end.
Exit codes: 0 shown, 1 no such operation.
"""

from __future__ import annotations

import click

from ..core import operation_reads
from ..core import representations as rep
from ..core.settings import Settings
from ..runtime.clock import utcnow
from . import output
from .common import database_url_option, engine_from, friendly_errors, main_group

# Each outcome group's words (the page's pgbus.operations.outcomes.*).
KIND_WORDS = {"completed": "completed", "failed": "failed again or cancelled", "stuck": "stuck again",
              "moving": "still running or waiting"}


def outcome_lines(found: operation_reads.Outcome, operation_id: int) -> list[str]:
    """What became of the runs, a line per group and per part with the
    query that lists its runs (GET /runs?..., /workflows?...), and the
    warning when they mostly fail again."""
    lines = []
    if found.mostly_failing:
        lines.append(f"Warning: most of the runs this operation set going fail again: {found.failing} of the "
                     f"{found.settled} that have settled failed or are stuck again on an error.")
    lines.append("What became of the runs it acted on:")
    shown = rep.operation_outcome(found, operation_id)
    for group in shown["groups"]:
        lines.append(f"  {KIND_WORDS[group['kind']]}: {group['total']}")
        for part in group["parts"]:
            lines.append(f"    {part['value']}: {part['count']}  (runs: {part['query']})")
    return lines


@main_group.group("operations")
def operations_group() -> None:
    """Operations: one verb on every run a filter matches."""


@operations_group.command("show")
@database_url_option
@click.argument("operation_id", type=int)
@click.option("--json", "as_json", is_flag=True, help="One JSON object: the API's operation and outcome.")
@friendly_errors
def show(database_url, operation_id, as_json):
    """One operation: verb, filters, status, counts and what became of its runs."""
    engine = engine_from(database_url, pool_size=1, max_overflow=0)
    try:
        found = operation_reads.with_outcome(engine, Settings(), operation_id, utcnow())
    finally:
        engine.dispose()
    if found is None:
        raise click.ClickException(f"no operation {operation_id}")
    operation, outcome = found
    if as_json:
        output.echo_json_lines([{"operation": rep.operation(operation),
                                 "outcome": rep.operation_outcome(outcome, operation["id"])}])
        return
    click.echo(f"Operation {operation['id']}: {operation['verb']} on {operation['filters'] or '(no filter)'}, "
               f"{operation['status']}; moved {operation['moved']}, skipped {operation['skipped']}, "
               f"refused {operation['refused']} of {operation['total']}.")
    click.echo(f"By {operation['actor']}: {operation['reason']}")
    for line in outcome_lines(outcome, operation["id"]):
        click.echo(line)
