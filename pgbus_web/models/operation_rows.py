"""pgbus_web_operations: one verb on every run a filter matches, done in
chunks (runtime/operation_policy.py and operation_runner.py hold the rules,
docs/operations.md the crash-safety argument).

Whoever holds an operation proves it with the heartbeat it last wrote (the
*fence*): every write of progress names it, so a process whose operation
was taken over (its heartbeat went stale) writes nothing more.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import Connection

from ..rules import states
from . import STATES, among, as_dict, as_dicts

COLUMNS = (
    "id, verb, filters, ceiling_id, params, reason, actor, status, total, moved, skipped, "
    "refused, cursor, heartbeat_at, created_at, started_at, finished_at, error, "
    "rate, max_in_flight, pace_log, paused_at, paused_by, resumed_at, resumed_by, approved_at, approved_by, "
    "held_seconds, requested_by, cancelled_by, cancel_reason, approve_reason, pause_reason, resume_reason"
)
# How many operations the recent ones are (the pages' list, GET /operations).
RECENT = 50
# Statuses an operation may still leave for another (cancel stops any of them).
UNFINISHED = STATES.OPERATION_UNFINISHED
# Statuses a chunk in hand still lands its counts in: running, or cancelled
# or paused while the chunk ran.
_COUNTED = among((states.OPERATION_RUNNING, states.OPERATION_CANCELLED, states.OPERATION_PAUSED))

_INSERT = sa.text(
    f"""
    INSERT INTO pgbus_web_operations
        (verb, filters, ceiling_id, params, reason, actor, total, created_at, status, rate, max_in_flight,
         requested_by)
    VALUES (:verb, :filters, :ceiling_id, :params, :reason, :actor, :total, :now, :status, :rate, :max_in_flight,
            :requested_by)
    RETURNING {COLUMNS}
    """
).bindparams(sa.bindparam("filters", type_=JSONB), sa.bindparam("params", type_=JSONB))


def insert(
    conn: Connection,
    *,
    verb: str,
    filters: Mapping[str, str],
    ceiling_id: int,
    params: Mapping[str, Any],
    reason: str,
    actor: str,
    total: int,
    now: datetime,
    status: str = states.OPERATION_QUEUED,
    rate: float | None = None,
    max_in_flight: int | None = None,
    requested_by: str | None = None,
) -> dict[str, Any]:
    return as_dict(
        conn.execute(
            _INSERT,
            {
                "requested_by": requested_by,
                "verb": verb,
                "filters": dict(filters),
                "ceiling_id": int(ceiling_id),
                "params": dict(params),
                "reason": reason,
                "actor": actor,
                "total": int(total),
                "now": now,
                "status": status,
                "rate": rate,
                "max_in_flight": max_in_flight,
            },
        ).one()
    )


def find(conn: Connection, operation_id: int) -> dict[str, Any] | None:
    return as_dict(
        conn.execute(
            sa.text(f"SELECT {COLUMNS} FROM pgbus_web_operations WHERE id = :id"), {"id": int(operation_id)}
        ).first()
    )


def recent(conn: Connection, *, limit: int = RECENT) -> list[dict[str, Any]]:
    """The newest *limit* operations first."""
    return as_dicts(
        conn.execute(
            sa.text(f"SELECT {COLUMNS} FROM pgbus_web_operations ORDER BY created_at DESC, id DESC LIMIT :limit"),
            {"limit": int(limit)},
        )
    )


def any_open(conn: Connection) -> bool:
    """True when an operation is queued or running (the serving process's
    cheap look before it tries a claim)."""
    found: bool = conn.execute(
        sa.text(f"SELECT EXISTS (SELECT 1 FROM pgbus_web_operations WHERE status IN {STATES.OPERATION_OPEN})")
    ).scalar_one()
    return found


def outcome_totals(conn: Connection) -> dict[tuple[str, str], int]:
    """{(verb, outcome): runs} over every operation kept: the runs each
    verb moved, skipped and refused (the metrics' operation outcomes)."""
    rows = conn.execute(
        sa.text(
            "SELECT verb, COALESCE(sum(moved), 0), COALESCE(sum(skipped), 0), COALESCE(sum(refused), 0) "
            "FROM pgbus_web_operations GROUP BY verb"
        )
    )
    totals: dict[tuple[str, str], int] = {}
    for verb, moved, skipped, refused in rows:
        totals.update({(verb, "moved"): int(moved), (verb, "skipped"): int(skipped), (verb, "refused"): int(refused)})
    return totals


def status_counts(conn: Connection) -> dict[tuple[str, str], int]:
    """{(verb, status): operations}."""
    rows = conn.execute(sa.text("SELECT verb, status, count(*) FROM pgbus_web_operations GROUP BY verb, status"))
    return {(verb, status): int(count) for verb, status, count in rows}


def claim(
    conn: Connection, *, now: datetime, stale_before: datetime, operation_id: int | None = None
) -> dict[str, Any] | None:
    """Take the oldest queued operation, or a running one whose heartbeat
    is older than *stale_before* (its process died); with *operation_id*,
    that one only. SKIP LOCKED: two claimers never wait on each other, and
    never take the same one. The row comes back with its new heartbeat,
    the fence of every later write."""
    only = "AND id = :operation_id" if operation_id is not None else ""
    return as_dict(
        conn.execute(
            sa.text(
                f"""
            UPDATE pgbus_web_operations
            SET status = {STATES.OPERATION_RUNNING}, heartbeat_at = :now, started_at = COALESCE(started_at, :now)
            WHERE id = (
                SELECT id FROM pgbus_web_operations
                WHERE (status = {STATES.OPERATION_QUEUED}
                       OR (status = {STATES.OPERATION_RUNNING} AND heartbeat_at < :stale_before)) {only}
                ORDER BY id
                LIMIT 1
                FOR UPDATE SKIP LOCKED
            )
            RETURNING {COLUMNS}
            """
            ),
            {"now": now, "stale_before": stale_before, "operation_id": operation_id},
        ).first()
    )


def progress(
    conn: Connection,
    operation_id: int,
    *,
    fence: datetime,
    now: datetime,
    cursor: int,
    moved: int,
    skipped: int,
    refused: int,
    pace_log: list[Any] | None = None,
) -> dict[str, Any] | None:
    """Add one chunk's counts and move the cursor past it, with a new
    heartbeat (and, given, the pace's bookkeeping); None when *fence* no
    longer holds (taken over): nothing written. A cancelled or paused
    operation still gets the counts of the chunk that was in hand."""
    return as_dict(
        conn.execute(
            sa.text(
                f"""
            UPDATE pgbus_web_operations
            SET moved = moved + :moved, skipped = skipped + :skipped, refused = refused + :refused,
                cursor = GREATEST(cursor, :cursor), heartbeat_at = :now,
                pace_log = COALESCE(:pace_log, pace_log)
            WHERE id = :id AND heartbeat_at = :fence AND status IN {_COUNTED}
            RETURNING {COLUMNS}
            """
            ).bindparams(sa.bindparam("pace_log", type_=JSONB(none_as_null=True))),
            {
                "id": int(operation_id),
                "fence": fence,
                "now": now,
                "cursor": int(cursor),
                "moved": int(moved),
                "skipped": int(skipped),
                "refused": int(refused),
                "pace_log": list(pace_log) if pace_log is not None else None,
            },
        ).first()
    )


def finish(conn: Connection, operation_id: int, *, fence: datetime, now: datetime) -> dict[str, Any] | None:
    """Done. moved is counted again from the audit trail: the runs with an
    event of this operation, whoever wrote it (a holder that lost the
    operation may still commit runs of its chunk after the taker walked
    past them, and those no longer match the filter). The runs counted at
    preview that are neither moved nor counted otherwise had moved on
    before their turn: skipped."""
    return as_dict(
        conn.execute(
            sa.text(
                f"""
            WITH acted AS (
                SELECT count(DISTINCT e.workflow_id) AS runs FROM pgbus_workflow_events e
                WHERE e.details ? 'operation_id' AND e.details ->> 'operation_id' = :operation
            )
            UPDATE pgbus_web_operations
            SET status = {STATES.OPERATION_DONE}, finished_at = :now, heartbeat_at = :now, moved = acted.runs,
                skipped = skipped + GREATEST(total - acted.runs - skipped - refused, 0)
            FROM acted
            WHERE id = :id AND heartbeat_at = :fence AND status = {STATES.OPERATION_RUNNING}
            RETURNING {COLUMNS}
            """
            ),
            {"id": int(operation_id), "fence": fence, "now": now, "operation": str(operation_id)},
        ).first()
    )


def fail(conn: Connection, operation_id: int, *, fence: datetime, now: datetime, error: str) -> bool:
    return (
        conn.execute(
            sa.text(
                f"UPDATE pgbus_web_operations SET status = {STATES.OPERATION_FAILED}, finished_at = :now, "
                "error = :error "
                f"WHERE id = :id AND heartbeat_at = :fence AND status = {STATES.OPERATION_RUNNING}"
            ),
            {"id": int(operation_id), "fence": fence, "now": now, "error": error[:1000]},
        ).rowcount
        == 1
    )


def release(conn: Connection, operation_id: int, *, fence: datetime) -> bool:
    """Give a running operation back to the queue (a stopping process):
    another process claims it at once instead of waiting for staleness."""
    return (
        conn.execute(
            sa.text(
                f"UPDATE pgbus_web_operations SET status = {STATES.OPERATION_QUEUED}, heartbeat_at = NULL "
                f"WHERE id = :id AND heartbeat_at = :fence AND status = {STATES.OPERATION_RUNNING}"
            ),
            {"id": int(operation_id), "fence": fence},
        ).rowcount
        == 1
    )


def cancel(
    conn: Connection, operation_id: int, *, now: datetime, actor: str | None = None, reason: str | None = None
) -> dict[str, Any] | None:
    """Any status that has not ended (awaiting approval, queued, running,
    paused) -> cancelled, saying who and why; None when it had ended."""
    return as_dict(
        conn.execute(
            sa.text(
                f"""
            UPDATE pgbus_web_operations SET status = {STATES.OPERATION_CANCELLED}, finished_at = :now,
                   cancelled_by = :actor, cancel_reason = :reason
            WHERE id = :id AND status IN {UNFINISHED}
            RETURNING {COLUMNS}
            """
            ),
            {"id": int(operation_id), "now": now, "actor": actor, "reason": reason},
        ).first()
    )


def renew(conn: Connection, operation_id: int, *, fence: datetime, now: datetime) -> datetime | None:
    """A new heartbeat for a running operation whose holder still holds
    *fence* (a long chunk, so nobody takes it over meanwhile): the new
    fence, or None when it is no longer held."""
    return conn.execute(
        sa.text(
            "UPDATE pgbus_web_operations SET heartbeat_at = :now "
            f"WHERE id = :id AND heartbeat_at = :fence AND status = {STATES.OPERATION_RUNNING} RETURNING heartbeat_at"
        ),
        {"id": int(operation_id), "fence": fence, "now": now},
    ).scalar()


def pause(
    conn: Connection, operation_id: int, *, now: datetime, actor: str, reason: str | None = None
) -> dict[str, Any] | None:
    """queued or running -> paused, saying who and when; None when it was
    neither. The heartbeat stays: a holder's next fenced write still lands
    (the counts of the chunk in hand), sees paused and drops it."""
    return as_dict(
        conn.execute(
            sa.text(
                f"""
            UPDATE pgbus_web_operations SET status = {STATES.OPERATION_PAUSED}, paused_at = :now, paused_by = :actor,
                   pause_reason = :reason
            WHERE id = :id AND status IN {STATES.OPERATION_OPEN}
            RETURNING {COLUMNS}
            """
            ),
            {"id": int(operation_id), "now": now, "actor": actor, "reason": reason},
        ).first()
    )


def go_on(
    conn: Connection, operation_id: int, *, now: datetime, actor: str, reason: str | None = None
) -> dict[str, Any] | None:
    """paused -> queued (any process claims it), saying who and when, and
    adding the pause's length to held_seconds; None when it was not paused."""
    return as_dict(
        conn.execute(
            sa.text(
                f"""
            UPDATE pgbus_web_operations SET status = {STATES.OPERATION_QUEUED}, resumed_at = :now, resumed_by = :actor,
                   resume_reason = :reason,
                   held_seconds = held_seconds + GREATEST(EXTRACT(EPOCH FROM (:now - paused_at)), 0)
            WHERE id = :id AND status = {STATES.OPERATION_PAUSED}
            RETURNING {COLUMNS}
            """
            ),
            {"id": int(operation_id), "now": now, "actor": actor, "reason": reason},
        ).first()
    )


def approve(
    conn: Connection, operation_id: int, *, now: datetime, actor: str, key: str | None = None, reason: str | None = None
) -> dict[str, Any] | None:
    """awaiting_approval -> queued, with the approver, the moment and why,
    when neither *actor* nor the principal *key* asked for it; None otherwise."""
    return as_dict(
        conn.execute(
            sa.text(
                f"""
            UPDATE pgbus_web_operations
            SET status = {STATES.OPERATION_QUEUED}, approved_at = :now, approved_by = :actor, approve_reason = :reason
            WHERE id = :id AND status = {STATES.OPERATION_AWAITING_APPROVAL} AND actor <> :actor
              AND COALESCE(requested_by, actor) <> :key
            RETURNING {COLUMNS}
            """
            ),
            {"id": int(operation_id), "now": now, "actor": actor, "key": key or actor, "reason": reason},
        ).first()
    )


def set_pace(conn: Connection, operation_id: int, changes: Mapping[str, Any]) -> dict[str, Any] | None:
    """Set rate and/or max_in_flight (*changes*: those names, a value or
    None for none) of an operation that has not ended; None when it had."""
    sets = ", ".join(f"{name} = :{name}" for name in ("rate", "max_in_flight") if name in changes)
    return as_dict(
        conn.execute(
            sa.text(
                f"""
            UPDATE pgbus_web_operations SET {sets}
            WHERE id = :id AND status IN {UNFINISHED}
            RETURNING {COLUMNS}
            """
            ),
            {"id": int(operation_id), **{name: changes[name] for name in ("rate", "max_in_flight") if name in changes}},
        ).first()
    )


def approvals(conn: Connection, operation_ids: Iterable[Any]) -> dict[int, dict[str, Any]]:
    """{id: {approved_by, approved_at}} of those of *operation_ids* that were
    approved (the audit sentences of their runs name the approver)."""
    ids = sorted({int(value) for value in operation_ids})
    if not ids:
        return {}
    rows = conn.execute(
        sa.text(
            "SELECT id, approved_by, approved_at FROM pgbus_web_operations "
            "WHERE id = ANY(:ids) AND approved_by IS NOT NULL"
        ),
        {"ids": ids},
    )
    return {int(row.id): {"approved_by": row.approved_by, "approved_at": row.approved_at} for row in rows}
