"""The Locks page's read: every uniqueness lock of a view with its state,
the counts by state and by queue, the words for each state."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy.engine import Connection

from ..i18n import t
from ..locks import FRESH, GONE, LIVE, ORPHAN, PARKED
from ..models import pgmq_queues, uniqueness_keys
from .lock_filters import LockFilters
from .settings import Settings

# Badge tones: a live or parked lock is doing its job; a gone one leaked a
# little; an orphan blocks its key until someone (or the reaper) acts.
STATE_TONES = {LIVE: "green", PARKED: "blue", FRESH: "gray", GONE: "yellow", ORPHAN: "red"}


def state_labels() -> dict[str, str]:
    return {
        LIVE: t("pgbus.locks.states.live"),
        GONE: t("pgbus.locks.states.gone"),
        PARKED: t("pgbus.locks.states.parked"),
        FRESH: t("pgbus.locks.states.fresh"),
        ORPHAN: t("pgbus.locks.states.orphan"),
    }


def locks_context(
    conn: Connection, settings: Settings, view: LockFilters, now: datetime | None = None
) -> dict[str, Any]:
    """Everything the page shows, read on one connection."""
    floor = settings.lock_age_floor
    page = uniqueness_keys.list_locks(
        conn,
        age_floor=floor,
        limit=settings.page_size,
        state=view.state,
        queue=view.queue,
        after=view.after,
    )
    return {
        "now": now or datetime.now(UTC),
        "view": view,
        "locks": page.rows,
        "next_query": view.next_query(page.next_cursor) if page.next_cursor else None,
        "counts": uniqueness_keys.count_by_state(conn, age_floor=floor, queue=view.queue),
        "queues": uniqueness_keys.queue_counts(conn),
        "known_queues": {table.name for table in pgmq_queues.queue_tables(conn)},
        "age_floor": floor,
        "state_labels": state_labels(),
        "state_tones": STATE_TONES,
    }
