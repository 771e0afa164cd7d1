"""The runs page_where's WHERE matches, counted by status no further than a
cap (so a page can say "more than cap" for the price of cap), within a
time budget.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from .statement_budget import Cancelled, within


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
        with within(conn, budget):
            rows = conn.execute(statement, values).all()
    except Cancelled:
        return None
    return {status: int(runs) for status, runs in rows}
