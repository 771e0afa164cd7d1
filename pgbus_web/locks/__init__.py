"""Uniqueness locks as an operator sees them: the Locks page's actions, the
reaper, and a seeder for the demo and the benchmarks (their SQL is in
models/uniqueness_keys.py, models/pgmq_queues.py and
models/blocked_executions.py).

A lock (a pgbus_uniqueness_keys row) is in exactly one of these states:

- ``live``: bound to a PGMQ message that still exists;
- ``gone``: bound to a message that no longer exists (or to a queue that
  does not);
- ``parked``: unbound, and a job parked in pgbus_blocked_executions carries
  its key: it binds when that job runs;
- ``fresh``: unbound, acquired within the age floor: probably an enqueue or
  a retry hand-over in flight;
- ``orphan``: unbound past the age floor, and no parked job carries it.
"""

from ..rules.states import LOCK_FRESH as FRESH
from ..rules.states import LOCK_GONE as GONE
from ..rules.states import LOCK_LIVE as LIVE
from ..rules.states import LOCK_ORPHAN as ORPHAN
from ..rules.states import LOCK_PARKED as PARKED
from ..rules.states import LOCK_STATES as STATES

__all__ = ["FRESH", "GONE", "LIVE", "ORPHAN", "PARKED", "STATES"]
