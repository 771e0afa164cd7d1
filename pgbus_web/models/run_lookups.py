"""pgbus_workflows, read for a run by the short id the pages print: the
search box's own prefix range (workflow_search.py), served by its index.
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from .workflow_search import SEARCH_ID_PREFIX_MIN, _successor, ascii_lower

# The range of search_where's id prefix branch, so that it reads the same
# expression index (schema v3's pgbus_workflows_search_id), in its order.
_IDS_STARTING_WITH = sa.text(
    "SELECT workflow_id FROM pgbus_workflows"
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
