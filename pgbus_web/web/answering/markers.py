"""The change markers as one request reads them: once, however many of
its answers ask (the fragment's ETag, then its kept read). Each read is a
round trip to the database; beside a bulk operation, whose chunks keep
the server's cores busy, a second one was a second wait for a core."""

from __future__ import annotations

from datetime import datetime

from flask import g
from sqlalchemy.engine import Connection

from ...core import worker_reads
from ...plumbing.state import state

_MARKERS = "pgbus_web_markers"


def markers(conn: Connection, now: datetime | None = None) -> tuple[str, str]:
    """core/worker_reads.poll_markers() for this request, read at its
    first call (*now* of that call)."""
    found = g.get(_MARKERS)
    if found is None:
        found = worker_reads.poll_markers(conn, state().settings, now)
        setattr(g, _MARKERS, found)
    return found
