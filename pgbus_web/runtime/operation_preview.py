"""An operation's preview (docs/operations.md): what one outside verb on
every run a filter of the runs index matches would do now: the exact
count, by status, how many runs the verb fits (the verb table's rule) and
how many it will skip and why, and a sample: the first runs the index
shows. Read in one repeatable-read snapshot, so the ceiling (the highest
run id now), the counts and the sample agree.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy.engine import Engine

from ..models import workflow_index, workflow_rows, workflow_search, workflow_windows
from ..rules import run_filters as index_filters
from ..rules import states
from ..rules.stuck import Thresholds
from .clock import utcnow
from .operation_record import check, stored_query

# Runs shown in a preview.
SAMPLE_SIZE = 10


@dataclass
class Preview:
    verb: str
    query: dict[str, str]  # the index filters (stored_query)
    params: dict[str, Any]
    now: datetime
    ceiling_id: int
    total: int
    by_status: dict[str, int]  # in the order of states.RUN, only statuses present
    fits: int
    # Why the others are skipped: {"why": "status", "status", "count"} or
    # {"why": "class_not_loaded", "workflow_class", "count"}.
    skips: list[dict[str, Any]] = field(default_factory=list)
    sample: list[dict[str, Any]] = field(default_factory=list)
    # The runs the verb would act on, by class: whoever asks must be
    # allowed the verb on each (core/permissions.py).
    classes: dict[str, int] = field(default_factory=dict)

    @property
    def skipped(self) -> int:
        return self.total - self.fits


def filter_binds(run_filters: index_filters.RunFilters, now: datetime) -> dict[str, Any]:
    """The index's binds of *run_filters* at *now*, without the page cursors."""
    binds = run_filters.page_binds(now)
    binds.pop("before_id", None)
    binds.pop("after_id", None)
    return binds


def preview(
    engine: Engine,
    run_filters: index_filters.RunFilters,
    verb: str,
    params: Mapping[str, Any] | None = None,
    *,
    registry=None,
    thresholds: Thresholds,
    now: datetime | None = None,
    window: int = workflow_windows.WINDOW,
) -> Preview:
    """What *verb* on every run *run_filters* matches would do now. Read in
    one repeatable-read snapshot, so the ceiling, counts and sample agree."""
    now = now or utcnow()
    found, stored, _ = check(verb, params, None, now=now, require_reason=False)
    binds = filter_binds(run_filters, now)
    with engine.connect() as conn:
        conn = conn.execution_options(isolation_level="REPEATABLE READ")
        with conn.begin():
            ceiling = workflow_rows.highest_id(conn)
            fragments = workflow_search.searches_fragments(conn, run_filters.q)
            where, where_binds = workflow_index.page_where(
                now=now, ceiling_id=ceiling, fragments=fragments, **thresholds, **binds
            )
            # One window of ids per statement (bounded walks, docs/operations.md).
            counts, holding = workflow_windows.count_by_window(
                conn, where=where, binds=where_binds, ceiling_id=ceiling, window=window
            )
            sample = workflow_windows.sample_in(
                conn, holding, limit=SAMPLE_SIZE, now=now, fragments=fragments, **thresholds, **binds
            )
    by_status: dict[str, int] = {}
    for (_, status), runs in counts.items():
        by_status[status] = by_status.get(status, 0) + runs
    by_status = {status: by_status[status] for status in states.RUN if status in by_status} | {
        status: runs for status, runs in by_status.items() if status not in states.RUN
    }
    fits = 0
    not_loaded: dict[str, int] = {}
    classes: dict[str, int] = {}
    for (workflow_class, status), runs in sorted(counts.items()):
        if not found.allows(status):
            continue
        if found.needs_class and (registry is None or registry.get(workflow_class) is None):
            not_loaded[workflow_class] = not_loaded.get(workflow_class, 0) + runs
            continue
        fits += runs
        classes[workflow_class] = classes.get(workflow_class, 0) + runs
    skips = [
        {"why": "status", "status": status, "count": runs}
        for status, runs in by_status.items()
        if not found.allows(status)
    ]
    skips += [
        {"why": "class_not_loaded", "workflow_class": klass, "count": runs}
        for klass, runs in sorted(not_loaded.items())
    ]
    return Preview(
        verb=found.name,
        query=stored_query(run_filters),
        params=stored,
        now=now,
        ceiling_id=ceiling,
        total=sum(by_status.values()),
        by_status=by_status,
        fits=fits,
        skips=skips,
        sample=sample,
        classes=classes,
    )
