"""The heartbeat a worker or a serving process writes (pgbus_web_workers,
docs/workers.md): a row inserted when it starts, rewritten by one UPSERT
at most every *interval* seconds (its last tick, the steps it ran, the
operation in hand), marked stopped on a clean stop.

- A worker beats from its tick (runtime/worker.py) and, while it runs,
  from a small thread too, so a step whose own code takes minutes does
  not make a live worker look gone.
- A serving process that does operations beats from the operations
  thread's loop (``ServingOperations``, the extension's Background): it
  looks at the database every couple of seconds anyway.

A beat that cannot reach the database is logged and tried again at the
next one: the heartbeat never stops the work it reports on.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta

from sqlalchemy.engine import Engine

from ..models import worker_heartbeats
from .clock import utcnow
from .operation_runner import Background

log = logging.getLogger("pgbus_web.heartbeat")

# Seconds between two beats at most (an UPSERT each): well below the
# dashboard's worker_gone_after (30 s by default).
INTERVAL = 5.0
# A row last heard of this long ago is deleted (a process gone or stopped
# long since: the Workers page keeps a day of them).
KEPT = timedelta(days=1)
# A process prunes at most this often.
PRUNE_EVERY = 3600.0
# The longest host name kept (a row's host is text; gethostname is short).
MAX_HOST = 255

WORKER, SERVE = "worker", "serve"


def this_host() -> str:
    return socket.gethostname()[:MAX_HOST]


class Heartbeat:
    """One process's row. ``beat`` is cheap to call often: it writes only
    when *interval* has passed since the last write (or *force*).
    Thread-safe: a worker's tick and its pulse thread share one."""

    def __init__(
        self, engine: Engine, kind: str, *, interval: float = INTERVAL, clock: Callable[[], datetime] = utcnow
    ) -> None:
        self.engine = engine
        self.kind = kind
        self.interval = float(interval)
        self.clock = clock
        self.host = this_host()
        self.pid = os.getpid()
        self.id: int | None = None
        self.started_at: datetime | None = None
        self._last = 0.0
        self._last_prune = 0.0
        self._lock = threading.Lock()

    def register(self) -> int:
        """The row's id, inserting the row first when there is none yet."""
        with self._lock:
            if self.id is None:
                now = self.clock()
                with self.engine.begin() as conn:
                    row = worker_heartbeats.register(conn, kind=self.kind, host=self.host, pid=self.pid, now=now)
                    worker_heartbeats.prune(conn, heard_before=now - KEPT)
                self.id, self.started_at = int(row["id"]), row["started_at"]
                self._last = self._last_prune = time.monotonic()
            return self.id

    def beat(self, *, steps_done: int = 0, operation_id: int | None = None, force: bool = False) -> bool:
        """Write the heartbeat when it is due; whether it wrote."""
        if self.id is None or self.started_at is None:  # set together by register()
            self.register()
            return True
        with self._lock:
            moment = time.monotonic()
            if not force and moment - self._last < self.interval:
                return False
            now = self.clock()
            with self.engine.begin() as conn:
                worker_heartbeats.beat(
                    conn,
                    self.id,
                    kind=self.kind,
                    host=self.host,
                    pid=self.pid,
                    started_at=self.started_at,
                    now=now,
                    steps_done=steps_done,
                    operation_id=operation_id,
                )
                if moment - self._last_prune >= PRUNE_EVERY:
                    worker_heartbeats.prune(conn, heard_before=now - KEPT)
                    self._last_prune = moment
            self._last = moment
            return True

    def stop(self, *, steps_done: int = 0) -> None:
        """A clean stop: the row says so (the Workers page lists it stopped,
        the index never flags it)."""
        with self._lock:
            if self.id is None:
                return
            with self.engine.begin() as conn:
                worker_heartbeats.stop(conn, self.id, now=self.clock(), steps_done=steps_done)


class Pulse:
    """A daemon thread calling *beat* every *interval* seconds until stopped."""

    def __init__(self, beat: Callable[[], object], interval: float) -> None:
        self._beat = beat
        self.interval = interval
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="pgbus-web-heartbeat", daemon=True)

    def start(self) -> Pulse:
        self.thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        self.thread.join(timeout)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self._beat()
            except Exception as problem:  # noqa: BLE001  (the next beat tries again)
                log.warning("heartbeat failed (%s); trying again in %.1fs", problem.__class__.__name__, self.interval)


class ServingOperations(Background):
    """The serving process's operations thread (runtime/operation_runner.Background)
    with a heartbeat: beaten each time its loop hears from the database
    (every *poll* seconds at least), marked stopped when it is stopped."""

    def __init__(
        self, engine: Engine, registry=None, *, poll: float = 2.0, interval: float = INTERVAL, **options
    ) -> None:
        super().__init__(engine, registry, poll=poll, **options)
        self.heartbeat = Heartbeat(engine, SERVE, interval=interval)

    def _database_answered(self) -> None:
        super()._database_answered()
        held = self.runner.held
        try:
            self.heartbeat.beat(operation_id=held.operation["id"] if held is not None else None)
        except Exception as problem:  # noqa: BLE001  (operations go on without it)
            log.warning("heartbeat failed: %s", problem.__class__.__name__)

    def stop(self, timeout: float = 10.0) -> None:
        super().stop(timeout)
        try:
            self.heartbeat.stop()
        except Exception as problem:  # noqa: BLE001  (stopping all the same: gone once silent)
            log.warning(
                "could not mark this process stopped (%s): it shows as gone once silent", problem.__class__.__name__
            )
