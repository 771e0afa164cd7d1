"""One context builder per page: read what the page shows (on one
connection) and shape it for its template. No Flask request in here, so a
builder can be called from a test, a benchmark or an HTMX fragment alike.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.engine import Connection, Engine

from .. import db
from ..models import (
    batches,
    changes,
    events,
    operation_rows,
    run_lookups,
    signals,
    step_durations,
    steps,
    workflow_activity,
    workflow_attention,
    workflow_capped_counts,
    workflow_counts,
    workflow_index,
    workflow_rows,
    workflow_search,
)
from ..rules import states, stuck, verb_table
from ..rules.approval import Approval
from ..rules.run_filters import RANGES, RunFilters

# Re-exported: the pages read the clock through here (a test holds it still).
from ..runtime.clock import utcnow as utcnow
from ..runtime.definitions import Workflow
from . import policy as policy_rules
from . import redacting, worker_reads
from .settings import Settings
from .words.presenters import batch_progress as presenters_batch_progress
from .words.presenters import event_operation as presenters_event_operation

# The insights page's range when none is asked for.
DEFAULT_INSIGHTS_RANGE = "7d"
# The run page shows a run's newest attempts and events, and older ones a
# window at a time on demand: the page costs the same whatever the history.
ATTEMPTS_SHOWN = 25
EVENTS_SHOWN = 50
# Step durations read the newest this many runs of the range: enough for
# a steady median and 95th percentile, and a page that stays quick on a
# class with millions of attempts.
DURATION_SAMPLE_RUNS = 2_000


class NotFound(LookupError):
    """What a page is about does not exist; the message says what is missing."""


def policy_of(source: Connection | Engine) -> policy_rules.Policy:
    """The policy as this process keeps it, for the database *source*
    (a connection or an engine) belongs to."""
    if isinstance(source, Connection):
        return policy_rules.current(source.engine, source)
    return policy_rules.current(source)


def thresholds(source: Connection | Engine) -> stuck.Thresholds:
    """The stuck-run thresholds of the policy, as the models' queries take them."""
    return policy_of(source).thresholds()


def with_approvals(conn: Connection, event_rows: list[dict[str, Any]]) -> None:
    """Give each event an operation wrote that operation's approval
    (``approval``: approved_by, approved_at), when a second operator
    approved it: its audit sentence names them."""
    by_operation = operation_rows.approvals(
        conn, [presenters_event_operation(row) for row in event_rows if presenters_event_operation(row)]
    )
    for row in event_rows:
        found = by_operation.get(presenters_event_operation(row) or 0)
        if found is not None:
            row["approval"] = found


def approval(source: Connection | Engine, settings: Settings) -> Approval:
    """Which operations wait for a second principal: the policy's rule,
    tightened by this process's own approval settings (never loosened)."""
    return policy_of(source).approval.tightened(settings.approval_threshold, settings.approval_verbs)


def definition_of(settings: Settings, workflow_class: str | None) -> Workflow | None:
    """The class's definition when it is loaded here (its registry has
    it), else None: the verbs that need its step list are not offered."""
    registry = settings.registry
    return registry.get(workflow_class) if registry is not None else None


def storable(value: str) -> bool:
    """False for a value PostgreSQL text cannot hold (a NUL): no run or
    class has it, and asking the database would fail, not answer."""
    return "\x00" not in value


def find_run(conn: Connection, workflow_id: str) -> dict[str, Any] | None:
    """The run's row; None when no run has this id (an id PostgreSQL text
    cannot hold included). Every door answers None with
    problems.run_not_found."""
    return workflow_rows.find(conn, workflow_id) if storable(workflow_id) else None


def runs_by_prefix(conn: Connection, prefix: str) -> list[str]:
    """At most two ids of runs whose id starts with *prefix* (the short id
    the pages print): two are enough to know it names more than one run."""
    return run_lookups.ids_starting_with(conn, prefix, limit=2) if storable(prefix) else []


# --- the runs index --------------------------------------------------------


@dataclass
class Pagination:
    """Keyset cursors: the id to pass as ``before`` (older) and as ``after`` (newer)."""

    older: int | None
    newer: int | None

    @property
    def any(self) -> bool:
        return self.older is not None or self.newer is not None


def _count_table(counts: dict[tuple[str, str], int]) -> dict[str, Any]:
    """status_counts as a table: one row per class, one column per status
    that has runs, with totals."""
    classes = sorted({klass for klass, _ in counts})
    statuses = [status for status in states.RUN if any(s == status for _, s in counts)]
    rows: list[dict[str, Any]] = [
        {
            "workflow_class": klass,
            "counts": {status: counts.get((klass, status), 0) for status in statuses},
            "total": sum(counts.get((klass, status), 0) for status in states.RUN),
        }
        for klass in classes
    ]
    totals = {status: sum(row["counts"][status] for row in rows) for status in statuses}
    return {"statuses": statuses, "rows": rows, "totals": totals, "total": sum(totals.values())}


def index_runs(conn: Connection, settings: Settings, filters: RunFilters, now: datetime) -> dict[str, Any]:
    """One page of runs for *filters*, and the cursors around it."""
    size = settings.page_size
    rows = workflow_index.page(conn, limit=size + 1, now=now, **thresholds(conn), **filters.page_binds(now))
    if filters.after is not None:
        # Fetched upwards from the cursor: the extra row is the newest one.
        more_newer = len(rows) > size
        rows = rows[1:] if more_newer else rows
        has_newer, has_older = more_newer, True
    else:
        has_older = len(rows) > size
        rows = rows[:size]
        has_newer = filters.before is not None
    pagination = Pagination(
        older=rows[-1]["id"] if rows and has_older else None,
        newer=rows[0]["id"] if rows and has_newer else None,
    )
    return {"runs": rows, "pagination": pagination}


# The parts of the index are its blocks (pages.INDEX), each its own
# queries; an HTMX refresh of one block loads only that part.
INDEX_PARTS = ("total", "counts", "attention", "runs", "filter_ranges", "workers_banner")


def attention_context(conn: Connection, settings: Settings, now: datetime) -> dict[str, Any]:
    """The index's needs-attention block: the groups at *now*, the failed
    runs' groups, the groups' classes whose definitions are not loaded
    here, and when they were read (``attention_read_at``, the "as of")."""
    groups = workflow_attention.attention_groups(conn, now=now, **thresholds(conn))
    failed = workflow_attention.failed_groups(conn)
    for group in failed:
        # Rerun needs the class's step list (verb_table.CLASS_VERBS).
        group["class_loaded"] = definition_of(settings, group["workflow_class"]) is not None
    # The groups' classes whose definitions are not loaded here: their
    # retry, resume, skip and rerun are not offered, and the page says why.
    unloaded = sorted(
        {
            group["workflow_class"]
            for group in [*groups, *failed]
            if definition_of(settings, group["workflow_class"]) is None
        }
    )
    return {"attention_groups": groups, "failed_groups": failed, "unloaded_classes": unloaded, "attention_read_at": now}


# What index_context may hand its reading to: called with the connection,
# the page's moment and the function that reads the whole context at that
# moment on a connection it is given, it answers the context, read now or
# remembered from an equal read (web/answering/page_cache.py).
Remember = Callable[[Connection, datetime, Callable[[Connection], dict[str, Any]]], dict[str, Any]]


def index_context(
    conn: Connection,
    settings: Settings,
    filters: RunFilters | None,
    now: datetime | None = None,
    parts: tuple[str, ...] = INDEX_PARTS,
    remember: Remember | None = None,
) -> dict[str, Any]:
    """The runs index: counts per class and status, the needs-attention
    groups and (unless the filters were bad, *filters* None) a page of runs.
    *parts* names what to read; the others come back empty. With
    *remember*, what it gives (read by it or remembered)."""
    now = now or utcnow()
    if remember is not None:
        return remember(conn, now, lambda on: index_context(on, settings, filters, now, parts))
    # The page head's total is the counts' sum: either block reads them.
    counts = _count_table(workflow_counts.status_counts(conn) if {"counts", "total"} & set(parts) else {})
    if "attention" in parts:
        attention = attention_context(conn, settings, now)
    else:
        attention = {"attention_groups": [], "failed_groups": [], "unloaded_classes": [], "attention_read_at": now}
    classes = sorted(
        {row["workflow_class"] for row in counts["rows"]} | set(getattr(settings.registry, "names", ()) or ())
    )
    context: dict[str, Any] = {
        "now": now,
        "filters": filters or RunFilters(),
        "counts": counts,
        **attention,
        # Workers gone silent that hold runs (the banner above the groups).
        "gone_workers": worker_reads.gone_holding(conn, settings, now) if "workers_banner" in parts else [],
        "classes": classes,
        "statuses": states.RUN,
        "reasons": states.STUCK_REASONS,
        "ranges": tuple(RANGES),
        "runs": [],
        "pagination": Pagination(None, None),
        # No run at all: the likeliest cause is the wrong database, so the
        # page says which one it reads.
        "database_place": db.place(conn) if "counts" in parts and not counts["rows"] else None,
        # The search box's hint says whether a fragment from anywhere in an
        # id is looked for (the whole page only: no fragment draws the box).
        "fragment_search": set(parts) >= set(INDEX_PARTS) and workflow_search.fragment_index_present(conn),
    }
    if filters is not None and "runs" in parts:
        context.update(index_runs(conn, settings, filters, now))
        if filters.active:
            by_status = matching_statuses(conn, settings, filters, now, budget=MATCHING_BUDGET)
            # Not counted within its budget: the entry is shown without a
            # count and with every verb (the preview counts them all).
            matching = None if by_status is None else sum(by_status.values())
            context.update(
                matching=matching,
                matching_cap=MATCHING_CAP,
                # Past the cap the statuses are those of the runs counted
                # first, not of all: every verb stays offered.
                matching_verbs=verb_table.fitting(by_status)
                if by_status is not None and matching is not None and matching <= MATCHING_CAP
                else None,
            )
            # A search that names one run (a pasted id, a subject) offers to
            # open it: the operator looked for that run, not for a list.
            if filters.q and context["matching"] == 1 and len(context["runs"]) == 1:
                context["only_match"] = context["runs"][0]
    return context


# The index's "Act on all N runs" counts this far and no further: the
# runs block is refreshed every few seconds, and counting a million runs
# costs half a second (the preview, asked for once, gives the exact count).
MATCHING_CAP = 10_000
# Seconds that count may take. Warm, 10,000 runs are a few milliseconds;
# a filter the indexes do not answer alone (a status and a time range) on
# a cold million-run table reads a block of the table per run, and took 17 s
# past the page's 10 s timeout (the page was a 503): past this budget the
# entry says "Act on all matching runs", without a count.
MATCHING_BUDGET = 1.0


def matching_statuses(
    conn: Connection, settings: Settings, filters: RunFilters, now: datetime, *, budget: float | None = None
) -> dict[str, int] | None:
    """{status: runs} of what the operation's preview would count for
    *filters* now, up to MATCHING_CAP + 1 runs in all. A stuck reason's
    runs, or a needs-attention group's, are counted from what is kept.
    With *budget* (seconds), None when counting took longer."""
    if filters.reason is not None and not any(
        (
            filters.q,
            filters.status,
            filters.subject,
            filters.since,
            filters.created_from,
            filters.created_to,
            filters.operation,
        )
    ):
        runs = workflow_attention.stuck_count(
            conn,
            reason=filters.reason,
            now=now,
            **thresholds(conn),
            workflow_class=filters.workflow_class,
            step_name=filters.step,
            error_class=filters.error_class,
            no_error_class=filters.no_error_class,
        )
        return {stuck.BY_REASON[filters.reason].status: min(int(runs), MATCHING_CAP + 1)} if runs else {}
    binds = filters.page_binds(now)
    binds.pop("before_id", None)
    binds.pop("after_id", None)
    fragments = workflow_search.searches_fragments(conn, filters.q)
    where, where_binds = workflow_index.page_where(now=now, fragments=fragments, **thresholds(conn), **binds)
    return workflow_capped_counts.status_counts_up_to(
        conn, where=where, binds=where_binds, cap=MATCHING_CAP, budget=budget
    )


# --- one run ---------------------------------------------------------------


def _step_groups(
    shown: list[dict[str, Any]], named: list[dict[str, Any]], definition: Workflow | None
) -> list[dict[str, Any]]:
    """The run's steps in the definition's order (steps it has that the
    run has not reached yet come with no attempts), then any step the
    definition no longer has, in the order the run met it. Each with its
    attempts among *shown*, its number of attempts and its latest one
    (from *named*, steps.names_for_run: over the whole history)."""
    by_name: dict[str, list[dict[str, Any]]] = {}
    for row in shown:
        by_name.setdefault(row["step_name"], []).append(row)
    facts = {entry["name"]: entry for entry in named}
    names = list(definition.step_names) if definition is not None else []
    names += [name for name in facts if name not in names]
    return [
        {
            "name": name,
            "attempts": by_name.get(name, []),
            "count": facts[name]["attempts"] if name in facts else 0,
            "latest": facts[name]["latest"] if name in facts else None,
            "defined": definition is not None and definition.has_step(name),
        }
        for name in names
    ]


@dataclass(frozen=True)
class Window:
    """Which of a run's attempts or events the page shows: the newest
    *shown* of *total* below *before* (None: the newest); *older* is the
    ``before`` of the next older window (None when none is older)."""

    shown: int
    total: int
    before: int | None
    older: int | None

    @property
    def partial(self) -> bool:
        return self.before is not None or self.older is not None


def _window(
    rows: list[dict[str, Any]], size: int, total: int, before: int | None
) -> tuple[list[dict[str, Any]], Window]:
    """The newest *size* of *rows* (read with one extra, oldest first) and their Window."""
    older = len(rows) > size
    rows = rows[-size:] if older else rows
    return rows, Window(len(rows), total, before, rows[0]["id"] if older and rows else None)


def run_context(
    conn: Connection,
    settings: Settings,
    workflow_id: str,
    now: datetime | None = None,
    run: dict[str, Any] | None = None,
    attempts_before: int | None = None,
    events_before: int | None = None,
    reveal: bool = False,
) -> dict[str, Any]:
    """One run with its steps, signals, batches and audit trail: its newest
    ATTEMPTS_SHOWN attempts and EVENTS_SHOWN events, or those below
    *attempts_before* / *events_before*. NotFound when no run has this id.
    *run*: its row when the caller has just read it (a verb returns the run
    as it left it), saving that read. The values the policy redacts are
    redacted (``redacted`` says whether any was) unless *reveal*: only
    redacting.record_reveal's caller passes it, after writing its audit line."""
    now = now or utcnow()
    if run is None:
        run = find_run(conn, workflow_id)
    if run is None:
        raise NotFound(workflow_id)
    named = steps.names_for_run(conn, workflow_id)
    step_rows, attempts = _window(
        steps.for_run(conn, workflow_id, limit=ATTEMPTS_SHOWN + 1, before_id=attempts_before),
        ATTEMPTS_SHOWN,
        sum(entry["attempts"] for entry in named),
        attempts_before,
    )
    newest_events, events_total = events.newest_for_run(
        conn, workflow_id, limit=EVENTS_SHOWN + 1, before_id=events_before
    )
    event_rows, event_window = _window(newest_events, EVENTS_SHOWN, events_total, events_before)
    with_approvals(conn, event_rows)
    signal_rows = signals.for_run(conn, workflow_id)
    latest = max((entry["latest"] for entry in named), key=lambda row: row["id"], default=None)
    steps_by_id = {row["id"]: row for row in step_rows}
    # A signal names the step that claimed it, shown or not.
    steps_by_id.update(
        steps.find_many(
            conn,
            workflow_id,
            (row["claimed_by_step_id"] for row in signal_rows if row["claimed_by_step_id"] not in steps_by_id),
        )
    )
    batch_ids = [row["batch_id"] for row in step_rows] + ([latest["batch_id"]] if latest else [])
    batch_map = batches.find_many(conn, batch_ids)
    definition = definition_of(settings, run["workflow_class"])
    digest = definition.digest if definition is not None else None
    run["step"] = latest
    run["batch"] = batch_map.get(latest["batch_id"]) if latest and latest["batch_id"] else None
    page = {
        "now": now,
        "run": run,
        "steps": step_rows,
        "step_groups": _step_groups(step_rows, named, definition),
        "steps_by_id": steps_by_id,
        "batches": batch_map,
        "signals": signal_rows,
        "events": event_rows,
        "attempts_window": attempts,
        "events_window": event_window,
        "definition": definition,
        "class_loaded": definition is not None,
        "definition_outdated": workflow_rows.definition_outdated(run, digest),
        # What "Compare with…" offers (core/compare.py).
        "last_completed": workflow_rows.newest_completed(conn, run["workflow_class"], other_than=run["workflow_id"]),
    }
    # Here, before any door draws or serialises a value (docs/redaction.md).
    page["redacted"] = False if reveal else redacting.run_page(page, redacting.rules_of(conn))
    page["revealed"] = reveal
    return page


# --- per-class insights ----------------------------------------------------


def insights_context(
    conn: Connection,
    settings: Settings,
    workflow_class: str,
    range_name: str = DEFAULT_INSIGHTS_RANGE,
    now: datetime | None = None,
) -> dict[str, Any]:
    """One class's counts by status and step durations over *range_name*,
    and its stuck runs now. NotFound when the class has no runs and is not
    registered."""
    now = now or utcnow()
    if not storable(workflow_class):
        raise NotFound(workflow_class)
    definition = definition_of(settings, workflow_class)
    if definition is None and not workflow_counts.class_exists(conn, workflow_class):
        raise NotFound(workflow_class)
    since = now - RANGES[range_name]
    status_counts = workflow_counts.class_status_counts(conn, workflow_class, created_from=since)
    stuck = workflow_attention.stuck_reason_counts(conn, now=now, workflow_class=workflow_class, **thresholds(conn))
    sample = steps.duration_percentiles(conn, workflow_class, created_from=since, run_limit=DURATION_SAMPLE_RUNS)
    durations = sample["steps"]
    for row in durations:
        # percentile_cont interpolates in floating point (88 comes back as
        # 87.99999...); to the millisecond is all a duration shows.
        for key in ("median_seconds", "p95_seconds"):
            if row[key] is not None:
                row[key] = round(float(row[key]), 3)
    # Per step and UTC day over 30 days, from the kept histograms.
    step_days = step_durations.per_day(conn, workflow_class, now=now)
    for day in step_days:
        for row in day["steps"]:
            # A kept figure is a bucket's middle (1.96 s for 2 s); a page
            # writes whole seconds by cutting, so it is rounded to what it
            # shows: the millisecond under a second, the second above.
            for key in ("median_seconds", "p95_seconds"):
                if row[key] is not None:
                    row[key] = round(row[key]) if row[key] >= 1 else round(row[key], 3)
    if definition is not None:
        order = {name: index for index, name in enumerate(definition.step_names)}
        durations.sort(key=lambda row: order.get(row["step_name"], len(order)))
        for day in step_days:
            day["steps"].sort(key=lambda row: order.get(row["step_name"], len(order)))
    return {
        "now": now,
        "workflow_class": workflow_class,
        "definition": definition,
        "range": range_name,
        "ranges": tuple(RANGES),
        "since": since,
        "status_counts": [(status, status_counts.get(status, 0)) for status in states.RUN],
        "status_total": sum(status_counts.values()),
        "stuck_counts": [(reason, stuck.get((workflow_class, reason), 0)) for reason in states.STUCK_REASONS],
        "stuck_total": sum(count for (_, _), count in stuck.items()),
        "durations": durations,
        "durations_runs": sample["runs"],
        "durations_sampled": sample["runs"] >= DURATION_SAMPLE_RUNS,
        # Per hour over 24 hours and per day over 30 days, from the kept
        # rollup: the same few rows at any number of runs.
        "activity": {
            bucket: workflow_activity.series(conn, workflow_class, bucket=bucket, now=now)
            for bucket in workflow_activity.BUCKETS
        },
        "step_days": step_days,
    }


# --- one batch -------------------------------------------------------------

# A batch page lists at most this many of the step attempts waiting on it.
BATCH_WAITERS_LIMIT = 100
# No batch id is longer: a longer one is not looked up.
MAX_BATCH_ID = 1000


def batch_context(conn: Connection, batch_id: str, now: datetime | None = None) -> dict[str, Any]:
    """One batch: its jobs by state (pgbus_batches keeps counts, not the
    jobs themselves) and the step attempts that wait or waited on it, each
    with its run. NotFound when no batch has this id."""
    now = now or utcnow()
    batch = batches.find(conn, batch_id) if storable(batch_id) and len(batch_id) <= MAX_BATCH_ID else None
    if batch is None:
        raise NotFound(batch_id)
    done, total = presenters_batch_progress(batch)
    counted = {
        "completed": int(batch["completed_jobs"] or 0),
        "failed": int(batch["failed_jobs"] or 0),
        "discarded": int(batch["discarded_jobs"] or 0),
    }
    jobs = [(name, count) for name, count in counted.items()]
    jobs.append(("pending", max(total - sum(counted.values()), 0)))
    return {
        "now": now,
        "batch": batch,
        "done": done,
        "total": total,
        "jobs": jobs,
        "waiters": steps.for_batch(conn, batch_id, limit=BATCH_WAITERS_LIMIT),
        "waiters_limit": BATCH_WAITERS_LIMIT,
    }


def change_marker(conn: Connection) -> int:
    """The number every committed write to the runs, steps, events, signals
    and batches raises: a live-refresh poll whose marker, clock bucket and
    request are unchanged answers 304 (web/answering/not_modified.py)."""
    return changes.marker(conn)


def replica_health(database: db.Database) -> dict[str, Any] | None:
    """/health's word on the replica (None without one): its state
    (streaming, lagging, unreachable, not_standby), the seconds it is
    behind at most (null when unknown), the bound, and where pages read
    now for a browser that wrote nothing."""
    view = database.replica_view()
    if view is None:
        return None
    return {
        "state": view.state,
        "lag_seconds": None if view.lag is None else round(view.lag, 3),
        "max_lag_seconds": database.replica_max_lag,
        "reads": database.route().source,
    }
