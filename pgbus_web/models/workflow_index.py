"""The runs index's query: its filters and search box as one WHERE clause
(page_where), a page of runs with their latest step and batch, and the
counts and walks an operation makes over the same WHERE.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..rules import run_filters, stuck
from . import as_dicts


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
        " WHERE h.status = 'in_progress' AND h.worker_id = :worker)"
    ),
}

# The search box's id lengths: their home is the filters' rules, which the
# pages read too.
SEARCH_ID_PREFIX_MIN = run_filters.SEARCH_ID_PREFIX_MIN
SEARCH_ID_FRAGMENT_MIN = run_filters.SEARCH_ID_FRAGMENT_MIN
# A longer fragment is looked up in the trigram index by its first this
# many characters and checked whole on the runs found: each trigram more
# is one more posting list read (a whole uuid's read 819 buffers at a
# million runs, its first 8 characters 42; bench/search.py).
SEARCH_ID_FRAGMENT_WINDOW = 8
# The trigram index that serves the fragment search (its schema version): made
# only where the database has pg_trgm; without it a fragment is not looked
# for (it would read every run) and the prefix search stays.
FRAGMENT_INDEX = "pgbus_workflows_id_trgm"
_FRAGMENT_INDEX_PRESENT = sa.text("SELECT to_regclass(:index) IS NOT NULL")


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


def is_fragment(search: str | None) -> bool:
    """Whether the search box's *search* is also looked for inside run ids."""
    return search is not None and len(search) >= SEARCH_ID_FRAGMENT_MIN and len(search.split()) == 1


def fragment_index_present(conn: Connection) -> bool:
    """Whether this database has the fragment search's trigram index."""
    return bool(conn.execute(_FRAGMENT_INDEX_PRESENT, {"index": FRAGMENT_INDEX}).scalar_one())


def searches_fragments(conn: Connection, search: str | None) -> bool:
    """page_where's *fragments* for *search* on this database: whether it
    is a fragment and the index to find it is there (asked only then)."""
    return is_fragment(search) and fragment_index_present(conn)


def like_literal(text: str) -> str:
    """*text* as a LIKE pattern that matches exactly it: the pattern's
    characters (``%``, ``_`` and the escape, a backslash) escaped."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def search_where(search: str, *, fragments: bool = False) -> tuple[str, dict[str, Any]]:
    """The search box's condition over run ``w`` and its binds: any of

    - the run id, case-insensitive: by prefix from SEARCH_ID_PREFIX_MIN
      characters on (the short id the list shows), else whole; with
      *fragments* (the trigram index is there), also anywhere in it when
      the text is a fragment (is_fragment);
    - the idempotency key, case-insensitive;
    - the subject id alone (``1042``), or type and id (``order 1042``),
      case-insensitive.

    Every branch matches an expression index (the run id's as a range, so
    a bound plan can use it; the fragment's the trigram index), so the OR
    is a BitmapOr of index scans at any table size (bench/search.py)."""
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
    if fragments and is_fragment(search):
        # LIKE's default escape is the backslash like_literal writes.
        window = lowered[:SEARCH_ID_FRAGMENT_WINDOW]
        binds["search_id_window"] = "%" + like_literal(window) + "%"
        if window == lowered:
            branches.append('lower(w.workflow_id COLLATE "C") LIKE :search_id_window')
        else:
            branches.append(
                '(lower(w.workflow_id COLLATE "C") LIKE :search_id_window'
                ' AND strpos(lower(w.workflow_id COLLATE "C"), :search_id_fragment) > 0)'
            )
            binds["search_id_fragment"] = lowered
    branches.append("lower(w.idempotency_key) = lower(:search)")
    branches.append("lower(w.subject_id) = lower(:search)")
    parts = search.split(None, 1)
    if len(parts) == 2:
        branches.append(
            "(lower(w.subject_id) = lower(:search_subject_id) AND lower(w.subject_type) = lower(:search_subject_type))"
        )
        binds.update(search_subject_type=parts[0], search_subject_id=parts[1].strip())
    return "(" + " OR ".join(branches) + ")", binds


def json_where(column: str, documents: tuple[str, ...], bind: str) -> tuple[str, dict[str, Any]]:
    """*column* (jsonb) containing any of *documents* (JSON texts), as
    containments the column's GIN jsonb_path_ops index answers (an OR of
    them is a BitmapOr of its scans), and the binds, named from *bind*."""
    names = {f"{bind}_{n}": document for n, document in enumerate(documents)}
    condition = " OR ".join(f"{column} @> CAST(:{name} AS jsonb)" for name in names)
    return "(" + condition + ")", names


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
    arguments: list[tuple[str, ...]] | tuple = (),
    signals: list[tuple[str, ...]] | tuple = (),
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
    def statement(where: str):
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
        with _within(conn, SIGNAL_WALK_BUDGET):
            return _split_page_rows(conn.execute(statement(where), binds))
    except _Cancelled:
        pass
    condition, json_binds = json_where("sg.payload", tuple(signals[0]), "signal_ids")
    by_ids = (
        f"{where} AND w.workflow_id = ANY(ARRAY(SELECT sg.workflow_id FROM pgbus_workflow_signals sg"
        f" WHERE {condition}))"
    )
    return _split_page_rows(conn.execute(statement(by_ids), {**binds, **json_binds}))


def status_counts_up_to(
    conn: Connection, *, where: str, binds: Mapping[str, Any], cap: int, budget: float | None = None
) -> dict[str, int] | None:
    """{status: runs} of the runs page_where's *where* matches, counting no
    further than *cap* + 1 runs in all (so a page can say "more than cap"
    for the price of cap; the statuses of the runs read anyway). With
    *budget* (seconds) the count is cancelled past it and None answered:
    a filter whose runs are not in the cache (each matched run one read
    of the table) cannot hold the page up to its statement timeout."""
    statement = sa.text(
        f"""
        SELECT status, count(*) FROM (
            SELECT w.status FROM pgbus_workflows w
                WHERE {where}
            LIMIT :count_cap
        ) matched
        GROUP BY status
        """
    )
    values = {**binds, "count_cap": int(cap) + 1}
    if budget is None:
        return {status: int(runs) for status, runs in conn.execute(statement, values)}
    try:
        with _within(conn, budget):
            rows = conn.execute(statement, values).all()
    except _Cancelled:
        return None
    return {status: int(runs) for status, runs in rows}


class _Cancelled(Exception):
    """The statement ran past its budget (SQLSTATE 57014, query_canceled)."""


# SQLSTATE of a statement the server cancelled (statement_timeout among others).
_QUERY_CANCELED = "57014"


class _within:
    """The statements of the block are cancelled by the server past
    *seconds* (statement_timeout), and the connection's own timeout is put
    back after. On a connection in a transaction the block is a savepoint
    (a cancelled statement rolls back to it, with the setting); on an
    AUTOCOMMIT one the setting is the session's until it is put back."""

    def __init__(self, conn: Connection, seconds: float) -> None:
        self.conn = conn
        self.limit = f"{max(int(seconds * 1000), 1)}ms"
        self.autocommit = conn.get_execution_options().get("isolation_level") == "AUTOCOMMIT"
        self.savepoint = None
        self.before = None

    def __enter__(self) -> _within:
        if not self.autocommit:
            self.savepoint = self.conn.begin_nested()
        self.before = self.conn.execute(
            sa.text("SELECT current_setting('statement_timeout'), set_config('statement_timeout', :limit, :local)"),
            {"limit": self.limit, "local": not self.autocommit},
        ).first()[0]
        return self

    def __exit__(self, kind, problem, trace) -> bool:
        cancelled = (
            isinstance(problem, sa.exc.DBAPIError) and getattr(problem.orig, "sqlstate", None) == _QUERY_CANCELED
        )
        if self.savepoint is not None:
            if problem is None:
                self._put_back()
                self.savepoint.commit()
            else:
                self.savepoint.rollback()  # the setting goes with it
        else:
            self._put_back()
        if cancelled:
            raise _Cancelled() from problem
        return False

    def _put_back(self) -> None:
        self.conn.execute(
            sa.text("SELECT set_config('statement_timeout', :before, :local)"),
            {"before": self.before, "local": not self.autocommit},
        )


# --- an operation's bounded walks ------------------------------------------------
#
# Every statement an operation sends over the runs reads one window of ids:
# ``id > low AND id <= low + WINDOW`` beside the filter's own conditions.
# Whatever plan the filter gets (the (status, id) or (class, id) index for a
# status or a class, the primary key for a filter no index fits), it reads
# at most one window's entries of that index, so no statement walks the
# table, however thin a slice of millions the filter matches
# (docs/operations.md "Bounded walks"). The cursor moves by window: a
# window without a matching run costs one index range.

# Ids per window of a chunk's walk and of the preview's count.
WINDOW = 100_000


def next_id(conn: Connection, *, after_id: int) -> int | None:
    """The lowest run id above *after_id* (one probe of the primary key),
    None when there is none: a walk jumps over the gaps pruning leaves."""
    return conn.execute(
        sa.text("SELECT w.id FROM pgbus_workflows w WHERE w.id > :after ORDER BY w.id LIMIT 1"),
        {"after": int(after_id)},
    ).scalar()


def previous_id(conn: Connection, *, up_to: int) -> int | None:
    """The highest run id up to *up_to*, None when there is none."""
    return conn.execute(
        sa.text("SELECT w.id FROM pgbus_workflows w WHERE w.id <= :up_to ORDER BY w.id DESC LIMIT 1"),
        {"up_to": int(up_to)},
    ).scalar()


def windows_down(conn: Connection, *, ceiling_id: int, window: int = WINDOW):
    """The id windows (low, high] from *ceiling_id* down to the lowest run,
    newest first, each at most *window* ids wide and starting at a run."""
    high = previous_id(conn, up_to=ceiling_id)
    while high is not None:
        low = max(high - int(window), 0)
        yield low, high
        high = previous_id(conn, up_to=low) if low > 0 else None


def count_window(
    conn: Connection,
    *,
    where: str,
    binds: Mapping[str, Any],
    low: int,
    high: int,
) -> dict[tuple[str, str], int]:
    """{(workflow_class, status): runs} matching *where* with an id in
    (*low*, *high*]."""
    rows = conn.execute(
        sa.text(
            f"""
            SELECT w.workflow_class, w.status, count(*) AS runs
            FROM pgbus_workflows w
            WHERE w.id > :window_low AND w.id <= :window_high AND ({where})
            GROUP BY w.workflow_class, w.status
            """
        ),
        {**binds, "window_low": int(low), "window_high": int(high)},
    )
    return {(klass, status): int(runs) for klass, status, runs in rows}


def walk_window(
    conn: Connection,
    *,
    where: str,
    binds: Mapping[str, Any],
    after_id: int,
    ceiling_id: int,
    limit: int,
    window: int = WINDOW,
) -> tuple[list[dict[str, Any]], int | None]:
    """The next runs matching *where* in one window of ids above
    *after_id* (up to *ceiling_id*), oldest first, at most *limit*; and the
    id every matching run up to which is in the list (the last one's when
    *limit* were found, else the window's end), None when no run is left
    below the ceiling. Two statements: a probe of the primary key for the
    window's start, and the window itself."""
    start = next_id(conn, after_id=after_id)
    if start is None or start > ceiling_id:
        return [], None
    high = min(start - 1 + int(window), int(ceiling_id))
    rows = as_dicts(
        conn.execute(
            sa.text(
                f"""
            SELECT w.id, w.workflow_id, w.workflow_class, w.status
            FROM pgbus_workflows w
            WHERE w.id > :walk_after AND w.id <= :walk_high AND ({where})
            ORDER BY w.id
            LIMIT :walk_limit
            """
            ),
            {**binds, "walk_after": int(after_id), "walk_high": high, "walk_limit": int(limit)},
        )
    )
    if len(rows) >= limit:
        return rows, rows[-1]["id"]
    return rows, high


def walk(
    conn: Connection,
    *,
    where: str,
    binds: Mapping[str, Any],
    after_id: int,
    ceiling_id: int,
    limit: int,
    window: int = WINDOW,
    windows: int,
) -> tuple[list[dict[str, Any]], int, bool]:
    """An operation's next chunk: up to *limit* runs matching *where* above
    *after_id*, reading at most *windows* windows (each one statement);
    the id the walk got to (every matching run up to it is in the list);
    and whether any run may be left above it below *ceiling_id*. Fewer
    runs than *limit* and more left: the windows ran out first (a thin
    slice), and the next chunk goes on from there."""
    rows: list[dict[str, Any]] = []
    reached = int(after_id)
    for _ in range(max(int(windows), 1)):
        found, got_to = walk_window(
            conn,
            where=where,
            binds=binds,
            after_id=reached,
            ceiling_id=ceiling_id,
            limit=limit - len(rows),
            window=window,
        )
        rows += found
        if got_to is None:
            return rows, max(reached, int(ceiling_id)), False
        reached = got_to
        if len(rows) >= limit:
            return rows, reached, True
    return rows, reached, reached < ceiling_id


def count_by_window(
    conn: Connection,
    *,
    where: str,
    binds: Mapping[str, Any],
    ceiling_id: int,
    window: int = WINDOW,
) -> tuple[dict[tuple[str, str], int], list[tuple[int, int]]]:
    """{(workflow_class, status): runs} matching *where* up to *ceiling_id*,
    one window of ids per statement, newest window first: the counts, and the windows that hold a matching run (newest
    first: where the preview's sample is read)."""
    totals: dict[tuple[str, str], int] = {}
    holding: list[tuple[int, int]] = []
    for low, high in windows_down(conn, ceiling_id=ceiling_id, window=window):
        counts = count_window(conn, where=where, binds=binds, low=low, high=high)
        if counts:
            holding.append((low, high))
        for key, runs in counts.items():
            totals[key] = totals.get(key, 0) + runs
    return totals, holding


def sample_in(
    conn: Connection,
    windows: list[tuple[int, int]],
    *,
    limit: int,
    threshold: timedelta,
    waiting_threshold: timedelta,
    now: datetime | None = None,
    **filters: Any,
) -> list[dict[str, Any]]:
    """The first *limit* runs of the index's page (newest first) read from
    *windows* (count_by_window's, newest first), one window per statement."""
    filters.pop("ceiling_id", None)
    rows: list[dict[str, Any]] = []
    for low, high in windows:
        rows += page(
            conn,
            limit=limit - len(rows),
            threshold=threshold,
            waiting_threshold=waiting_threshold,
            now=now,
            floor_id=low,
            ceiling_id=high,
            **filters,
        )
        if len(rows) >= limit:
            break
    return rows


# The columns of an export (docs/search.md, Exporting runs): the run's own,
# its stuck reason as the index gives it, its latest step's name and error
# class, and its arguments.
EXPORT_COLUMNS = (
    "id",
    "workflow_id",
    "workflow_class",
    "status",
    "stuck_reason",
    "current_step",
    "latest_step_name",
    "latest_error_class",
    "subject_type",
    "subject_id",
    "idempotency_key",
    "definition_digest",
    "created_at",
    "started_at",
    "paused_at",
    "finished_at",
    "updated_at",
    "arguments",
)


def _moment(column: str) -> str:
    # ISO 8601 as JSON writes it (2026-03-01T14:05:00.123456+00:00): the
    # same text in a CSV cell as in an NDJSON line, made by the server.
    return f"to_json({column}) #>> '{{}}'"


# The export's columns whose text never needs a CSV cell's quotes or its
# formula escape (digits, a moment, one of a few keys).
_CSV_PLAIN = frozenset(
    ("id", "status", "stuck_reason", "created_at", "started_at", "paused_at", "finished_at", "updated_at")
)
# What a CSV cell may not start with: a spreadsheet reads it as a formula
# (OWASP's list, the tab and carriage return included).
CSV_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def _csv_cell(text: str) -> str:
    """The CSV cell of *text* (an SQL text expression, cheap to repeat):
    a text that starts like a formula gets a leading apostrophe, one that
    holds a comma, a quote or a line break is quoted (its quotes doubled),
    NULL is empty. The usual text, none of these, is given as it is after
    one look at its first character and four searches."""
    codes = ", ".join(str(ord(start)) for start in CSV_FORMULA_STARTS)
    escaped = f"CASE WHEN ascii({text}) IN ({codes}) THEN '''' || {text} ELSE {text} END"
    special = (
        f"""strpos({text}, ',') > 0 OR strpos({text}, '"') > 0"""
        f" OR strpos({text}, E'\\n') > 0 OR strpos({text}, E'\\r') > 0"
    )
    return (
        f"""CASE WHEN {text} IS NULL THEN '' WHEN {special} THEN '"' || replace({escaped}, '"', '""') || '"'"""
        f" WHEN ascii({text}) IN ({codes}) THEN '''' || {text} ELSE {text} END"
    )


def _csv_line(values: Mapping[str, str]) -> str:
    """The SELECT list that makes each run one CSV line (CRLF ended) on the
    server, with _csv_cell's escapes, as Python's csv writer writes them.
    The arguments (JSON, made text once) are always quoted: an object's
    keys hold quotes anyway; a negative number alone gets the apostrophe."""
    cells = []
    for key, value in values.items():
        if key == "arguments":
            text = f"({value})::text"
            escaped = (
                f"CASE WHEN jsonb_typeof({value}) = 'number' AND {value} < '0'::jsonb"
                f" THEN '''' || {text} ELSE {text} END"
            )
            cells.append(f"""coalesce('"' || replace({escaped}, '"', '""') || '"', '')""")
        elif key in _CSV_PLAIN:
            text = _moment(value) if key.endswith("_at") else f"({value})::text"
            cells.append(f"coalesce({text}, '')")
        else:
            cells.append(_csv_cell(value))
    return " || ',' || ".join(cells) + " || E'\\r\\n'"


def export_rows(
    conn: Connection,
    *,
    where: str,
    binds: Mapping[str, Any],
    ceiling_id: int,
    now: datetime,
    threshold: timedelta,
    waiting_threshold: timedelta,
    as_json: bool = False,
    as_csv: bool = False,
    batch: int = 2000,
    limit: int | None = None,
    redact: tuple[str, ...] = (),
):
    """Every run page_where's *where* matches with an id up to *ceiling_id*
    (the first *limit* of them, when given),
    oldest first, in lists of up to *batch*: each run a row of
    EXPORT_COLUMNS as text (None for NULL;
    moments ISO 8601, the arguments their JSON), or with *as_json* one JSON
    object's text with those keys in that order, or with *as_csv* its CSV
    line (_csv_line). Read through a
    server-side cursor *batch* rows at a time, so memory does not grow with
    the count; the server writes the text, so each row costs Python little.
    A generator: the statement runs when the first row is asked for, and
    *conn* must stay open until the last. *redact*: the policy's redaction
    rules (their text), applied to the arguments by the server
    (pgbus_web_redact, schema/v16.sql) before any format is made of them."""
    given = stuck.params(now, threshold, waiting_threshold)
    reasons = "\n                 ".join(stuck.reason_sql(stuck.rules_for(given)))
    values = {
        "id": "w.id",
        "workflow_id": "w.workflow_id",
        "workflow_class": "w.workflow_class",
        "status": "w.status",
        "stuck_reason": f"CASE {reasons} END",
        "current_step": "w.current_step",
        "latest_step_name": "w.latest_step_name",
        "latest_error_class": "w.latest_error_class",
        "subject_type": "w.subject_type",
        "subject_id": "w.subject_id",
        "idempotency_key": "w.idempotency_key",
        "definition_digest": "w.definition_digest",
        "created_at": "w.created_at",
        "started_at": "w.started_at",
        "paused_at": "w.paused_at",
        "finished_at": "w.finished_at",
        "updated_at": "w.updated_at",
        "arguments": "shown.arguments" if redact else "w.arguments",
    }
    assert tuple(values) == EXPORT_COLUMNS
    # Redacted once per row, however many times the line names it.
    shown = (
        "CROSS JOIN LATERAL (SELECT pgbus_web_redact(w.arguments, CAST(:export_redact AS text[])) AS arguments) shown"
        if redact
        else ""
    )
    if as_json:
        pairs = ", ".join(f"'{key}', {value}" for key, value in values.items())
        selected = f"json_build_object({pairs})::text"
    elif as_csv:
        selected = _csv_line(values)
    else:
        selected = ", ".join(
            _moment(value) if key.endswith("_at") else f"({value})::text" for key, value in values.items()
        )
    statement = sa.text(
        f"""
        SELECT {selected}
        FROM pgbus_workflows w {shown}
        WHERE w.id <= :export_ceiling AND ({where})
        ORDER BY w.id
        {"LIMIT :export_limit" if limit is not None else ""}
        """
    )
    # A server-side cursor lives in a transaction: a page's connection is
    # in autocommit, so this one is put back in a transaction of its own
    # (READ COMMITTED: the cursor reads the snapshot of its start).
    if not conn.in_transaction():
        conn.execution_options(isolation_level="READ COMMITTED")
    result = conn.execution_options(stream_results=True, yield_per=int(batch)).execute(
        statement,
        {
            **binds,
            **given,
            "export_ceiling": int(ceiling_id),
            **({"export_limit": int(limit)} if limit is not None else {}),
            **({"export_redact": list(redact)} if redact else {}),
        },
    )
    try:
        # A batch at a time: a row at a time through the result costs more
        # than the server takes to send it.
        for rows in result.partitions(int(batch)):
            yield [line for (line,) in rows] if as_json or as_csv else rows
    finally:
        result.close()
