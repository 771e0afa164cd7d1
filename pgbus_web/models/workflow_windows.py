"""An operation's bounded walks over the runs page_where's WHERE matches: its
preview's counts and sample, and its chunks' walks, one window of ids per
statement (docs/operations.md "Bounded walks").
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from . import as_dicts
from .workflow_index import page

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


def windows_down(conn: Connection, *, ceiling_id: int, window: int = WINDOW) -> Iterator[tuple[int, int]]:
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
