"""What every command shares: the group, the --database-url option, and
turning known failures into one-line errors."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
from sqlalchemy.exc import DBAPIError, OperationalError

from .. import __version__
from ..core import permissions, policy, problems, settings_loader, tokens
from ..core.settings import SettingError
from ..core.words import command_line
from ..db import DATABASE_URL_ENV, Bounds, DatabaseUrlError, create_engine
from ..progress import MissingExtra


@click.group()
@click.version_option(__version__, prog_name="pgbus-web")
def main_group() -> None:
    """Operator dashboard for pgbus workflows on PostgreSQL."""


# A command's settings come from one loader (core/settings_loader.py):
# defaults, the --config file, the environment, then the options. The
# context keeps the file and the options naming a setting, so that
# load_settings() merges them wherever the command asks.
_CONFIG = "pgbus_web.config"
_OPTIONS = "pgbus_web.options"


def _remember_config(ctx: click.Context, param: click.Parameter, value: Path | None) -> Path | None:
    if value is not None:
        ctx.meta[_CONFIG] = value
    return value


def load_settings(
    *, flags: dict[str, str] | None = None, registry: bool = True, **options: Any
) -> settings_loader.Loaded:
    """This command's settings: *options* (by setting name, None when not
    given) over the environment over the settings file over the defaults;
    a wrong one is the command's one-line error, before anything starts."""
    ctx = click.get_current_context()
    merged = {**ctx.meta.get(_OPTIONS, {}), **options}
    try:
        return settings_loader.load(merged, config=ctx.meta.get(_CONFIG), flags=flags, registry=registry)
    except SettingError as exc:
        raise InputRefused(str(exc)) from None


def _database_url(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """The database URL the loader settles on: the option, else
    PGBUS_DATABASE_URL, else the settings file's. Every setting is
    checked here, so a wrong one stops any command that opens the database."""
    ctx.meta.setdefault(_OPTIONS, {})["database_url"] = value
    if ctx.resilient_parsing:
        return value
    return load_settings(registry=False).settings.database_url


config_option = click.option(
    "--config",
    type=click.Path(dir_okay=False, path_type=Path),
    metavar="FILE",
    is_eager=True,
    expose_value=False,
    callback=_remember_config,
    help=f"A settings file (TOML: docs/settings.md); else {settings_loader.CONFIG_ENV}'s.",
)


def database_url_option(func: Callable[..., Any]) -> Callable[..., Any]:
    """--database-url and --config, the two every command that opens the database takes."""
    func = click.option(
        "--database-url",
        callback=_database_url,
        help=f"PostgreSQL URL, e.g. postgresql://user:pass@localhost:5432/app; else {DATABASE_URL_ENV} "
        "or the settings file's database_url.",
    )(func)
    return config_option(func)


TOKEN_ENV = "PGBUS_WEB_TOKEN"

token_option = click.option(
    "--token",
    envvar=TOKEN_ENV,
    show_envvar=True,
    metavar="TOKEN",
    help="An API token (`pgbus-web tokens add`): the command acts as its principal, with its role and the "
    "policy's grants. Without one it is break-glass: written so on every audit line, and never able to approve.",
)


def principal(engine, token: str | None, door: str = permissions.CLI) -> permissions.Principal:
    """Who a command acts as: the principal of *token*, proven by its hash
    in the database; break-glass without one. The login name of the shell
    is never taken for an identity."""
    # A command reads the policy as it is now, never one its process kept
    # from an earlier command (a server's engine is not made here).
    policy.forget(engine)
    if not token:
        return permissions.break_glass(door)
    found = tokens.check(engine, token.strip())
    if found is None:
        raise click.ClickException(problems.token_refused(tokens.refused(engine, token.strip())).message)
    return found.principal(door)


def refused(problem: Exception) -> click.ClickException:
    """A refusal of the refusal table that is not of the input (403, 404,
    409): its sentence, exit code 1."""
    return click.ClickException(problems.refusal(problem).message)


def first_line(exc: BaseException) -> str:
    text = str(getattr(exc, "orig", None) or exc).strip()
    return text.splitlines()[0] if text else exc.__class__.__name__


def friendly_errors(func):
    """Known failures become ``Error: <what failed>`` and exit code 1."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except (DatabaseUrlError, MissingExtra) as exc:
            raise click.ClickException(str(exc)) from None
        except SettingError as exc:
            raise InputRefused(str(exc)) from None
        except OperationalError as exc:
            raise click.ClickException(command_line.unreachable(first_line(exc))) from None
        except DBAPIError as exc:
            raise click.ClickException(command_line.database_error(first_line(exc))) from None

    return wrapper


class InputRefused(click.UsageError):
    """A refusal of what the command was given, in the refusal table's
    words (core/problems.py: the pages', the API's and MCP's), exit code
    2, without click's usage lines: the option was spelled right, its
    value was not."""

    exit_code = problems.EXIT_INPUT

    def show(self, file=None) -> None:
        click.echo(command_line.error(self.format_message()), err=True, file=file)


def input_refused(problem: Exception, **names) -> click.ClickException:
    """*problem* (a checks.FormError, run_filters.FilterError or the
    runtime's refusal of an input) as the command's error."""
    return InputRefused(problems.refusal(problem, **names).message)


def engine_from(database_url: str | None, bounds: Bounds | None = None, **kwargs):
    """An engine for a command, checked with one round trip so that an
    unreachable server fails here, with a one-line message. *bounds*: how
    long it waits on the server (pgbus_web.db; the pages' by default)."""
    engine = create_engine(database_url, bounds, **kwargs)
    with engine.connect() as conn:
        conn.exec_driver_sql("SELECT 1")
    return engine
