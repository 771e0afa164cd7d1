"""The ``pgbus-web`` console script.

Each group of commands lives in its own module and is added here; every
command that takes ``--database-url`` also reads ``PGBUS_DATABASE_URL``.
Failures the operator can fix (a bad URL, a server that does not answer, a
schema of another version) end in one line on stderr and a non-zero exit,
never a traceback.
"""

from __future__ import annotations

from .common import main_group
from . import database  # noqa: F401  (registers `db`)
from . import locks  # noqa: F401  (registers `locks`)
from . import worker  # noqa: F401  (registers `worker`)
from . import serve  # noqa: F401  (registers `serve`)
from . import demo  # noqa: F401  (registers `demo`)
from . import seed  # noqa: F401  (registers `seed`)


def main() -> None:
    main_group(prog_name="pgbus-web")
