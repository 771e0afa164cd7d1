"""``pgbus-web runs ...`` and ``pgbus-web attention``: the runs index, one
run, its verbs and signals, and the needs-attention groups, from a shell.

The same reads and verbs as the pages (core/acts.py), acting as
``cli:<os user>``. People get aligned tables cut to the terminal; ``--json``
gives JSON Lines (core/representations.py's shapes, one object a line). Exit
codes: 0 done, 1 refused (no such run, a status the verb does not start
from, a definition not loaded), 2 bad usage (an unknown filter value, a
bad time, payload or step).
"""

from __future__ import annotations

import json
import shlex

import click

from ..core import acts, checks, exports, permissions, policy, problems, redacting
from ..core.compare import CompareRefused
from ..core.settings import Settings
from ..core.settings_loader import default_of
from ..core.words import command_line
from ..rules import run_filters, states, verb_table
from ..runtime import errors
from . import output
from .bulk import filter_values
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
from .worker import DEFINITIONS_ENV

json_option = click.option("--json", "as_json", is_flag=True, help="JSON Lines for scripts, not a table.")
filter_option = click.option(
    "--filter",
    "filter_pairs",
    multiple=True,
    metavar="NAME=VALUE",
    help="An index filter by its name, arg.<path>=VALUE and signal.<path>=VALUE too; repeat for more.",
)
definitions_option = click.option(
    "--definitions",
    metavar="MODULE",
    help="Module exposing REGISTRY: the workflow definitions (resume, resume_at, skip and rerun need them); "
    f"else {DEFINITIONS_ENV} or the settings file's definitions.",
)


def _settings(definitions: str | None, **values) -> Settings:
    """The command's settings (core/settings_loader.py), *values* its options."""
    return load_settings(definitions=definitions, **values).settings


def _refused(problem: Exception, **names) -> click.ClickException:
    """A refusal: exit 2 with the refusal table's sentence when the input
    was wrong, else 1."""
    if isinstance(problem, acts.BAD_INPUT) or problems.is_input(problem):
        return input_refused(problem, **names)
    if isinstance(problem, (permissions.NotPermitted, errors.AttemptsUsedUp)):
        return click.ClickException(problems.refusal(problem, **names).message)
    if isinstance(problem, errors.ClassNotLoaded):
        # The fix is on this command line: say which option it is.
        return click.ClickException(command_line.definitions_needed(problem))
    return click.ClickException(str(problem))


@main_group.group("runs")
def runs_group() -> None:
    """List, show and act on workflow runs."""


# --- runs list -----------------------------------------------------------------


@runs_group.command("list")
@database_url_option
@click.option(
    "--q",
    "q",
    metavar="TEXT",
    help="Search: a run id or its shown prefix, an idempotency key, a subject (any case) or its id.",
)
@click.option("--class", "workflow_class", help="Only runs of this workflow class.")
@click.option("--status", help=f"Only runs in this status ({', '.join(states.RUN)}).")
@click.option("--reason", help=f"Only runs stuck for this reason ({', '.join(states.STUCK_REASONS)}).")
@click.option("--step", help="Only runs whose latest step has this name.")
@click.option("--subject", help='Only runs of this subject: "TYPE" or "TYPE ID".')
@click.option("--error-class", help="Only runs whose latest step failed with this error class.")
@click.option("--no-error-class", is_flag=True, help="Only runs whose latest step has no error class.")
@click.option("--since", help=f"Only runs created within this range ({', '.join(run_filters.RANGES)}).")
@click.option("--from", "created_from", metavar="MOMENT", help="Only runs created at or after (ISO 8601).")
@click.option("--to", "created_to", metavar="MOMENT", help="Only runs created before (ISO 8601).")
@click.option("--operation", type=int, help="Only runs this operation acted on.")
@click.option("--before", type=int, metavar="ID", help="The page older than this run id (the cursor printed).")
@click.option(
    "--limit",
    type=click.IntRange(1, 1000),
    help=f"Runs on the page (default: the setting page_size, {default_of('page_size')}).",
)
@filter_option
@json_option
@definitions_option
@token_option
@friendly_errors
def list_runs(
    database_url,
    q,
    workflow_class,
    status,
    reason,
    step,
    subject,
    error_class,
    no_error_class,
    since,
    created_from,
    created_to,
    operation,
    before,
    limit,
    filter_pairs,
    as_json,
    definitions,
    token=None,
):
    """The runs the index's filters match, newest first."""
    named = {
        "q": q,
        "workflow_class": workflow_class,
        "status": status,
        "reason": reason,
        "step": step,
        "subject": subject,
        "error_class": error_class,
        "no_error_class": run_filters.NO_ERROR_CLASS if no_error_class else None,
        "since": since,
        "from": created_from,
        "to": created_to,
        "operation": operation,
        "before": before,
    }
    pairs = filter_values(filter_pairs)
    for name in pairs:
        if named.get(name) is not None:
            raise click.UsageError(command_line.filter_twice(name))
    try:
        filters = acts.filters_from({**named, **pairs})
    except run_filters.FilterError as problem:
        raise input_refused(problem) from None
    settings = load_settings(definitions=definitions, page_size=limit, flags={"page_size": "--limit"}).settings
    engine = engine_from(database_url, pool_size=1, max_overflow=0)
    try:
        page = acts.runs(engine, settings, _searchable(engine, filters, token))
    finally:
        engine.dispose()
    if as_json:
        output.echo_json_lines(page.runs)
    else:
        output.echo_table(
            ("ID", "CLASS", "STATUS", "STUCK", "STEP", "UPDATED", "WORKFLOW ID"),
            (
                (
                    run["id"],
                    run["workflow_class"],
                    run["status"],
                    run["stuck_reason"],
                    (run["latest_step"] or {}).get("step_name") or run["current_step"],
                    run["updated_at"],
                    run["workflow_id"],
                )
                for run in page.runs
            ),
        )
    if page.next_before is not None:
        click.echo(command_line.more_before(page.next_before), err=True)


def _searchable(engine, filters, token):
    """*filters*, unless they search by a value the policy redacts and the
    token's principal may not reveal it: exit 2 with the sentence."""
    try:
        return redacting.check_search(filters, principal(engine, token), policy.current(engine))
    except run_filters.FilterError as problem:
        raise input_refused(problem) from None


# --- runs export ---------------------------------------------------------------


@runs_group.command("export")
@database_url_option
@click.option(
    "--format",
    "fmt",
    type=click.Choice(tuple(exports.FORMATS)),
    required=True,
    help="csv (a header row of stable column keys) or ndjson (one JSON object a line).",
)
@filter_option
@click.option(
    "-o",
    "--output",
    "output_path",
    type=click.Path(dir_okay=False, writable=True),
    help="Write to this file (default: the standard output).",
)
@token_option
@friendly_errors
def export_runs(database_url, fmt, filter_pairs, output_path, token=None):
    """Every run the filters match, oldest first, up to the highest run id
    when the export starts, streamed in constant memory."""
    try:
        filters = acts.filters_from(filter_values(filter_pairs))
    except run_filters.FilterError as problem:
        raise input_refused(problem) from None
    engine = engine_from(database_url, pool_size=1, max_overflow=0)
    try:
        filters = _searchable(engine, filters, token)
        made = exports.export(engine.connect, load_settings(registry=False).settings, filters, fmt)
        stream = click.open_file(output_path or "-", "wb")
        try:
            for chunk in made.chunks:
                stream.write(chunk)
        finally:
            if output_path:
                stream.close()
    finally:
        engine.dispose()
    if output_path:
        click.echo(command_line.export_written(output_path, made.ceiling_id), err=True)


# --- runs show -----------------------------------------------------------------


def _describe(detail: dict) -> None:
    run = detail["run"]
    status = command_line.status_stuck(run["status"], run["stuck_reason"])
    facts = [
        ("Run", run["workflow_id"]),
        ("Class", run["workflow_class"]),
        ("Status", status),
        ("Step", run["current_step"]),
        ("Subject", " ".join(part for part in (run["subject_type"], run["subject_id"]) if part)),
        ("Created", run["created_at"]),
        ("Updated", run["updated_at"]),
        ("Actions", ", ".join(detail["available_actions"]) or "none"),
        # As the policy shows them: "[redacted]" values unless --reveal.
        ("Arguments", _json_text(run["arguments"])),
    ]
    for line in output.table(("", ""), facts)[1:]:
        click.echo(line)
    attempts = [(group["name"], attempt) for group in detail["steps"] for attempt in group["attempts"]]
    if attempts:
        click.echo("")
        output.echo_table(
            ("STEP", "ATTEMPT", "STATUS", "FINISHED", "ERROR"),
            (
                (
                    name,
                    a["attempt"],
                    a["status"],
                    a["finished_at"],
                    ": ".join(part for part in (a["error_class"], a["error_message"]) if part),
                )
                for name, a in attempts
            ),
        )
    if detail["signals"]:
        click.echo("")
        output.echo_table(
            ("SIGNAL", "STATUS", "RECEIVED", "PAYLOAD"),
            ((s["name"], s["status"], s["created_at"], _json_text(s["payload"])) for s in detail["signals"]),
        )
    if detail["events"]:
        click.echo("")
        output.echo_table(
            ("WHEN", "EVENT", "ACTOR", "STEP", "REASON"),
            ((e["created_at"], e["event"], e["actor"], e["step_name"], e["reason"]) for e in detail["events"]),
        )


@runs_group.command("show")
@database_url_option
@click.argument("workflow_id")
@json_option
@definitions_option
@click.option(
    "--reveal",
    is_flag=True,
    help="Show the values the policy redacts in clear (the reveal power on the run's class); "
    "writes an audit line on the run saying who revealed.",
)
@click.option("--reason", help="With --reveal: why, kept on the audit line.")
@token_option
@friendly_errors
def show(database_url, workflow_id, as_json, definitions, reveal=False, reason=None, token=None):
    """One run: its steps, signals, audit trail and the verbs it allows now."""
    settings = _settings(definitions)
    engine = engine_from(database_url, pool_size=1, max_overflow=0)
    try:
        if reveal:
            detail = acts.reveal(engine, settings, workflow_id, principal=principal(engine, token), reason=reason)
        else:
            detail = acts.run(engine, settings, workflow_id)
    except permissions.NotPermitted as problem:
        raise _refused(problem) from None
    except acts.NotFound:
        raise click.ClickException(problems.run_not_found(workflow_id).message) from None
    finally:
        engine.dispose()
    if as_json:
        output.echo_json_lines([detail])
    else:
        _describe(detail)


# --- runs compare ----------------------------------------------------------------


def _json_text(value) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _describe_comparison(found: dict) -> None:
    click.echo(command_line.divergence(found["divergence"]))
    click.echo(
        "The definition changed between them (digests differ)."
        if found["definition_changed"]
        else "Both started on the same definition."
    )
    click.echo("")
    output.echo_table(
        ("", "A", "B"),
        (
            ("Run", found["a"]["workflow_id"], found["b"]["workflow_id"]),
            ("Class", found["a"]["workflow_class"], found["b"]["workflow_class"]),
            ("Status", found["a"]["status"], found["b"]["status"]),
            ("Digest", found["a"]["definition_digest"], found["b"]["definition_digest"]),
        ),
    )
    changes = found["arguments"]["changes"]
    click.echo("")
    if changes:
        output.echo_table(
            ("PATH", "CHANGE", "A", "B"),
            (
                (
                    row["path"] or "$",
                    row["kind"],
                    _json_text(row["a"]) if row["kind"] != "added" else "",
                    _json_text(row["b"]) if row["kind"] != "removed" else "",
                )
                for row in changes
            ),
        )
    else:
        click.echo(command_line.arguments_identical())
    if found["steps"]:
        click.echo("")
        output.echo_table(
            ("STEP", "A", "B", ""),
            (
                (
                    row["step_name"],
                    command_line.side_words(row["a"]),
                    command_line.side_words(row["b"]),
                    "<- they part" if row["diverges"] else "",
                )
                for row in found["steps"]
            ),
        )


@runs_group.command("compare")
@database_url_option
@click.argument("a_id", metavar="A")
@click.argument("b_id", metavar="B")
@json_option
@definitions_option
@friendly_errors
def compare_runs(database_url, a_id, b_id, as_json, definitions):
    """Two runs side by side: the arguments' diff, the steps, and where they part."""
    settings = _settings(definitions)
    engine = engine_from(database_url, pool_size=1, max_overflow=0)
    try:
        found = acts.compare_runs(engine, settings, a_id, b_id)
    except CompareRefused as problem:
        refusal = problems.refusal(problem)
        if problems.exit_code(refusal) == problems.EXIT_INPUT:
            raise input_refused(problem) from None
        raise click.ClickException(refusal.message) from None
    finally:
        engine.dispose()
    if as_json:
        output.echo_json_lines([found])
    else:
        _describe_comparison(found)


# --- runs VERB -------------------------------------------------------------------


def _after(detail: dict, verb: str, as_json: bool, said: str) -> None:
    """What a verb or a signal answers: its JSON, or the sentence every
    door says (words/done.py) and the run as it is now."""
    if as_json:
        output.echo_json_lines([detail])
        return
    click.echo(said)
    click.echo(command_line.run_now(verb, detail["run"], detail["available_actions"]))


def _verb_command(verb: verb_table.Verb) -> None:
    def command(database_url, workflow_id, reason, definitions, as_json, at=None, from_step=None, token=None):
        settings = _settings(definitions)
        engine = engine_from(database_url, pool_size=1, max_overflow=0)
        try:
            detail, said = acts.act_said(
                engine,
                settings,
                verb.name,
                workflow_id,
                principal=principal(engine, token),
                reason=reason,
                at=at,
                from_step=from_step,
            )
        except (checks.FormError, acts.WorkflowError, permissions.NotPermitted) as problem:
            raise _refused(problem, verb=verb.name, workflow_id=workflow_id) from None
        finally:
            engine.dispose()
        _after(detail, verb.name, as_json, said)

    command.__doc__ = f"{verb.name} one run (from {', '.join(verb.from_statuses)})" + (
        "; needs --definitions." if verb.needs_class else "."
    )
    if verb_table.FROM_STEP in verb.fields:
        command = click.option("--step", "from_step", help="The step to rerun from (default: the first).")(command)
    if verb_table.AT in verb.fields:
        command = click.option("--at", required=True, help="When (ISO 8601 with a zone, in the future).")(command)
    command = json_option(command)
    command = token_option(command)
    command = definitions_option(command)
    command = click.option("--reason", required=True, help="Why: recorded on the run's audit trail.")(command)
    command = click.argument("workflow_id")(command)
    command = database_url_option(command)
    runs_group.command(verb.name)(friendly_errors(command))


for _verb in verb_table.TABLE:
    if _verb.name in acts.REASONED:
        _verb_command(_verb)


@runs_group.command("signal")
@database_url_option
@click.argument("workflow_id")
@click.argument("name")
@click.option("--payload", default="{}", show_default=True, help="A JSON object.")
@click.option("--idempotency-key", help="Sent again with the same key, the signal is stored once.")
@json_option
@definitions_option
@token_option
@friendly_errors
def send_signal(database_url, workflow_id, name, payload, idempotency_key, as_json, definitions, token=None):
    """Send signal NAME to one ongoing run."""
    settings = _settings(definitions)
    engine = engine_from(database_url, pool_size=1, max_overflow=0)
    try:
        result, said = acts.signal_said(
            engine,
            settings,
            workflow_id,
            name,
            payload,
            principal=principal(engine, token),
            idempotency_key=idempotency_key,
        )
    except (checks.FormError, acts.WorkflowError, permissions.NotPermitted) as problem:
        raise _refused(problem, verb=verb_table.SIGNAL, workflow_id=workflow_id) from None
    finally:
        engine.dispose()
    if as_json:
        output.echo_json_lines([result])
        return
    _after(result["run"], "signal", False, said)


# --- attention -------------------------------------------------------------------


@main_group.command("attention")
@database_url_option
@json_option
@definitions_option
@friendly_errors
def attention(database_url, as_json, definitions):
    """The runs that need a person, grouped by class, step, reason and error."""
    settings = _settings(definitions)
    engine = engine_from(database_url, pool_size=1, max_overflow=0)
    try:
        groups = acts.attention(engine, settings)
    finally:
        engine.dispose()
    if as_json:
        output.echo_json_lines(groups)
        return
    if not groups:
        click.echo(command_line.nothing_needs_attention())
        return
    output.echo_table(
        ("RUNS", "CLASS", "STEP", "REASON", "ERROR", "SINCE", "LIST WITH"),
        (
            (
                group["count"],
                group["workflow_class"],
                group["step_name"],
                group["reason"],
                group["error_class"],
                group["first_seen_at"],
                _list_with(group["filters"]),
            )
            for group in groups
        ),
    )


# The runs list options that a group's filters (run_filters.group_query) map to.
_OPTION_OF = {
    "workflow_class": "--class",
    "status": "--status",
    "reason": "--reason",
    "step": "--step",
    "error_class": "--error-class",
    "no_error_class": "--no-error-class",
}


def _list_with(filters: dict) -> str:
    parts = []
    for name, value in filters.items():
        option = _OPTION_OF.get(name)
        if option is None:
            continue
        parts.append(option if name == "no_error_class" else f"{option} {shlex.quote(value)}")
    return " ".join(parts)
