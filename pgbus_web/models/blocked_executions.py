"""pgbus_blocked_executions: jobs parked behind a concurrency limit."""

from __future__ import annotations

from collections.abc import Iterable

import sqlalchemy as sa
from sqlalchemy.engine import Connection

# The payload key under which pgbus carries a job's uniqueness key.
UNIQUENESS_METADATA_KEY = "pgbus_uniqueness_key"

# A parked payload is a JSON object, or (written before pgbus fixed a
# double encoding) a JSON string holding one; the schema's function reads
# the key through either, and gives NULL for a string that is not JSON.
KEY_PATH = "pgbus_parked_uniqueness_key(payload, :metadata_key)"


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
            f"SELECT DISTINCT {KEY_PATH} AS lock_key FROM pgbus_blocked_executions "
            f"WHERE {KEY_PATH} IN (SELECT unnest(CAST(:lock_keys AS text[])))"
        ),
        {"metadata_key": UNIQUENESS_METADATA_KEY, "lock_keys": keys},
    )
    return {lock_key for (lock_key,) in rows}


def parked_concurrency_keys(conn: Connection, lock_keys: list[str]) -> dict[str, str]:
    """The concurrency key of the (oldest) parked job carrying each key."""
    if not lock_keys:
        return {}
    rows = conn.execute(
        sa.text(
            f"""
            SELECT DISTINCT ON (lock_key) lock_key, concurrency_key
            FROM (SELECT {KEY_PATH} AS lock_key, concurrency_key, id
                  FROM pgbus_blocked_executions) AS p
            WHERE lock_key = ANY(:lock_keys)
            ORDER BY lock_key, id
            """
        ),
        {"metadata_key": UNIQUENESS_METADATA_KEY, "lock_keys": list(lock_keys)},
    )
    return {row.lock_key: row.concurrency_key for row in rows}


def park_many(conn: Connection, queue_name: str, concurrency_keys: list[str], payloads: list[str]) -> None:
    """Park one job per (concurrency key, payload JSON text), as pgbus parks
    a job behind its concurrency limit (demo data)."""
    conn.execute(
        sa.text(
            """
            INSERT INTO pgbus_blocked_executions (concurrency_key, queue_name, payload, priority, created_at)
            SELECT c, :queue, CAST(p AS jsonb), 0, now()
            FROM unnest(CAST(:concurrency_keys AS text[]), CAST(:payloads AS text[])) AS x(c, p)
            """
        ),
        {"concurrency_keys": list(concurrency_keys), "payloads": list(payloads), "queue": queue_name},
    )
