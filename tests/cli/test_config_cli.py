"""``pgbus-web config`` and the one loader behind every process: what it
prints and masks, the order of the sources through the command line, a
wrong setting stopping a process before it starts, and one settings file
seen alike by serve's app, the worker, a command and the MCP server."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from click.testing import CliRunner

from pgbus_web.cli import worker as worker_command
from pgbus_web.core import worker_reads
from pgbus_web.launch import demo as demo_command
from pgbus_web.launch import main_group
from pgbus_web.launch import serve as serve_command
from pgbus_web.mcp import server as mcp_server

# No database or settings from the machine running the tests; a table wide
# enough for every value (output.table cuts to the terminal's width).
CLEAN = {"PGBUS_DATABASE_URL": None, "PGBUS_WEB_CONFIG": None, "PGBUS_REPLICA_URL": None, "COLUMNS": "400"}


def _config(args, env=None):
    result = CliRunner().invoke(main_group, ["config", *args], env={**CLEAN, **(env or {})})
    return result


def _settings(args, env=None):
    result = _config(["--json", *args], env)
    assert result.exit_code == 0, result.output
    return {row["setting"]: row for row in map(json.loads, result.output.splitlines())}


def test_file_then_environment_then_option_each_over_the_one_below(tmp_path):
    path = tmp_path / "pgbus-web.toml"
    path.write_text('database_url = "postgresql://app@file-host/app"\npage_size = 20\n')
    env = {"PGBUS_DATABASE_URL": "postgresql://app@env-host/app"}
    option = ["--database-url", "postgresql://app@option-host/app"]

    control = _settings([])
    assert control["database_url"]["value"] is None and control["database_url"]["source"] == "default"
    assert control["page_size"] == {
        "setting": "page_size",
        "value": 50,
        "source": "default",
        "from": None,
        "variable": "PGBUS_WEB_PAGE_SIZE",
    }
    filed = _settings(["--config", str(path)])
    assert filed["database_url"]["value"] == "postgresql://app@file-host/app"
    assert (filed["database_url"]["source"], filed["database_url"]["from"]) == ("file", str(path))
    # The variable names the file as --config does.
    assert _settings([], {"PGBUS_WEB_CONFIG": str(path)})["page_size"]["value"] == 20
    environment = _settings(["--config", str(path)], env)
    assert environment["database_url"]["value"] == "postgresql://app@env-host/app"
    assert environment["database_url"]["from"] == "PGBUS_DATABASE_URL"
    assert environment["page_size"]["source"] == "file"
    given = _settings(["--config", str(path), *option], env)
    assert given["database_url"]["value"] == "postgresql://app@option-host/app"
    assert (given["database_url"]["source"], given["database_url"]["from"]) == ("option", "--database-url")


def test_the_table_says_where_each_came_from_and_masks_secrets(tmp_path):
    path = tmp_path / "pgbus-web.toml"
    path.write_text('secret_key = "file-secret"\nrefresh_interval = 3\napproval_verbs = ["cancel", "rerun"]\n')
    result = _config(
        ["--config", str(path), "--database-url", "postgresql://app:db-password@db/app"],
        {"PGBUS_WEB_WORKER_GONE_AFTER": "20", "PGBUS_REPLICA_URL": "postgresql://ro:replica-password@replica/app"},
    )
    assert result.exit_code == 0, result.output
    assert "file-secret" not in result.output and "password@" not in result.output
    lines = result.output.splitlines()
    assert lines[0] == f"Settings file: {path}"
    assert lines[1].split() == ["SETTING", "VALUE", "FROM"]
    rows = {line.split()[0]: line.split(None, 2)[1:] for line in lines[2:]}
    assert rows["database_url"] == ["postgresql://app:***@db/app", "option --database-url"]
    assert rows["replica_url"] == ["postgresql://ro:***@replica/app", "environment PGBUS_REPLICA_URL"]
    assert rows["secret_key"] == ["***", f"file {path}"]
    assert rows["refresh_interval"] == ["3", f"file {path}"]
    assert rows["approval_verbs"] == ["cancel,rerun", f"file {path}"]
    assert rows["worker_gone_after"] == ["20", "environment PGBUS_WEB_WORKER_GONE_AFTER"]
    assert rows["page_size"] == ["50", "default"]
    [unset] = [line for line in lines if line.startswith("approval_threshold ")]
    assert unset.split()[1:] == ["(not", "set)", "default"]
    without = _config([])
    assert without.output.splitlines()[0] == "No settings file (--config or PGBUS_WEB_CONFIG names one)."


@pytest.mark.parametrize(
    ("text", "env", "said"),
    [
        ("page_siz = 5\n", {}, "unknown pgbus-web setting 'page_siz' in the settings file"),
        ("stall_threshold = 300\n", {}, "stall_threshold is a rule of the policy now"),
        ("", {"PGBUS_WEB_PAGE_SIZ": "5"}, "unknown pgbus-web setting in the environment: PGBUS_WEB_PAGE_SIZ"),
        ("", {"PGBUS_WEB_REFRESH_INTERVAL": "soon"}, "(environment PGBUS_WEB_REFRESH_INTERVAL)"),
    ],
)
def test_a_wrong_setting_is_one_sentence_and_nothing_starts(tmp_path, monkeypatch, text, env, said):
    path = tmp_path / "pgbus-web.toml"
    path.write_text(text)
    started = []
    monkeypatch.setattr(serve_command, "create_server", lambda *args, **kwargs: started.append("serve"))
    monkeypatch.setattr(worker_command, "Worker", lambda *args, **kwargs: started.append("worker"))
    monkeypatch.setattr(demo_command, "create_server", lambda *args, **kwargs: started.append("demo"))
    for command in (["config"], ["serve"], ["worker", "--definitions", "pgbus_web.demo.workflows"], ["mcp"]):
        result = CliRunner().invoke(
            main_group,
            [*command, "--config", str(path), "--database-url", "postgresql://nobody@127.0.0.1:1/none"],
            env={**CLEAN, **env},
        )
        assert result.exit_code == 2, (command, result.output)
        assert said in result.output and len(result.output.strip().splitlines()) == 1, result.output
    refused = CliRunner().invoke(main_group, ["demo", "--config", str(path)], env={**CLEAN, **env})
    assert refused.exit_code == 2 and said in refused.output, refused.output
    assert started == []


class _Recorded:
    """Stands in for what a process would run: records what it was given."""

    seen: dict = {}

    def __init__(self, engine=None, registry=None, **kwargs):
        _Recorded.seen["worker"] = (str(engine.url.host), kwargs["operation_stale_after"])
        self.total_steps = 0

    def run(self, *args):
        pass

    def stop(self, *args, **kwargs):
        pass


def test_one_settings_file_is_seen_by_serve_the_worker_a_command_and_mcp(database_url, engine, monkeypatch, tmp_path):
    path = tmp_path / "pgbus-web.toml"
    # The database URL only in the file: every process below reaches it.
    path.write_text(f'database_url = "{database_url}"\noperation_stale_after = 7\nmetrics_interval = 4.5\n')
    host = engine.url.host
    seen = _Recorded.seen
    seen.clear()

    def served(server):
        app = server.application.app
        seen["serve"] = (
            str(app.extensions["pgbus_web"].database.primary.url.host),
            app.extensions["pgbus_web"].settings,
        )

    def built(engine, settings, **kwargs):
        seen["mcp"] = (str(engine.url.host), settings)
        return _Recorded.__new__(_Recorded)

    def listing(engine, settings):
        seen["workers"] = (str(engine.url.host), settings)
        return {"workers": [], "queues": []}

    monkeypatch.setattr(serve_command, "serve_until_stopped", served)
    monkeypatch.setattr(worker_command, "Worker", _Recorded)
    monkeypatch.setattr(mcp_server, "build", built)
    monkeypatch.setattr(worker_reads, "listing", listing)
    for command in (
        ["serve", "--port", "0", "--no-access-log"],
        ["worker", "--definitions", "pgbus_web.demo.workflows"],
        ["workers", "--json"],
        ["mcp"],
    ):
        result = CliRunner().invoke(main_group, [*command, "--config", str(path)], env=CLEAN)
        assert result.exit_code == 0, (command, result.output)
    assert seen["worker"] == (str(host), timedelta(seconds=7))
    for door in ("serve", "workers", "mcp"):
        reached, settings = seen[door]
        assert reached == str(host), door
        assert settings.operation_stale_after == timedelta(seconds=7), door
        assert settings.metrics_interval == 4.5, door
