"""Checking and repairing what the triggers keep: the runs' latest_*
columns, the kept counts by class and status and the paused and failed
runs' counts by group key, against their reference recounts
(models/recount.py; ``pgbus-web db check`` and ``db repair``). Both walk the runs in batches by id; a repair writes
each batch in its own short transaction, so it can run beside the workers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from sqlalchemy.engine import Engine

from ..models import recount, workflow_counts, workflow_upkeep

# Runs per batch: big enough that a million runs take a hundred round trips,
# small enough that a repair's transaction holds its row locks for moments.
BATCH_SIZE = 10_000


@dataclass
class CheckResult:
    seen: int = 0
    wrong: int = 0
    named: list[str] = field(default_factory=list)  # some of the disagreeing runs
    counts: dict = field(default_factory=dict)  # (class, status) -> (kept, counted)
    attention: dict = field(default_factory=dict)  # group key -> (kept, counted)


def total_runs(engine: Engine) -> int:
    with engine.connect() as conn:
        return workflow_counts.count_runs(conn)


def batches(engine: Engine, batch_size: int) -> Iterator[tuple[int, int, int]]:
    """(after_id, last_id, runs) of each batch of runs in id order."""
    after_id = 0
    while True:
        with engine.connect() as conn:
            batch = workflow_upkeep.next_batch(conn, after_id=after_id, size=batch_size)
        if batch is None:
            return
        last_id, runs = batch
        yield after_id, last_id, runs
        after_id = last_id


def repair_latest(engine: Engine, batch_size: int, done: Callable[[int], None] = lambda runs: None) -> tuple[int, int]:
    """Fix every run's latest_* columns, batch by batch: (runs fixed, runs
    seen); *done* hears each batch's runs (a progress bar)."""
    fixed = seen = 0
    for after_id, last_id, runs in batches(engine, batch_size):
        with engine.begin() as conn:
            fixed += workflow_upkeep.repair_latest(conn, after_id=after_id, last_id=last_id)
        seen += runs
        done(runs)
    return fixed, seen


def repair_counts(engine: Engine) -> int:
    """Refill the kept counts that disagree with the runs; how many."""
    with engine.begin() as conn:
        return recount.repair_counts(conn)


def repair_attention(engine: Engine) -> int:
    """Refill the needs-attention counts by key if any disagrees with the
    runs; how many disagreed."""
    with engine.begin() as conn:
        return recount.repair_attention(conn)


def check(
    engine: Engine, batch_size: int, examples: int, done: Callable[[int], None] = lambda runs: None
) -> CheckResult:
    """Runs whose latest_* columns disagree with their latest step (naming
    up to *examples*), and counts that disagree with the runs. Changes nothing."""
    result = CheckResult()
    for after_id, last_id, runs in batches(engine, batch_size):
        with engine.connect() as conn:
            differ, ids = workflow_upkeep.latest_mismatches(
                conn, after_id=after_id, last_id=last_id, limit=examples - len(result.named)
            )
        result.seen += runs
        result.wrong += differ
        result.named += ids
        done(runs)
    with engine.connect() as conn:
        result.counts = recount.count_mismatches(conn)
    with engine.connect() as conn:
        result.attention = recount.attention_mismatches(conn)
    return result
