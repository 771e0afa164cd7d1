"""``pgbus-web serve``: the standalone dashboard under waitress."""

from __future__ import annotations

import logging

import click

from .. import db
from ..db import describe_url
from .common import database_url_option, engine_from, friendly_errors, main_group

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8080
# waitress worker threads: one for each connection the pages' pool can
# hold, and some to spare, so that when every connection waits on a frozen
# database (each wait bounded, docs/web.md) /health and the static files
# still find a thread. Requests beyond that queue until one is free.
SPARE_THREADS = 4
THREADS = db.POOL_SIZE + db.MAX_OVERFLOW + SPARE_THREADS


def build_app(database_url, replica_url=None, *, definitions=None, secret_key=None, trusted_proxies=0,
              **timeouts):
    """The standalone app for one database, its engines checked with one
    round trip each; *timeouts* are Settings' ``*_timeout`` fields."""
    from ..app import create_app
    from ..web.settings import Settings
    from .worker import load_registry

    registry = load_registry(definitions) if definitions else None
    settings = Settings(registry=registry, secret_key=secret_key, **timeouts)
    primary = engine_from(database_url, bounds=settings.bounds())
    replica = engine_from(replica_url, bounds=settings.bounds()) if replica_url else None
    return create_app(
        {"settings": settings, "database": db.Database(primary, replica), "trusted_proxies": trusted_proxies}
    )


def create_server(app, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT):
    """A waitress server for *app* (``.run()`` serves until closed)."""
    import waitress

    return waitress.create_server(app, host=host, port=port, threads=THREADS, ident="pgbus-web")


def _seconds(name: str, default: float, help: str, minimum: float = 0.1):
    return click.option(
        f"--{name}", type=click.FloatRange(min=minimum), default=default, show_default=True,
        envvar=f"PGBUS_WEB_{name.upper().replace('-', '_')}", metavar="SECONDS", help=help,
    )


@main_group.command("serve")
@database_url_option
@click.option("--replica-url", envvar="PGBUS_REPLICA_URL", help="Read-only replica the pages may read from.")
@click.option("--host", default=DEFAULT_HOST, show_default=True)
@click.option("--port", type=click.IntRange(1, 65535), default=DEFAULT_PORT, show_default=True)
@click.option("--definitions", metavar="MODULE",
              help="Module exposing REGISTRY: offers the verbs that need a run's step list.")
@click.option("--secret-key", envvar="PGBUS_WEB_SECRET_KEY",
              help="Signs sessions and CSRF tokens; give every process behind one address the same.")
@click.option("--trusted-proxies", type=click.IntRange(min=0), default=0, show_default=True,
              envvar="PGBUS_WEB_TRUSTED_PROXIES", metavar="N",
              help="Reverse proxies in front of the server whose X-Forwarded-* headers to believe "
                   "(1 behind one TLS proxy); 0 ignores those headers.")
@_seconds("connect-timeout", db.CONNECT_TIMEOUT, "Opening a database connection (whole seconds, at least 2).",
          minimum=2)
@_seconds("statement-timeout", db.STATEMENT_TIMEOUT,
          f"A page's statement, cancelled by the server; the client gives up {db.ANSWER_GRACE}s later.")
@_seconds("pool-timeout", db.POOL_TIMEOUT, "Waiting for a free connection when all are in use.")
@_seconds("health-timeout", db.HEALTH_TIMEOUT, "/health in all (its own connection; at least 2s to connect).")
@friendly_errors
def serve(database_url, replica_url, host, port, definitions, secret_key, trusted_proxies,
          connect_timeout, statement_timeout, pool_timeout, health_timeout):
    """Serve the dashboard for one database."""
    app = build_app(
        database_url, replica_url, definitions=definitions, secret_key=secret_key,
        trusted_proxies=trusted_proxies, connect_timeout=connect_timeout,
        statement_timeout=statement_timeout, pool_timeout=pool_timeout, health_timeout=health_timeout,
    )
    logging.basicConfig()
    server = create_server(app, host, port)
    click.echo(f"Dashboard: http://{host}:{port}/workflows")
    click.echo(f"Database: {describe_url(app.extensions['pgbus_web'].database.primary)}")
    server.run()
