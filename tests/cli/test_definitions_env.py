"""PGBUS_WEB_DEFINITIONS: the module of workflow definitions from the
environment, for every command that takes --definitions, so that a
container's one environment gives them to serve, the worker and the rest."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from pgbus_web.launch import main_group

# Imports, but has no REGISTRY: each command says so before any database work.
NOT_DEFINITIONS = "pgbus_web.rules.states"
# Nothing listens there: a command that ignored the variable would fail on it.
NOWHERE = "postgresql://nobody@127.0.0.1:1/none"


@pytest.mark.parametrize(
    "command",
    [
        ["serve"],
        ["worker"],
        ["mcp"],
        ["runs", "show", "some-run"],
        ["runs", "resume", "some-run", "--reason", "r"],
        ["attention"],
        ["bulk", "cancel", "--filter", "status=paused", "--reason", "r", "--dry-run"],
    ],
)
def test_every_command_taking_definitions_reads_them_from_the_environment(command):
    result = CliRunner().invoke(
        main_group, [*command, "--database-url", NOWHERE], env={"PGBUS_WEB_DEFINITIONS": NOT_DEFINITIONS}
    )
    # A setting the command cannot use: refused before anything starts.
    assert result.exit_code == 2, result.output
    assert f"{NOT_DEFINITIONS} has no REGISTRY" in result.output
    assert "(environment PGBUS_WEB_DEFINITIONS)" in result.output


@pytest.mark.parametrize("command", [["serve"], ["worker"], ["mcp"], ["runs", "show"], ["bulk"], ["attention"]])
def test_the_help_names_the_variable(command):
    result = CliRunner().invoke(main_group, [*command, "--help"], env={"COLUMNS": "200"})
    assert "PGBUS_WEB_DEFINITIONS" in result.output


def test_runs_show_offers_the_verbs_the_definitions_from_the_environment_allow(database_url, driver):
    workflow_id = driver.paused_on_capture()

    def actions(env):
        result = CliRunner().invoke(
            main_group, ["runs", "show", "--database-url", database_url, workflow_id, "--json"], env=env
        )
        assert result.exit_code == 0, result.output
        return json.loads(result.output.splitlines()[0])["available_actions"]

    assert actions({"PGBUS_WEB_DEFINITIONS": "pgbus_web.demo.workflows"}) == [
        "resume",
        "resume_at",
        "skip",
        "cancel",
        "signal",
    ]
    # A control: without it, only the verbs that need no step list.
    assert actions({}) == ["cancel", "signal"]
