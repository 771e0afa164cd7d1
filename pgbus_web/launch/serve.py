"""``pgbus-web serve``: the standalone dashboard under waitress."""

from __future__ import annotations

import dataclasses
import ipaddress
import logging
import signal
import sys
from pathlib import Path
from typing import Any

import click

from .. import db, schema
from ..access_log import AccessLog
from ..access_log import log as _access
from ..app import create_app
from ..auth import Auth, UsersFileError, passwords
from ..cli.common import database_url_option, engine_from, friendly_errors, load_settings, main_group
from ..cli.users import USERS_FILE_ENV
from ..cli.worker import DEFINITIONS_ENV
from ..core.settings import Settings
from ..core.settings_loader import REPLICA_URL_ENV, default_of, variable
from ..core.words import command_line
from ..db import describe_url
from ..plumbing import forwarded
from ..progress import MissingExtra
from ..schema import status as schema_status

log = logging.getLogger("pgbus_web.serve")
LOG_FORMAT = "%(asctime)s %(name)s %(levelname)s %(message)s"

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8080
# waitress worker threads: one for each connection the pages' pool can
# hold, and some to spare, so that when every connection waits on a frozen
# database (each wait bounded, docs/web.md) /health and the static files
# still find a thread. Requests beyond that queue until one is free.
SPARE_THREADS = 4
THREADS = db.POOL_SIZE + db.MAX_OVERFLOW + SPARE_THREADS


def check_schema(database_url, install: bool = False) -> None:
    """ClickException naming `pgbus-web db install` unless the database
    holds this release's schema; with *install*, install it first."""
    engine = engine_from(database_url, db.UNBOUNDED_STATEMENTS)
    try:
        if install:
            try:
                result = schema.install(engine)
            except schema.SchemaVersionError as exc:
                raise click.ClickException(str(exc)) from None
            if result.installed:
                click.echo(command_line.schema_installed(result.version))
        with engine.connect() as conn:
            problem = schema_status.problem(conn)
    finally:
        engine.dispose()
    if problem:
        raise click.ClickException(command_line.schema_needed(problem))


def build_app(
    database_url,
    replica_url=None,
    *,
    settings: Settings | None = None,
    trusted_proxies=0,
    trusted_proxy_addresses=(),
    auth=None,
    **values,
):
    """The standalone app for one database, its primary checked with one
    round trip; *settings* the loader's (``serve``'s) or Settings'
    defaults, with *values* (Settings' fields: registry, secret_key, the
    timeouts, ...) over them; *auth* a pgbus_web.auth.Auth (sign-in) or None."""
    settings = dataclasses.replace(settings or Settings(), **values)
    primary = engine_from(database_url, bounds=settings.bounds())
    # The replica unchecked: one that is down at start is read around
    # (pages read the primary) until it answers.
    replica = db.create_engine(replica_url, settings.bounds()) if replica_url else None
    return create_app(
        {
            "settings": settings,
            "database": db.Database(primary, replica, settings.replica_max_lag),
            "trusted_proxies": trusted_proxies,
            "trusted_proxy_addresses": trusted_proxy_addresses,
            "auth": auth,
        }
    )


class Later:
    """A WSGI app given after the socket is bound: a port in use fails
    before any database work."""

    app: Any = None  # the WSGI app, given once the socket is bound

    def __call__(self, environ, start_response):
        return self.app(environ, start_response)


def create_server(app, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT, threads: int = THREADS):
    """A waitress server for *app*, its socket bound (``.run()`` serves
    until closed); a port in use or an address that cannot be bound is a
    one-line ClickException."""
    try:
        import waitress.server
    except ImportError:
        raise click.ClickException(str(MissingExtra("waitress", "standalone"))) from None

    try:
        # waitress would strip X-Forwarded-Proto/-For/-Host/-Port from every
        # peer, its trusted_proxy being a single address; the app decides
        # instead, from --trusted-proxy (plumbing/forwarded.py).
        return waitress.server.create_server(
            app, host=host, port=port, threads=threads, ident="pgbus-web", clear_untrusted_proxy_headers=False
        )
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise click.ClickException(command_line.cannot_listen(host, port, reason)) from None


def serve_until_stopped(server) -> None:
    """Serve until SIGTERM or SIGINT: waitress then stops taking requests and
    gives the ones in flight a few seconds (its task dispatcher's grace).
    A handler of our own, so that it also stops as PID 1 (a container),
    which gets no default action for SIGTERM."""

    def stop(signum, frame):
        raise SystemExit(0)  # waitress's run() ends its loop on it

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        server.run()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        server.close()


def is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def auth_from(host, users_file, trusted_header, trusted_role_header, trusted_proxy, no_auth):
    """The sign-in the options ask for (a pgbus_web.auth.Auth), or None when
    serving without one is allowed: on loopback, or with --no-auth."""
    configured = users_file is not None or bool(trusted_header)
    if no_auth and configured:
        raise click.ClickException(command_line.no_auth_conflict())
    if not configured:
        if not no_auth and not is_loopback(host):
            raise click.ClickException(command_line.open_refused(host))
        return None
    if users_file is not None:
        if passwords.PasswordHasher is None:
            raise click.ClickException(passwords.MISSING)
        if not users_file.is_file():
            raise click.ClickException(command_line.no_users_file(users_file))
    if trusted_role_header and not trusted_header:
        raise click.ClickException(command_line.role_header_alone())
    try:
        auth = Auth(
            users_file,
            trusted_header=trusted_header,
            trusted_role_header=trusted_role_header,
            trusted_proxies=trusted_proxy,
        )
    except (ValueError, UsersFileError) as exc:
        raise click.ClickException(str(exc)) from None
    if auth.users is not None and not auth.users.users() and not trusted_header:
        raise click.ClickException(command_line.no_users(users_file))
    return auth


def _seconds(name: str, help: str, minimum: float = 0.1):
    """An option of a setting in seconds; its default and its variable are
    the setting's (core/settings_loader.py)."""
    setting = name.replace("-", "_")
    return click.option(
        f"--{name}",
        type=click.FloatRange(min=minimum),
        metavar="SECONDS",
        help=f"{help} [default: {default_of(setting):g}; {variable(setting)}]",
    )


@main_group.command("serve")
@database_url_option
@click.option(
    "--replica-url", help=f"Read-only replica the pages may read from; else {REPLICA_URL_ENV} or the settings file's."
)
@click.option(
    "--host",
    default=DEFAULT_HOST,
    show_default=True,
    envvar="PGBUS_WEB_HOST",
    show_envvar=True,
    help="Address to listen on; anything but loopback needs sign-in or --no-auth.",
)
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=DEFAULT_PORT,
    show_default=True,
    envvar=["PGBUS_WEB_PORT", "PORT"],
    show_envvar=True,
    help="0: any free port.",
)
@click.option(
    "--threads",
    type=click.IntRange(min=1),
    default=THREADS,
    show_default=True,
    envvar="PGBUS_WEB_THREADS",
    show_envvar=True,
    help="Requests served at once.",
)
@click.option(
    "--definitions",
    metavar="MODULE",
    help=f"Module exposing REGISTRY: offers the verbs that need a run's step list; else {DEFINITIONS_ENV} "
    "or the settings file's definitions.",
)
@click.option(
    "--secret-key",
    help="Signs sessions and CSRF tokens; give every process behind one address the same "
    f"(otherwise a random key: sign-ins and forms last as long as the process); else {variable('secret_key')} "
    "or the settings file's.",
)
@click.option(
    "--users-file",
    type=click.Path(dir_okay=False, path_type=Path),
    envvar=USERS_FILE_ENV,
    show_envvar=True,
    help="Ask for sign-in: the users of `pgbus-web users add`.",
)
@click.option(
    "--trusted-header",
    metavar="NAME",
    envvar="PGBUS_WEB_TRUSTED_HEADER",
    show_envvar=True,
    help="Take the user's name from this header of an auth proxy (e.g. X-Forwarded-User).",
)
@click.option(
    "--trusted-role-header",
    metavar="NAME",
    envvar="PGBUS_WEB_TRUSTED_ROLE_HEADER",
    show_envvar=True,
    help="The header with the user's role (viewer or operator); else the users file's, else viewer.",
)
@click.option(
    "--trusted-proxy",
    metavar="CIDR",
    multiple=True,
    envvar="PGBUS_WEB_TRUSTED_PROXY",
    show_envvar=True,
    help="Address or network the trusted headers and --trusted-proxies' X-Forwarded-* are "
    "believed from (repeatable; loopback when not given); from anywhere else they are ignored.",
)
@click.option(
    "--no-auth",
    is_flag=True,
    envvar="PGBUS_WEB_NO_AUTH",
    show_envvar=True,
    help="Serve without sign-in on a non-loopback --host: anyone who reaches it may act.",
)
@click.option(
    "--install-schema",
    is_flag=True,
    envvar="PGBUS_WEB_INSTALL_SCHEMA",
    show_envvar=True,
    help="Install the schema first when the database has none.",
)
@click.option(
    "--trusted-proxies",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    envvar="PGBUS_WEB_TRUSTED_PROXIES",
    show_envvar=True,
    metavar="N",
    help="Reverse proxies in front of the server whose X-Forwarded-* headers to believe "
    "(1 behind one TLS proxy), from --trusted-proxy addresses only; 0 ignores those headers.",
)
@click.option(
    "--access-log/--no-access-log",
    default=True,
    show_default=True,
    envvar="PGBUS_WEB_ACCESS_LOG",
    show_envvar=True,
    help="One line per request on stdout, in the format of the other log lines.",
)
@_seconds("connect-timeout", "Opening a database connection (whole seconds, at least 2).", minimum=2)
@_seconds(
    "statement-timeout",
    f"A page's statement, cancelled by the server; the client gives up {db.ANSWER_GRACE}s later.",
)
@_seconds("pool-timeout", "Waiting for a free connection when all are in use.")
@_seconds("health-timeout", "/health in all (its own connection; at least 2s to connect).")
@_seconds(
    "replica-max-lag",
    "Pages read --replica-url only while it is at most this far behind the primary (docs/replica.md).",
    minimum=0,
)
@_seconds("metrics-interval", "/metrics reads the database at most once per this (docs/metrics.md).")
@click.option(
    "--approval-threshold",
    type=click.IntRange(min=0),
    metavar="RUNS",
    help="Also wait for another principal's approval above this many runs of --approval-verbs "
    "(the policy's approval rule applies in any case; this can only add waits).",
)
@click.option(
    "--approval-verbs",
    metavar="VERB,...",
    help="The verbs --approval-threshold applies to (default: every verb).",
)
@friendly_errors
def serve(
    database_url,
    replica_url,
    host,
    port,
    threads,
    definitions,
    secret_key,
    users_file,
    trusted_header,
    trusted_role_header,
    trusted_proxy,
    no_auth,
    install_schema,
    trusted_proxies,
    access_log,
    connect_timeout,
    statement_timeout,
    pool_timeout,
    health_timeout,
    replica_max_lag,
    metrics_interval,
    approval_threshold=None,
    approval_verbs=None,
):
    """Serve the dashboard for one database, until SIGTERM or Ctrl-C.

    Without --users-file or --trusted-header it serves on loopback only
    (or anywhere with --no-auth). The database must hold this release's
    schema (`pgbus-web db install`, or --install-schema)."""
    # Every log line, the access log's too, on stdout in one format.
    logging.basicConfig(stream=sys.stdout, format=LOG_FORMAT)
    if access_log:
        _access.setLevel(logging.INFO)
    auth = auth_from(host, users_file, trusted_header, trusted_role_header, trusted_proxy, no_auth)
    try:
        forwarded.networks(trusted_proxy)
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None
    # Before the socket and the database: a wrong setting (a module name
    # without REGISTRY, a bad value in the file) is the whole answer.
    loaded = load_settings(
        replica_url=replica_url,
        definitions=definitions,
        secret_key=secret_key,
        connect_timeout=connect_timeout,
        statement_timeout=statement_timeout,
        pool_timeout=pool_timeout,
        health_timeout=health_timeout,
        replica_max_lag=replica_max_lag,
        metrics_interval=metrics_interval,
        approval_threshold=approval_threshold,
        approval_verbs=approval_verbs,
    )
    # The socket first: a port in use fails before any database work.
    later = Later()
    server = create_server(later, host, port, threads)
    try:
        check_schema(database_url, install=install_schema)
        app = build_app(
            database_url,
            loaded.settings.replica_url,
            settings=loaded.settings,
            trusted_proxies=trusted_proxies,
            trusted_proxy_addresses=trusted_proxy,
            auth=auth,
        )
    except BaseException:
        server.close()
        raise
    if auth is None and not is_loopback(host):
        log.warning("pgbus-web: serving on %s with no sign-in (--no-auth): anyone who reaches it may act", host)
    click.echo(command_line.dashboard_at(host, server.effective_port))
    click.echo(command_line.database_at(describe_url(app.extensions["pgbus_web"].database.primary)))
    later.app = AccessLog(app) if access_log else app
    try:
        serve_until_stopped(server)
    finally:
        # The operation in hand goes back to the queue before the pool
        # closes, so another process takes it at once (as the demo does).
        operations = app.extensions["pgbus_web"].operations
        if operations is not None:
            operations.stop()
        app.extensions["pgbus_web"].database.dispose()
    click.echo("Stopped.")
