"""pgbus_workflows: one row per run, and the queries over runs that the
dashboard and the runtime share (counts, stuck reasons, attention groups).

Every status change goes through the runtime as ``lock_for`` then one
guarded ``transition`` inside the same transaction.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any, Iterable, Mapping

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from ..rules import stuck
from . import as_dict, as_dicts

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

# Default page size of attention groups, and of a bulk action's walk.
ATTENTION_GROUP_LIMIT = 200
ATTENTION_IDS_LIMIT = 500

SUBJECT_INDEX = "pgbus_workflows_one_ongoing_per_subject"


class SubjectAlreadyOngoing(Exception):
    """Another ongoing run of this class already exists for this subject."""

    def __init__(self, workflow_class: str, subject_type: str, subject_id: str):
        self.workflow_class = workflow_class
        self.subject_type = subject_type
        self.subject_id = subject_id
        super().__init__(
            f"{workflow_class} already has an ongoing run for {subject_type} {subject_id}"
        )


def _now() -> datetime:
    return datetime.now(timezone.utc)


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


def lock_for(conn: Connection, workflow_id: str, *, sets_latest: bool = False) -> dict[str, Any] | None:
    """The run's row, locked FOR UPDATE until the transaction ends; None when unknown.
    *sets_latest*: this transaction keeps latest_* itself (LATEST_BY_WRITER)."""
    declare = f", set_config('{LATEST_BY_WRITER}', 'on', true) AS latest_by_writer" if sets_latest else ""
    row = as_dict(conn.execute(
        sa.text(
            f"SELECT {SELECT_COLUMNS}{declare} FROM pgbus_workflows "
            "WHERE workflow_id = :workflow_id FOR UPDATE"
        ),
        {"workflow_id": workflow_id},
    ).first())
    if row is not None:
        row.pop("latest_by_writer", None)
    return row


def lock_many(conn: Connection, workflow_ids: list[str]) -> list[dict[str, Any]]:
    """lock_for() of many runs at once, in id order, without waiting: a run
    whose row another transaction holds is left out (SKIP LOCKED), as is
    an unknown one."""
    if not workflow_ids:
        return []
    rows = conn.execute(
        sa.text(
            f"SELECT {SELECT_COLUMNS} FROM pgbus_workflows "
            "WHERE workflow_id = ANY(:workflow_ids) ORDER BY id FOR UPDATE SKIP LOCKED"
        ),
        {"workflow_ids": list(workflow_ids)},
    )
    return as_dicts(rows)


def any_run(conn: Connection) -> bool:
    """True when the table holds a run (the demo seeds an empty database only)."""
    return conn.execute(sa.text("SELECT EXISTS (SELECT 1 FROM pgbus_workflows)")).scalar_one()


def highest_id(conn: Connection) -> int:
    """The highest run id so far, 0 for none."""
    return conn.execute(sa.text("SELECT COALESCE(max(id), 0) FROM pgbus_workflows")).scalar_one()


def waiting_for_signal(conn: Connection, signal: str, *, waiting_before: datetime, limit: int) -> list[str]:
    """Newest first, the ids of waiting runs whose latest step has waited
    for *signal* since before *waiting_before*."""
    return conn.execute(
        sa.text(
            """
            SELECT w.workflow_id
            FROM pgbus_workflows w
            JOIN LATERAL (
                SELECT wait_for, waiting_since FROM pgbus_workflow_steps
                WHERE workflow_id = w.workflow_id ORDER BY id DESC LIMIT 1
            ) s ON TRUE
            WHERE w.status = 'waiting' AND s.wait_for = :signal AND s.waiting_since < :before
            ORDER BY w.id DESC
            LIMIT :limit
            """
        ),
        {"signal": signal, "before": waiting_before, "limit": limit},
    ).scalars().all()


# The run's latest step, as the latest_* triggers read it (schema/v2.sql):
# joined into a run UPDATE by a writer that keeps latest_* itself.
_LATEST_FROM = """
    FROM (SELECT 1) AS one
    LEFT JOIN LATERAL (
        SELECT id AS l_id, step_name AS l_step_name, status AS l_status, error_class AS l_error_class,
               scheduled_at AS l_scheduled_at, waiting_since AS l_waiting_since, timeout_at AS l_timeout_at
        FROM pgbus_workflow_steps
        WHERE workflow_id = :workflow_id
        ORDER BY id DESC
        LIMIT 1
    ) l ON TRUE
"""
_LATEST_SET = (
    ", (latest_step_id, latest_step_name, latest_step_status, latest_error_class,"
    " latest_scheduled_at, latest_waiting_since, latest_timeout_at) ="
    " (l.l_id, l.l_step_name, l.l_status, l.l_error_class, l.l_scheduled_at,"
    " l.l_waiting_since, l.l_timeout_at)"
)


def transition(
    conn: Connection, workflow_id: str, *, from_: Iterable[str] | str, to: str,
    sync_latest: bool = False, **attrs: Any
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
    "UPDATE pgbus_workflows w SET updated_at = w.updated_at" + _LATEST_SET + _LATEST_FROM
    + " WHERE w.workflow_id = :workflow_id"
    " AND (w.latest_step_id, w.latest_step_name, w.latest_step_status, w.latest_error_class,"
    " w.latest_scheduled_at, w.latest_waiting_since, w.latest_timeout_at)"
    " IS DISTINCT FROM (l.l_id, l.l_step_name, l.l_status, l.l_error_class, l.l_scheduled_at,"
    " l.l_waiting_since, l.l_timeout_at)"
)


def sync_latest(conn: Connection, workflow_id: str) -> None:
    """latest_* from the run's latest step, written only when they differ
    (a writer that declared LATEST_BY_WRITER and moved no status)."""
    conn.execute(_SYNC_LATEST, {"workflow_id": workflow_id})


def resume_many(conn: Connection, moves: list[dict[str, Any]], *, from_: Iterable[str]) -> int:
    """Many runs from a status in *from_* to ready in one statement, each
    with its current_step, paused_at cleared, and its latest_* columns
    already those of the scheduled step row about to be inserted (step_id,
    step_name, scheduled_at): the steps' trigger then finds nothing to
    change and leaves the row alone, one run row version instead of two.
    Returns how many moved."""
    if not moves:
        return 0
    return conn.execute(
        sa.text(
            """
            UPDATE pgbus_workflows w
            SET status = 'ready', updated_at = now(), current_step = m.step_name, paused_at = NULL,
                latest_step_id = m.step_id, latest_step_name = m.step_name, latest_step_status = 'scheduled',
                latest_error_class = NULL, latest_scheduled_at = m.scheduled_at, latest_waiting_since = NULL,
                latest_timeout_at = NULL
            FROM unnest(CAST(:workflow_ids AS text[]), CAST(:step_ids AS bigint[]), CAST(:step_names AS text[]),
                        CAST(:scheduled AS timestamptz[])) AS m(workflow_id, step_id, step_name, scheduled_at)
            WHERE w.workflow_id = m.workflow_id AND w.status = ANY(:from_statuses)
            """
        ),
        {"from_statuses": list(from_), "workflow_ids": [move["workflow_id"] for move in moves],
         "step_ids": [int(move["step_id"]) for move in moves], "step_names": [move["step_name"] for move in moves],
         "scheduled": [move["scheduled_at"] for move in moves]},
    ).rowcount


def insert_run(conn: Connection, attrs: Mapping[str, Any]) -> bool:
    """Insert a run. With an idempotency_key, a run of the same class and key
    already there means nothing is inserted and False comes back. A second
    ongoing run for the same subject raises SubjectAlreadyOngoing (inside a
    savepoint, so the caller's transaction stays usable)."""
    names = _checked(attrs)
    conflict = (
        " ON CONFLICT (workflow_class, idempotency_key)"
        " WHERE idempotency_key IS NOT NULL DO NOTHING"
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


# The exact counts per (class, status) that schema/v3.sql's triggers keep:
# the folded totals plus the deltas not folded yet. A few dozen rows
# whatever the history; every count by class and status reads them.
_KEPT_COUNTS = """
    SELECT workflow_class, status, sum(runs) AS runs
    FROM (
        SELECT workflow_class, status, runs FROM pgbus_workflow_counts {where}
        UNION ALL
        SELECT workflow_class, status, runs FROM pgbus_workflow_count_deltas {where}
    ) kept
    GROUP BY workflow_class, status
    HAVING sum(runs) <> 0
"""


def status_counts(conn: Connection, workflow_class: str | None = None) -> dict[tuple[str, str], int]:
    """{(workflow_class, status): runs} over every run (of *workflow_class*
    when given), from the kept counts: one small read, exact."""
    where = "WHERE workflow_class = :workflow_class" if workflow_class is not None else ""
    rows = conn.execute(
        sa.text(_KEPT_COUNTS.format(where=where)), {"workflow_class": workflow_class}
    )
    return {(klass, status): int(runs) for klass, status, runs in rows}


def counted_status_counts(conn: Connection) -> dict[tuple[str, str], int]:
    """status_counts as count(*) over the runs themselves: what the kept
    counts must equal (db check, the tests)."""
    rows = conn.execute(
        sa.text(
            "SELECT workflow_class, status, count(*) AS runs "
            "FROM pgbus_workflows GROUP BY workflow_class, status"
        )
    )
    return {(klass, status): runs for klass, status, runs in rows}


def count_mismatches(conn: Connection) -> dict[tuple[str, str], tuple[int, int]]:
    """{(class, status): (kept, counted)} where the kept counts differ from
    count(*), both read in one snapshot. Changes nothing."""
    conn.execute(sa.text("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY"))
    kept, counted = status_counts(conn), counted_status_counts(conn)
    return {
        key: (kept.get(key, 0), counted.get(key, 0))
        for key in sorted(set(kept) | set(counted))
        if kept.get(key, 0) != counted.get(key, 0)
    }


def repair_counts(conn: Connection) -> int:
    """Refill the kept counts from count(*); the number of (class, status)
    pairs that were wrong (nothing is written when none was). In the caller's transaction: the deltas table is
    locked first, which waits for every transaction that has written a
    delta and holds off the next ones (their runs' writes wait at their
    trigger) until this commits, so what is counted and what is kept match."""
    conn.execute(sa.text("LOCK TABLE pgbus_workflow_count_deltas IN EXCLUSIVE MODE"))
    kept, counted = status_counts(conn), counted_status_counts(conn)
    wrong = sum(1 for key in set(kept) | set(counted) if kept.get(key, 0) != counted.get(key, 0))
    if not wrong:
        return 0
    conn.execute(sa.text("DELETE FROM pgbus_workflow_count_deltas"))
    conn.execute(sa.text("DELETE FROM pgbus_workflow_counts"))
    conn.execute(
        sa.text(
            "INSERT INTO pgbus_workflow_counts (workflow_class, status, runs) "
            "SELECT workflow_class, status, count(*) FROM pgbus_workflows "
            "GROUP BY workflow_class, status"
        )
    )
    return wrong


def fold_counts(conn: Connection) -> None:
    """Fold the committed deltas into the totals now (when no other fold
    runs): after a bulk load that wrote many deltas with triggers off."""
    conn.execute(sa.text("SELECT pgbus_workflow_counts_fold()"))


def add_counts(conn: Connection, counts: Mapping[tuple[str, str], int]) -> None:
    """Add *counts* to the kept counts: for runs written while the triggers
    did not fire (the seeder's bulk load as a superuser)."""
    if counts:
        conn.execute(
            sa.text(
                "INSERT INTO pgbus_workflow_count_deltas (workflow_class, status, runs) "
                "SELECT * FROM unnest(CAST(:classes AS text[]), CAST(:statuses AS text[]), "
                "CAST(:runs AS bigint[]))"
            ),
            {
                "classes": [klass for klass, _ in counts],
                "statuses": [status for _, status in counts],
                "runs": list(counts.values()),
            },
        )


# Each paused or ready run (and, when waiting_before is given, each waiting
# run) with its latest step's facts and why it is stuck (NULL when it is
# not), by the rules of rules/stuck.py; "since" is when the run got stuck:
# paused_at, the overdue step's scheduled_at, or the waiting step's
# waiting_since.
# The latest step's facts are the run's latest_* columns (a trigger on the
# steps table keeps them), so the whole query reads pgbus_workflows_stuck
# only, instead of looking up the latest step of every such run. The
# needs-attention queries and the index's reason filter both read the same
# rules, so a group's count and its "N runs" list agree, and neither looks
# a run's steps up.
def _stuck_runs_sql(rules: tuple[stuck.Rule, ...], *, by_class: bool) -> str:
    since = "\n                 ".join(stuck.since_sql(rules, "stuck_reason.reason"))
    reasons = "\n                     ".join(
        f"WHEN w.status = '{rule.status}' AND {stuck.condition_sql(rule)} THEN '{rule.reason}'"
        for rule in rules
    )
    class_filter = "AND w.workflow_class = :workflow_class" if by_class else ""
    return f"""
        SELECT w.id, w.workflow_id, w.workflow_class,
               COALESCE(w.latest_step_name, w.current_step) AS step_name,
               w.latest_error_class AS error_class, stuck_reason.reason,
               CASE
                 {since}
               END AS since
        FROM pgbus_workflows w
        CROSS JOIN LATERAL (
            SELECT CASE
                     {reasons}
                   END AS reason
        ) stuck_reason
        WHERE w.status IN ({stuck.statuses_sql(rules)}) {class_filter}
    """


def _stuck_binds(threshold: timedelta, now: datetime | None, waiting_threshold: timedelta | None):
    return stuck.params(now or _now(), threshold, waiting_threshold)


def stuck_reason_counts(
    conn: Connection,
    *,
    threshold: timedelta,
    now: datetime | None = None,
    waiting_threshold: timedelta | None = None,
    workflow_class: str | None = None,
) -> dict[tuple[str, str], int]:
    """{(workflow_class, reason): runs} for the ongoing runs that need a person."""
    summary = stuck_reason_summary(conn, threshold=threshold, now=now, waiting_threshold=waiting_threshold,
                                   workflow_class=workflow_class)
    return {key: runs for key, (runs, _) in summary.items()}


def stuck_reason_summary(
    conn: Connection,
    *,
    threshold: timedelta,
    now: datetime | None = None,
    waiting_threshold: timedelta | None = None,
    workflow_class: str | None = None,
) -> dict[tuple[str, str], tuple[int, datetime | None]]:
    """{(workflow_class, reason): (runs, when the oldest got stuck)}: the
    stuck runs counted, with the oldest "since" (the metrics' oldest-stuck
    age; None when no run of the pair has one)."""
    binds = _stuck_binds(threshold, now, waiting_threshold)
    if workflow_class is not None:
        binds["workflow_class"] = workflow_class
    inner = _stuck_runs_sql(stuck.rules_for(binds), by_class=workflow_class is not None)
    rows = conn.execute(
        sa.text(
            f"""
            SELECT stuck.workflow_class, stuck.reason, count(*) AS runs, min(stuck.since) AS oldest
            FROM ({inner}) stuck
            WHERE stuck.reason IS NOT NULL
            GROUP BY stuck.workflow_class, stuck.reason
            """
        ),
        binds,
    )
    return {(klass, reason): (runs, oldest) for klass, reason, runs, oldest in rows}


def attention_groups(
    conn: Connection,
    *,
    threshold: timedelta,
    now: datetime | None = None,
    waiting_threshold: timedelta | None = None,
    limit: int = ATTENTION_GROUP_LIMIT,
    workflow_class: str | None = None,
) -> list[dict[str, Any]]:
    """The stuck runs grouped by (class, step, reason, error class), biggest
    group first, at most *limit* groups, each with when its runs got stuck
    (first_seen_at, last_seen_at) and its newest error message."""
    binds = _stuck_binds(threshold, now, waiting_threshold)
    binds["limit"] = int(limit)
    if workflow_class is not None:
        binds["workflow_class"] = workflow_class
    inner = _stuck_runs_sql(stuck.rules_for(binds), by_class=workflow_class is not None)
    # The newest error message is read for each group's newest run only,
    # after grouping: carrying every stuck run's message through the
    # grouping would read each of their step rows from the table, where the
    # rest comes from the stuck-runs index alone (docs/performance.md).
    # The newest run is the greatest (since, id), a missing since counting
    # as oldest: one max() per group rather than an ordered array of every
    # run in it, which lets the grouping skip a sort by since.
    rows = conn.execute(
        sa.text(
            f"""
            SELECT grouped.workflow_class, grouped.step_name, grouped.reason, grouped.error_class,
                   grouped.count, grouped.first_seen_at, grouped.last_seen_at,
                   (SELECT error_message FROM pgbus_workflow_steps
                    WHERE workflow_id = (SELECT workflow_id FROM pgbus_workflows
                                         WHERE id = grouped.newest_id)
                    ORDER BY id DESC
                    LIMIT 1) AS error_message
            FROM (
                SELECT stuck.workflow_class, stuck.step_name, stuck.reason, stuck.error_class,
                       count(*) AS count,
                       min(stuck.since) AS first_seen_at, max(stuck.since) AS last_seen_at,
                       CAST((max(ARRAY[COALESCE(EXTRACT(EPOCH FROM stuck.since), '-Infinity'),
                                       stuck.id]))[2] AS bigint) AS newest_id
                FROM ({inner}) stuck
                WHERE stuck.reason IS NOT NULL
                GROUP BY stuck.workflow_class, stuck.step_name, stuck.reason, stuck.error_class
                ORDER BY count DESC, last_seen_at DESC NULLS LAST, stuck.workflow_class
                LIMIT :limit
            ) grouped
            ORDER BY grouped.count DESC, grouped.last_seen_at DESC NULLS LAST, grouped.workflow_class
            """
        ),
        binds,
    )
    return as_dicts(rows)


def failed_groups(conn: Connection, *, limit: int = ATTENTION_GROUP_LIMIT) -> list[dict[str, Any]]:
    """The failed runs (terminal: no needs-attention group has them) grouped
    by (class, step, error class) of their latest step, biggest first, at
    most *limit* groups, each with its count and its newest failure
    (last_failed_at). Read from the failed-runs index alone (schema v3)."""
    rows = conn.execute(
        sa.text(
            """
            SELECT w.workflow_class, COALESCE(w.latest_step_name, w.current_step) AS step_name,
                   w.latest_error_class AS error_class, count(*) AS count,
                   max(w.finished_at) AS last_failed_at
            FROM pgbus_workflows w
            WHERE w.status = 'failed'
            GROUP BY 1, 2, 3
            ORDER BY count DESC, last_failed_at DESC NULLS LAST, 1, 2, 3
            LIMIT :limit
            """
        ),
        {"limit": int(limit)},
    )
    return as_dicts(rows)


def attention_ids(
    conn: Connection,
    group: Mapping[str, Any],
    *,
    threshold: timedelta,
    now: datetime | None = None,
    waiting_threshold: timedelta | None = None,
    limit: int = ATTENTION_IDS_LIMIT,
) -> list[str]:
    """The workflow_ids of one attention group (workflow_class, step_name,
    reason, error_class; a None error_class matches runs without one),
    oldest stuck first, at most *limit*: what a bulk action walks."""
    binds = _stuck_binds(threshold, now, waiting_threshold)
    binds.update(
        workflow_class=group["workflow_class"],
        step_name=group["step_name"],
        reason=group["reason"],
        error_class=group.get("error_class"),
        limit=int(limit),
    )
    inner = _stuck_runs_sql(stuck.rules_for(binds), by_class=True)
    rows = conn.execute(
        sa.text(
            f"""
            SELECT stuck.workflow_id
            FROM ({inner}) stuck
            WHERE stuck.step_name = :step_name AND stuck.reason = :reason
              AND stuck.error_class IS NOT DISTINCT FROM CAST(:error_class AS text)
            ORDER BY stuck.since NULLS LAST, stuck.id
            LIMIT :limit
            """
        ),
        binds,
    )
    return [workflow_id for (workflow_id,) in rows]


def stale_ids(conn: Connection, *, before: datetime, limit: int = 1000) -> list[str]:
    """Terminal runs last updated before *before*, oldest first: what pruning removes."""
    rows = conn.execute(
        sa.text(
            """
            SELECT workflow_id FROM pgbus_workflows
            WHERE status IN ('completed', 'failed', 'cancelled') AND updated_at < :before
            ORDER BY updated_at
            LIMIT :limit
            """
        ),
        {"before": before, "limit": int(limit)},
    )
    return [workflow_id for (workflow_id,) in rows]


def count_stale(conn: Connection, *, before: datetime) -> int:
    """How many runs pruning at *before* would remove."""
    return conn.execute(
        sa.text(
            "SELECT count(*) FROM pgbus_workflows "
            "WHERE status IN ('completed', 'failed', 'cancelled') AND updated_at < :before"
        ),
        {"before": before},
    ).scalar_one()


def delete_stale(conn: Connection, *, before: datetime, limit: int = 1000) -> int:
    """Delete up to *limit* stale runs; their steps, events and signals go with them."""
    # The outer test again: a run moved on (a rerun) between the subquery's
    # snapshot and the row lock is re-checked on its new version and kept.
    return conn.execute(
        sa.text(
            """
            DELETE FROM pgbus_workflows
            WHERE id IN (
                SELECT id FROM pgbus_workflows
                WHERE status IN ('completed', 'failed', 'cancelled') AND updated_at < :before
                ORDER BY updated_at
                LIMIT :limit
            )
            AND status IN ('completed', 'failed', 'cancelled') AND updated_at < :before
            """
        ),
        {"before": before, "limit": int(limit)},
    ).rowcount


# --- The latest_* columns against the steps ------------------------------------

# A run's latest_* columns and the columns of its latest step row they copy
# (schema/v2.sql keeps them equal on every write while triggers fire).
LATEST_COLUMNS = (
    "latest_step_id", "latest_step_name", "latest_step_status", "latest_error_class",
    "latest_scheduled_at", "latest_waiting_since", "latest_timeout_at",
)
_LATEST_STEP = """
    LEFT JOIN LATERAL (
        SELECT id, step_name, status, error_class, scheduled_at, waiting_since, timeout_at
        FROM pgbus_workflow_steps
        WHERE workflow_id = w.workflow_id
        ORDER BY id DESC
        LIMIT 1
    ) s ON TRUE
"""
_LATEST_DIFFERS = (
    f"({', '.join('w.' + name for name in LATEST_COLUMNS)}) IS DISTINCT FROM "
    "(s.id, s.step_name, s.status, s.error_class, s.scheduled_at, s.waiting_since, s.timeout_at)"
)


def count_runs(conn: Connection) -> int:
    """Every run, from the kept counts."""
    return sum(status_counts(conn).values())


def next_batch(conn: Connection, *, after_id: int, size: int) -> tuple[int, int] | None:
    """The next batch of at most *size* runs with ids above *after_id*, as
    (its last id, its runs): the batch is after_id < id <= last id. None past
    the last run."""
    last_id, runs = conn.execute(
        sa.text(
            "SELECT max(id), count(*) FROM (SELECT id FROM pgbus_workflows WHERE id > :after_id "
            "ORDER BY id LIMIT :size) batch"
        ),
        {"after_id": int(after_id), "size": int(size)},
    ).one()
    return None if last_id is None else (last_id, runs)


def latest_mismatches(conn: Connection, *, after_id: int, last_id: int, limit: int) -> tuple[int, list[str]]:
    """Over the runs with after_id < id <= last_id: how many carry latest_*
    columns other than their latest step row's (all NULL for a run without
    steps), and up to *limit* of their workflow_ids, lowest id first."""
    wrong, examples = conn.execute(
        sa.text(
            f"""
            SELECT count(*), (array_agg(w.workflow_id ORDER BY w.id))[1:CAST(:limit AS integer)]
            FROM pgbus_workflows w
            {_LATEST_STEP}
            WHERE w.id > :after_id AND w.id <= :last_id AND {_LATEST_DIFFERS}
            """
        ),
        {"after_id": int(after_id), "last_id": int(last_id), "limit": int(limit)},
    ).one()
    return wrong, list(examples or [])


def repair_latest(conn: Connection, *, after_id: int, last_id: int) -> int:
    """Set the latest_* columns of the runs with after_id < id <= last_id that
    disagree with their latest step row; the number of runs fixed.

    Two statements in the caller's transaction: the wrong runs are locked
    first, then read again and written with a fresh snapshot, so a step
    written meanwhile by a transaction that held one of them (its trigger
    updates the run) is seen rather than overwritten with older facts."""
    ids = conn.execute(
        sa.text(
            f"""
            SELECT w.id FROM pgbus_workflows w
            {_LATEST_STEP}
            WHERE w.id > :after_id AND w.id <= :last_id AND {_LATEST_DIFFERS}
            FOR UPDATE OF w
            """
        ),
        {"after_id": int(after_id), "last_id": int(last_id)},
    ).scalars().all()
    if not ids:
        return 0
    assignments = ", ".join(
        f"{column} = truth.{source}"
        for column, source in zip(
            LATEST_COLUMNS,
            ("id", "step_name", "status", "error_class", "scheduled_at", "waiting_since", "timeout_at"),
        )
    )
    return conn.execute(
        sa.text(
            f"""
            UPDATE pgbus_workflows target SET {assignments}
            FROM (
                SELECT w.id AS run_id, s.*
                FROM pgbus_workflows w
                {_LATEST_STEP}
                WHERE w.id = ANY(:ids) AND {_LATEST_DIFFERS}
            ) truth
            WHERE target.id = truth.run_id
            """
        ),
        {"ids": list(ids)},
    ).rowcount


def definition_outdated(run: Mapping[str, Any], current_digest: str | None) -> bool:
    """True when the run started on another step list than its definition
    declares now. *current_digest* is None when the definition is not
    registered in this process: nothing to compare, so not outdated."""
    if current_digest is None:
        return False
    return run.get("definition_digest") != current_digest


# --- Written by the runtime ---------------------------------------------------

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


# --- The dashboard's pages -------------------------------------------------

# Columns of the runs index (no arguments: they can be large and the index
# does not show them).
_PAGE_RUN_COLUMNS = (
    "w.id, w.workflow_id, w.workflow_class, w.status, w.current_step, "
    "w.subject_type, w.subject_id, w.definition_digest, w.paused_at, w.started_at, "
    "w.finished_at, w.created_at, w.updated_at"
)
# The latest step row of each listed run, prefixed so it can sit beside the run's.
_PAGE_STEP_COLUMNS = (
    "s.id AS step_id, s.step_name AS step_step_name, s.status AS step_status, "
    "s.attempt AS step_attempt, s.scheduled_at AS step_scheduled_at, "
    "s.started_at AS step_started_at, s.finished_at AS step_finished_at, "
    "s.wait_for AS step_wait_for, s.waiting_since AS step_waiting_since, "
    "s.timeout_at AS step_timeout_at, s.batch_id AS step_batch_id, "
    "s.error_class AS step_error_class, s.error_message AS step_error_message, "
    "s.created_at AS step_created_at"
)
_PAGE_BATCH_COLUMNS = (
    "b.batch_id AS batch_batch_id, b.description AS batch_description, "
    "b.total_jobs AS batch_total_jobs, b.completed_jobs AS batch_completed_jobs, "
    "b.failed_jobs AS batch_failed_jobs, b.discarded_jobs AS batch_discarded_jobs, "
    "b.status AS batch_status, b.finished_at AS batch_finished_at"
)

# Each index filter: the condition it adds, always the same text; values go
# in as binds. A filter left out adds nothing, so each combination gets a
# plan that can use its index (a catch-all "(:x IS NULL OR col = :x)" would
# defeat a generic plan).
_PAGE_FILTERS = {
    "workflow_class": "w.workflow_class = :workflow_class",
    "status": "w.status = :status",
    "subject_type": "w.subject_type = :subject_type",
    "subject_id": "w.subject_id = :subject_id",
    "created_from": "w.created_at >= :created_from",
    "created_to": "w.created_at < :created_to",
    "before_id": "w.id < :before_id",
    "after_id": "w.id > :after_id",
    # An operation's walk: never past the highest id at its preview.
    "ceiling_id": "w.id <= :ceiling_id",
    # The runs an operation acted on (its events carry its id).
    "operation": (
        "w.workflow_id IN (SELECT e.workflow_id FROM pgbus_workflow_events e"
        " WHERE e.details ? 'operation_id' AND e.details ->> 'operation_id' = :operation)"
    ),
}

# The search box (DESIGN §10): the shortest run id prefix taken as one (the
# list shows eight characters); a shorter text matches a whole id only.
SEARCH_ID_PREFIX_MIN = 4


def ascii_lower(value: str) -> str:
    """*value* with A-Z made a-z and nothing else changed: what PostgreSQL's
    lower() does under the "C" collation, which the run id search index
    uses, so the prefix's bounds computed here agree with it exactly."""
    return value.translate(_ASCII_LOWER)


_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def _successor(prefix: str) -> str | None:
    """The least text greater than every text that starts with *prefix*,
    in code point order (the "C" collation); None when there is none."""
    chars = list(prefix)
    while chars:
        code = ord(chars.pop()) + 1
        if 0xD800 <= code <= 0xDFFF:  # surrogates are no characters of UTF-8 text
            code = 0xE000
        if code <= 0x10FFFF:
            return "".join(chars) + chr(code)
    return None


def search_where(search: str) -> tuple[str, dict[str, Any]]:
    """The search box's condition over run ``w`` and its binds: any of

    - the run id, case-insensitive: by prefix from SEARCH_ID_PREFIX_MIN
      characters on (the short id the list shows), else whole;
    - the idempotency key, case-insensitive;
    - the subject id alone (``1042``), or type and id (``order 1042``),
      case-insensitive.

    Every branch matches an expression index of schema v3 (the run id's
    as a range, so a bound plan can use it), so the OR is a BitmapOr of
    index scans at any table size (bench/search.py)."""
    lowered = ascii_lower(search)
    binds: dict[str, Any] = {"search": search}
    branches = []
    high = _successor(lowered) if len(search) >= SEARCH_ID_PREFIX_MIN else None
    if high is not None:
        branches.append(
            '(lower(w.workflow_id COLLATE "C") >= :search_id_low'
            ' AND lower(w.workflow_id COLLATE "C") < :search_id_high)'
        )
        binds.update(search_id_low=lowered, search_id_high=high)
    else:
        branches.append('lower(w.workflow_id COLLATE "C") = :search_id_low')
        binds["search_id_low"] = lowered
    branches.append("lower(w.idempotency_key) = lower(:search)")
    branches.append("lower(w.subject_id) = lower(:search)")
    parts = search.split(None, 1)
    if len(parts) == 2:
        branches.append(
            "(lower(w.subject_id) = lower(:search_subject_id)"
            " AND lower(w.subject_type) = lower(:search_subject_type))"
        )
        binds.update(search_subject_type=parts[0], search_subject_id=parts[1].strip())
    return "(" + " OR ".join(branches) + ")", binds


def _split_page_rows(result) -> list[dict[str, Any]]:
    """The index rows of *result*, each as the run's columns plus ``step``
    (its latest step row, or None) and ``batch`` (the batch that step waits
    on, or None). Which column goes where is decided once per result from
    its names, not per row: a page has 50 rows of 35 columns."""
    run_keys: list[str] = []
    step_keys: list[str] = []
    batch_keys: list[str] = []
    run_at: list[int] = []
    step_at: list[int] = []
    batch_at: list[int] = []
    for index, key in enumerate(result.keys()):
        if key == "step_id":
            step_keys.append("id")
            step_at.append(index)
        elif key.startswith("step_"):
            step_keys.append(key[len("step_"):])
            step_at.append(index)
        elif key.startswith("batch_"):
            batch_keys.append(key[len("batch_"):])
            batch_at.append(index)
        else:
            run_keys.append(key)
            run_at.append(index)
    step_id, batch_id = step_at[step_keys.index("id")], batch_at[batch_keys.index("batch_id")]
    workflow_id = run_at[run_keys.index("workflow_id")]
    split = []
    for row in result.all():
        run = dict(zip(run_keys, [row[i] for i in run_at]))
        step = None
        if row[step_id] is not None:
            step = dict(zip(step_keys, [row[i] for i in step_at]))
            step["workflow_id"] = row[workflow_id]
        run["step"] = step
        run["batch"] = dict(zip(batch_keys, [row[i] for i in batch_at])) if row[batch_id] is not None else None
        split.append(run)
    return split


def page_where(
    *,
    threshold: timedelta,
    waiting_threshold: timedelta,
    now: datetime | None = None,
    before_id: int | None = None,
    after_id: int | None = None,
    ceiling_id: int | None = None,
    operation: int | str | None = None,
    workflow_class: str | None = None,
    status: str | None = None,
    reason: str | None = None,
    subject_type: str | None = None,
    subject_id: str | None = None,
    step_name: str | None = None,
    error_class: str | None = None,
    no_error_class: bool = False,
    created_from: datetime | None = None,
    created_to: datetime | None = None,
    search: str | None = None,
) -> tuple[str, dict[str, Any]]:
    """The runs index's WHERE clause (over ``w``, a run, and ``s``, its
    latest step) and its binds, for page() and for an operation's walk
    (count_matching, matching_ids), so both see exactly the same runs.

    *ceiling_id* keeps runs up to that id; *operation* the runs that
    operation acted on. *reason* keeps the runs stuck for that reason (as stuck_reason_counts
    decides, with the latest step); *step_name* and *error_class* match the
    latest step (the run's current step when no step row exists yet);
    *no_error_class* keeps the runs whose latest step has no error class (or
    that have no step), as an attention group without one counts them;
    *search* is the search box's text (search_where)."""
    if reason is not None and reason not in stuck.BY_REASON:
        raise ValueError(f"unknown stuck reason {reason!r}")
    now = now or _now()
    values: dict[str, Any] = {
        "workflow_class": workflow_class,
        "status": status,
        "subject_type": subject_type,
        "subject_id": subject_id,
        "created_from": created_from,
        "created_to": created_to,
        "before_id": before_id,
        "after_id": after_id,
        "ceiling_id": ceiling_id,
        "operation": str(operation) if operation is not None else None,
    }
    binds = {name: value for name, value in values.items() if value is not None}
    conditions = [_PAGE_FILTERS[name] for name in binds]
    if reason is not None:
        # The stuck rule's status first: the scan walks the (status, id)
        # index newest first and stops at the page size.
        rule = stuck.BY_REASON[reason]
        conditions += ["w.status = :reason_status", stuck.condition_sql(rule)]
        binds.update(reason_status=rule.status, **stuck.params(now, threshold, waiting_threshold))
    # The latest step's name and error class from the run's latest_*
    # columns, as the stuck rules read them: a filter never looks a run's steps
    # up, so its count costs the same at ten million runs as at one.
    # current_step names a run that has no step row yet.
    if step_name is not None:
        conditions.append("COALESCE(w.latest_step_name, w.current_step) = :step_name")
        binds["step_name"] = step_name
    if error_class is not None:
        conditions.append("w.latest_error_class = :error_class")
        binds["error_class"] = error_class
    elif no_error_class:
        conditions.append("w.latest_error_class IS NULL")
    if search is not None:
        condition, search_binds = search_where(search)
        conditions.append(condition)
        binds.update(search_binds)
    where = " AND ".join(conditions) or "TRUE"
    return where, binds


# The latest step of run w (s.*), which each row of a page shows. The
# filters (page_where) read the run row alone, never this join.
_LATEST_STEP_JOIN = """
    LEFT JOIN LATERAL (
        SELECT id, step_name, status, attempt, scheduled_at, started_at,
               finished_at, wait_for, waiting_since, timeout_at, batch_id,
               error_class, error_message, created_at
        FROM pgbus_workflow_steps
        WHERE workflow_id = w.workflow_id
        ORDER BY id DESC
        LIMIT 1
    ) s ON TRUE
"""


def page(
    conn: Connection,
    *,
    limit: int,
    threshold: timedelta,
    waiting_threshold: timedelta,
    now: datetime | None = None,
    **filters: Any,
) -> list[dict[str, Any]]:
    """One page of the runs index, newest first, each run with its latest
    step and that step's batch under ``step`` and ``batch``; *filters* are
    page_where's.

    Keyset pagination by id: *before_id* gives the page of older runs,
    *after_id* the page of newer ones (fetched oldest first, returned newest
    first), so a page deep in a million runs costs what the first one does."""
    after_id = filters.get("after_id")
    where, binds = page_where(threshold=threshold, waiting_threshold=waiting_threshold, now=now, **filters)
    binds["limit"] = int(limit)
    # Newer pages walk up from after_id; every page is shown newest first.
    direction = "ASC" if after_id is not None else "DESC"
    rows = conn.execute(
        sa.text(
            f"""
            SELECT listed.*, {_PAGE_BATCH_COLUMNS}
            FROM (
                SELECT {_PAGE_RUN_COLUMNS}, {_PAGE_STEP_COLUMNS}
                FROM pgbus_workflows w
                {_LATEST_STEP_JOIN}
                WHERE {where}
                ORDER BY w.id {direction}
                LIMIT :limit
            ) listed
            LEFT JOIN LATERAL (
                SELECT * FROM pgbus_batches WHERE batch_id = listed.step_batch_id
            ) b ON TRUE
            ORDER BY listed.id DESC
            """
        ),
        binds,
    )
    return _split_page_rows(rows)


def count_matching(conn: Connection, *, where: str, binds: Mapping[str, Any]) -> dict[tuple[str, str], int]:
    """{(workflow_class, status): runs} matching page_where's *where*."""
    rows = conn.execute(
        sa.text(
            f"""
            SELECT w.workflow_class, w.status, count(*) AS runs
            FROM pgbus_workflows w
            WHERE {where}
            GROUP BY w.workflow_class, w.status
            """
        ),
        dict(binds),
    )
    return {(klass, status): runs for klass, status, runs in rows}


def count_up_to(conn: Connection, *, where: str, binds: Mapping[str, Any], cap: int) -> int:
    """How many runs match page_where's *where*, counting no further than
    *cap* + 1 (so a page can say "more than cap" for the price of cap)."""
    return conn.execute(
        sa.text(
            f"""
            SELECT count(*) FROM (
                SELECT 1 FROM pgbus_workflows w
                    WHERE {where}
                LIMIT :count_cap
            ) matched
            """
        ),
        {**binds, "count_cap": int(cap) + 1},
    ).scalar_one()


def matching_ids(
    conn: Connection, *, where: str, binds: Mapping[str, Any], after_id: int, ceiling_id: int, limit: int,
) -> list[dict[str, Any]]:
    """The next runs matching page_where's *where* with an id in
    (*after_id*, *ceiling_id*], oldest id first, at most *limit*: id,
    workflow_id, workflow_class and status of each, an operation's chunk."""
    rows = conn.execute(
        sa.text(
            f"""
            SELECT w.id, w.workflow_id, w.workflow_class, w.status
            FROM pgbus_workflows w
            WHERE w.id > :walk_after AND w.id <= :walk_ceiling AND ({where})
            ORDER BY w.id
            LIMIT :walk_limit
            """
        ),
        {**binds, "walk_after": int(after_id), "walk_ceiling": int(ceiling_id), "walk_limit": int(limit)},
    )
    return as_dicts(rows)


def class_status_counts(
    conn: Connection, workflow_class: str, *, created_from: datetime | None = None
) -> dict[str, int]:
    """{status: runs} of one class, over the runs created since *created_from*
    (every run when None: the kept counts)."""
    if created_from is None:
        return {status: runs for (_, status), runs in status_counts(conn, workflow_class).items()}
    rows = conn.execute(
        sa.text(
            """
            SELECT status, count(*) AS runs FROM pgbus_workflows
            WHERE workflow_class = :workflow_class AND created_at >= :created_from
            GROUP BY status
            """
        ),
        {"workflow_class": workflow_class, "created_from": created_from},
    )
    return {status: runs for status, runs in rows}


def class_exists(conn: Connection, workflow_class: str) -> bool:
    """True when at least one run of *workflow_class* exists (the kept counts)."""
    return bool(status_counts(conn, workflow_class))
