"""The runs index's query: its filters and search box as one WHERE clause
(page_where), the one an operation's preview, walk and export read too, and
a page of runs with their latest step and batch (page).

Beside it, over the same WHERE: the search box's conditions
(workflow_search.py), the capped counts a page shows
(workflow_capped_counts.py), an operation's bounded walks
(workflow_windows.py) and the export (workflow_export.py).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..rules import stuck
from . import STATES
from .statement_budget import Cancelled, within
from .workflow_search import json_where, search_where, searches_fragments


def _now() -> datetime:
    return datetime.now(UTC)


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
    # An operation's preview sample, one id window at a time.
    "floor_id": "w.id > :floor_id",
    # An operation's walk: never past the highest id at its preview.
    "ceiling_id": "w.id <= :ceiling_id",
    # The runs an operation acted on (its events carry its id).
    "operation": (
        "w.workflow_id IN (SELECT e.workflow_id FROM pgbus_workflow_events e"
        " WHERE e.details ? 'operation_id' AND e.details ->> 'operation_id' = :operation)"
    ),
    # The runs whose step in progress that worker started (a partial index).
    "worker": (
        "w.workflow_id IN (SELECT h.workflow_id FROM pgbus_workflow_steps h"
        f" WHERE h.status = {STATES.STEP_IN_PROGRESS} AND h.worker_id = :worker)"
    ),
}


def _split_page_rows(result: sa.CursorResult[Any]) -> list[dict[str, Any]]:
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
            step_keys.append(key[len("step_") :])
            step_at.append(index)
        elif key.startswith("batch_"):
            batch_keys.append(key[len("batch_") :])
            batch_at.append(index)
        else:
            run_keys.append(key)
            run_at.append(index)
    step_id, batch_id = step_at[step_keys.index("id")], batch_at[batch_keys.index("batch_id")]
    workflow_id = run_at[run_keys.index("workflow_id")]
    split = []
    for row in result.all():
        run = dict(zip(run_keys, [row[i] for i in run_at], strict=True))
        step = None
        if row[step_id] is not None:
            step = dict(zip(step_keys, [row[i] for i in step_at], strict=True))
            step["workflow_id"] = row[workflow_id]
        run["step"] = step
        run["batch"] = (
            dict(zip(batch_keys, [row[i] for i in batch_at], strict=True)) if row[batch_id] is not None else None
        )
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
    floor_id: int | None = None,
    operation: int | str | None = None,
    worker: int | None = None,
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
    search_arguments: tuple[str, ...] = (),
    arguments: list[tuple[str, ...]] | tuple[tuple[str, ...], ...] = (),
    signals: list[tuple[str, ...]] | tuple[tuple[str, ...], ...] = (),
    fragments: bool = False,
) -> tuple[str, dict[str, Any]]:
    """The runs index's WHERE clause (over ``w``, a run: never its steps)
    and its binds, for page() and for an operation's walk
    (count_by_window, walk), so both see exactly the same runs.

    *ceiling_id* keeps runs up to that id; *operation* the runs that
    operation acted on. *reason* keeps the runs stuck for that reason (as stuck_reason_counts
    decides, with the latest step); *step_name* and *error_class* match the
    latest step (the run's current step when no step row exists yet);
    *no_error_class* keeps the runs whose latest step has no error class (or
    that have no step), as an attention group without one counts them;
    *search* is the search box's text (search_where; *fragments* as
    searches_fragments says for it), *search_arguments* the documents of
    its ``path:value`` form, OR-ed with it; *arguments* keeps the runs
    whose arguments contain one of each entry's documents, *signals* those
    with a signal whose payload does (json_where)."""
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
        "floor_id": floor_id,
        "operation": str(operation) if operation is not None else None,
        "worker": worker,
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
        condition, search_binds = search_where(search, fragments=fragments)
        if search_arguments:
            extra, extra_binds = json_where("w.arguments", tuple(search_arguments), "search_arg")
            condition, search_binds = f"({condition} OR {extra})", {**search_binds, **extra_binds}
        conditions.append(condition)
        binds.update(search_binds)
    for number, documents in enumerate(arguments):
        condition, json_binds = json_where("w.arguments", tuple(documents), f"arg_{number}")
        conditions.append(condition)
        binds.update(json_binds)
    for number, documents in enumerate(signals):
        condition, json_binds = json_where("sg.payload", tuple(documents), f"signal_{number}")
        conditions.append(f"w.workflow_id IN (SELECT sg.workflow_id FROM pgbus_workflow_signals sg WHERE {condition})")
        binds.update(json_binds)
    where = " AND ".join(conditions) or "TRUE"
    return where, binds


# The latest step of each listed run (s.*), which each row of a page
# shows. The filters (page_where) read the run row alone, never this join;
# it is made after the page's LIMIT (page()), so it costs one lookup per
# row shown whatever plan finds the runs.
_LATEST_STEP_JOIN = """
    LEFT JOIN LATERAL (
        SELECT id, step_name, status, attempt, scheduled_at, started_at,
               finished_at, wait_for, waiting_since, timeout_at, batch_id,
               error_class, error_message, created_at
        FROM pgbus_workflow_steps
        WHERE workflow_id = listed.workflow_id
        ORDER BY id DESC
        LIMIT 1
    ) s ON TRUE
"""


# How long a page with a signal's match may walk the newest runs before it
# reads the matches' runs instead (page()).
SIGNAL_WALK_BUDGET = 0.2


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
    page_where's (*fragments*, when not given, asked of the database).

    Keyset pagination by id: *before_id* gives the page of older runs,
    *after_id* the page of newer ones (fetched oldest first, returned newest
    first), so a page deep in a million runs costs what the first one does."""
    after_id = filters.get("after_id")
    if "fragments" not in filters:
        filters["fragments"] = searches_fragments(conn, filters.get("search"))
    where, binds = page_where(threshold=threshold, waiting_threshold=waiting_threshold, now=now, **filters)
    binds["limit"] = int(limit)
    # Newer pages walk up from after_id; every page is shown newest first.
    direction = "ASC" if after_id is not None else "DESC"

    # The page's runs are chosen first, by id alone (an index that holds
    # the filter's columns and the id answers it without the table), and
    # only those rows are read whole and get their latest step and batch:
    # a subquery with a LIMIT is never merged into the query around it. With the step joined
    # inside, a plan that finds the runs by another index than the id's
    # (the waiting-overdue candidates', read by their wait, then sorted by
    # id) looked up the latest step of every matching run before the sort:
    # 10,000 lookups, 0.8 s, for a page of 50 (docs/performance.md).
    def statement(where: str) -> sa.TextClause:
        return sa.text(
            f"""
            SELECT listed.*, {_PAGE_STEP_COLUMNS}, {_PAGE_BATCH_COLUMNS}
            FROM (
                SELECT {_PAGE_RUN_COLUMNS}
                FROM (
                    SELECT w.id FROM pgbus_workflows w
                    WHERE {where}
                    ORDER BY w.id {direction}
                    LIMIT :limit
                ) picked
                JOIN pgbus_workflows w ON w.id = picked.id
            ) listed
            {_LATEST_STEP_JOIN}
            LEFT JOIN LATERAL (
                SELECT * FROM pgbus_batches WHERE batch_id = s.batch_id
            ) b ON TRUE
            ORDER BY listed.id DESC
            """
        )

    signals = filters.get("signals") or ()
    if not signals:
        return _split_page_rows(conn.execute(statement(where), binds))
    # A signal's match is a semi-join, which the planner answers by
    # walking the ids from the newest and probing each run's signals when
    # the value is common: it stops at the page size when the matches are
    # among the newest runs, and reads every newer run first when they are
    # not (a value only older runs carry, under millions of newer runs: past
    # the statement timeout at 11M runs). So the walk gets a budget, and
    # past it the page names the first match's runs by their ids too, read
    # from the payload's GIN index and the runs' workflow_id index: a cost
    # that follows the matches (0.7 s for 87,000 of them), not the table.
    try:
        with within(conn, SIGNAL_WALK_BUDGET):
            return _split_page_rows(conn.execute(statement(where), binds))
    except Cancelled:
        pass
    condition, json_binds = json_where("sg.payload", tuple(signals[0]), "signal_ids")
    by_ids = (
        f"{where} AND w.workflow_id = ANY(ARRAY(SELECT sg.workflow_id FROM pgbus_workflow_signals sg"
        f" WHERE {condition}))"
    )
    return _split_page_rows(conn.execute(statement(by_ids), {**binds, **json_binds}))
