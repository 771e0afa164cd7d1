"""pgbus_blocked_executions: jobs parked behind a concurrency limit."""

from __future__ import annotations

from typing import Iterable

import sqlalchemy as sa
from sqlalchemy.engine import Connection

# The payload key under which pgbus carries a job's uniqueness key.
UNIQUENESS_METADATA_KEY = "pgbus_uniqueness_key"

# A parked payload is a JSON object, or (written before pgbus fixed a
# double encoding) a JSON string holding one; the schema's function reads
# the key through either, and gives NULL for a string that is not JSON.
_KEY_PATH = "pgbus_parked_uniqueness_key(payload, :metadata_key)"


def parked_uniqueness_keys(conn: Connection, lock_keys: Iterable[str]) -> set[str]:
    """The keys, out of *lock_keys*, that a parked job carries. A parked job's
    lock stays unbound until it runs and it sits in no queue, so the reaper
    asks here before calling such a row an orphan."""
    keys = list(dict.fromkeys(str(key) for key in lock_keys))
    if not keys:
        return set()
    # IN (unnest) rather than = ANY: once psycopg prepares the statement
    # (a reaper calls this per slice), a generic plan tests = ANY by walking
    # the array for every parked row; the semi-join hashes it.
    rows = conn.execute(
        sa.text(
            f"SELECT DISTINCT {_KEY_PATH} AS lock_key FROM pgbus_blocked_executions "
            f"WHERE {_KEY_PATH} IN (SELECT unnest(CAST(:lock_keys AS text[])))"
        ),
        {"metadata_key": UNIQUENESS_METADATA_KEY, "lock_keys": keys},
    )
    return {lock_key for (lock_key,) in rows}
