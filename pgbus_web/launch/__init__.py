"""The ``pgbus-web`` console script: the command line's commands (cli/)
and the ones that start a server (serve, demo, mcp), in one group.

Each group of commands lives in its own module and is added to the group
when imported; every command that takes ``--database-url`` also reads
``PGBUS_DATABASE_URL``. Failures the operator can fix (a bad URL, a server
that does not answer, a schema of another version) end in one line on
stderr and a non-zero exit, never a traceback.
"""

from __future__ import annotations

from .. import cli  # noqa: F401  (registers the command line's commands)
from ..cli.common import main_group
from . import demo, mcp_command, serve  # noqa: F401  (register demo, mcp, serve)


def main() -> None:
    main_group(prog_name="pgbus-web")
