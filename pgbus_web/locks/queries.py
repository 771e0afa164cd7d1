"""The Locks page's reads: every uniqueness lock with its state, the counts
per state, the queues locks name.

PGMQ keeps each queue in a table of its own, ``pgmq.q_<name>``, so looking a
lock's message up takes one branch per queue. Those tables are read from
``pgmq.meta``, checked against the catalog and quoted by the dialect;
nothing a request carries reaches the SQL text, only the binds.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..models.blocked_executions import _KEY_PATH as PARKED_KEY_PATH
from ..models.blocked_executions import UNIQUENESS_METADATA_KEY
from . import FRESH, GONE, LIVE, ORPHAN, PARKED, STATES


@dataclass(frozen=True)
class QueueTable:
    """A PGMQ queue (its name as pgmq.meta has it) whose table exists."""

    name: str
    relname: str


@dataclass(frozen=True)
class Cursor:
    """Where a page ends: locks are listed oldest first, then by key."""

    created_at: datetime
    lock_key: str


@dataclass
class LockPage:
    rows: list[dict[str, Any]]
    next_cursor: Cursor | None


def queue_tables(conn: Connection) -> list[QueueTable]:
    """Every queue pgmq.meta lists whose table is really there."""
    rows = conn.execute(
        sa.text(
            """
            SELECT m.queue_name, c.relname
            FROM pgmq.meta AS m
            JOIN pg_class AS c
              ON c.relname = lower('q_' || m.queue_name)
             AND c.relnamespace = to_regnamespace('pgmq')
             AND c.relkind IN ('r', 'p')
            ORDER BY m.queue_name
            """
        )
    )
    return [QueueTable(name=row.queue_name, relname=row.relname) for row in rows]


def find_queue(conn: Connection, queue_name: str) -> QueueTable | None:
    return next((table for table in queue_tables(conn) if table.name == queue_name), None)


def qualified_table(conn: Connection, table: QueueTable) -> str:
    """``pgmq."q_<name>"``, quoted by the dialect."""
    quote = conn.dialect.identifier_preparer.quote_identifier
    return f"{quote('pgmq')}.{quote(table.relname)}"


def find_message(conn: Connection, table: QueueTable, msg_id: int, *, for_update: bool = False):
    """The message's msg_id, enqueued_at and read_ct, or None when it is gone."""
    lock = " FOR UPDATE" if for_update else ""
    row = conn.execute(
        sa.text(
            f"SELECT msg_id, enqueued_at, read_ct FROM {qualified_table(conn, table)} "
            f"WHERE msg_id = :msg_id{lock}"
        ),
        {"msg_id": int(msg_id)},
    ).first()
    return dict(row._mapping) if row is not None else None


def message_lookup(conn: Connection, tables: list[QueueTable]) -> tuple[str, dict[str, Any]]:
    """A LATERAL subquery giving the message of lock ``u`` (msg_id,
    enqueued_at, read_ct), or no row. One branch per queue, each gated on the
    lock naming that queue: PostgreSQL runs only the matching branch, an
    index probe on the queue's primary key."""
    branches = []
    params: dict[str, Any] = {}
    for index, table in enumerate(tables):
        bind = f"message_queue_{index}"
        params[bind] = table.name
        branches.append(
            f"SELECT q.msg_id, q.enqueued_at, q.read_ct FROM {qualified_table(conn, table)} AS q "
            f"WHERE u.msg_id > 0 AND u.queue_name = :{bind} AND q.msg_id = u.msg_id"
        )
    if not branches:
        branches.append(
            "SELECT NULL::bigint AS msg_id, NULL::timestamptz AS enqueued_at, "
            "NULL::integer AS read_ct WHERE false"
        )
    return "\nUNION ALL\n".join(branches), params


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
    f"WITH parked_keys AS MATERIALIZED (SELECT {PARKED_KEY_PATH} AS lock_key "
    f"FROM pgbus_blocked_executions WHERE {PARKED_KEY_PATH} IS NOT NULL)"
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
    lookup, params = message_lookup(conn, queue_tables(conn))
    params["metadata_key"] = UNIQUENESS_METADATA_KEY
    return (
        f"""
        FROM pgbus_uniqueness_keys AS u
        LEFT JOIN LATERAL ({lookup}) AS msg ON true
        """,
        params,
    )


def parked_concurrency_keys(conn: Connection, lock_keys: list[str]) -> dict[str, str]:
    """The concurrency key of the (oldest) parked job carrying each key."""
    if not lock_keys:
        return {}
    rows = conn.execute(
        sa.text(
            f"""
            SELECT DISTINCT ON (lock_key) lock_key, concurrency_key
            FROM (SELECT {PARKED_KEY_PATH} AS lock_key, concurrency_key, id
                  FROM pgbus_blocked_executions) AS p
            WHERE lock_key = ANY(:lock_keys)
            ORDER BY lock_key, id
            """
        ),
        {"metadata_key": UNIQUENESS_METADATA_KEY, "lock_keys": list(lock_keys)},
    )
    return {row.lock_key: row.concurrency_key for row in rows}


def _checked_state(state: str | None) -> str | None:
    if state is not None and state not in STATES:
        raise ValueError(f"not a lock state: {state!r}")
    return state


def _as_utc(moment: datetime | None) -> datetime | None:
    """created_at comes back zone-less; every connection of ours writes UTC."""
    if moment is None or moment.tzinfo is not None:
        return moment
    return moment.replace(tzinfo=timezone.utc)


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
        params["after_at"] = _as_utc(after.created_at).astimezone(timezone.utc).replace(tzinfo=None)
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
    concurrency_keys = parked_concurrency_keys(
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


def _live_count(conn: Connection, tables: list[QueueTable], queue_filter: str) -> tuple[str, dict[str, Any]]:
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
            f"JOIN {qualified_table(conn, table)} AS q ON q.msg_id = u.msg_id "
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
    live, params = _live_count(conn, queue_tables(conn), queue_filter)
    params.update(age_floor=age_floor, metadata_key=UNIQUENESS_METADATA_KEY, queue=queue)
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
    tables = queue_tables(conn)
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
            f"(SELECT 1 FROM {qualified_table(conn, table)} AS q WHERE q.msg_id = u.msg_id)"
        )
    rows = conn.execute(
        sa.text(" UNION ALL ".join(branches) + " ORDER BY created_at, lock_key"), params
    )
    return [dict(row._mapping) for row in rows]


def queue_counts(conn: Connection) -> list[tuple[str, int]]:
    """The queue names locks carry, with how many each: the queue filter."""
    rows = conn.execute(
        sa.text(
            "SELECT queue_name, count(*) AS n FROM pgbus_uniqueness_keys "
            "GROUP BY queue_name ORDER BY queue_name"
        )
    )
    return [(row.queue_name, row.n) for row in rows]
