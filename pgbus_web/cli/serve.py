"""``pgbus-web serve``: the standalone dashboard under waitress."""

from __future__ import annotations

import click

from ..db import describe_url
from .common import database_url_option, engine_from, friendly_errors, main_group

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8080
# waitress worker threads: enough for a handful of operators and HTMX polls.
THREADS = 8


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
@friendly_errors
def serve(database_url, replica_url, host, port, definitions, secret_key, trusted_proxies):
    """Serve the dashboard for one database."""
    import waitress

    from ..app import create_app
    from ..db import Database
    from .worker import load_registry

    registry = load_registry(definitions) if definitions else None
    primary = engine_from(database_url)
    replica = engine_from(replica_url) if replica_url else None
    app = create_app(
        {"database": Database(primary, replica), "registry": registry, "secret_key": secret_key,
         "trusted_proxies": trusted_proxies}
    )
    click.echo(f"Dashboard: http://{host}:{port}/workflows")
    click.echo(f"Database: {describe_url(primary)}")
    waitress.serve(app, host=host, port=port, threads=THREADS, ident="pgbus-web")
