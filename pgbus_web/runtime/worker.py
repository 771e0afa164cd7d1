"""The worker: runs due steps, wakes steps whose batch finished, and sweeps
for timed-out waits and stalled steps, and does one chunk of a queued or
running operation per tick (runtime/operation_runner.py).

Any number of workers may run side by side: a due step is claimed with
``FOR UPDATE SKIP LOCKED`` on its run, and marked in progress in that same
transaction, so no two workers ever run one step. ``stop()`` (the CLI wires
it to SIGTERM and SIGINT) ends the loop after the step in hand is finished
and recorded; a worker never abandons a step it marked started.

Given a ``Heartbeat`` (the command line and the demo give one), a worker
keeps its row in pgbus_web_workers (runtime/heartbeat.py): registered at
its first tick, beaten from every tick (an UPSERT at most every few
seconds) and from a thread while it runs, marked stopped when it stops.
Every step it starts records that row's id (pgbus_workflow_steps.worker_id),
declared in the claim's own statement: no extra round trip.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy.engine import Engine

from .. import defaults
from ..models import workflow_activity, workflow_attention
from ..rules.stuck import Thresholds
from . import operation_runner, system
from .clock import utcnow
from .definitions import Registry
from .heartbeat import Heartbeat, Pulse

log = logging.getLogger("pgbus_web.worker")

# Seconds between two looks for due steps when the last look found none.
POLL_INTERVAL = 1.0
# Seconds between two sweeps (timed-out waits, stalls).
SWEEP_INTERVAL = 15.0
# Steps one tick runs at most before it sweeps and wakes batches again.
STEPS_PER_TICK = 100


@dataclass
class TickResult:
    steps: int = 0  # step callables run
    handled: int = 0  # due steps handled without running (back to a wait)
    woken: int = 0  # steps whose batch finished
    timed_out: int = 0
    stalled: int = 0
    batches_advanced: int = 0  # demo batches whose simulated jobs moved on
    operation_runs: int = 0  # runs an operation's chunk handled

    @property
    def busy(self) -> bool:
        return bool(
            self.steps
            or self.handled
            or self.woken
            or self.timed_out
            or self.stalled
            or self.batches_advanced
            or self.operation_runs
        )


class Worker:
    def __init__(
        self,
        engine: Engine,
        registry: Registry,
        *,
        poll_interval: float = POLL_INTERVAL,
        sweep_interval: float = SWEEP_INTERVAL,
        stall_threshold: timedelta = defaults.STALL_THRESHOLD,
        steps_per_tick: int = STEPS_PER_TICK,
        simulate_batches: bool = False,
        chain: bool = True,
        clock: Callable[[], datetime] = utcnow,
        rng: random.Random | None = None,
        operation_stale_after: timedelta = operation_runner.STALE_AFTER,
        heartbeat: Heartbeat | None = None,
        thresholds: Callable[[], Thresholds] | None = None,
    ) -> None:
        self.engine = engine
        # The policy's stuck thresholds, asked at each sweep (the command
        # line gives the policy's reader; a test may give fixed ones).
        self._thresholds = thresholds
        self.registry = registry
        self.poll_interval = poll_interval
        self.sweep_interval = sweep_interval
        self._stall_threshold = stall_threshold
        self.steps_per_tick = steps_per_tick
        self.simulate_batches = simulate_batches
        # Run a run's next step right away when it is due at once (one
        # commit per step); False: every step goes back through the queue.
        self.chain = chain
        self.clock = clock
        self.rng = rng or random.Random()
        self._stopping = threading.Event()
        # stop(silently=True): the row is left as a crashed worker's is.
        self._silent = False
        self._last_sweep: float | None = None
        self.total_steps = 0
        self._steps_in_tick = 0
        self.operations = operation_runner.Runner(
            engine, registry, clock=clock, stale_after=operation_stale_after, nap=0
        )
        self.heartbeat = heartbeat
        # The hour whose stuck runs this worker recorded (insights over time).
        self._stuck_hour: datetime | None = None

    @property
    def worker_id(self) -> int | None:
        """This worker's row in pgbus_web_workers (None without a heartbeat,
        or before its first tick)."""
        return self.heartbeat.id if self.heartbeat is not None else None

    def beat(self, *, force: bool = False) -> None:
        """The heartbeat, when one is due (cheap to call often)."""
        if self.heartbeat is None:
            return
        held = self.operations.held
        self.heartbeat.beat(
            steps_done=self.total_steps, force=force, operation_id=held.operation["id"] if held is not None else None
        )

    # --- one step, one tick --------------------------------------------------

    def run_step(self, *, now: datetime | None = None) -> str | None:
        """Claim and run one due step, then the steps of the same run that
        are due right after it (see system.finish_and_continue). None when
        nothing is due; otherwise what happened to the last step
        (completed, fanned_out, failed, late, handled)."""
        taken = system.take_step(self.engine, self.registry, now=now or self.clock(), worker_id=self.worker_id)
        if taken is None:
            return None
        if isinstance(taken, str):  # system.HANDLED, the one word take_step answers
            return system.HANDLED
        happened = None
        while taken is not None:
            outcome = system.execute(taken, now=now or self.clock())
            if not outcome.ok:
                log.info(
                    "%s %s #%s failed: %s: %s",
                    taken.run["workflow_id"],
                    taken.step["step_name"],
                    taken.step["attempt"],
                    outcome.error_class,
                    outcome.error_message,
                )
            happened, taken = system.finish_and_continue(
                self.engine,
                taken,
                outcome,
                now=now or self.clock(),
                chain=self.chain and not self._stopping.is_set(),
                worker_id=self.worker_id,
            )
            self.total_steps += 1
            self._steps_in_tick += 1
        return happened

    @property
    def stall_threshold(self) -> timedelta:
        return self._thresholds()["threshold"] if self._thresholds is not None else self._stall_threshold

    @property
    def waiting_threshold(self) -> timedelta | None:
        return self._thresholds()["waiting_threshold"] if self._thresholds is not None else defaults.WAITING_THRESHOLD

    def sweep(self, *, now: datetime | None = None) -> system.SweepResult:
        return system.sweep(self.engine, now=now or self.clock(), stall_threshold=self.stall_threshold)

    def record_stuck(self, *, now: datetime) -> bool:
        """Once an hour (the first sweep in it), the stuck runs of each
        class as the needs-attention rules count them with the default
        thresholds: the insights' stuck series. Whether it recorded."""
        hour = now.replace(minute=0, second=0, microsecond=0)
        if self._stuck_hour == hour:
            return False
        # Tried once an hour, whatever happens: a count the statement
        # timeout cuts short leaves that hour's snapshot out ("—" on the
        # page) and never holds up the steps.
        self._stuck_hour = hour
        try:
            with self.engine.begin() as conn:
                found = workflow_attention.stuck_reason_counts(
                    conn, threshold=self.stall_threshold, waiting_threshold=self.waiting_threshold, now=now
                )
                per_class = {name: 0 for name in self.registry.names}
                for (klass, _), count in found.items():
                    per_class[klass] = per_class.get(klass, 0) + count
                workflow_activity.record_stuck(conn, per_class, hour=hour)
        except Exception as problem:  # noqa: BLE001  (the work goes on without it)
            log.warning("could not record this hour's stuck runs: %s", problem.__class__.__name__)
            return False
        return True

    def tick(self, *, now: datetime | None = None, sweep: bool | None = None) -> TickResult:
        """One round: (the sweep when due), batches, then due steps until
        none is left or *steps_per_tick* ran. Pass *now* to run as of
        another time (tests); *sweep* forces the sweep on or off."""
        result = TickResult()
        self.beat()
        moment = now or self.clock()
        if sweep is None:
            sweep = self._last_sweep is None or time.monotonic() - self._last_sweep >= self.sweep_interval
        if sweep:
            swept = system.sweep(self.engine, now=moment, stall_threshold=self.stall_threshold)
            result.timed_out, result.stalled = swept.timed_out, swept.stalled
            self._last_sweep = time.monotonic()
            self.record_stuck(now=moment)
        if self.simulate_batches:
            result.batches_advanced = system.advance_batches(self.engine, now=moment, rng=self.rng)
        result.woken = system.wake_batches(self.engine, self.registry, now=moment)
        self._steps_in_tick = 0
        while self._steps_in_tick + result.handled < self.steps_per_tick and not self._stopping.is_set():
            happened = self.run_step(now=now)
            if happened is None:
                break
            if happened == system.HANDLED:
                result.handled += 1
        result.steps = self._steps_in_tick
        if not self._stopping.is_set():
            chunk = self.operations.step()
            if chunk is not None:
                # A finished operation counts as work: the next tick looks for another.
                result.operation_runs = max(chunk.moved + chunk.skipped + chunk.refused, 1)
        self.beat()
        return result

    def drain(self, *, now: datetime | None = None, max_ticks: int = 1000) -> TickResult:
        """Tick until a tick finds nothing to do (tests and benchmarks)."""
        total = TickResult()
        for _ in range(max_ticks):
            result = self.tick(now=now, sweep=True)
            for field in ("steps", "handled", "woken", "timed_out", "stalled", "batches_advanced", "operation_runs"):
                setattr(total, field, getattr(total, field) + getattr(result, field))
            if not result.busy:
                break
        return total

    # --- the loop ------------------------------------------------------------

    def run(self) -> None:
        """Tick until stop(); sleep poll_interval after an idle tick."""
        log.info("worker started: %s", ", ".join(self.registry.names))
        pulse = Pulse(self.beat, self.heartbeat.interval).start() if self.heartbeat is not None else None
        while not self._stopping.is_set():
            try:
                result = self.tick()
            except Exception:  # noqa: BLE001  (a lost connection must not end the worker)
                log.exception("worker tick failed; retrying after %.1fs", self.poll_interval)
                self._stopping.wait(self.poll_interval)
                continue
            if not result.busy:
                self._stopping.wait(self.poll_interval)
        try:
            # Another process takes the operation in hand at once, rather
            # than after its heartbeat goes stale.
            self.operations.release()
        except Exception:  # noqa: BLE001  (stopping all the same: taken over once stale)
            log.exception("could not release the operation in hand; it is taken over once stale")
        if pulse is not None:
            pulse.stop()
        if pulse is not None and self.heartbeat is not None and not self._silent:  # a pulse beats a heartbeat
            try:
                self.heartbeat.stop(steps_done=self.total_steps)
            except Exception:  # noqa: BLE001  (stopping all the same: gone once silent)
                log.exception("could not mark this worker stopped; it shows as gone once silent")
        log.info("worker stopped after %d steps", self.total_steps)

    def stop(self, *, silently: bool = False) -> None:
        """End the loop after the step in hand is finished and recorded.
        *silently*: without marking the heartbeat row stopped, so the
        dashboard sees the worker go silent as a crashed one does (the
        demo's way to show the gone-worker flag, docs/workers.md)."""
        self._silent = silently
        self._stopping.set()

    @property
    def stopping(self) -> bool:
        return self._stopping.is_set()
