"""Uniqueness locks as an operator sees them: the Locks page's queries, its
actions, the reaper, and a seeder for the demo and the benchmarks.

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

LIVE = "live"
GONE = "gone"
PARKED = "parked"
FRESH = "fresh"
ORPHAN = "orphan"

STATES = (LIVE, GONE, PARKED, FRESH, ORPHAN)
