"""pgbus_uniqueness_keys: the locks that keep a unique job single.

A lock is acquired before its message exists: unbound, it has msg_id 0 and
the placeholder queue ``pending`` (or its target queue); bound, it names its
PGMQ message (queue_name, msg_id). created_at is a timestamp WITHOUT time
zone, written in the session's zone (UTC on every connection of ours) and
compared through a cast in that same zone.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, overload

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..rules import states
from ..rules.states import LOCK_FRESH as FRESH
from ..rules.states import LOCK_GONE as GONE
from ..rules.states import LOCK_LIVE as LIVE
from ..rules.states import LOCK_ORPHAN as ORPHAN
from ..rules.states import LOCK_PARKED as PARKED
from . import as_dict, blocked_executions, pgmq_queues

PENDING_QUEUE = "pending"

# release_all_held_by sends one statement per this many holders.
RELEASE_SLICE = 1_000

# The row a message holds: bound to that message, or still unbound (a parked
# job's row, or one whose bind failed) and acquired no later than the
# message was sent. A lock is always taken before its message exists, so an
# unbound row acquired after the send is a successor's. Unbound means
# msg_id <= 0 only: "pending" is a name a real queue can have too.
_HELD_BY = (
    "lock_key = :lock_key AND ("
    "(queue_name = :queue_name AND msg_id = :msg_id AND msg_id > 0) OR "
    "(msg_id <= 0 AND created_at <= CAST(:sent_at AS timestamptz)))"
)


def sent_at_literal(enqueued_at: Any) -> str:
    """A message's enqueued_at as a timestamptz literal that carries its own
    offset. PGMQ hands over a string that already does; a datetime or epoch
    seconds would otherwise be read in the session's zone. A naive datetime
    is taken as UTC (every connection of ours runs in UTC). An unknown send
    time is ``-infinity``: no unbound row counts as the message's own.
    (Read back, our connections load it as ``values.MINUS_INFINITY``.)"""
    if enqueued_at is None:
        return "-infinity"
    if isinstance(enqueued_at, bool):
        raise TypeError("enqueued_at must be a time, not a bool")
    if isinstance(enqueued_at, (int, float)):
        enqueued_at = datetime.fromtimestamp(enqueued_at, tz=UTC)
    if isinstance(enqueued_at, datetime):
        if enqueued_at.tzinfo is None:
            enqueued_at = enqueued_at.replace(tzinfo=UTC)
        literal: str = enqueued_at.isoformat(timespec="microseconds")
        return literal
    return str(enqueued_at)


def find(conn: Connection, lock_key: str) -> dict[str, Any] | None:
    row = conn.execute(
        sa.text(
            "SELECT lock_key, queue_name, msg_id, created_at FROM pgbus_uniqueness_keys WHERE lock_key = :lock_key"
        ),
        {"lock_key": lock_key},
    ).first()
    return as_dict(row)


def acquire(conn: Connection, lock_key: str, *, queue_name: str = PENDING_QUEUE) -> datetime | None:
    """Take the lock, unbound; its acquire stamp, or None when someone holds it."""
    return conn.execute(
        sa.text(
            """
            INSERT INTO pgbus_uniqueness_keys (lock_key, queue_name, msg_id, created_at)
            VALUES (:lock_key, :queue_name, 0, CURRENT_TIMESTAMP)
            ON CONFLICT (lock_key) DO NOTHING
            RETURNING created_at
            """
        ),
        {"lock_key": lock_key, "queue_name": queue_name},
    ).scalar_one_or_none()


def bind(
    conn: Connection,
    lock_key: str,
    *,
    queue_name: str,
    msg_id: int,
    acquired_at: datetime | None = None,
) -> int:
    """Point this enqueue's unbound row at its message. With *acquired_at*
    (the stamp acquire or unbind returned) only the row stamped so, so that a
    finished job's bind cannot retarget a successor that re-acquired the key.
    Does not touch created_at: the reaper's age floor counts from acquire."""
    return conn.execute(
        sa.text(
            """
            UPDATE pgbus_uniqueness_keys SET queue_name = :queue_name, msg_id = :msg_id
            WHERE lock_key = :lock_key AND msg_id = 0
              AND (CAST(:acquired_at AS timestamp) IS NULL OR created_at = :acquired_at)
            """
        ),
        {"lock_key": lock_key, "queue_name": queue_name, "msg_id": int(msg_id), "acquired_at": acquired_at},
    ).rowcount


def release(conn: Connection, lock_key: str) -> int:
    """Drop the lock whoever holds it (an operator's release)."""
    return conn.execute(
        sa.text("DELETE FROM pgbus_uniqueness_keys WHERE lock_key = :lock_key"),
        {"lock_key": lock_key},
    ).rowcount


def release_held_by(conn: Connection, lock_key: str, *, queue_name: str, msg_id: int, enqueued_at: Any) -> int:
    """Release the lock a finishing message holds. A row that moved on stays:
    one handed to the message's retry (unbind), or one a successor took
    after this message's own row went. Without *enqueued_at* only the row
    bound to the message goes; the reaper takes an orphan."""
    return conn.execute(
        sa.text(f"DELETE FROM pgbus_uniqueness_keys WHERE {_HELD_BY}"),
        {
            "lock_key": lock_key,
            "queue_name": str(queue_name),
            "msg_id": int(msg_id),
            "sent_at": sent_at_literal(enqueued_at),
        },
    ).rowcount


def unbind(
    conn: Connection,
    lock_key: str,
    *,
    from_queue_name: str,
    from_msg_id: int,
    from_enqueued_at: Any,
    queue_name: str,
) -> datetime | None:
    """Hand the running attempt's lock to its retry, before the retry exists:
    the row is left unbound on the retry's queue and stamped now, after the
    attempt was sent, so the attempt's release no longer counts it as its
    own while the retry's (sent later) does. Returns the new stamp for the
    retry's bind, or None when the attempt no longer holds the key."""
    return conn.execute(
        sa.text(
            f"""
            UPDATE pgbus_uniqueness_keys
            SET queue_name = :new_queue_name, msg_id = 0, created_at = CURRENT_TIMESTAMP
            WHERE {_HELD_BY}
            RETURNING created_at
            """
        ),
        {
            "lock_key": lock_key,
            "queue_name": str(from_queue_name),
            "msg_id": int(from_msg_id),
            "sent_at": sent_at_literal(from_enqueued_at),
            "new_queue_name": str(queue_name),
        },
    ).scalar_one_or_none()


def release_all_held_by(conn: Connection, holders: Iterable[Sequence[Any]]) -> int:
    """release_held_by for many messages at once (bulk discards, purges):
    *holders* are (lock_key, queue_name, msg_id, enqueued_at) tuples, sent
    as arrays, one statement per RELEASE_SLICE. The ``= ANY`` lets each
    statement find its rows through the primary key; joined to the unnest
    alone, the planner hashed the whole table once per slice."""
    statement = sa.text(
        """
        DELETE FROM pgbus_uniqueness_keys AS u
        USING unnest(CAST(:lock_keys AS text[]), CAST(:queue_names AS text[]),
                     CAST(:msg_ids AS bigint[]), CAST(:sent_ats AS timestamptz[]))
              AS m(lock_key, queue_name, msg_id, sent_at)
        WHERE u.lock_key = ANY(CAST(:lock_keys AS text[]))
          AND u.lock_key = m.lock_key
          AND ((u.queue_name = m.queue_name AND u.msg_id = m.msg_id AND u.msg_id > 0)
               OR (u.msg_id <= 0 AND u.created_at <= m.sent_at))
        """
    )
    holders = list(holders)
    released = 0
    for start in range(0, len(holders), RELEASE_SLICE):
        chunk = holders[start : start + RELEASE_SLICE]
        released += conn.execute(
            statement,
            {
                "lock_keys": [str(h[0]) for h in chunk],
                "queue_names": [str(h[1]) for h in chunk],
                "msg_ids": [int(h[2]) for h in chunk],
                "sent_ats": [sent_at_literal(h[3]) for h in chunk],
            },
        ).rowcount
    return released


# --- each lock's state (the Locks page and the reaper) ---------------------------
# A lock is live (bound to a message that exists), gone (bound to one that
# does not, or to a queue that does not), parked (unbound, a parked job
# carries its key), fresh (unbound, younger than the age floor) or orphan
# (unbound past the floor, no parked job carries it): states.LOCK_STATES.


@dataclass(frozen=True)
class Cursor:
    """Where a page ends: locks are listed oldest first, then by key."""

    created_at: datetime
    lock_key: str


@dataclass
class LockPage:
    rows: list[dict[str, Any]]
    next_cursor: Cursor | None


# created_at is the session's wall clock written into a zone-less column, so
# it is compared with LOCALTIMESTAMP, that same wall clock.
CUTOFF = "(LOCALTIMESTAMP - CAST(:age_floor AS interval))"

# The keys parked jobs carry, read through the same expression as
# blocked_executions.parked_uniqueness_keys, computed once per statement (a
# WITH clause every query here starts with) and tested as ``IN (...)``, which
# PostgreSQL answers from a hash: there is no index on the payload's key.
# The ``IS TRUE`` keeps the test an expression: bare in a WHERE, the planner
# turns it into a join, and under a LIMIT it picked a nested loop that
# rescanned every parked key for every lock (seconds at 100,000 locks).
_WITH_PARKED_KEYS = (
    f"WITH parked_keys AS MATERIALIZED (SELECT {blocked_executions.KEY_PATH} AS lock_key "
    f"FROM pgbus_blocked_executions WHERE {blocked_executions.KEY_PATH} IS NOT NULL)"
)
_CARRIED = "(u.lock_key IN (SELECT lock_key FROM parked_keys))"
_IS_PARKED = f"(u.msg_id <= 0 AND {_CARRIED} IS TRUE)"
_NOT_PARKED = f"(u.msg_id <= 0 AND {_CARRIED} IS NOT TRUE)"

_STATE = f"""
    CASE
      WHEN u.msg_id > 0 AND msg.msg_id IS NOT NULL THEN '{LIVE}'
      WHEN u.msg_id > 0 THEN '{GONE}'
      WHEN {_IS_PARKED} THEN '{PARKED}'
      WHEN u.created_at > {CUTOFF} THEN '{FRESH}'
      ELSE '{ORPHAN}'
    END
"""

# The same states as predicates, so that a filtered page says what it wants
# (and the created_at index can serve the fresh and orphan pages).
STATE_PREDICATES = {
    LIVE: "u.msg_id > 0 AND msg.msg_id IS NOT NULL",
    GONE: "u.msg_id > 0 AND msg.msg_id IS NULL",
    PARKED: _IS_PARKED,
    FRESH: f"{_NOT_PARKED} AND u.created_at > {CUTOFF}",
    ORPHAN: f"{_NOT_PARKED} AND u.created_at <= {CUTOFF}",
}


def _from_clause(conn: Connection) -> tuple[str, dict[str, Any]]:
    lookup, params = pgmq_queues.message_lookup(conn, pgmq_queues.queue_tables(conn))
    params["metadata_key"] = blocked_executions.UNIQUENESS_METADATA_KEY
    return (
        f"""
        FROM pgbus_uniqueness_keys AS u
        LEFT JOIN LATERAL ({lookup}) AS msg ON true
        """,
        params,
    )


def _checked_state(state: str | None) -> str | None:
    if state is not None and state not in states.LOCK_STATES:
        raise ValueError(f"not a lock state: {state!r}")
    return state


@overload
def _as_utc(moment: datetime) -> datetime: ...
@overload
def _as_utc(moment: datetime | None) -> datetime | None: ...
def _as_utc(moment: datetime | None) -> datetime | None:
    """created_at comes back zone-less; every connection of ours writes UTC."""
    if moment is None or moment.tzinfo is not None:
        return moment
    return moment.replace(tzinfo=UTC)


def list_locks(
    conn: Connection,
    *,
    age_floor: timedelta,
    limit: int,
    state: str | None = None,
    queue: str | None = None,
    after: Cursor | None = None,
) -> LockPage:
    """One page of locks, oldest first, each with its state, its message
    (enqueued_at, read_ct) when live, and its parked job's concurrency key."""
    state = _checked_state(state)
    from_clause, params = _from_clause(conn)
    where = []
    if state is not None:
        where.append(STATE_PREDICATES[state])
    if queue is not None:
        where.append("u.queue_name = :queue")
        params["queue"] = queue
    if after is not None:
        where.append("(u.created_at, u.lock_key) > (CAST(:after_at AS timestamp), :after_key)")
        params["after_at"] = _as_utc(after.created_at).astimezone(UTC).replace(tzinfo=None)
        params["after_key"] = after.lock_key
    params.update(age_floor=age_floor, limit=int(limit) + 1)
    rows = conn.execute(
        sa.text(
            f"""
            {_WITH_PARKED_KEYS}
            SELECT u.lock_key, u.queue_name, u.msg_id, u.created_at,
                   -- None for a lock stamped at ±infinity: it has no finite age
                   -- (and PostgreSQL before 17 refuses to subtract it).
                   CASE WHEN isfinite(u.created_at)
                        THEN EXTRACT(EPOCH FROM LOCALTIMESTAMP - u.created_at)::float8 END AS age_seconds,
                   msg.enqueued_at, msg.read_ct,
                   {_STATE} AS state
            {from_clause}
            {"WHERE " + " AND ".join(where) if where else ""}
            ORDER BY u.created_at, u.lock_key
            LIMIT :limit
            """
        ),
        params,
    ).all()
    locks = [dict(row._mapping) for row in rows[:limit]]
    concurrency_keys = blocked_executions.parked_concurrency_keys(
        conn, [lock["lock_key"] for lock in locks if lock["state"] == PARKED]
    )
    for lock in locks:
        lock["created_at"] = _as_utc(lock["created_at"])
        lock["concurrency_key"] = concurrency_keys.get(lock["lock_key"])
    next_cursor = None
    if len(rows) > limit:
        last = locks[-1]
        next_cursor = Cursor(created_at=last["created_at"], lock_key=last["lock_key"])
    return LockPage(rows=locks, next_cursor=next_cursor)


def _live_count(
    conn: Connection, tables: list[pgmq_queues.QueueTable], queue_filter: str
) -> tuple[str, dict[str, Any]]:
    """How many bound locks have their message: a join per queue, summed,
    so that PostgreSQL picks a hash, merge or index join for each queue by
    its size instead of probing once per lock."""
    branches = []
    params: dict[str, Any] = {}
    for index, table in enumerate(tables):
        bind = f"live_queue_{index}"
        params[bind] = table.name
        branches.append(
            f"SELECT count(*) AS n FROM pgbus_uniqueness_keys AS u "
            f"JOIN {pgmq_queues.qualified_table(conn, table)} AS q ON q.msg_id = u.msg_id "
            f"WHERE u.msg_id > 0 AND u.queue_name = :{bind}{queue_filter}"
        )
    if not branches:
        return "0", params
    return f"(SELECT coalesce(sum(n), 0) FROM ({' UNION ALL '.join(branches)}) AS per_queue)", params


def count_by_state(conn: Connection, *, age_floor: timedelta, queue: str | None = None) -> dict[str, int]:
    """How many locks are in each state (every state present, zeros too),
    in one statement so that the numbers add up. Parked locks are counted by
    joining the parked keys to the locks (a few probes) rather than testing
    every unbound lock against them; fresh and orphan are then the unbound
    locks on each side of the floor, less the parked ones."""
    queue_filter = " AND u.queue_name = :queue" if queue is not None else ""
    live, params = _live_count(conn, pgmq_queues.queue_tables(conn), queue_filter)
    params.update(age_floor=age_floor, metadata_key=blocked_executions.UNIQUENESS_METADATA_KEY, queue=queue)
    row = conn.execute(
        sa.text(
            f"""
            {_WITH_PARKED_KEYS},
            cutoff AS (SELECT {CUTOFF} AS at),
            parked AS (
              SELECT count(*) FILTER (WHERE u.created_at > cutoff.at) AS young,
                     count(*) FILTER (WHERE u.created_at <= cutoff.at) AS old
              FROM (SELECT DISTINCT lock_key FROM parked_keys) AS p
              JOIN pgbus_uniqueness_keys AS u ON u.lock_key = p.lock_key
              CROSS JOIN cutoff
              WHERE u.msg_id <= 0{queue_filter}
            )
            SELECT {live} AS live,
                   count(*) FILTER (WHERE u.msg_id > 0) AS bound,
                   count(*) FILTER (WHERE u.msg_id <= 0 AND u.created_at > cutoff.at) AS unbound_young,
                   count(*) FILTER (WHERE u.msg_id <= 0 AND u.created_at <= cutoff.at) AS unbound_old,
                   (SELECT young FROM parked) AS parked_young,
                   (SELECT old FROM parked) AS parked_old
            FROM pgbus_uniqueness_keys AS u CROSS JOIN cutoff
            WHERE true{queue_filter}
            """
        ),
        params,
    ).one()
    return {
        LIVE: int(row.live),
        GONE: row.bound - int(row.live),
        PARKED: row.parked_young + row.parked_old,
        FRESH: row.unbound_young - row.parked_young,
        ORPHAN: row.unbound_old - row.parked_old,
    }


def gone_past_floor(conn: Connection, *, age_floor: timedelta) -> list[dict[str, Any]]:
    """Bound locks acquired before the floor whose message no longer exists
    (or whose queue does not): an anti-join per queue, which PostgreSQL runs
    as one hash or merge join rather than a probe per lock."""
    tables = pgmq_queues.queue_tables(conn)
    params: dict[str, Any] = {"age_floor": age_floor, "queue_names": [table.name for table in tables]}
    select = (
        "SELECT u.lock_key, u.queue_name, u.msg_id, u.created_at FROM pgbus_uniqueness_keys AS u "
        f"WHERE u.msg_id > 0 AND u.created_at <= {CUTOFF} "
    )
    branches = [select + "AND u.queue_name <> ALL(CAST(:queue_names AS text[]))"]
    for index, table in enumerate(tables):
        bind = f"gone_queue_{index}"
        params[bind] = table.name
        branches.append(
            select + f"AND u.queue_name = :{bind} AND NOT EXISTS "
            f"(SELECT 1 FROM {pgmq_queues.qualified_table(conn, table)} AS q WHERE q.msg_id = u.msg_id)"
        )
    rows = conn.execute(sa.text(" UNION ALL ".join(branches) + " ORDER BY created_at, lock_key"), params)
    return [dict(row._mapping) for row in rows]


def queue_counts(conn: Connection) -> list[tuple[str, int]]:
    """The queue names locks carry, with how many each: the queue filter."""
    rows = conn.execute(
        sa.text("SELECT queue_name, count(*) AS n FROM pgbus_uniqueness_keys GROUP BY queue_name ORDER BY queue_name")
    )
    return [(row.queue_name, row.n) for row in rows]


def unbound_past_floor(conn: Connection, *, age_floor: timedelta) -> list[dict[str, Any]]:
    """Unbound locks acquired before the floor, oldest first (the reaper's
    orphan candidates, before the parked ones are taken out)."""
    rows = conn.execute(
        sa.text(
            f"""
            SELECT lock_key, queue_name, msg_id, created_at FROM pgbus_uniqueness_keys AS u
            WHERE u.msg_id <= 0 AND u.created_at <= {CUTOFF}
            ORDER BY u.created_at, u.lock_key
            """
        ),
        {"age_floor": age_floor},
    )
    return [dict(row._mapping) for row in rows]


def lock_for(conn: Connection, lock_key: str) -> dict[str, Any] | None:
    """The lock's row, locked FOR UPDATE until the transaction ends."""
    row = conn.execute(
        sa.text(
            "SELECT lock_key, queue_name, msg_id, created_at FROM pgbus_uniqueness_keys "
            "WHERE lock_key = :lock_key FOR UPDATE"
        ),
        {"lock_key": lock_key},
    ).first()
    return as_dict(row)


# --- demo data (locks/lock_seeder.py): many rows at once, back-dated at random ----------


def bind_backdated(conn: Connection, table: pgmq_queues.QueueTable, msg_ids: list[int], *, span: timedelta) -> None:
    """Back-date messages *msg_ids* of *table* over *span* and bind a lock
    to each (its key from the message's metadata), acquired just before
    its message was sent."""
    conn.execute(
        sa.text(
            f"""
            WITH sent AS (
              UPDATE {pgmq_queues.qualified_table(conn, table)} AS q
              SET enqueued_at = now() - random() * CAST(:span AS interval),
                  read_ct = floor(random() * 4)::int
              WHERE q.msg_id = ANY(:ids)
              RETURNING q.msg_id, q.enqueued_at, q.message
            )
            INSERT INTO pgbus_uniqueness_keys (lock_key, queue_name, msg_id, created_at)
            SELECT sent.message ->> :metadata_key, :queue, sent.msg_id,
                   (sent.enqueued_at AT TIME ZONE 'UTC') - interval '40 milliseconds'
            FROM sent
            """
        ),
        {
            "ids": list(msg_ids),
            "span": span,
            "queue": table.name,
            "metadata_key": blocked_executions.UNIQUENESS_METADATA_KEY,
        },
    )


def insert_bound_backdated(conn: Connection, keys: list[str], queue_name: str, *, span: timedelta) -> None:
    """Locks bound to messages 1, 2, ... of *queue_name*, acquired within *span*."""
    conn.execute(
        sa.text(
            """
            INSERT INTO pgbus_uniqueness_keys (lock_key, queue_name, msg_id, created_at)
            SELECT k, :queue, n, LOCALTIMESTAMP - random() * CAST(:span AS interval)
            FROM unnest(CAST(:keys AS text[])) WITH ORDINALITY AS x(k, n)
            """
        ),
        {"keys": list(keys), "queue": queue_name, "span": span},
    )


def insert_unbound_backdated(conn: Connection, keys: list[str], *, older_than: timedelta, span: timedelta) -> None:
    """Unbound locks acquired *older_than* ago, spread over *span* before that."""
    conn.execute(
        sa.text(
            """
            INSERT INTO pgbus_uniqueness_keys (lock_key, queue_name, msg_id, created_at)
            SELECT k, :queue, 0,
                   LOCALTIMESTAMP - CAST(:older_than AS interval) - random() * CAST(:span AS interval)
            FROM unnest(CAST(:keys AS text[])) AS k
            """
        ),
        {"keys": list(keys), "queue": PENDING_QUEUE, "older_than": older_than, "span": span},
    )
