"""The ``pgbus-web`` console script.

Each group of commands lives in its own module and is added here; every
command that takes ``--database-url`` also reads ``PGBUS_DATABASE_URL``.
Failures the operator can fix (a bad URL, a server that does not answer, a
schema of another version) end in one line on stderr and a non-zero exit,
never a traceback.
"""

from __future__ import annotations

from . import (
    bulk,  # noqa: F401  (registers `bulk`)
    database,  # noqa: F401  (registers `db`)
    demo,  # noqa: F401  (registers `demo`)
    locks,  # noqa: F401  (registers `locks`)
    mcp_command,  # noqa: F401  (registers `mcp`)
    prune,  # noqa: F401  (registers `prune`)
    runs,  # noqa: F401  (registers `runs` and `attention`)
    seed,  # noqa: F401  (registers `seed`)
    serve,  # noqa: F401  (registers `serve`)
    tokens,  # noqa: F401  (registers `tokens`)
    users,  # noqa: F401  (registers `users`)
    worker,  # noqa: F401  (registers `worker`)
)
from .common import main_group


def main() -> None:
    main_group(prog_name="pgbus-web")
