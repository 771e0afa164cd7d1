"""pgbus_workflows rows: finding, locking, inserting and moving one run (or
many) from status to status.

Every status change goes through the runtime as ``lock_for`` then one
guarded ``transition`` inside the same transaction.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from ..rules.columns import LATEST_STEP_FIELDS, latest_list, step_fields_list
from . import STATES, as_dict, as_dicts
from .worker_heartbeats import WORKER_SETTING

# Columns insert_run and transition may write; names outside this list are
# refused rather than spliced into SQL.
COLUMNS = (
    "workflow_id",
    "workflow_class",
    "status",
    "current_step",
    "arguments",
    "subject_type",
    "subject_id",
    "idempotency_key",
    "definition_digest",
    "paused_at",
    "started_at",
    "finished_at",
    "created_at",
    "updated_at",
)
SELECT_COLUMNS = "id, " + ", ".join(COLUMNS)


SUBJECT_INDEX = "pgbus_workflows_one_ongoing_per_subject"


class SubjectAlreadyOngoing(Exception):
    """Another ongoing run of this class already exists for this subject."""

    def __init__(self, workflow_class: str | None, subject_type: str | None, subject_id: str | None) -> None:
        self.workflow_class = workflow_class
        self.subject_type = subject_type
        self.subject_id = subject_id
        super().__init__(f"{workflow_class} already has an ongoing run for {subject_type} {subject_id}")


def _checked(names: Iterable[str]) -> list[str]:
    names = list(names)
    unknown = [name for name in names if name not in COLUMNS]
    if unknown:
        raise ValueError(f"not a pgbus_workflows column: {', '.join(unknown)}")
    return names


def find(conn: Connection, workflow_id: str) -> dict[str, Any] | None:
    row = conn.execute(
        sa.text(f"SELECT {SELECT_COLUMNS} FROM pgbus_workflows WHERE workflow_id = :workflow_id"),
        {"workflow_id": workflow_id},
    ).first()
    return as_dict(row)


# Set (transaction-local) by a writer that keeps its runs' latest_* columns
# itself: the row trigger pgbus_workflow_steps_latest_on_run then skips its
# per-step-row UPDATE of the run (schema/v3.sql), and the writer ends with
# transition(..., sync_latest=True) or sync_latest() on every run whose
# steps it wrote. Any other writer leaves it unset and has the trigger.
LATEST_BY_WRITER = "pgbus_web.latest_by_writer"


def lock_for(
    conn: Connection, workflow_id: str, *, sets_latest: bool = False, worker_id: int | None = None
) -> dict[str, Any] | None:
    """The run's row, locked FOR UPDATE until the transaction ends; None when unknown.
    *sets_latest*: this transaction keeps latest_* itself (LATEST_BY_WRITER).
    *worker_id*: the worker whose transaction this is, declared for the steps
    it starts (models/worker_heartbeats.WORKER_SETTING), in the same statement."""
    declare = f", set_config('{LATEST_BY_WRITER}', 'on', true) AS latest_by_writer" if sets_latest else ""
    binds: dict[str, Any] = {"workflow_id": workflow_id}
    if worker_id is not None:
        declare += f", set_config('{WORKER_SETTING}', :worker_id, true) AS worker_declared"
        binds["worker_id"] = str(int(worker_id))
    row = as_dict(
        conn.execute(
            sa.text(
                f"SELECT {SELECT_COLUMNS}{declare} FROM pgbus_workflows WHERE workflow_id = :workflow_id FOR UPDATE"
            ),
            binds,
        ).first()
    )
    if row is not None:
        row.pop("latest_by_writer", None)
        row.pop("worker_declared", None)
    return row


# What a chunk of an operation decides from (runtime/chunks): the run's
# row without its arguments and moments, which cost a chunk more to read
# than to lock.
CHUNK_COLUMNS = "id, workflow_id, workflow_class, status, current_step, subject_type, subject_id"


def lock_many(
    conn: Connection,
    workflow_ids: list[str],
    *,
    sets_latest: bool = False,
    commit_unflushed: bool = False,
    columns: str | None = None,
) -> list[dict[str, Any]]:
    """lock_for() of many runs at once, in id order, without waiting: a run
    whose row another transaction holds is left out (SKIP LOCKED), as is
    an unknown one. *sets_latest*: this transaction keeps latest_* itself
    (LATEST_BY_WRITER; move_many(..., sync_latest=True) writes them).
    *commit_unflushed*: its COMMIT does not wait for the WAL flush
    (synchronous_commit off, for this transaction only): for a writer whose
    next transaction commits durably and so flushes this one too. Both are
    declared in the same statement, for the rows it returns. *columns*:
    CHUNK_COLUMNS (default: every column)."""
    if columns not in (None, CHUNK_COLUMNS):
        raise ValueError("lock_many reads every column or CHUNK_COLUMNS")
    if not workflow_ids:
        return []
    declare = f", set_config('{LATEST_BY_WRITER}', 'on', true) AS latest_by_writer" if sets_latest else ""
    if commit_unflushed:
        declare += ", set_config('synchronous_commit', 'off', true) AS synchronous_commit"
    rows = as_dicts(
        conn.execute(
            sa.text(
                f"SELECT {columns or SELECT_COLUMNS}{declare} FROM pgbus_workflows "
                "WHERE workflow_id = ANY(:workflow_ids) ORDER BY id FOR UPDATE SKIP LOCKED"
            ),
            {"workflow_ids": list(workflow_ids)},
        )
    )
    for row in rows:
        row.pop("latest_by_writer", None)
        row.pop("synchronous_commit", None)
    return rows


def any_run(conn: Connection) -> bool:
    """True when the table holds a run (the demo seeds an empty database only)."""
    found: bool = conn.execute(sa.text("SELECT EXISTS (SELECT 1 FROM pgbus_workflows)")).scalar_one()
    return found


def highest_id(conn: Connection) -> int:
    """The highest run id so far, 0 for none."""
    highest: int = conn.execute(sa.text("SELECT COALESCE(max(id), 0) FROM pgbus_workflows")).scalar_one()
    return highest


def waiting_for_signal(conn: Connection, signal: str, *, waiting_before: datetime, limit: int) -> list[str]:
    """Newest first, the ids of waiting runs whose latest step has waited
    for *signal* since before *waiting_before*."""
    return list(
        conn.execute(
            sa.text(
                f"""
            SELECT w.workflow_id
            FROM pgbus_workflows w
            JOIN LATERAL (
                SELECT wait_for, waiting_since FROM pgbus_workflow_steps
                WHERE workflow_id = w.workflow_id ORDER BY id DESC LIMIT 1
            ) s ON TRUE
            WHERE w.status = {STATES.WAITING} AND s.wait_for = :signal AND s.waiting_since < :before
            ORDER BY w.id DESC
            LIMIT :limit
            """
            ),
            {"signal": signal, "before": waiting_before, "limit": limit},
        )
        .scalars()
        .all()
    )


# The run's latest step, as the latest_* triggers read it (schema/v2.sql):
# joined into a run UPDATE by a writer that keeps latest_* itself.
_LATEST_FROM = f"""
    FROM (SELECT 1) AS one
    LEFT JOIN LATERAL (
        SELECT {", ".join(f"{field} AS l_{field}" for field in LATEST_STEP_FIELDS)}
        FROM pgbus_workflow_steps
        WHERE workflow_id = :workflow_id
        ORDER BY id DESC
        LIMIT 1
    ) l ON TRUE
"""
_LATEST_SET = f", ({latest_list()}) = ({step_fields_list('l', 'l_')})"


def transition(
    conn: Connection, workflow_id: str, *, from_: Iterable[str] | str, to: str, sync_latest: bool = False, **attrs: Any
) -> int:
    """Single-winner status change: 1 when this call moved the row, 0 when
    its status was not in *from_*. *attrs* are further columns to set.
    *sync_latest*: also set latest_* from the run's latest step, in the
    same row version (a writer that declared LATEST_BY_WRITER)."""
    from_statuses = [from_] if isinstance(from_, str) else list(from_)
    names = _checked(attrs)
    assignments = "".join(f", {name} = :{name}" for name in names)
    latest_set, latest_from = (_LATEST_SET, _LATEST_FROM) if sync_latest else ("", "")
    statement = sa.text(
        f"UPDATE pgbus_workflows w SET status = :to, updated_at = now(){assignments}{latest_set}"
        f"{latest_from} WHERE w.workflow_id = :workflow_id AND w.status = ANY(:from_statuses)"
    )
    if "arguments" in attrs:
        statement = statement.bindparams(sa.bindparam("arguments", type_=JSONB))
    result = conn.execute(
        statement,
        {"to": to, "workflow_id": workflow_id, "from_statuses": from_statuses, **attrs},
    )
    return result.rowcount


_SYNC_LATEST = sa.text(
    "UPDATE pgbus_workflows w SET updated_at = w.updated_at"
    + _LATEST_SET
    + _LATEST_FROM
    + " WHERE w.workflow_id = :workflow_id"
    + f" AND ({latest_list('w')}) IS DISTINCT FROM ({step_fields_list('l', 'l_')})"
)


def sync_latest(conn: Connection, workflow_id: str) -> None:
    """latest_* from the run's latest step, written only when they differ
    (a writer that declared LATEST_BY_WRITER and moved no status)."""
    conn.execute(_SYNC_LATEST, {"workflow_id": workflow_id})


# The columns move_many may set besides status (the verbs' moves set no other).
MOVE_COLUMNS = ("current_step", "paused_at", "finished_at")
_MOVE_TYPES = {"current_step": "text", "paused_at": "timestamptz", "finished_at": "timestamptz"}


def move_many(
    conn: Connection, moves: list[dict[str, Any]], *, from_: Iterable[str], sync_latest: bool = False
) -> list[str]:
    """transition() of many runs in one statement: each move is a dict of
    workflow_id, ``to`` and any of MOVE_COLUMNS (a key left out keeps the
    column as it is). Every run moves from a status in *from_*;
    *sync_latest* also sets latest_* from each run's latest step, in the
    same row version (a writer that declared LATEST_BY_WRITER). Returns
    the workflow_ids moved. The runs are also named by ``= ANY`` of their
    ids, so the planner reads them from the workflow_id index rather than
    hashing every run in a status of *from_* to join them (the runs of
    a whole table in a status, per chunk)."""
    if not moves:
        return []
    unknown = {key for move in moves for key in move} - {"workflow_id", "to", *MOVE_COLUMNS}
    if unknown:
        raise ValueError(f"not a column move_many sets: {', '.join(sorted(unknown))}")
    binds: dict[str, Any] = {
        "from_statuses": list(from_),
        "workflow_ids": [move["workflow_id"] for move in moves],
        "statuses": [move["to"] for move in moves],
    }
    arrays = ["CAST(:workflow_ids AS text[])", "CAST(:statuses AS text[])"]
    names = ["workflow_id", "status"]
    sets = ["status = m.status", "updated_at = now()"]
    for column in MOVE_COLUMNS:
        if not any(column in move for move in moves):
            continue
        binds[f"set_{column}"] = [column in move for move in moves]
        binds[column] = [move.get(column) for move in moves]
        arrays += [f"CAST(:set_{column} AS boolean[])", f"CAST(:{column} AS {_MOVE_TYPES[column]}[])"]
        names += [f"set_{column}", column]
        sets.append(f"{column} = CASE WHEN m.set_{column} THEN m.{column} ELSE w.{column} END")
    latest_set = latest_join = ""
    if sync_latest:
        latest_set = _LATEST_SET
        latest_join = _LATEST_FROM.replace("FROM (SELECT 1) AS one", "").replace(":workflow_id", "m.workflow_id")
    statement = sa.text(
        f"UPDATE pgbus_workflows w SET {', '.join(sets)}{latest_set} "
        f"FROM unnest({', '.join(arrays)}) AS m({', '.join(names)}) {latest_join} "
        "WHERE w.workflow_id = m.workflow_id AND w.workflow_id = ANY(CAST(:workflow_ids AS text[]))"
        " AND w.status = ANY(:from_statuses) RETURNING w.workflow_id"
    )
    return list(conn.execute(statement, binds).scalars())


def insert_run(conn: Connection, attrs: Mapping[str, Any]) -> bool:
    """Insert a run. With an idempotency_key, a run of the same class and key
    already there means nothing is inserted and False comes back. A second
    ongoing run for the same subject raises SubjectAlreadyOngoing (inside a
    savepoint, so the caller's transaction stays usable)."""
    names = _checked(attrs)
    conflict = (
        " ON CONFLICT (workflow_class, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING"
        if attrs.get("idempotency_key") is not None
        else ""
    )
    statement = sa.text(
        f"INSERT INTO pgbus_workflows ({', '.join(names)}) "
        f"VALUES ({', '.join(':' + name for name in names)}){conflict} RETURNING id"
    )
    if "arguments" in attrs:
        statement = statement.bindparams(sa.bindparam("arguments", type_=JSONB))
    try:
        with conn.begin_nested():
            row = conn.execute(statement, dict(attrs)).first()
    except IntegrityError as exc:
        constraint = getattr(getattr(exc.orig, "diag", None), "constraint_name", None)
        if constraint == SUBJECT_INDEX:
            raise SubjectAlreadyOngoing(
                attrs.get("workflow_class"), attrs.get("subject_type"), attrs.get("subject_id")
            ) from None
        raise
    return row is not None


def definition_outdated(run: Mapping[str, Any], current_digest: str | None) -> bool:
    """True when the run started on another step list than its definition
    declares now. *current_digest* is None when the definition is not
    registered in this process: nothing to compare, so not outdated."""
    if current_digest is None:
        return False
    return run.get("definition_digest") != current_digest


def find_by_idempotency_key(conn: Connection, workflow_class: str, idempotency_key: str) -> dict[str, Any] | None:
    """The run a start with this (class, idempotency key) already made."""
    row = conn.execute(
        sa.text(
            f"SELECT {SELECT_COLUMNS} FROM pgbus_workflows "
            "WHERE workflow_class = :workflow_class AND idempotency_key = :idempotency_key"
        ),
        {"workflow_class": workflow_class, "idempotency_key": idempotency_key},
    ).first()
    return as_dict(row)


def newest_completed(conn: Connection, workflow_class: str, *, other_than: str) -> str | None:
    """The id of the class's newest completed run (highest id) other than
    *other_than*: read down pgbus_workflows_class_id from the newest run of
    the class, so it stops at the first completed one it meets."""
    row = conn.execute(
        sa.text(
            "SELECT workflow_id FROM pgbus_workflows WHERE workflow_class = :workflow_class"
            f" AND status = {STATES.COMPLETED} AND workflow_id <> :other_than ORDER BY id DESC LIMIT 1"
        ),
        {"workflow_class": workflow_class, "other_than": other_than},
    ).first()
    return row[0] if row is not None else None
