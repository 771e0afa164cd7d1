"""``pgbus-web policy ...``: the rules every process and door reads (the
thresholds, the approval rule, the highest rate, redaction, grants), as
the Policy page shows and changes them (docs/policy.md)."""

from __future__ import annotations

import json

import click

from ..core import permissions, policy, policy_changes
from ..core import representations as rep
from ..core.words import command_line, results
from . import output
from .common import (
    database_url_option,
    engine_from,
    friendly_errors,
    input_refused,
    main_group,
    principal,
    refused,
    token_option,
)


def _json(value) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


@main_group.group("policy")
def policy_group() -> None:
    """The policy: the rules every dashboard, worker, command and MCP server reads."""


@policy_group.command("show")
@database_url_option
@click.option("--json", "as_json", is_flag=True, help="One JSON object per rule.")
@friendly_errors
def show(database_url, as_json) -> None:
    """Every rule: its value, whether it is the default, its version, and who changed it last and why."""
    engine = engine_from(database_url)
    try:
        shown = policy_changes.rules(engine)
    finally:
        engine.dispose()
    if as_json:
        output.echo_json_lines([rep.policy_rule(rule) for rule in shown])
        return
    for rule in shown:
        click.echo(command_line.rule_origin(rule, _json(rule["value"])))


def _change(database_url, token, key, value, reason, version, reset) -> None:
    engine = engine_from(database_url)
    try:
        try:
            parsed = None if reset else policy_changes.parse_value(value)
            made = policy_changes.change(
                engine, principal(engine, token), key, parsed, reason=reason, expected_version=version, reset=reset
            )
        except policy.ChangedUnderYou as problem:
            raise refused(problem) from None
        except policy.PolicyError as problem:
            raise input_refused(problem) from None
        except permissions.NotPermitted as problem:
            raise refused(problem) from None
    finally:
        engine.dispose()
    click.echo(command_line.rule_changed(key, _json(made["old_value"]), _json(made["new_value"]), made["id"]))
    click.echo(results.policy_changed(key))


@policy_group.command("set")
@click.argument("key", metavar="RULE")
@click.argument("value", metavar="JSON")
@click.option("--reason", required=True, help="Why: kept in the policy's history with who changed it.")
@click.option(
    "--version",
    type=int,
    default=None,
    help="The version you read (policy show): refused if someone changed the rule since.",
)
@database_url_option
@token_option
@friendly_errors
def set_rule(key, value, reason, version, database_url, token) -> None:
    """Set RULE to JSON, e.g. `policy set stall_threshold 300` or
    `policy set approval '{"threshold": 1000, "verbs": ["cancel"]}'`.
    Needs an admin's token; without a token the command is break-glass."""
    _change(database_url, token, key, value, reason, version, reset=False)


@policy_group.command("reset")
@click.argument("key", metavar="RULE")
@click.option("--reason", required=True, help="Why: kept in the policy's history with who changed it.")
@click.option("--version", type=int, default=None, help="The version you read: refused if the rule changed since.")
@database_url_option
@token_option
@friendly_errors
def reset(key, reason, version, database_url, token) -> None:
    """Put RULE back to its default."""
    _change(database_url, token, key, None, reason, version, reset=True)


@policy_group.command("history")
@click.argument("key", metavar="RULE", required=False)
@database_url_option
@click.option("--json", "as_json", is_flag=True, help="One JSON object per change.")
@friendly_errors
def history(key, database_url, as_json) -> None:
    """The policy's changes, newest first (of RULE alone when given)."""
    engine = engine_from(database_url)
    try:
        try:
            changes = policy_changes.history(engine, key)
        except policy.PolicyError as problem:
            raise input_refused(problem) from None
    finally:
        engine.dispose()
    if as_json:
        output.echo_json_lines([rep.policy_change(change) for change in changes])
        return
    for change in changes:
        click.echo(command_line.rule_history(change, _json(change["old_value"]), _json(change["new_value"])))
