"""Locks in every state, on real PGMQ queues, for the demo and the benchmarks.

Each lock is made the way pgbus makes it: a live one holds a message sent
with ``pgmq.send_batch``; a gone one held a message since deleted (or names a
queue that was dropped); a parked one is unbound and carried by a job in
pgbus_blocked_executions (some payloads double-encoded, as older pgbus wrote
them); fresh and orphaned ones are unbound, inside and past the age floor.
"""

from __future__ import annotations

import json
import random
import uuid
from datetime import timedelta

from sqlalchemy.engine import Connection, Engine

from .. import defaults
from ..models import blocked_executions, pgmq_queues, uniqueness_keys
from ..models.blocked_executions import UNIQUENESS_METADATA_KEY
from . import FRESH, GONE, LIVE, ORPHAN, PARKED

SEED_QUEUES = ("pgbus_default", "pgbus_mailers", "pgbus_reports")
# A queue name locks point at that PGMQ does not have (a dropped queue).
DROPPED_QUEUE = "pgbus_retired"
JOB_CLASSES = ("InvoiceJob", "SyncCustomerJob", "SendDigestJob", "RebuildSearchIndexJob")

# How a seeded set splits over the states, in percent.
STATE_SHARES = ((LIVE, 50), (GONE, 10), (PARKED, 10), (FRESH, 10), (ORPHAN, 20))
# Rows per statement: big enough to be fast, small enough to stay gentle.
CHUNK = 5_000
# Live messages were sent within this window; orphans sit up to this far past the floor.
LIVE_SPAN = timedelta(hours=2)
ORPHAN_SPAN = timedelta(days=2)


def split(n: int) -> dict[str, int]:
    """*n* spread over the states by STATE_SHARES (every state gets one when n >= 5)."""
    counts = {state: n * share // 100 for state, share in STATE_SHARES}
    if n >= len(STATE_SHARES):
        for state in counts:
            counts[state] = max(counts[state], 1)
    counts[LIVE] += n - sum(counts.values())
    return counts


def _by_queue(keys):
    """(queue, chunk of keys) pairs, the keys dealt over SEED_QUEUES in turn."""
    for index, queue in enumerate(SEED_QUEUES):
        for chunk in _chunks(keys[index :: len(SEED_QUEUES)]):
            yield queue, chunk


def _key(rng: random.Random) -> str:
    job = rng.choice(JOB_CLASSES)
    return f"pgbus:unique:{job}:{uuid.UUID(int=rng.getrandbits(128)).hex}"


def _chunks(items, size=CHUNK):
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _send_bound(conn: Connection, queue: str, keys: list[str]) -> list[int]:
    """Send one message per key and bind each key's lock to its message;
    messages are back-dated over LIVE_SPAN, each lock acquired just before."""
    messages = [
        json.dumps({"job_class": key.split(":")[2], "arguments": [], UNIQUENESS_METADATA_KEY: key}) for key in keys
    ]
    ids = pgmq_queues.send_batch(conn, queue, messages)
    table = pgmq_queues.find_queue(conn, queue)
    if table is None:
        raise LookupError(f"no PGMQ queue {queue!r} to seed locks in")
    uniqueness_keys.bind_backdated(conn, table, ids, span=LIVE_SPAN)
    return ids


def _park(conn: Connection, keys: list[str], rng: random.Random) -> None:
    """Park one job per key; every fourth payload double-encoded."""
    payloads = []
    concurrency_keys = []
    for index, key in enumerate(keys):
        job = key.split(":")[2]
        payload = json.dumps({"job_class": job, "arguments": [index], UNIQUENESS_METADATA_KEY: key})
        payloads.append(json.dumps(payload) if index % 4 == 3 else payload)
        concurrency_keys.append(f"{job}/tenant-{rng.randrange(1, 40)}")
    blocked_executions.park_many(conn, SEED_QUEUES[0], concurrency_keys, payloads)


def seed_locks(
    engine: Engine,
    n: int,
    *,
    age_floor: timedelta = defaults.LOCK_AGE_FLOOR,
    seed: int | None = None,
) -> dict[str, int]:
    """Add *n* locks spread over every state (see STATE_SHARES), creating the
    PGMQ queues they need; returns how many of each were made."""
    if n < 0:
        raise ValueError("the number of locks cannot be negative")
    rng = random.Random(seed)
    counts = split(n)
    with engine.begin() as conn:
        for queue in SEED_QUEUES:
            pgmq_queues.create(conn, queue)
        live = [_key(rng) for _ in range(counts[LIVE])]
        for queue, chunk in _by_queue(live):
            _send_bound(conn, queue, chunk)

        gone = [_key(rng) for _ in range(counts[GONE])]
        dropped = gone[: len(gone) // 5]
        for queue, chunk in _by_queue(gone[len(dropped) :]):
            ids = _send_bound(conn, queue, chunk)
            pgmq_queues.delete_many(conn, queue, ids)
        for chunk in _chunks(dropped):
            uniqueness_keys.insert_bound_backdated(conn, chunk, DROPPED_QUEUE, span=ORPHAN_SPAN)

        parked = [_key(rng) for _ in range(counts[PARKED])]
        for chunk in _chunks(parked):
            # Parked jobs can wait longer than the floor: the reaper must spare them.
            uniqueness_keys.insert_unbound_backdated(conn, chunk, older_than=timedelta(0), span=age_floor * 3)
            _park(conn, chunk, rng)

        fresh = [_key(rng) for _ in range(counts[FRESH])]
        for chunk in _chunks(fresh):
            uniqueness_keys.insert_unbound_backdated(conn, chunk, older_than=timedelta(0), span=age_floor * 0.9)

        orphans = [_key(rng) for _ in range(counts[ORPHAN])]
        for chunk in _chunks(orphans):
            uniqueness_keys.insert_unbound_backdated(
                conn, chunk, older_than=age_floor + timedelta(minutes=1), span=ORPHAN_SPAN
            )
    return counts
