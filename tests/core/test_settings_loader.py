"""The one settings loader (core/settings_loader.py): default < file <
environment < option, each step shown against a control without it; an
unknown key or variable refused by name, never ignored; a bad value
refused with where it came from; the variables other options read left
alone; secrets masked when shown."""

from __future__ import annotations

from datetime import timedelta

import click
import pytest

from pgbus_web.core import settings_loader
from pgbus_web.core.settings import SettingError, Settings
from pgbus_web.core.settings_loader import DEFAULT, ENVIRONMENT, FILE, OPTION, load
from pgbus_web.launch import main_group


def _file(tmp_path, text):
    path = tmp_path / "pgbus-web.toml"
    path.write_text(text)
    return path


def test_each_source_wins_over_the_one_below_it(tmp_path):
    path = _file(tmp_path, "page_size = 20\nrefresh_interval = 4\nworker_gone_after = 20\n")
    environ = {"PGBUS_WEB_PAGE_SIZE": "30", "PGBUS_WEB_WORKER_GONE_AFTER": "25"}

    # Control: nothing given, the default Settings declares.
    bare = load(environ={}, registry=False)
    assert bare.settings.page_size == Settings().page_size == 50
    assert bare.sources["page_size"].kind == DEFAULT
    # The file over the default.
    filed = load(config=path, environ={}, registry=False)
    assert filed.settings.page_size == 20 and filed.sources["page_size"] == settings_loader.Source(FILE, str(path))
    assert filed.settings.worker_gone_after == timedelta(seconds=20)
    # The environment over the file; what it does not name stays the file's.
    over = load(config=path, environ=environ, registry=False)
    assert over.settings.page_size == 30 and over.sources["page_size"].where == "PGBUS_WEB_PAGE_SIZE"
    assert over.settings.refresh_interval == 4 and over.sources["refresh_interval"].kind == FILE
    # An option over the environment; an option not given (None) changes nothing.
    given = load({"page_size": 40, "worker_gone_after": None}, config=path, environ=environ, registry=False)
    assert given.settings.page_size == 40 and given.sources["page_size"] == settings_loader.Source(
        OPTION, "--page-size"
    )
    assert given.settings.worker_gone_after == timedelta(seconds=25)
    assert given.sources["worker_gone_after"].kind == ENVIRONMENT


def test_the_file_is_named_by_the_variable_when_no_option_names_it(tmp_path):
    named = _file(tmp_path, "page_size = 21\n")
    other = tmp_path / "other.toml"
    other.write_text("page_size = 22\n")
    assert load(environ={"PGBUS_WEB_CONFIG": str(named)}, registry=False).settings.page_size == 21
    assert load(config=other, environ={"PGBUS_WEB_CONFIG": str(named)}, registry=False).settings.page_size == 22


def test_text_is_read_by_each_settings_kind():
    loaded = load(
        environ={
            "PGBUS_WEB_RUN_OPERATIONS": "false",
            "PGBUS_WEB_METRICS": "yes",
            "PGBUS_WEB_METRICS_INTERVAL": "2.5",
            "PGBUS_WEB_APPROVAL_VERBS": "cancel, rerun",
            "PGBUS_WEB_APPROVAL_THRESHOLD": "100",
            "PGBUS_WEB_LOCK_AGE_FLOOR": "7200",
            "PGBUS_DATABASE_URL": "postgresql://app@db/app",
            "PGBUS_WEB_PAGE_SIZE": "",  # empty: not given
        },
        registry=False,
    )
    settings = loaded.settings
    assert settings.run_operations is False and settings.metrics is True and settings.metrics_interval == 2.5
    assert settings.approval_verbs == ("cancel", "rerun") and settings.approval_threshold == 100
    assert settings.lock_age_floor == timedelta(hours=2)
    assert settings.database_url == "postgresql://app@db/app"
    assert loaded.sources["database_url"].where == "PGBUS_DATABASE_URL"
    assert loaded.sources["page_size"].kind == DEFAULT


@pytest.mark.parametrize(
    ("environ", "said"),
    [
        (
            {"PGBUS_WEB_PAGE_SIZE": "many"},
            "page_size must be a whole number; got 'many' (environment PGBUS_WEB_PAGE_SIZE)",
        ),
        (
            {"PGBUS_WEB_PAGE_SIZE": "0"},
            "page_size must be a whole number of 1 or more; got 0 (environment PGBUS_WEB_PAGE_SIZE)",
        ),
        ({"PGBUS_WEB_RUN_OPERATIONS": "maybe"}, "run_operations must be true or false"),
        ({"PGBUS_WEB_DEFAULT_LOCALE": "xx"}, "default_locale must be one of the locale codes"),
        ({"PGBUS_WEB_APPROVAL_VERBS": "explode"}, "approval_verbs must be some of"),
        ({"PGBUS_WEB_PAGE_SIZ": "5"}, "unknown pgbus-web setting in the environment: PGBUS_WEB_PAGE_SIZ"),
        ({"PGBUS_WEB_STALL_THRESHOLD": "300"}, "stall_threshold is a rule of the policy now"),
        ({"PGBUS_WEB_DATABASE_URL": "postgresql://x"}, "the variable of database_url is PGBUS_DATABASE_URL"),
    ],
)
def test_a_bad_or_unknown_variable_is_refused_by_name(environ, said):
    with pytest.raises(SettingError) as refused:
        load(environ=environ, registry=False)
    assert said in str(refused.value)


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("page_siz = 5\n", "unknown pgbus-web setting 'page_siz' in the settings file"),
        ("waiting_threshold = 300\n", "waiting_threshold is a rule of the policy now"),
        ("page_size = true\n", "page_size must be a whole number; got True (file "),
        ("connect_timeout = 'soon'\n", "connect_timeout must be a number of seconds; got 'soon' (file "),
        ("page_size = \n", "is not TOML"),
    ],
)
def test_a_bad_or_unknown_key_of_the_file_is_refused_by_name(tmp_path, text, said):
    with pytest.raises(SettingError) as refused:
        load(config=_file(tmp_path, text), environ={}, registry=False)
    assert said in str(refused.value)


def test_a_missing_file_is_refused(tmp_path):
    with pytest.raises(SettingError, match="no pgbus-web settings file at"):
        load(config=tmp_path / "absent.toml", environ={}, registry=False)


def test_definitions_load_the_registry_or_are_refused_with_their_source():
    loaded = load(environ={"PGBUS_WEB_DEFINITIONS": "pgbus_web.demo.workflows"})
    assert loaded.definitions == "pgbus_web.demo.workflows" and loaded.settings.registry is not None
    assert load(environ={"PGBUS_WEB_DEFINITIONS": "pgbus_web.demo.workflows"}, registry=False).settings.registry is None
    with pytest.raises(SettingError, match=r"has no REGISTRY .*\(option --definitions\)"):
        load({"definitions": "pgbus_web.rules.states"}, environ={})


def _envvars(command: click.Command):
    for param in command.params:
        names = param.envvar if isinstance(param.envvar, (list, tuple)) else [param.envvar]
        yield from (name for name in names if name)
    for sub in getattr(command, "commands", {}).values():
        yield from _envvars(sub)


def test_the_variables_other_options_read_are_never_refused():
    found = {name for name in _envvars(main_group) if name.startswith(settings_loader.PREFIX)}
    assert "PGBUS_WEB_TOKEN" in found and "PGBUS_WEB_HOST" in found
    assert found <= settings_loader.OTHER_VARIABLES, found - settings_loader.OTHER_VARIABLES
    load(environ={name: "1" for name in found - {settings_loader.CONFIG_ENV}}, registry=False)


def test_no_option_restates_a_settings_default():
    """An option of a setting has no default of its own: the loader fills it
    (the worker's --statement-timeout is its own bound, not the pages')."""
    commands = {name: main_group.commands[name] for name in ("serve", "worker", "bulk", "workers", "mcp", "config")}
    commands["runs list"] = main_group.commands["runs"].commands["list"]
    commands["locks reap"] = main_group.commands["locks"].commands["reap"]
    for name, command in commands.items():
        ctx = click.Context(command)
        for param in command.params:
            if param.name in settings_loader.KINDS and (name, param.name) != ("worker", "statement_timeout"):
                default = param.get_default(ctx)  # None, or click's mark of "no default"
                assert default is None or type(default).__module__.startswith("click"), (name, param.name)
                assert not param.envvar, (name, param.name)


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://app:s3cret@db:5432/app", "postgresql://app:***@db:5432/app"),
        (
            "postgresql://app@db/app?password=s3cret&sslmode=require",
            "postgresql://app@db/app?password=***&sslmode=require",
        ),
        ("postgres://app@db/app", "postgres://app@db/app"),
        ("host=db password=s3cret", "***"),
    ],
)
def test_a_database_urls_password_is_masked(url, shown):
    assert settings_loader.shown("database_url", url) == shown
    assert "s3cret" not in settings_loader.shown("replica_url", url)


def test_the_secret_key_is_masked_and_durations_are_seconds():
    assert settings_loader.shown("secret_key", "hush") == "***"
    assert settings_loader.shown("secret_key", None) is None
    assert settings_loader.shown("worker_gone_after", timedelta(seconds=30)) == 30
    assert settings_loader.shown("approval_verbs", ("cancel",)) == ["cancel"]


def test_the_blueprint_goes_through_the_same_checks_and_defaults():
    """A host app keeps its keywords and app.config; the values are checked
    as the loader's are, with the same sentence, over the same defaults."""
    from flask import Flask

    from pgbus_web.extension import PgbusWeb

    app = Flask(__name__)
    app.config["PGBUS_WEB_PAGE_SIZE"] = 0
    with pytest.raises(SettingError) as mounted:
        PgbusWeb(run_operations=False).settings_for(app)
    with pytest.raises(SettingError) as loaded:
        load({"page_size": 0}, environ={}, registry=False)
    said = "pgbus-web setting page_size must be a whole number of 1 or more; got 0"
    assert str(mounted.value) == said and str(loaded.value) == f"{said} (option --page-size)"
    settings, _prefix = PgbusWeb(run_operations=False).settings_for(Flask(__name__))
    assert settings == load({"run_operations": False}, environ={}, registry=False).settings
