"""PGMQ's queues as pgbus-web reads them: which queues exist (pgmq.meta,
checked against the catalog), a message by id, deleting one, and the
per-queue subquery the lock queries join through.

PGMQ keeps each queue in a table of its own, ``pgmq.q_<name>``, so looking a
message up takes one branch per queue. Those tables are read from
``pgmq.meta``, checked against the catalog and quoted by the dialect;
nothing a request carries reaches the SQL text, only the binds.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection


@dataclass(frozen=True)
class QueueTable:
    """A PGMQ queue (its name as pgmq.meta has it) whose table exists."""

    name: str
    relname: str


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


def find_message(
    conn: Connection, table: QueueTable, msg_id: int, *, for_update: bool = False
) -> dict[str, Any] | None:
    """The message's msg_id, enqueued_at and read_ct, or None when it is gone."""
    lock = " FOR UPDATE" if for_update else ""
    row = conn.execute(
        sa.text(
            f"SELECT msg_id, enqueued_at, read_ct FROM {qualified_table(conn, table)} WHERE msg_id = :msg_id{lock}"
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
            "SELECT NULL::bigint AS msg_id, NULL::timestamptz AS enqueued_at, NULL::integer AS read_ct WHERE false"
        )
    return "\nUNION ALL\n".join(branches), params


def create(conn: Connection, queue_name: str) -> None:
    conn.execute(sa.text("SELECT pgmq.create(:queue)"), {"queue": queue_name})


def send_batch(conn: Connection, queue_name: str, messages: list[str]) -> list[int]:
    """Send *messages* (JSON texts) to *queue_name*; their msg_ids, in order."""
    return list(
        conn.execute(
            sa.text("SELECT pgmq.send_batch(:queue, CAST(:messages AS jsonb[]))"),
            {"queue": queue_name, "messages": messages},
        )
        .scalars()
        .all()
    )


def delete(conn: Connection, queue_name: str, msg_id: int) -> bool:
    return bool(
        conn.execute(
            sa.text("SELECT pgmq.delete(:queue_name, :msg_id)"), {"queue_name": queue_name, "msg_id": int(msg_id)}
        ).scalar()
    )


def delete_many(conn: Connection, queue_name: str, msg_ids: list[int]) -> None:
    conn.execute(
        sa.text("SELECT pgmq.delete(:queue, CAST(:ids AS bigint[]))"), {"queue": queue_name, "ids": list(msg_ids)}
    )


def queue_depths(conn: Connection, tables: list[QueueTable], *, now: datetime) -> list[dict[str, Any]]:
    """Each queue's depth (its messages), how many are visible at *now* (their
    visibility timeout passed) and the moment its oldest message was
    enqueued (None when empty), one UNION ALL branch per queue, in
    *tables*' order. Counting reads the whole queue table: a queue is a
    backlog of what is due, not a history, so it stays small."""
    if not tables:
        return []
    branches = []
    params: dict[str, Any] = {"now": now}
    for index, table in enumerate(tables):
        bind = f"queue_{index}"
        params[bind] = table.name
        branches.append(
            f"SELECT {index} AS position, CAST(:{bind} AS text) AS queue_name, count(*) AS depth,"
            " count(*) FILTER (WHERE q.vt <= :now) AS visible,"
            f" min(q.enqueued_at) AS oldest_enqueued_at FROM {qualified_table(conn, table)} AS q"
        )
    rows = conn.execute(sa.text("\nUNION ALL\n".join(branches) + "\nORDER BY position"), params)
    return [
        {
            "queue_name": row.queue_name,
            "depth": int(row.depth),
            "visible": int(row.visible),
            "oldest_enqueued_at": row.oldest_enqueued_at,
        }
        for row in rows
    ]
