"""The reads of operations every door shows: the recent ones, one by id
(none past a bigserial's range: such an id names no operation), and what
became of the runs one acted on."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy.engine import Connection

from ..models import operation_outcomes
from ..models import operations as store
from ..rules.run_filters import MAX_ID
from .reads import thresholds
from .settings import Settings


def recent(conn: Connection, limit: int) -> list[dict[str, Any]]:
    """The newest *limit* operations, newest first."""
    return store.recent(conn, limit=limit)


def find(conn: Connection, operation_id: int) -> dict[str, Any] | None:
    """Operation *operation_id*, or None."""
    if not 0 < operation_id <= MAX_ID:
        return None
    return store.find(conn, operation_id)


def outcomes(conn: Connection, settings: Settings, operation_id: int, now: datetime) -> dict[tuple[str, str | None], int]:
    """{(status, stuck reason or None): runs} of the runs the operation
    acted on, as they are now, by the settings' stuck thresholds."""
    return operation_outcomes.outcomes(conn, operation_id, now=now, **thresholds(settings))
