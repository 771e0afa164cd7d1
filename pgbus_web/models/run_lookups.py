"""pgbus_workflows, read for a page that needs a run by part of its id or
only a few facts of the runs a filter matches: small reads beside the
index's own (workflow_index.py), each served by an index of the table.
"""

from __future__ import annotations

from typing import Any, Mapping

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from .workflow_index import SEARCH_ID_PREFIX_MIN, _successor, ascii_lower

# The range of search_where's id prefix branch, so that it reads the same
# expression index (schema v3's pgbus_workflows_search_id), in its order.
_IDS_STARTING_WITH = sa.text(
    'SELECT workflow_id FROM pgbus_workflows'
    ' WHERE lower(workflow_id COLLATE "C") >= :low AND lower(workflow_id COLLATE "C") < :high'
    ' ORDER BY lower(workflow_id COLLATE "C") LIMIT :limit'
)


def ids_starting_with(conn: Connection, prefix: str, *, limit: int = 2) -> list[str]:
    """Up to *limit* run ids that start with *prefix*, in any case, as the
    search box matches a short id; none for a prefix shorter than
    SEARCH_ID_PREFIX_MIN (it would match too much to mean one run)."""
    lowered = ascii_lower(prefix)
    high = _successor(lowered)
    if len(prefix) < SEARCH_ID_PREFIX_MIN or high is None:
        return []
    rows = conn.execute(_IDS_STARTING_WITH, {"low": lowered, "high": high, "limit": int(limit)})
    return [workflow_id for (workflow_id,) in rows]


def status_counts_up_to(conn: Connection, *, where: str, binds: Mapping[str, Any], cap: int) -> dict[str, int]:
    """{status: runs} of the runs page_where's *where* matches, counting no
    further than *cap* + 1 runs in all: workflow_index.count_up_to by status,
    for the same price (the statuses of the runs read anyway)."""
    rows = conn.execute(
        sa.text(
            f"""
            SELECT status, count(*) FROM (
                SELECT w.status FROM pgbus_workflows w
                    WHERE {where}
                LIMIT :count_cap
            ) matched
            GROUP BY status
            """
        ),
        {**binds, "count_cap": int(cap) + 1},
    )
    return {status: int(runs) for status, runs in rows}
