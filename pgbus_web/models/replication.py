"""The write-ahead log's positions, as the primary and a streaming replica
tell them (no table: PostgreSQL's own functions). db.ReplicaWatch reads
them to decide where pages read (docs/replica.md).

An LSN is handed around as an int (the byte position in the WAL), which
compares as the server's pg_lsn does; ``lsn_text`` writes it as the
server does ("16/B374D848")."""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import Connection


def lsn_int(text: str | None) -> int | None:
    """The server's "X/Y" text as an int; None for None or anything else."""
    if not isinstance(text, str):
        return None
    high, slash, low = text.partition("/")
    if not slash or not high or not low or len(high) > 8 or len(low) > 8:
        return None
    try:
        return (int(high, 16) << 32) | int(low, 16)
    except ValueError:
        return None


def lsn_text(value: int) -> str:
    return f"{value >> 32:X}/{value & 0xFFFFFFFF:X}"


# The headers PostgreSQL puts at the start of a WAL page (short) and of a
# segment's first page (long): an insert position just past one means no
# record has begun on that page yet.
SHORT_PAGE_HEADER = 24
LONG_PAGE_HEADER = 40


def written(conn: Connection) -> int:
    """Read after a commit: a WAL position at or past that commit's
    record, so a replica that has replayed up to here shows every write
    committed before this was read.

    The flush position: COMMIT returns once its record is flushed (unless
    synchronous_commit is off), and a standby gets only flushed WAL. With
    synchronous_commit off, the insert position instead (the commit may
    not be flushed yet), taken back to its page's start when it sits just
    past a page's header, where a standby's replay position stops."""
    row = conn.execute(
        sa.text(
            "SELECT current_setting('synchronous_commit') = 'off',"
            " pg_current_wal_flush_lsn()::text, pg_current_wal_insert_lsn()::text,"
            " (SELECT setting::bigint FROM pg_settings WHERE name = 'wal_block_size'),"
            " (SELECT setting::bigint FROM pg_settings WHERE name = 'wal_segment_size')"
        )
    ).one()
    if not row[0]:
        return _server_lsn(row[1])
    position, page, segment = _server_lsn(row[2]), int(row[3]), int(row[4])
    into_page = position % page
    if into_page == SHORT_PAGE_HEADER or (into_page == LONG_PAGE_HEADER and position % segment == LONG_PAGE_HEADER):
        position -= into_page
    return position


def flushed(conn: Connection) -> int:
    """Where the primary's WAL is flushed to: what a standby can have."""
    return _server_lsn(conn.execute(sa.text("SELECT pg_current_wal_flush_lsn()::text")).scalar_one())


def _server_lsn(text: str) -> int:
    """A WAL position the server itself wrote as text: always "X/Y"."""
    position = lsn_int(text)
    if position is None:
        raise ValueError(f"the server gave {text!r} for a WAL position")
    return position


@dataclass(frozen=True)
class Replay:
    """How far a standby has replayed."""

    # False: the server is not (or no longer) a standby.
    in_recovery: bool
    # The last WAL position replayed; None before any.
    replayed: int | None
    # The last WAL position received from the primary; None before any.
    received: int | None
    # True when its startup process waits for WAL to arrive: it has
    # replayed every whole record it received (the replay position then
    # stops at the last whole record, before a record the primary has only
    # partly flushed). None when this role cannot see it (pg_stat_activity
    # shows other processes' wait events to pg_read_all_stats only).
    waiting_for_wal: bool | None
    # Seconds since the last replayed transaction committed on the
    # primary (the standby's clock against the primary's commit
    # timestamp); None before any since the standby started.
    since_last_commit: float | None


def replay(conn: Connection) -> Replay:
    row = conn.execute(
        sa.text(
            "SELECT pg_is_in_recovery(), pg_last_wal_replay_lsn()::text,"
            " extract(epoch FROM clock_timestamp() - pg_last_xact_replay_timestamp())::float8,"
            " pg_last_wal_receive_lsn()::text,"
            " (SELECT wait_event FROM pg_stat_activity WHERE backend_type = 'startup')"
        )
    ).one()
    return Replay(
        bool(row[0]),
        lsn_int(row[1]),
        lsn_int(row[3]),
        None if row[4] is None else row[4] == "RecoveryWalStream",
        None if row[2] is None else max(0.0, float(row[2])),
    )
