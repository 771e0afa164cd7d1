"""The reads of workers and queues every door shows (the Workers page, the
index's banner, the API, the command line, MCP, /metrics): one home for
what "alive", "gone" and "stopped" mean, against the setting
worker_gone_after (docs/workers.md)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy.engine import Connection, Engine

from ..models import changes, pgmq_queues, policy_rows, worker_heartbeats
from ..runtime.clock import utcnow
from . import policy, representations
from .settings import Settings

# The Workers page lists at most this many rows (a day of them is kept).
WORKERS_SHOWN = 500
# The index's banner names at most this many runs of each gone worker; the
# link to the filtered index lists them all.
RUNS_SHOWN = 5
STATES, KINDS = worker_heartbeats.STATES, worker_heartbeats.KINDS


def cutoff(settings: Settings, now: datetime) -> datetime:
    """A heartbeat older than this is gone."""
    return now - settings.worker_gone_after


def worker_rows(conn: Connection, settings: Settings, now: datetime | None = None) -> list[dict[str, Any]]:
    """Every kept row, alive first, each with its ``state`` and the steps it
    holds in progress (``holding``)."""
    now = now or utcnow()
    return worker_heartbeats.listing(conn, cutoff=cutoff(settings, now), limit=WORKERS_SHOWN)


def gone_holding(conn: Connection, settings: Settings, now: datetime | None = None) -> list[dict[str, Any]]:
    """The gone workers the index flags, with the first RUNS_SHOWN runs
    each held: those that still hold runs (flagged before those runs are
    stalled), and those that fell silent within the stalled threshold
    even holding none (a worker gone is news until then)."""
    now = now or utcnow()
    return worker_heartbeats.gone_holding(
        conn,
        cutoff=cutoff(settings, now),
        recent=now - policy.current(conn.engine).stall_threshold,
        run_limit=RUNS_SHOWN,
    )


def queue_rows(conn: Connection, now: datetime | None = None) -> list[dict[str, Any]]:
    """Each PGMQ queue with its depth, visible messages, oldest message's
    moment and age in seconds (None when empty)."""
    now = now or utcnow()
    rows = pgmq_queues.queue_depths(conn, pgmq_queues.queue_tables(conn), now=now)
    for row in rows:
        row["oldest_age_seconds"] = age_seconds(row["oldest_enqueued_at"], now)
    return rows


def age_seconds(moment: datetime | None, now: datetime) -> float | None:
    """Seconds from *moment* to *now*, 0 for a moment after it, None for
    none or one with no finite distance (±infinity)."""
    if moment is None:
        return None
    try:
        return max((now - moment).total_seconds(), 0.0)
    except (OverflowError, TypeError):
        return None


def counts(conn: Connection, settings: Settings, now: datetime | None = None) -> dict[tuple[str, str], int]:
    """{(kind, state): rows}, every pair present (zeros included)."""
    now = now or utcnow()
    found = worker_heartbeats.state_counts(conn, cutoff=cutoff(settings, now))
    return {(kind, state): found.get((kind, state), 0) for kind in KINDS for state in STATES}


def workers_context(conn: Connection, settings: Settings, now: datetime | None = None) -> dict[str, Any]:
    """The Workers page: the processes and the queues."""
    now = now or utcnow()
    rows = worker_rows(conn, settings, now)
    return {
        "now": now,
        "workers": rows,
        "workers_shown": WORKERS_SHOWN,
        "alive": sum(1 for row in rows if row["state"] == "alive"),
        "gone_after": settings.worker_gone_after,
        "queues": queue_rows(conn, now),
    }


def poll_markers(conn: Connection, settings: Settings, now: datetime | None = None) -> tuple[str, str]:
    """The change marker (core/page_reads.change_marker) and which workers are
    alive or gone now, in one statement (a live refresh draws anew when
    either changes: a worker falling silent writes nothing); and the same
    without the changes operations' chunks made (models/changes.by_operation)."""
    marker, others, states = changes.marker_with(
        conn,
        f"SELECT ({worker_heartbeats.MARKER_SQL}) || '/p' || ({policy_rows.MARKER_SQL})",
        {"cutoff": cutoff(settings, now or utcnow())},
    )
    # The policy's last change rides on the same statement: it keys the
    # kept reads (a rule's change draws anew) and tells this process's
    # kept policy whether it is still fresh, at no round trip of its own.
    policy.seen(conn.engine, int(str(states).rpartition("/p")[2]))
    return f"{marker}/{states}", f"{others}/{states}"


def listing(engine: Engine, settings: Settings) -> dict[str, list[dict[str, Any]]]:
    """The workers and the queues as the JSON shapes (the command line, MCP)."""
    now = utcnow()
    with engine.connect() as conn:
        return {
            "workers": [representations.worker(row) for row in worker_rows(conn, settings, now)],
            "queues": [representations.queue(row) for row in queue_rows(conn, now)],
        }
