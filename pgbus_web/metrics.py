"""The Prometheus metrics (docs/metrics.md): what the runs index counts,
read with the pages' own queries and handed to ``prometheus_client``.

- ``pgbus_workflow_runs{workflow_class,status}``: runs per class and status
  (models.workflow_counts.status_counts, the index's count table).
- ``pgbus_workflow_stuck_runs{workflow_class,reason}`` and
  ``pgbus_workflow_oldest_stuck_seconds{workflow_class,reason}``: the runs
  that need a person, by the needs-attention rules (rules/stuck.py, as
  models.workflow_attention reads them), and how long the oldest of each pair has been stuck.
- ``pgbus_web_operation_runs_total{verb,outcome}``: the runs operations
  moved, skipped and refused (operations are never deleted, so these only
  grow), and ``pgbus_web_operations{verb,status}``: operations per status.
- ``pgbus_web_workers{kind,state}``: workers and serving processes alive,
  gone (silent past worker_gone_after) and stopped (models/worker_heartbeats.STATE_SQL).
- ``pgbus_pgmq_queue_depth{queue}``, ``pgbus_pgmq_queue_visible{queue}`` and
  ``pgbus_pgmq_oldest_message_age_seconds{queue}``: each PGMQ queue's
  messages, those visible now, and its oldest message's age (0: empty).

A scrape reads the database at most once per *interval* seconds however
many scrapers ask: the first scrape after the interval reads under a lock,
the others wait for it and answer from what it read. No Flask in here.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from .db import Database
from .models import operation_rows, pgmq_queues, worker_heartbeats, workflow_attention, workflow_counts
from .models.values import Infinite
from .progress import MissingExtra
from .rules import states
from .runtime.clock import utcnow

# Seconds a scrape's reading is reused (Settings.metrics_interval).
INTERVAL = 15.0


def require_client():
    """prometheus_client, or MissingExtra naming the extra that brings it."""
    try:
        import prometheus_client
    except ImportError:
        raise MissingExtra("prometheus_client", "metrics") from None
    return prometheus_client


def available() -> bool:
    try:
        require_client()
    except MissingExtra:
        return False
    return True


@dataclass
class Reading:
    """What one read of the database found."""

    runs: dict[tuple[str, str], int] = field(default_factory=dict)
    stuck: dict[tuple[str, str], tuple[int, datetime | None]] = field(default_factory=dict)
    outcomes: dict[tuple[str, str], int] = field(default_factory=dict)
    operations: dict[tuple[str, str], int] = field(default_factory=dict)
    workers: dict[tuple[str, str], int] = field(default_factory=dict)
    queues: list[dict] = field(default_factory=list)
    at: datetime = field(default_factory=utcnow)

    def classes(self) -> list[str]:
        return sorted({klass for klass, _ in self.runs} | {klass for klass, _ in self.stuck})

    def oldest_seconds(self, key: tuple[str, str]) -> float:
        _, since = self.stuck.get(key, (0, None))
        return self.age_seconds(since)

    def age_seconds(self, since) -> float:
        """Seconds from *since* to the reading, 0 for none or an infinite one."""
        if since is None or not isinstance(since, datetime) or isinstance(since, Infinite):
            return 0.0  # an infinite or missing moment: no age to tell
        if since.tzinfo is None:
            since = since.replace(tzinfo=UTC)
        return max((self.at - since).total_seconds(), 0.0)


def read(
    database: Database,
    *,
    threshold: timedelta,
    waiting_threshold: timedelta | None,
    now: datetime | None = None,
    gone_after: timedelta | None = None,
) -> Reading:
    """Every number the metrics give, on one connection; the workers' only
    with *gone_after* (Settings.worker_gone_after)."""
    now = now or utcnow()
    with database.read() as conn:
        workers: dict[tuple[str, str], int] = {}
        if gone_after is not None:
            workers = {(kind, state): 0 for kind in worker_heartbeats.KINDS for state in worker_heartbeats.STATES}
            workers.update(worker_heartbeats.state_counts(conn, cutoff=now - gone_after))
        queues = pgmq_queues.queue_depths(conn, pgmq_queues.queue_tables(conn), now=now)
        return Reading(
            runs=workflow_counts.status_counts(conn),
            stuck=workflow_attention.stuck_reason_summary(
                conn, threshold=threshold, waiting_threshold=waiting_threshold, now=now
            ),
            outcomes=operation_rows.outcome_totals(conn),
            operations=operation_rows.status_counts(conn),
            workers=workers,
            queues=queues,
            at=now,
        )


class Cache:
    """One Reading shared by every scrape for *interval* seconds."""

    def __init__(
        self, load: Callable[[], Reading], interval: float = INTERVAL, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.load = load
        self.interval = float(interval)
        self.clock = clock
        self._lock = threading.Lock()
        self._reading: Reading | None = None
        self._read_at = 0.0

    def get(self) -> Reading:
        # Under the lock: scrapes arriving while one reads wait for its answer.
        with self._lock:
            if self._reading is None or self.clock() - self._read_at >= self.interval:
                self._reading = self.load()
                self._read_at = self.clock()
            return self._reading


class Collector:
    """A prometheus_client collector over a Cache."""

    def __init__(self, cache: Cache) -> None:
        self.cache = cache

    def describe(self) -> list:
        return []  # collected on scrape only, never when registered

    def collect(self) -> Iterator:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        reading = self.cache.get()
        classes = reading.classes()
        runs = GaugeMetricFamily(
            "pgbus_workflow_runs", "Workflow runs by class and status.", labels=("workflow_class", "status")
        )
        stuck = GaugeMetricFamily(
            "pgbus_workflow_stuck_runs",
            "Ongoing runs that need a person, by class and stuck reason.",
            labels=("workflow_class", "reason"),
        )
        oldest = GaugeMetricFamily(
            "pgbus_workflow_oldest_stuck_seconds",
            "Seconds since the oldest stuck run of a class and reason got stuck (0: none).",
            labels=("workflow_class", "reason"),
        )
        # Every class with every status and reason, zeros included: a
        # pair that empties falls to 0 rather than vanishing.
        for klass in classes:
            for status in states.RUN:
                runs.add_metric((klass, status), reading.runs.get((klass, status), 0))
            for reason in states.STUCK_REASONS:
                stuck.add_metric((klass, reason), reading.stuck.get((klass, reason), (0, None))[0])
                oldest.add_metric((klass, reason), reading.oldest_seconds((klass, reason)))
        outcomes = CounterMetricFamily(
            "pgbus_web_operation_runs", "Runs operations acted on, by verb and outcome.", labels=("verb", "outcome")
        )
        for (verb, outcome), count in sorted(reading.outcomes.items()):
            outcomes.add_metric((verb, outcome), count)
        ops = GaugeMetricFamily("pgbus_web_operations", "Operations by verb and status.", labels=("verb", "status"))
        for verb in sorted({verb for verb, _ in reading.operations}):
            for status in states.OPERATION:
                ops.add_metric((verb, status), reading.operations.get((verb, status), 0))
        workers = GaugeMetricFamily(
            "pgbus_web_workers",
            "Workers and serving processes by kind and state (alive, gone, stopped).",
            labels=("kind", "state"),
        )
        for (kind, state), count in sorted(reading.workers.items()):
            workers.add_metric((kind, state), count)
        depth = GaugeMetricFamily("pgbus_pgmq_queue_depth", "Messages in a PGMQ queue.", labels=("queue",))
        visible = GaugeMetricFamily(
            "pgbus_pgmq_queue_visible", "Messages of a PGMQ queue visible now.", labels=("queue",)
        )
        age = GaugeMetricFamily(
            "pgbus_pgmq_oldest_message_age_seconds",
            "Seconds since a PGMQ queue's oldest message was enqueued (0: empty).",
            labels=("queue",),
        )
        for queue in reading.queues:
            depth.add_metric((queue["queue_name"],), queue["depth"])
            visible.add_metric((queue["queue_name"],), queue["visible"])
            age.add_metric((queue["queue_name"],), reading.age_seconds(queue["oldest_enqueued_at"]))
        yield from (runs, stuck, oldest, outcomes, ops, workers, depth, visible, age)
