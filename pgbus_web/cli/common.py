"""What every command shares: the group, the --database-url option, and
turning known failures into one-line errors."""

from __future__ import annotations

import functools
import getpass

import click
from sqlalchemy.exc import DBAPIError, OperationalError

from .. import __version__
from ..core import problems
from ..db import DATABASE_URL_ENV, Bounds, DatabaseUrlError, create_engine
from ..progress import MissingExtra


@click.group()
@click.version_option(__version__, prog_name="pgbus-web")
def main_group() -> None:
    """Operator dashboard for pgbus workflows on PostgreSQL."""


database_url_option = click.option(
    "--database-url",
    envvar=DATABASE_URL_ENV,
    show_envvar=True,
    help="PostgreSQL URL, e.g. postgresql://user:pass@localhost:5432/app",
)


def actor() -> str:
    """Who acts from the command line, on the audit trail and an
    operation: ``cli:<os user>``."""
    try:
        return f"cli:{getpass.getuser()}"
    except Exception:  # noqa: BLE001  (no login name in a container)
        return "cli:unknown"


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
        except OperationalError as exc:
            raise click.ClickException(f"cannot reach the database: {first_line(exc)}") from None
        except DBAPIError as exc:
            raise click.ClickException(f"database error: {first_line(exc)}") from None

    return wrapper


class InputRefused(click.UsageError):
    """A refusal of what the command was given, in the refusal table's
    words (core/problems.py: the pages', the API's and MCP's), exit code
    2, without click's usage lines: the option was spelled right, its
    value was not."""

    exit_code = problems.EXIT_INPUT

    def show(self, file=None) -> None:
        click.echo(f"Error: {self.format_message()}", err=True, file=file)


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
