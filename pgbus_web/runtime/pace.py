"""An operation's pace (docs/operations.md): at most ``rate`` runs per
second and at most ``max_in_flight`` runs started and not settled, for
every process doing it together. The budget lives on the operation's row:
``pace_log`` lists the chunks that ended within the last window (when each
ended, how many runs it acted on), written by the holder under its fence
with each chunk's progress; the runs in flight are counted from the audit
trail (models.events.operation_in_flight).

Why a window of chunk ends holds the rate: a chunk's runs are acted on
between its start and its end, and one process holds an operation at a
time, so every chunk before the one starting now has ended. A chunk
starting at t takes at most rate * window runs minus those of the chunks
that ended after t - window; any window of that length then holds at most
rate * window acted-on runs (rate per second, for a rate of 1 or more).

No I/O here: the Runner reads the row and the count and writes the log.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

# The longest a runner sleeps on a spent budget before it looks again (and
# renews its heartbeat, noticing a pause or a cancel): the claim is kept
# through the wait, which is never longer than one window for the rate.
NAP = 0.5
# A runner that does not sleep on a spent budget (a worker's tick) renews
# its heartbeat this often while it waits.
HEARTBEAT_EVERY = timedelta(seconds=1)
# A chunk takes at most this share of a window's budget, so the runs of a
# second are spread over it rather than all at its start (more when the
# chunks themselves take longer than that share: see budget).
SMOOTH = 4


def window(rate: float) -> float:
    """Seconds the budget is counted over: one, or longer for a rate under
    one run per second (0.2: one run per five seconds)."""
    return max(1.0, 1.0 / rate)


def _epoch(moment: datetime) -> float:
    return moment.timestamp()


@dataclass(frozen=True)
class Budget:
    runs: int  # runs the next chunk may act on (None: no pace)
    wait: float  # seconds until the budget allows one more run, when runs is 0
    log: list[list[float]]  # the entries still inside the window


def kept(log: Sequence[Sequence[float]] | None, rate: float, now: datetime) -> list[list[float]]:
    """The entries of *log* that ended inside the window before *now*."""
    since = _epoch(now) - window(rate)
    return [[float(end), int(runs)] for end, runs in (log or []) if float(end) > since]


def budget(operation: Mapping[str, Any], *, now: datetime, in_flight: int | None, chunk: int) -> Budget:
    """How many runs the operation's next chunk may act on at *now*:
    *chunk* at most, within its rate (by its pace_log) and its ceiling
    (*in_flight*: the runs in flight now, None when it has no ceiling)."""
    runs = chunk
    wait = 0.0
    log: list[list[float]] = []
    rate = operation.get("rate")
    if rate:
        log = kept(operation.get("pace_log"), rate, now)
        allowed = math.floor(rate * window(rate) + 1e-9) - sum(entry[1] for entry in log)
        per_chunk = max(1, math.ceil(rate * window(rate) / SMOOTH))
        ends = sorted(entry[0] for entry in log)
        if len(ends) >= 2:
            # Chunks slower than a share of the window (a cold disk): the
            # next takes what the rate earns over as long as the last took,
            # or the rate is never reached. The window's sum still bounds it.
            per_chunk = max(per_chunk, math.ceil(rate * min(ends[-1] - ends[-2], window(rate)) - 1e-9))
        runs = max(0, min(runs, allowed, per_chunk))
        if runs == 0:
            # The oldest entries leave the window first: wait for the
            # first whose leaving frees a run.
            need = sum(entry[1] for entry in log) - math.floor(rate * window(rate) + 1e-9) + 1
            freed: float = 0
            for end, count in sorted(log):
                freed += count
                if freed >= need:
                    wait = max(0.0, end + window(rate) - _epoch(now))
                    break
    ceiling = operation.get("max_in_flight")
    if ceiling and in_flight is not None:
        room = max(0, int(ceiling) - int(in_flight))
        if room < runs:
            runs = room
            if room == 0:
                wait = max(wait, NAP)
    return Budget(runs=runs, wait=wait, log=log)


def logged(log: list[list[float]], rate: float | None, end: datetime, runs: int) -> list[list[float]] | None:
    """The log to write after a chunk that ended at *end* having acted on
    *runs* runs; None when the operation has no rate (nothing kept)."""
    if not rate:
        return None
    entries = kept(log, rate, end)
    if runs:
        entries.append([_epoch(end), int(runs)])
    return entries
