"""Helpers for the lock tests: real PGMQ queues and messages, locks taken
through the model (acquire, bind, unbind) and jobs parked the way pgbus
parks them. Back-dating a lock is the only thing done behind the model."""

from __future__ import annotations

import json
from datetime import timedelta

import sqlalchemy as sa

from pgbus_web import defaults
from pgbus_web.models import pgmq_queues, uniqueness_keys

FLOOR = defaults.LOCK_AGE_FLOOR
QUEUE = "pgbus_default"


class Locks:
    """Builds locks in each state on a real database."""

    def __init__(self, engine):
        self.engine = engine

    def queue(self, name: str = QUEUE) -> str:
        with self.engine.begin() as conn:
            conn.execute(sa.text("SELECT pgmq.create(:queue)"), {"queue": name})
        return name

    def send(self, queue: str = QUEUE, body: dict | None = None) -> dict:
        """A message on *queue* (created if needed): its msg_id and enqueued_at."""
        self.queue(queue)
        with self.engine.begin() as conn:
            msg_id = conn.execute(
                sa.text("SELECT pgmq.send(:queue, CAST(:body AS jsonb))"),
                {"queue": queue, "body": json.dumps(body or {})},
            ).scalar_one()
            return pgmq_queues.find_message(conn, pgmq_queues.find_queue(conn, queue), msg_id)

    def message(self, queue: str, msg_id: int) -> dict | None:
        with self.engine.connect() as conn:
            return pgmq_queues.find_message(conn, pgmq_queues.find_queue(conn, queue), msg_id)

    def read(self, queue: str = QUEUE) -> None:
        """A worker reading one message (read_ct goes up)."""
        with self.engine.begin() as conn:
            conn.execute(sa.text("SELECT * FROM pgmq.read(:queue, 30, 1)"), {"queue": queue})

    def delete(self, queue: str, msg_id: int) -> None:
        with self.engine.begin() as conn:
            conn.execute(
                sa.text("SELECT pgmq.delete(:queue, CAST(:msg_id AS bigint))"), {"queue": queue, "msg_id": msg_id}
            )

    def acquire(self, key: str, *, age: timedelta | None = None):
        """An unbound lock; *age* back-dates it."""
        with self.engine.begin() as conn:
            stamp = uniqueness_keys.acquire(conn, key)
        assert stamp is not None, f"{key} was already held"
        if age is not None:
            self.backdate(key, age)
        return stamp

    def backdate(self, key: str, age: timedelta) -> None:
        with self.engine.begin() as conn:
            conn.execute(
                sa.text(
                    "UPDATE pgbus_uniqueness_keys SET created_at = LOCALTIMESTAMP - CAST(:age AS interval) "
                    "WHERE lock_key = :key"
                ),
                {"key": key, "age": age},
            )

    def live(self, key: str, queue: str = QUEUE, *, age: timedelta | None = None) -> dict:
        """A lock bound to a message that exists; returns the message."""
        stamp = self.acquire(key)
        message = self.send(queue)
        with self.engine.begin() as conn:
            assert uniqueness_keys.bind(conn, key, queue_name=queue, msg_id=message["msg_id"], acquired_at=stamp) == 1
        if age is not None:
            self.backdate(key, age)
        return message

    def gone(self, key: str, queue: str = QUEUE, *, age: timedelta | None = None) -> dict:
        message = self.live(key, queue, age=age)
        self.delete(queue, message["msg_id"])
        return message

    def park(self, key: str, *, concurrency_key: str = "InvoiceJob/tenant-1", double_encoded: bool = False) -> None:
        payload = json.dumps({"job_class": "InvoiceJob", "arguments": [1], "pgbus_uniqueness_key": key})
        if double_encoded:
            payload = json.dumps(payload)
        with self.engine.begin() as conn:
            conn.execute(
                sa.text(
                    "INSERT INTO pgbus_blocked_executions (concurrency_key, queue_name, payload) "
                    "VALUES (:concurrency_key, :queue, CAST(:payload AS jsonb))"
                ),
                {"concurrency_key": concurrency_key, "queue": QUEUE, "payload": payload},
            )

    def parked(self, key: str, *, age: timedelta | None = None, **park) -> None:
        self.acquire(key, age=age)
        self.park(key, **park)

    def row(self, key: str) -> dict | None:
        with self.engine.connect() as conn:
            return uniqueness_keys.find(conn, key)

    def snapshot(self) -> tuple:
        """Every lock row, parked job and message: what "nothing changed" compares."""
        with self.engine.connect() as conn:
            locks = conn.execute(sa.text("SELECT * FROM pgbus_uniqueness_keys ORDER BY lock_key")).all()
            parked = conn.execute(sa.text("SELECT * FROM pgbus_blocked_executions ORDER BY id")).all()
            messages = []
            for table in pgmq_queues.queue_tables(conn):
                messages += [
                    (table.name, *row)
                    for row in conn.execute(
                        sa.text(
                            f"SELECT msg_id, read_ct FROM {pgmq_queues.qualified_table(conn, table)} ORDER BY msg_id"
                        )
                    )
                ]
            return locks, parked, messages

    def states(self, **kwargs) -> dict[str, str]:
        """lock_key -> state, over every lock."""
        with self.engine.connect() as conn:
            page = uniqueness_keys.list_locks(conn, age_floor=kwargs.pop("age_floor", FLOOR), limit=1000, **kwargs)
        return {row["lock_key"]: row["state"] for row in page.rows}
