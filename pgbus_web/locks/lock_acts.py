"""What an operator (or the reaper) does to locks. Each function runs inside
the caller's transaction and changes nothing when it raises.

- ``release_lock``: drop one lock, whoever holds it.
- ``discard_message``: delete a lock's PGMQ message and release the lock that
  message holds, as a finishing job would (``release_held_by``): a lock that
  has moved on to a retry or a successor stays.
- ``reap``: release every lock past the age floor that nothing can use any
  more: unbound and carried by no parked job (an orphan), or bound to a
  message that no longer exists. Never a parked job's, never a live one's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.engine import Connection

from ..models import blocked_executions, pgmq_queues, uniqueness_keys
from ..models.uniqueness_keys import RELEASE_SLICE


class LockActionError(Exception):
    """An action that cannot run; nothing was changed."""


class LockNotFound(LockActionError):
    def __init__(self, lock_key: str):
        self.lock_key = lock_key
        super().__init__(f"no lock with key {lock_key!r}")


class QueueNotFound(LockActionError):
    def __init__(self, queue_name: str):
        self.queue_name = queue_name
        super().__init__(f"no PGMQ queue named {queue_name!r}")


class MessageNotFound(LockActionError):
    def __init__(self, queue_name: str, msg_id: int):
        self.queue_name = queue_name
        self.msg_id = msg_id
        super().__init__(f"message {msg_id} is no longer in queue {queue_name!r}")


def _checked_floor(age_floor: timedelta) -> timedelta:
    if not isinstance(age_floor, timedelta) or age_floor <= timedelta(0):
        raise ValueError("the age floor must be a positive duration")
    return age_floor


def release_lock(conn: Connection, lock_key: str) -> dict[str, Any]:
    """Release the lock *lock_key*; returns the row as it was."""
    row = uniqueness_keys.lock_for(conn, lock_key)
    if row is None:
        raise LockNotFound(lock_key)
    uniqueness_keys.release(conn, lock_key)
    return row


@dataclass
class Discarded:
    lock_key: str
    queue_name: str
    msg_id: int
    enqueued_at: datetime
    # False when the lock had already moved on (to a retry or a successor).
    lock_released: bool


def discard_message(conn: Connection, lock_key: str, *, queue_name: str, msg_id: int) -> Discarded:
    """Delete message *msg_id* of *queue_name* and release the lock it holds
    under *lock_key*. The message is read under a row lock first, so a
    worker cannot take it in between, and its enqueued_at tells
    release_held_by which unbound row (if any) is still its own."""
    if isinstance(msg_id, bool) or not isinstance(msg_id, int) or msg_id <= 0:
        raise LockActionError(f"not a message id: {msg_id!r}")
    if uniqueness_keys.find(conn, lock_key) is None:
        raise LockNotFound(lock_key)
    table = pgmq_queues.find_queue(conn, queue_name)
    if table is None:
        raise QueueNotFound(queue_name)
    message = pgmq_queues.find_message(conn, table, msg_id, for_update=True)
    if message is None:
        raise MessageNotFound(queue_name, msg_id)
    pgmq_queues.delete(conn, table.name, msg_id)
    released = uniqueness_keys.release_held_by(
        conn, lock_key, queue_name=table.name, msg_id=msg_id, enqueued_at=message["enqueued_at"]
    )
    return Discarded(lock_key, table.name, msg_id, message["enqueued_at"], lock_released=released > 0)


@dataclass
class ReapPlan:
    """What a reap takes: each row as it was seen (lock_key, queue_name,
    msg_id, created_at)."""

    age_floor: timedelta
    orphans: list[dict[str, Any]] = field(default_factory=list)
    gone: list[dict[str, Any]] = field(default_factory=list)
    # Unbound past the floor, spared because a parked job carries the key.
    parked: int = 0

    @property
    def total(self) -> int:
        return len(self.orphans) + len(self.gone)


@dataclass
class ReapResult:
    plan: ReapPlan
    released: int
    dry_run: bool

    @property
    def kept(self) -> int:
        """Planned rows that moved on before the release and were left."""
        return 0 if self.dry_run else self.plan.total - self.released


def plan_reap(conn: Connection, *, age_floor: timedelta) -> ReapPlan:
    """The rows a reap would release now (see the module docstring)."""
    plan = ReapPlan(age_floor=_checked_floor(age_floor))
    unbound = uniqueness_keys.unbound_past_floor(conn, age_floor=age_floor)
    parked: set[str] = set()
    for start in range(0, len(unbound), RELEASE_SLICE):
        chunk = unbound[start : start + RELEASE_SLICE]
        parked |= blocked_executions.parked_uniqueness_keys(conn, (row["lock_key"] for row in chunk))
    plan.orphans = [row for row in unbound if row["lock_key"] not in parked]
    plan.parked = len(unbound) - len(plan.orphans)

    plan.gone = uniqueness_keys.gone_past_floor(conn, age_floor=age_floor)
    return plan


def release_planned(conn: Connection, plan: ReapPlan) -> int:
    """Release what *plan* found, through release_all_held_by (one
    statement per thousand). An orphan is passed as held by a message sent
    at its own created_at, so it goes only while it is still that unbound
    row: one a retry re-stamped, a job bound or a successor re-acquired
    since the plan was made stays. A gone row is passed with no send time,
    so only the row still bound to that message goes."""
    holders = [(row["lock_key"], row["queue_name"], row["msg_id"], row["created_at"]) for row in plan.orphans] + [
        (row["lock_key"], row["queue_name"], row["msg_id"], None) for row in plan.gone
    ]
    return uniqueness_keys.release_all_held_by(conn, holders)


def reap(conn: Connection, *, age_floor: timedelta, dry_run: bool = False) -> ReapResult:
    """Plan, then (unless *dry_run*) release; one transaction, the caller's."""
    plan = plan_reap(conn, age_floor=age_floor)
    if dry_run:
        return ReapResult(plan=plan, released=0, dry_run=True)
    return ReapResult(plan=plan, released=release_planned(conn, plan), dry_run=False)
