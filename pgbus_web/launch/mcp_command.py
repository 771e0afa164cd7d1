"""``pgbus-web mcp``: the MCP server over stdio (pgbus_web/mcp/server.py,
docs/mcp.md). Read-only unless started with --allow-actions."""

from __future__ import annotations

import click

from ..cli.common import (
    database_url_option,
    engine_from,
    friendly_errors,
    load_settings,
    main_group,
    principal,
    token_option,
)
from ..cli.worker import DEFINITIONS_ENV
from ..core import permissions
from ..mcp import server as mcp_server
from ..progress import MissingExtra


@main_group.command("mcp")
@database_url_option
@click.option(
    "--allow-actions",
    is_flag=True,
    help="Offer the tools that act (verbs, signals, operations), as the principal of --token, with a reason.",
)
@click.option(
    "--definitions",
    metavar="MODULE",
    help="Module exposing REGISTRY: the workflow definitions (resume, resume_at, skip and rerun need them); "
    f"else {DEFINITIONS_ENV} or the settings file's definitions.",
)
@token_option
@friendly_errors
def mcp(database_url, allow_actions, definitions, token):
    """Serve the Model Context Protocol on standard input and output."""
    try:
        import mcp as _sdk  # noqa: F401  (the extra's package, checked before the database)
    except ImportError:
        raise MissingExtra("mcp", "mcp") from None
    settings = load_settings(definitions=definitions).settings
    engine = engine_from(database_url, pool_size=2, max_overflow=0)
    try:
        who = principal(engine, token, permissions.MCP)
        mcp_server.build(
            engine, settings, allow_actions=allow_actions, principal=who, token=token.strip() if token else None
        ).run("stdio")
    finally:
        engine.dispose()
