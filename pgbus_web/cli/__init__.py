"""The command line's commands onto the domain: runs and attention, bulk
operations (bulk, operations show), locks, prune, the database, API tokens, users, seed, the
worker and the settings (config). Each module registers its commands on the one group
(common.main_group); the console script (pgbus_web.launch) adds the
commands that start a server.
"""

from __future__ import annotations

from . import (  # noqa: F401  (register their commands)
    bulk,
    config,
    database,
    locks,
    operations,
    policy,
    prune,
    runs,
    seed,
    sessions,
    tokens,
    users,
    worker,
    workers,
)
