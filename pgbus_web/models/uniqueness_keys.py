"""pgbus_uniqueness_keys: the locks that keep a unique job single.

A lock is acquired before its message exists: unbound, it has msg_id 0 and
the placeholder queue ``pending`` (or its target queue); bound, it names its
PGMQ message (queue_name, msg_id). created_at is a timestamp WITHOUT time
zone, written in the session's zone (UTC on every connection of ours) and
compared through a cast in that same zone.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Iterable, Sequence

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from . import as_dict

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
        enqueued_at = datetime.fromtimestamp(enqueued_at, tz=timezone.utc)
    if isinstance(enqueued_at, datetime):
        if enqueued_at.tzinfo is None:
            enqueued_at = enqueued_at.replace(tzinfo=timezone.utc)
        return enqueued_at.isoformat(timespec="microseconds")
    return str(enqueued_at)


def find(conn: Connection, lock_key: str) -> dict[str, Any] | None:
    row = conn.execute(
        sa.text(
            "SELECT lock_key, queue_name, msg_id, created_at FROM pgbus_uniqueness_keys "
            "WHERE lock_key = :lock_key"
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


def release_held_by(
    conn: Connection, lock_key: str, *, queue_name: str, msg_id: int, enqueued_at: Any
) -> int:
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
