"""The demo's history: runs of the demo workflows played as the runtime
would have written them: their step rows (one per attempt), audit events
(who, why, with the runtime's details), signals and fan-out batches, every
moment within the last 30 days. Most runs completed; the others are spread
over every status and every stuck reason (see ``STORIES``).

A run is played on a relative clock (seconds from its start); its story
then says where it sits in time (a run still waiting on a signal ends near
now, a completed one anywhere in the window), and only then are moments
turned into timestamps. A chunk of runs becomes COPY blocks here; writing
them is seed.py's job. No I/O here but the ids a chunk is given.
"""

from __future__ import annotations

import inspect
import random
from bisect import bisect
from collections.abc import Callable
from datetime import UTC, timedelta
from itertools import accumulate
from typing import Any, Protocol

from .. import defaults
from ..models import steps
from ..rules import states
from ..rules.columns import latest_list
from ..runtime.definitions import Workflow
from . import workflows as demo
from .copy_text import _EPOCH, NULL, _copy_safe, _json, _Moments

UTC = UTC

# How far back the generated history reaches.
HISTORY = timedelta(days=30)

SYSTEM = states.SYSTEM_ACTOR
APP = states.APP_ACTOR
OPERATORS = ("dashboard:alice", "dashboard:bob")

STALL_SECONDS = defaults.STALL_THRESHOLD.total_seconds()
WAITING_SECONDS = defaults.WAITING_THRESHOLD.total_seconds()
MINUTE, HOUR, DAY = 60.0, 3600.0, 86400.0

# What becomes of a run, in runs per thousand; the rest completed.
STORIES = {
    "failed": 15,
    "cancelled": 15,
    "paused_error": 20,
    "stalled": 10,
    "paused_manual": 15,
    "overdue": 10,
    "ready_later": 15,
    "ready_now": 5,
    "running": 5,
    "waiting_batch": 10,
    "waiting_signal": 15,
    "waiting_profile": 5,
    "waiting_overdue": 10,
}
COMPLETED_PER_THOUSAND = 1000 - sum(STORIES.values())

# Classes of the completed runs (and of stories open to every class), per thousand.
CLASS_WEIGHTS = ((demo.ORDER, 500), (demo.ONBOARDING, 300), (demo.REFUND, 200))

# Classes and their cumulative weights, for _pick.
_CLASSES = tuple(c for c, _ in CLASS_WEIGHTS)
_CLASSES_CUM = tuple(accumulate(w for _, w in CLASS_WEIGHTS))
# Failed attempts of capture_payment in a completed order: 0, 1, 2.
_CAPTURE_FAILS_CUM = tuple(accumulate((80, 14, 6)))


def _pick(rng: random.Random, population: tuple, cum_weights: tuple):
    """rng.choices(population, cum_weights=cum_weights)[0], drawing the same
    number, without building the list (a run draws a class and more)."""
    return population[bisect(cum_weights, rng.random() * (cum_weights[-1] + 0.0), 0, len(population) - 1)]


# The failures the demo steps raise, as the runtime stores them:
# step -> (error class, message, the step's function).
ERRORS = {
    "capture_payment": ("TimeoutError", demo.CAPTURE_ERROR, demo.capture_payment),
    "send_welcome_email": ("smtplib.SMTPServerDisconnected", demo.SMTP_ERROR, demo.send_welcome_email),
    "issue_refund": ("ValueError", demo.REFUND_ERROR, demo.issue_refund),
}


def _backtrace(func: Callable, error_class: str, message: str) -> str:
    """The traceback the runtime would store: the step's own raise line."""
    try:
        lines, first = inspect.getsourcelines(func)
    except OSError:
        lines, first = [], func.__code__.co_firstlineno
    offset, source = next(
        ((i, line.strip()) for i, line in enumerate(lines) if line.strip().startswith("raise ")), (0, "raise")
    )
    return (
        "Traceback (most recent call last):\n"
        f'  File "pgbus_web/demo/workflows.py", line {first + offset}, in {func.__name__}\n'
        f"    {source}\n{error_class}: {message}\n"
    )


# Stored as COPY text: already escaped.
BACKTRACES = {step: _copy_safe(_backtrace(func, name, message)) for step, (name, message, func) in ERRORS.items()}

REASONS = {
    "resume": ("gateway is back", "SMTP relay fixed", "retrying after the provider's incident", "fixed upstream"),
    "pause": (
        "waiting for a stock count",
        "customer asked us to hold",
        "investigating a duplicate charge",
        "on hold until the vendor answers",
    ),
    "cancel": ("duplicate order", "customer withdrew", "test run", "fraud check failed", "replaced by a new run"),
    "skip": ("user unsubscribed from emails", "sent by hand", "not needed for this customer"),
    "rerun": ("captured amount corrected", "customer confirmed the refund"),
    "reschedule": ("stock arrives Monday", "customer asked for a later date"),
    "run_now": ("user asked for the tips now", "expedite"),
}


# --- one run, played on a relative clock ------------------------------------

# Step row fields, in COPY order after workflow_id (times are relative seconds).
(
    S_ID,
    S_NAME,
    S_STATUS,
    S_ATTEMPT,
    S_SCHEDULED,
    S_STARTED,
    S_FINISHED,
    S_WAIT_FOR,
    S_WAITING_SINCE,
    S_TIMEOUT,
    S_BATCH,
    S_ERROR_CLASS,
    S_ERROR_MESSAGE,
    S_BACKTRACE,
    S_RESULT,
    S_CREATED,
    S_UPDATED,
) = range(17)
# A step row's columns as the reads return them (models/steps).
STEP_COLUMNS = steps.COLUMNS
RUN_COLUMNS = (
    "workflow_id, workflow_class, status, current_step, arguments, subject_type, subject_id, "
    "idempotency_key, definition_digest, paused_at, started_at, finished_at, created_at, updated_at, " + latest_list()
)
EVENT_COLUMNS = "workflow_id, event, actor, reason, step_id, step_name, attempt, details, created_at"
SIGNAL_COLUMNS = (
    "id, workflow_id, name, payload, idempotency_key, status, claimed_by_step_id, claimed_at, consumed_at, created_at"
)
BATCH_COLUMNS = (
    "batch_id, description, total_jobs, completed_jobs, failed_jobs, discarded_jobs, status, created_at, finished_at"
)


def _at(key: str, moment: float) -> tuple:
    """Details holding one moment, formatted once the run is placed in time."""
    return (f'{{"{key}": "', moment, '"}')


class _Run:
    """One run being played: its rows, its status, and the clock ``t``."""

    def __init__(self, chunk: Chunk, definition: Workflow, number: int):
        self.chunk = chunk
        self.rng = chunk.rng
        self.definition = definition
        self.steps_def = definition.steps
        self.number = number
        self.t = 0.0
        self.status = states.READY
        self.current_step = None
        self.paused_at: float | None = None
        self.finished_at: float | None = None
        self.steps: list[list] = []
        self.events: list[tuple] = []
        self.signals: list[list] = []
        self.batches: list[list] = []
        self.arguments: dict[str, Any] = {}
        self.digest = chunk.digests[definition.name]
        # A signal that arrives during the next timer, before its wait step.
        self.early_signal = False
        self.tracking: str | None = None
        # The first run of its story in this seed (it shows every variant).
        self.first = False
        # Where the run sits in time: the relative moment `anchor` lands
        # between the absolute epoch seconds `low` and `high`.
        self.anchor = (0.0, 0.0, 0.0)

    # -- small moves ----------------------------------------------------------

    def wait(self, low: float, high: float) -> None:
        # random.uniform's own arithmetic, without its call.
        self.t += low + (high - low) * self.rng.random()

    def event(self, name, step=None, *, actor=SYSTEM, reason=None, details="{}"):
        self.events.append((name, actor, reason, step, details, self.t))

    def operator(self) -> str:
        return self.rng.choice(OPERATORS)

    def reason(self, kind: str) -> str:
        return self.rng.choice(REASONS[kind])

    def new_step(self, step, status, *, scheduled_at, wait_for=None):
        attempt = 1 + sum(1 for row in self.steps if row[S_NAME] == step.name)
        row = [
            self.chunk.step_ids.take(),
            step.name,
            status,
            attempt,
            scheduled_at,
            None,
            None,
            wait_for,
            None,
            None,
            None,
            None,
            None,
            None,
            None,
            self.t,
            self.t,
        ]
        self.steps.append(row)
        self.current_step = step.name
        return row

    def schedule(self, step, *, due=None, actor=SYSTEM, reason=None, event="step_scheduled"):
        """A new attempt of *step*, as the runtime schedules it: a step that
        waits for a signal and is due now starts waiting at once."""
        if due is None:
            due = self.t + step.delay.total_seconds() if step.delay else self.t
        pending = None
        if step.wait_for and due <= self.t:
            pending = next(
                (
                    signal
                    for signal in self.signals
                    if signal[4] == states.SIGNAL_PENDING and signal[1] == step.wait_for
                ),
                None,
            )
        if step.wait_for and due <= self.t and pending is None:
            row = self.new_step(step, states.STEP_WAITING, scheduled_at=self.t, wait_for=step.wait_for)
            row[S_WAITING_SINCE] = self.t
            if step.wait_timeout:
                row[S_TIMEOUT] = self.t + step.wait_timeout.total_seconds()
                details: str | tuple[str, Any, str] = (
                    f'{{"signal": "{step.wait_for}", "timeout_at": "',
                    row[S_TIMEOUT],
                    '"}',
                )
            else:
                details = f'{{"signal": "{step.wait_for}"}}'
            self.event("step_waiting", row, actor=actor, reason=reason, details=details)
            self.status = states.WAITING
            return row
        row = self.new_step(step, states.STEP_SCHEDULED, scheduled_at=due, wait_for=step.wait_for)
        self.event(event, row, actor=actor, reason=reason, details=_at("at", due))
        if pending is not None:
            self.claim(pending, row, actor=actor)
        self.status = states.READY
        return row

    def start_step(self, row) -> None:
        self.t = max(self.t, row[S_SCHEDULED]) + (0.05 + (2.0 - 0.05) * self.rng.random())  # uniform(0.05, 2.0)
        row[S_STATUS] = states.STEP_IN_PROGRESS
        row[S_STARTED] = row[S_UPDATED] = self.t
        self.status = states.RUNNING
        self.event("step_started", row)

    def complete_step(self, row, result: str | None = None) -> None:
        self.wait(0.05, 2.5)
        row[S_STATUS] = states.STEP_COMPLETED
        row[S_FINISHED] = row[S_UPDATED] = self.t
        row[S_RESULT] = result if result is not None else self.chunk.result_for(self, row[S_NAME])
        self.consume_held(row[S_NAME])
        self.event("step_completed", row)

    def fail_step(self, row, error_class, message, backtrace=None) -> None:
        self.wait(0.3, 6.0)
        row[S_STATUS] = states.STEP_FAILED
        row[S_FINISHED] = row[S_UPDATED] = self.t
        row[S_ERROR_CLASS], row[S_ERROR_MESSAGE], row[S_BACKTRACE] = error_class, message, backtrace
        self.event("step_failed", row, details=f'{{"error_class": "{error_class}", "error_message": "{message}"}}')

    def consume_held(self, step_name) -> None:
        if not self.signals:
            return
        ids = {row[S_ID] for row in self.steps if row[S_NAME] == step_name}
        for signal in self.signals:
            if signal[4] == states.SIGNAL_CLAIMED and signal[5] in ids:
                signal[4], signal[7] = states.SIGNAL_CONSUMED, self.t

    # -- run-level moves ------------------------------------------------------

    def begin(self) -> None:
        self.event("started", actor=APP, details=f'{{"definition_digest": "{self.digest}"}}')
        self.schedule(self.steps_def[0], actor=APP)

    def finish(self, status=states.COMPLETED, step=None, error_class=None) -> None:
        self.status = status
        self.finished_at = self.t
        self.paused_at = None
        details = (
            f'{{"status": "{status}", "error_class": "{error_class}"}}' if error_class else f'{{"status": "{status}"}}'
        )
        self.event("finished", step, details=details)

    def pause_on_error(self, row, attempts: int) -> None:
        self.status = states.PAUSED
        self.paused_at = self.t
        self.event("paused", row, details=f'{{"error_class": "{row[S_ERROR_CLASS]}", "attempts": {attempts:d}}}')

    def pause_by_operator(self, actor, reason) -> None:
        was = self.status
        self.status = states.PAUSED
        self.paused_at = self.t
        self.event("paused", self.steps[-1], actor=actor, reason=reason, details=f'{{"was": "{was}"}}')

    def cancel(self, actor, reason) -> None:
        was = self.status
        cancelled = []
        for row in self.steps:
            if row[S_STATUS] in states.STEP_OPEN:
                row[S_STATUS] = states.STEP_CANCELLED
                row[S_FINISHED] = row[S_UPDATED] = self.t
                cancelled.append(row)
        self.status = states.CANCELLED
        self.finished_at = self.t
        ids = ", ".join(str(row[S_ID]) for row in cancelled)
        self.event(
            "cancelled",
            cancelled[-1] if cancelled else None,
            actor=actor,
            reason=reason,
            details=f'{{"was": "{was}", "cancelled_steps": [{ids}]}}',
        )

    def signal(self, name, payload, *, actor=APP) -> list:
        """A signal arrives and is stored pending."""
        signal_id = self.chunk.signal_ids.take()
        key = f"{name}-{self.number}" if self.rng.random() < 0.5 else None
        # id, name, payload, idempotency_key, status, claimed_by_step_id, claimed_at, consumed_at, created_at
        signal = [signal_id, name, payload, key, states.SIGNAL_PENDING, None, None, None, self.t]
        self.signals.append(signal)
        quoted_key = f'"{key}"' if key else "null"
        self.event(
            "signal_received",
            actor=actor,
            details=f'{{"signal": "{name}", "signal_id": {signal_id:d}, "idempotency_key": {quoted_key}}}',
        )
        return signal

    def claim(self, signal, row, *, actor=SYSTEM) -> None:
        signal[4], signal[5], signal[6] = states.SIGNAL_CLAIMED, row[S_ID], self.t
        self.event(
            "signal_claimed", row, actor=actor, details=f'{{"signal": "{signal[1]}", "signal_id": {signal[0]:d}}}'
        )

    # -- whole steps ------------------------------------------------------------

    def play_step(self, step, *, fails: int = 0):
        """Play *step* from scheduling to its end, failing its first *fails*
        attempts. Returns the last row; the run is paused or failed when the
        step ran out of attempts, else it is ready for the next step."""
        row = (
            self.steps[-1]
            if self.steps and self.steps[-1][S_NAME] == step.name and self.steps[-1][S_STATUS] in states.STEP_OPEN
            else self.schedule(step)
        )
        if step.delay and self.early_signal:
            self.early_signal = False
            self.wait(MINUTE, step.delay.total_seconds() * 0.9)
            self.signal(demo.PROFILE_SIGNAL, self.chunk.payload_for(self, demo.PROFILE_SIGNAL))
        while True:
            if row[S_STATUS] == states.STEP_WAITING:
                self.receive(step, row)
            self.start_step(row)
            streak = row[S_ATTEMPT]
            if streak <= fails:
                error_class, message, _ = ERRORS[step.name]
                self.fail_step(row, error_class, message, BACKTRACES[step.name])
                if streak < step.max_attempts:
                    retry_at = self.t + step.backoff.delay(streak).total_seconds()
                    row = self.schedule(step, due=retry_at, event="step_reattempted")
                    continue
                if step.on_failure == "fail":
                    self.finish(states.FAILED, row, error_class)
                else:
                    self.pause_on_error(row, streak)
                return row
            if step.fan_out:
                self.fan_out(row)
                self.finish_batch(row)
            else:
                self.complete_step(row)
            return row

    def receive(self, step, row) -> None:
        """The signal *row* waits for arrives after a while and is claimed."""
        if step.wait_timeout:
            self.t += min(self.rng.expovariate(1 / (14 * HOUR)), step.wait_timeout.total_seconds() * 0.95)
        else:
            self.t += min(self.rng.expovariate(1 / (10 * HOUR)), 4 * DAY)
        signal = self.signal(step.wait_for, self.chunk.payload_for(self, step.wait_for))
        row[S_STATUS], row[S_SCHEDULED], row[S_UPDATED] = states.STEP_SCHEDULED, self.t, self.t
        self.claim(signal, row, actor=APP)
        self.status = states.READY

    def fan_out(self, row, *, done: int | None = None) -> list:
        jobs = self.arguments.get("vendors", demo.MIN_VENDORS)
        self.wait(0.05, 0.5)
        batch_id = self.chunk.uuid()
        description = f"{self.definition.name}#{row[S_NAME]}"
        batch = [batch_id, description, jobs, done or 0, 0, 0, states.BATCH_PROCESSING, self.t, None]
        self.batches.append(batch)
        row[S_STATUS], row[S_BATCH], row[S_WAITING_SINCE], row[S_UPDATED] = (
            states.STEP_WAITING,
            batch_id,
            self.t,
            self.t,
        )
        self.status = states.WAITING
        self.event(
            "fan_out_opened",
            row,
            details=f'{{"batch_id": "{batch_id}", "description": "{description}", "total_jobs": {jobs:d}}}',
        )
        return batch

    def finish_batch(self, row) -> None:
        batch = self.batches[-1]
        self.t += self.rng.uniform(3.0, 30.0) + self.rng.expovariate(1 / (3 * MINUTE))
        failed = 1 if self.rng.random() < 0.05 else 0
        batch[3], batch[4], batch[6], batch[8] = batch[2] - failed, failed, states.BATCH_FINISHED, self.t
        self.wait(0.5, 5.0)  # the worker notices the finished batch
        counts = (
            f'"total_jobs": {batch[2]:d}, "completed_jobs": {batch[3]:d}, '
            f'"failed_jobs": {failed:d}, "discarded_jobs": 0'
        )
        row[S_STATUS], row[S_FINISHED], row[S_UPDATED] = states.STEP_COMPLETED, self.t, self.t
        row[S_RESULT] = f'{{"batch_id": "{batch[0]}", {counts}}}'
        self.event("fan_out_finished", row, details=f'{{"batch_id": "{batch[0]}", {counts}}}')
        self.event("step_completed", row)

    def play_until(self, stop: int, fails: dict[str, int] | None = None) -> None:
        """Play every step before index *stop* to its end; as the runtime
        does, the next step is scheduled the moment one completes."""
        fails = fails or {}
        for step in self.steps_def[:stop]:
            self.play_step(step, fails=fails.get(step.name, 0))

    def advance_to(self, index: int):
        """Schedule step *index* after the previous one ended (the runtime's advance)."""
        return self.schedule(self.steps_def[index])

    def place(self, moment: float, low: float, high: float) -> None:
        self.anchor = (moment, low, high)


# --- the stories ----------------------------------------------------------------


def _index(run: _Run, name: str) -> int:
    return run.definition.step_names.index(name)


def _regular_indexes(run: _Run) -> list[int]:
    """Steps that neither wait for a signal nor fan out."""
    return [i for i, step in enumerate(run.steps_def) if not step.wait_for and not step.fan_out and not step.delay]


def _completed(run: _Run, now: float) -> None:
    rng = run.rng
    klass = run.definition.name
    fails: dict[str, int] = {}
    twist = rng.random()
    if klass == demo.ORDER:
        fails["capture_payment"] = _pick(rng, (0, 1, 2), _CAPTURE_FAILS_CUM)
    elif klass == demo.ONBOARDING:
        fails["send_welcome_email"] = 1 if rng.random() < 0.1 else 0
        # Some users complete their profile while the tips timer runs.
        run.early_signal = rng.random() < 0.2
    elif klass == demo.REFUND:
        fails["issue_refund"] = 1 if rng.random() < 0.08 else 0

    run.begin()
    if twist < 0.03 and klass in (demo.ORDER, demo.ONBOARDING):
        # Paused on an error, then an operator resumed it and the retry went through.
        name = "capture_payment" if klass == demo.ORDER else "send_welcome_email"
        index = _index(run, name)
        run.play_until(index, fails)
        step = run.steps_def[index]
        failed = run.play_step(step, fails=step.max_attempts)
        run.arguments[_FLAG[name]] = step.max_attempts
        run.t += rng.uniform(5 * MINUTE, 2 * DAY)
        actor, reason = run.operator(), run.reason("resume")
        run.event("resumed", failed, actor=actor, reason=reason, details=f'{{"action": "retry", "step": "{name}"}}')
        run.paused_at = None
        run.schedule(step, actor=actor)
        run.play_step(step)
        _play_rest(run, index + 1, fails)
    elif twist < 0.04 and klass == demo.ONBOARDING:
        # The welcome email kept failing; an operator skipped it.
        index = _index(run, "send_welcome_email")
        run.play_until(index, fails)
        step = run.steps_def[index]
        failed = run.play_step(step, fails=step.max_attempts)
        run.arguments[_FLAG[step.name]] = True
        run.t += rng.uniform(10 * MINUTE, DAY)
        actor = run.operator()
        skipped = run.new_step(step, states.STEP_SKIPPED, scheduled_at=None)
        skipped[S_FINISHED] = run.t
        run.event("step_skipped", skipped, actor=actor, reason=run.reason("skip"))
        run.paused_at = None
        run.schedule(run.steps_def[index + 1], actor=actor)
        _play_rest(run, index + 1, fails)
    elif twist < 0.06 and klass == demo.REFUND:
        # The refund failed; after a correction an operator ran it again.
        index = _index(run, "issue_refund")
        run.play_until(index, fails)
        step = run.steps_def[index]
        run.play_step(step, fails=step.max_attempts)
        run.arguments[_FLAG[step.name]] = step.max_attempts
        run.t += rng.uniform(HOUR, 3 * DAY)
        actor = run.operator()
        run.event(
            "rerun", actor=actor, reason=run.reason("rerun"), details=f'{{"from_step": "{step.name}", "was": "failed"}}'
        )
        run.finished_at = None
        run.schedule(step, actor=actor)
        run.play_step(step)
        _play_rest(run, index + 1, fails)
    elif twist < 0.08 and klass == demo.ONBOARDING:
        # Someone asked for the tips early: the timer was run now.
        index = _index(run, "send_tips")
        run.play_until(index, fails)
        row = run.advance_to(index)
        run.t += rng.uniform(MINUTE, 20 * HOUR)
        was = row[S_SCHEDULED]
        row[S_SCHEDULED] = row[S_UPDATED] = run.t
        run.event(
            "run_now",
            row,
            actor=run.operator(),
            reason=run.reason("run_now"),
            details=('{"at": "', run.t, '", "was": "', was, '"}'),
        )
        _play_rest(run, index, fails)
    else:
        run.play_until(len(run.steps_def), fails)
        run.finish(step=None)
    _set_flags(run, fails)
    run.place(run.t, now - HISTORY.total_seconds() + run.t, now)


_FLAG = {"capture_payment": "fail_capture", "send_welcome_email": "fail_welcome_email", "issue_refund": "fail_refund"}


def _set_flags(run: _Run, fails: dict[str, int]) -> None:
    for name, count in fails.items():
        if count and not run.arguments.get(_FLAG[name]):
            run.arguments[_FLAG[name]] = count


def _play_rest(run: _Run, index: int, fails: dict[str, int]) -> None:
    for step in run.steps_def[index:]:
        run.play_step(step, fails=fails.get(step.name, 0))
    run.finish()


def _failed(run: _Run, now: float) -> None:
    index = _index(run, "issue_refund")
    step = run.steps_def[index]
    run.begin()
    run.play_until(index)
    run.play_step(step, fails=step.max_attempts)
    run.arguments["fail_refund"] = True
    run.place(run.t, now - HISTORY.total_seconds() + run.t, now)


def _cancelled(run: _Run, now: float) -> None:
    rng = run.rng
    run.begin()
    actor, reason = run.operator(), run.reason("cancel")
    waits = [i for i, step in enumerate(run.steps_def) if step.wait_for]
    kind = rng.random()
    if kind < 0.4 and waits:
        index = rng.choice(waits)
        run.play_until(index)
        run.advance_to(index)
    elif kind < 0.6 and run.definition.name == demo.ORDER:
        index = _index(run, "capture_payment")
        run.play_until(index)
        step = run.steps_def[index]
        run.play_step(step, fails=step.max_attempts)
        run.arguments["fail_capture"] = True
    else:
        index = rng.choice(_regular_indexes(run))
        run.play_until(index)
        if index:
            run.advance_to(index)
    run.t += rng.uniform(MINUTE, 3 * DAY)
    run.cancel(actor, reason)
    run.place(run.t, now - HISTORY.total_seconds() + run.t, now)


def _paused_error(run: _Run, now: float) -> None:
    rng = run.rng
    run.begin()
    if run.definition.name == demo.ORDER and rng.random() < 0.3:
        # The shipment never got confirmed: the sweep timed the wait out.
        index = _index(run, "await_shipment")
        run.play_until(index)
        step = run.steps_def[index]
        row = run.advance_to(index)
        run.t = row[S_TIMEOUT] + rng.uniform(1.0, 30.0)
        message = "waited for %s since %s; the wait timed out at %s"
        row[S_STATUS], row[S_FINISHED], row[S_UPDATED] = states.STEP_FAILED, run.t, run.t
        row[S_ERROR_CLASS] = states.WAIT_TIMED_OUT_ERROR
        row[S_ERROR_MESSAGE] = (message, step.wait_for, row[S_WAITING_SINCE], row[S_TIMEOUT])
        run.event(
            "wait_timed_out", row, details=(f'{{"signal": "{step.wait_for}", "timeout_at": "', row[S_TIMEOUT], '"}')
        )
        run.status, run.paused_at = states.PAUSED, run.t
        run.event("paused", row, details=f'{{"error_class": "{states.WAIT_TIMED_OUT_ERROR}"}}')
    else:
        name = "capture_payment" if run.definition.name == demo.ORDER else "send_welcome_email"
        index = _index(run, name)
        run.play_until(index)
        step = run.steps_def[index]
        run.play_step(step, fails=step.max_attempts)
        # A resume (a further attempt) goes through.
        run.arguments[_FLAG[name]] = step.max_attempts
    _place_paused(run, now)


def _place_paused(run: _Run, now: float) -> None:
    # Paused runs pile up: many recent, some from weeks ago.
    run.place(run.t, now - HISTORY.total_seconds() + run.t, now - MINUTE)


def _stalled(run: _Run, now: float) -> None:
    index = run.rng.choice(_regular_indexes(run))
    run.begin()
    run.play_until(index)
    row = run.steps[-1] if index == 0 else run.advance_to(index)
    run.start_step(row)
    started = row[S_STARTED]
    run.t = started + STALL_SECONDS + run.rng.uniform(5.0, 60.0)
    threshold = int(STALL_SECONDS)
    row[S_STATUS], row[S_FINISHED], row[S_UPDATED] = states.STEP_FAILED, run.t, run.t
    row[S_ERROR_CLASS] = states.STEP_STALLED_ERROR
    row[S_ERROR_MESSAGE] = ("in progress since %s, longer than the stall threshold of " + f"{threshold}s", started)
    run.event("stall_detected", row, details=('{"started_at": "', started, f'", "threshold_seconds": {threshold:d}}}'))
    run.status, run.paused_at = states.PAUSED, run.t
    run.event("paused", row, details=f'{{"error_class": "{states.STEP_STALLED_ERROR}"}}')
    _place_paused(run, now)


def _paused_manual(run: _Run, now: float) -> None:
    rng = run.rng
    run.begin()
    waits = [i for i, step in enumerate(run.steps_def) if step.wait_for]
    if waits and rng.random() < 0.4:
        index = rng.choice(waits)
    else:
        index = rng.choice(_regular_indexes(run))
    run.play_until(index)
    if index:
        run.advance_to(index)
    run.wait(0.5, 5 * MINUTE)
    run.pause_by_operator(run.operator(), run.reason("pause"))
    _place_paused(run, now)


def _overdue(run: _Run, now: float) -> None:
    index = run.rng.choice(_regular_indexes(run))
    run.begin()
    run.play_until(index)
    row = run.steps[-1] if index == 0 else run.advance_to(index)
    # Nothing took the step: its due time is the moment that counts.
    run.place(row[S_SCHEDULED], now - 7 * DAY, now - STALL_SECONDS - MINUTE)


def _ready_later(run: _Run, now: float) -> None:
    rng = run.rng
    run.begin()
    if run.definition.name == demo.ONBOARDING:
        index = _index(run, "send_tips")
        run.play_until(index)
        row = run.advance_to(index)
        if run.first or rng.random() < 0.3:
            # The user completed the profile already; the signal waits for its step.
            run.wait(MINUTE, 12 * HOUR)
            run.signal(demo.PROFILE_SIGNAL, run.chunk.payload_for(run, demo.PROFILE_SIGNAL))
        # The timer is still running: its due time is after now.
        run.place(run.t, now - (row[S_SCHEDULED] - run.t) + MINUTE, now - MINUTE)
        return
    index = rng.choice(_regular_indexes(run))
    run.play_until(index)
    row = run.steps[-1] if index == 0 else run.advance_to(index)
    run.wait(1.0, 5 * MINUTE)
    was, due = row[S_SCHEDULED], run.t + rng.uniform(HOUR, 3 * DAY)
    row[S_SCHEDULED] = row[S_UPDATED] = due
    run.event(
        "rescheduled",
        row,
        actor=run.operator(),
        reason=run.reason("reschedule"),
        details=('{"at": "', due, '", "was": "', was, '"}'),
    )
    run.place(run.t, now - HOUR, now - MINUTE)


def _ready_now(run: _Run, now: float) -> None:
    # The awaited signal just came: the wait step claimed it and is due now.
    index = next(i for i, step in enumerate(run.steps_def) if step.wait_for)
    run.begin()
    run.play_until(index)
    row = run.advance_to(index)
    run.receive(run.steps_def[index], row)
    run.place(run.t, now - STALL_SECONDS + MINUTE, now)


def _running(run: _Run, now: float) -> None:
    index = run.rng.choice(_regular_indexes(run))
    run.begin()
    run.play_until(index)
    row = run.steps[-1] if index == 0 else run.advance_to(index)
    run.start_step(row)
    run.place(run.t, now - STALL_SECONDS + MINUTE, now)


def _waiting_batch(run: _Run, now: float) -> None:
    index = _index(run, "notify_vendors")
    run.begin()
    run.play_until(index)
    row = run.advance_to(index)
    run.start_step(row)
    jobs = run.arguments.get("vendors", demo.MIN_VENDORS)
    run.fan_out(row, done=run.rng.randrange(0, jobs))
    run.place(run.t, now - 2 * HOUR, now)


def _waiting_signal(run: _Run, now: float) -> None:
    index = _index(run, "await_shipment")
    run.begin()
    run.play_until(index)
    row = run.advance_to(index)
    timeout = row[S_TIMEOUT] - row[S_WAITING_SINCE]
    run.place(row[S_WAITING_SINCE], now - timeout + HOUR, now)


def _waiting_profile(run: _Run, now: float, overdue: bool = False) -> None:
    index = _index(run, "await_profile")
    run.begin()
    run.play_until(index)
    row = run.advance_to(index)
    if overdue:
        run.place(
            row[S_WAITING_SINCE], now - HISTORY.total_seconds() + row[S_WAITING_SINCE], now - WAITING_SECONDS - HOUR
        )
    else:
        run.place(row[S_WAITING_SINCE], now - WAITING_SECONDS + HOUR, now)


def _waiting_overdue(run: _Run, now: float) -> None:
    _waiting_profile(run, now, overdue=True)


# story -> (how it is played, the classes it applies to; None: any)
PLAYERS: dict[str, tuple[Callable[[_Run, float], None], tuple[str, ...] | None]] = {
    "completed": (_completed, None),
    "failed": (_failed, (demo.REFUND,)),
    "cancelled": (_cancelled, None),
    "paused_error": (_paused_error, (demo.ORDER, demo.ORDER, demo.ONBOARDING)),
    "stalled": (_stalled, None),
    "paused_manual": (_paused_manual, None),
    "overdue": (_overdue, None),
    "ready_later": (_ready_later, (demo.ONBOARDING, demo.ONBOARDING, demo.ORDER)),
    "ready_now": (_ready_now, (demo.ORDER, demo.ONBOARDING)),
    "running": (_running, None),
    "waiting_batch": (_waiting_batch, (demo.ORDER,)),
    "waiting_signal": (_waiting_signal, (demo.ORDER,)),
    "waiting_profile": (_waiting_profile, (demo.ONBOARDING,)),
    "waiting_overdue": (_waiting_overdue, (demo.ONBOARDING,)),
}


def shuffled_deck(rng: random.Random, first: bool) -> list[str]:
    """One thousand runs' stories, shuffled. The first deck starts with one
    run of every story, so that even a small seed shows them all."""
    cards = ["completed"] * COMPLETED_PER_THOUSAND
    for story, count in STORIES.items():
        cards += [story] * count
    rng.shuffle(cards)
    if first:
        head = list(STORIES)
        rng.shuffle(head)
        for story in head:
            cards.remove(story)
        cards = head + cards
    return cards


# --- ids, arguments, payloads -----------------------------------------------------


def _arguments(run: _Run) -> dict[str, Any]:
    rng, n = run.rng, run.number
    klass = run.definition.name
    if klass == demo.ORDER:
        return {
            "order_id": n,
            "customer_id": demo.customer_of(n),
            "amount_cents": rng.randrange(500, 50_000),
            "vendors": rng.randint(demo.MIN_VENDORS, demo.MAX_VENDORS),
            "fail_capture": False,
        }
    if klass == demo.ONBOARDING:
        return {"user_id": n, "fail_welcome_email": False}
    return {
        "refund_id": n,
        "customer_id": demo.customer_of(n),
        "amount_cents": rng.randrange(500, 20_000),
        "fail_refund": False,
    }


CARRIERS = ("DHL", "UPS", "PostNord", "GLS", "FedEx")


# uuid.UUID's version 4 marks: the variant bits (10) and the version nibble (4).
_UUID_KEEP = ~((0xC000 << 48) | (0xF000 << 64)) & ((1 << 128) - 1)
_UUID_V4 = (0x8000 << 48) | (4 << 76)


class Ids(Protocol):
    """Where a chunk takes its step and signal ids (seed.py reserves them
    from the tables' sequences)."""

    def take(self) -> int: ...


# --- a chunk of runs ------------------------------------------------------------------


class Chunk:
    """Plays runs and keeps their rows, ready for COPY."""

    def __init__(
        self, rng: random.Random, step_ids: Ids, signal_ids: Ids, now: float, old_order: Workflow, told: dict[str, int]
    ):
        self.rng = rng
        self.told = told  # runs played so far per story, across chunks
        self.step_ids = step_ids
        self.signal_ids = signal_ids
        self.now = now
        self.old_order = old_order
        # Digests hash the step list: computed once, not per run.
        self.digests = dict(demo.REGISTRY.digests())
        self.old_digest = old_order.digest
        # Per table: (workflow_id, the COPY text of that run's rows).
        self.runs: list[tuple[str, str]] = []
        self.steps: list[tuple[str, str]] = []
        self.events: list[tuple[str, str]] = []
        self.signals: list[tuple[str, str]] = []
        self.batches: list[tuple[str, str]] = []
        self.statuses: dict[str, int] = {}
        # {(class, status): runs}: the kept run counts the chunk adds when
        # it is written with triggers off.
        self.counts: dict[tuple[str, str], int] = {}
        self.rows = {"steps": 0, "events": 0, "signals": 0, "batches": 0}

    def uuid(self) -> str:
        """A random version-4 uuid's text, as str(uuid.UUID(int=..., version=4))."""
        bits = self.rng.getrandbits(128) & _UUID_KEEP | _UUID_V4
        h = f"{bits:032x}"
        return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"

    def result_for(self, run: _Run, step_name: str) -> str:
        args = run.arguments
        if step_name == "reserve_stock":
            return f'{{"reserved": true, "order_id": {args["order_id"]:d}}}'
        if step_name in ("capture_payment", "issue_refund"):
            key = "captured_cents" if step_name == "capture_payment" else "refunded_cents"
            return f'{{"{key}": {args["amount_cents"]:d}}}'
        if step_name == "create_account":
            return f'{{"user_id": {args["user_id"]:d}}}'
        if step_name == "activate":
            return '{"active": true}'
        if step_name == "validate_refund":
            return '{"valid": true}'
        if step_name == "await_shipment":
            return f'{{"tracking": "{run.tracking}"}}'
        if step_name == "await_profile":
            return '{"profile": {"complete": true}}'
        return '{"sent": true}'

    def payload_for(self, run: _Run, signal: str) -> str:
        if signal == demo.SHIPMENT_SIGNAL:
            run.tracking = f"1Z{self.rng.randrange(10**10):010d}"
            return f'{{"carrier": "{self.rng.choice(CARRIERS)}", "tracking": "{run.tracking}"}}'
        return '{"complete": true}'

    def play(self, story: str, number: int) -> None:
        player, classes = PLAYERS[story]
        rng = self.rng
        told = self.told.get(story, 0)
        self.told[story] = told + 1
        if classes is None:
            klass = _pick(rng, _CLASSES, _CLASSES_CUM)
        else:
            klass = classes[told % len(classes)]  # in turn, so that a few runs show each
        definition = demo.REGISTRY[klass]
        run = _Run(self, definition, number)
        run.first = told == 0
        if klass == demo.ORDER and story == "completed" and rng.random() < 0.1:
            # Started before notify_vendors existed: the definition changed since.
            run.definition = self.old_order
            run.steps_def = self.old_order.steps
            run.digest = self.old_digest
        run.arguments = _arguments(run)
        player(run, self.now)
        self._emit(run)

    def _emit(self, run: _Run) -> None:
        """The run's rows as COPY text, now that its place in time is known."""
        moment, low, high = run.anchor
        ts = _Moments(_EPOCH + timedelta(seconds=self.rng.uniform(low, max(low, high)) - moment))

        def text(value):
            # Every string here is built from COPY-safe parts (see _copy_safe).
            if type(value) is tuple:
                # Moments inside JSON and messages carry their offset, as the runtime writes them.
                return "".join(ts[part] + "+00:00" if type(part) is float else part for part in value)
            return NULL if value is None else value

        workflow_id = self.uuid()
        klass = run.definition.name
        has_subject = self.rng.random() < 0.9
        subject_type = demo.SUBJECT_TYPES[klass] if has_subject else None
        subject_id = str(run.number) if has_subject else None
        key = f"{subject_type.lower()}-{run.number}" if subject_type and self.rng.random() < 0.6 else None
        args = ", ".join(f'"{name}": {_json(value)}' for name, value in run.arguments.items())
        created = ts[0.0]
        steps = run.steps
        # The latest step's facts on the run, as the steps trigger keeps
        # them: the trigger does not fire while seeding skips row checks.
        if steps:
            # Ids are taken in rising order as steps are added: the last is the latest.
            latest = steps[-1]
            latest_columns = (
                str(latest[S_ID]),
                latest[S_NAME],
                latest[S_STATUS],
                latest[S_ERROR_CLASS] or NULL,
                ts[latest[S_SCHEDULED]],
                ts[latest[S_WAITING_SINCE]],
                ts[latest[S_TIMEOUT]],
            )
        else:
            latest_columns = (NULL,) * 7
        self.runs.append(
            (
                workflow_id,
                "\t".join(
                    (
                        workflow_id,
                        klass,
                        run.status,
                        run.current_step or NULL,
                        text(f"{{{args}}}"),
                        subject_type or NULL,
                        subject_id or NULL,
                        key or NULL,
                        run.digest,
                        ts[run.paused_at],
                        created,
                        ts[run.finished_at],
                        created,
                        ts[run.t],
                        *latest_columns,
                    )
                )
                + "\n",
            )
        )
        self.statuses[run.status] = self.statuses.get(run.status, 0) + 1
        self.counts[(klass, run.status)] = self.counts.get((klass, run.status), 0) + 1
        rows = self.rows
        rows["steps"] += len(steps)
        rows["events"] += len(run.events)
        rows["signals"] += len(run.signals)
        rows["batches"] += len(run.batches)

        # A step's columns as its events name it, by the row's identity.
        step_columns = {}
        lines = []
        for row in steps:
            step_id = str(row[S_ID])
            attempt = str(row[S_ATTEMPT])
            step_columns[id(row)] = f"{step_id}\t{row[S_NAME]}\t{attempt}"
            message = row[S_ERROR_MESSAGE]
            if message is None:
                message = NULL
            elif type(message) is tuple:
                template, *parts = message
                message = template % tuple(ts[p] + "+00:00" if type(p) is float else p for p in parts)
            backtrace, result = row[S_BACKTRACE], row[S_RESULT]
            lines.append(
                f"{step_id}\t{workflow_id}\t{row[S_NAME]}\t{row[S_STATUS]}\t{attempt}\t{ts[row[S_SCHEDULED]]}\t"
                f"{ts[row[S_STARTED]]}\t{ts[row[S_FINISHED]]}\t{row[S_WAIT_FOR] or NULL}\t"
                f"{ts[row[S_WAITING_SINCE]]}\t{ts[row[S_TIMEOUT]]}\t{row[S_BATCH] or NULL}\t"
                f"{row[S_ERROR_CLASS] or NULL}\t{message}\t{NULL if backtrace is None else backtrace}\t"
                f"{NULL if result is None else result}\t{ts[row[S_CREATED]]}\t{ts[row[S_UPDATED]]}\n"
            )
        if lines:
            self.steps.append((workflow_id, "".join(lines)))

        if run.events:
            no_step = "\\N\t\\N\t\\N"
            self.events.append(
                (
                    workflow_id,
                    "".join(
                        [
                            f"{workflow_id}\t{name}\t{actor}\t{NULL if reason is None else reason}\t"
                            f"{no_step if step is None else step_columns[id(step)]}\t"
                            f"{details if type(details) is str else text(details)}\t{ts[moment]}\n"
                            for name, actor, reason, step, details, moment in run.events
                        ]
                    ),
                )
            )

        if run.signals:
            self.signals.append(
                (
                    workflow_id,
                    "".join(
                        "\t".join(
                            (
                                str(signal[0]),
                                workflow_id,
                                signal[1],
                                text(signal[2]),
                                signal[3] or NULL,
                                signal[4],
                                NULL if signal[5] is None else str(signal[5]),
                                ts[signal[6]],
                                ts[signal[7]],
                                ts[signal[8]],
                            )
                        )
                        + "\n"
                        for signal in run.signals
                    ),
                )
            )
        for batch in run.batches:
            self.batches.append(
                (
                    batch[0],
                    "\t".join(
                        (
                            batch[0],
                            text(batch[1]),
                            str(batch[2]),
                            str(batch[3]),
                            str(batch[4]),
                            str(batch[5]),
                            batch[6],
                            ts[batch[7]],
                            ts[batch[8]],
                        )
                    )
                    + "\n",
                )
            )
