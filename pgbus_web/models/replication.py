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


def written(conn: Connection) -> int:
    """Where the primary's WAL ends now (its insert position): after a
    commit, at or past that commit's record. A replica that has replayed
    up to here shows every write committed before this was read."""
    return lsn_int(conn.execute(sa.text("SELECT pg_current_wal_insert_lsn()::text")).scalar_one())


@dataclass(frozen=True)
class Replay:
    """How far a standby has replayed."""

    # False: the server is not (or no longer) a standby.
    in_recovery: bool
    # The last WAL position replayed; None before any.
    replayed: int | None
    # Seconds since the last replayed transaction committed on the
    # primary (the standby's clock against the primary's commit
    # timestamp); None before any.
    since_last_commit: float | None


def replay(conn: Connection) -> Replay:
    row = conn.execute(sa.text(
        "SELECT pg_is_in_recovery(), pg_last_wal_replay_lsn()::text,"
        " extract(epoch FROM clock_timestamp() - pg_last_xact_replay_timestamp())::float8"
    )).one()
    return Replay(bool(row[0]), lsn_int(row[1]), None if row[2] is None else max(0.0, float(row[2])))
