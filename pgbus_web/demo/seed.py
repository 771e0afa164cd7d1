"""Seeding a database with the demo's history: ``seed(engine, runs=N)`` or
``pgbus-web seed --runs N``. The runs are played by stories.py; here they
are written with COPY while a second thread plays the next chunk, so a
million runs take minutes. Into empty tables (a fresh database) they go in
one transaction, frozen, with the indexes built after the rows
(empty_load.py); otherwise a chunk of runs per transaction, beside
whatever else writes. Step and signal ids are taken ahead of the rows, so
rows can name each other before they are written.
"""

from __future__ import annotations

import queue
import random
import sys
import threading
import time
from collections.abc import Generator
from contextlib import closing
from dataclasses import dataclass, field
from datetime import datetime
from operator import itemgetter

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from .. import schema
from ..models import attention_counts, changes, step_durations, workflow_activity, workflow_counts, workflow_rows
from ..progress import bar as progress_bar
from ..runtime.definitions import Workflow
from . import empty_load
from . import workflows as demo
from .stories import (
    BATCH_COLUMNS,
    EVENT_COLUMNS,
    RUN_COLUMNS,
    SIGNAL_COLUMNS,
    STEP_COLUMNS,
    UTC,
    Chunk,
    shuffled_deck,
)

# Runs played and written per transaction: big enough for COPY to pay off,
# small enough for a steady progress bar.
CHUNK_RUNS = 5_000
# Chunks played ahead of the one being written.
CHUNKS_AHEAD = 2
# Step and signal ids are taken from their sequences this many at a time.
ID_BLOCK = 50_000
# How long the player thread may hold the GIL while the writing thread
# waits for it (Python's default is 5 ms). psycopg sends COPY text in
# 128 kB pieces and lets go of the GIL while the server reads each one;
# taking it back cost up to a whole interval per piece, and the server sat
# idle meanwhile (at 200,000 runs the COPY took 41.7 s with the default,
# 32.5 s with 0.5 ms; docs/performance.md, "Seeding").
SWITCH_INTERVAL = 0.0005


class SeedError(RuntimeError):
    """The database cannot take generated runs (no schema, or another version)."""


@dataclass
class SeedResult:
    runs: int
    steps: int = 0
    events: int = 0
    signals: int = 0
    batches: int = 0
    seconds: float = 0.0
    statuses: dict[str, int] = field(default_factory=dict)
    # Indexes dropped and built again after the rows (0 when the tables
    # held rows, and the chunks were written into the indexes as they were).
    indexes_rebuilt: int = 0

    def add(self, chunk: Chunk) -> None:
        self.steps += chunk.rows["steps"]
        self.events += chunk.rows["events"]
        self.signals += chunk.rows["signals"]
        self.batches += chunk.rows["batches"]
        for status, count in chunk.statuses.items():
            self.statuses[status] = self.statuses.get(status, 0) + count


class _Ids:
    """Ids taken from a table's sequence a block at a time, so that rows
    can name each other (an event its step) before they are written. The
    table is locked while a block is reserved: an insert by anyone else
    takes its id before or after the block, never inside it."""

    def __init__(self, engine: Engine, table: str):
        self.engine = engine
        self.table = table
        self.next, self.end = 1, 0  # empty: the first take reserves a block
        self.block_start = None
        self.last_taken: int | None = None
        with engine.connect() as conn:
            self.sequence = conn.execute(
                sa.text("SELECT pg_get_serial_sequence(:table, 'id')"), {"table": table}
            ).scalar_one()

    def take(self) -> int:
        if self.next > self.end:
            self._reserve()
        taken = self.next
        self.next += 1
        self.last_taken = taken
        return taken

    def _lock(self, conn) -> None:
        # The table name is one of ours, never input.
        conn.exec_driver_sql(f"LOCK TABLE {self.table} IN SHARE ROW EXCLUSIVE MODE")

    def _reserve(self) -> None:
        with self.engine.begin() as conn:
            self._lock(conn)
            first = conn.execute(sa.text("SELECT nextval(:seq)"), {"seq": self.sequence}).scalar_one()
            conn.execute(sa.text("SELECT setval(:seq, :last)"), {"seq": self.sequence, "last": first + ID_BLOCK - 1})
        self.next, self.end, self.block_start = first, first + ID_BLOCK - 1, first

    def give_back(self) -> None:
        """Return the unused end of the last block when nobody took ids since."""
        if self.block_start is None:
            return
        with self.engine.begin() as conn:
            self._lock(conn)
            last = conn.execute(sa.text(f"SELECT last_value FROM {self.sequence}")).scalar_one()
            if last != self.end:
                return
            if self.last_taken is not None and self.last_taken >= self.block_start:
                conn.execute(sa.text("SELECT setval(:seq, :v)"), {"seq": self.sequence, "v": self.last_taken})
            else:
                conn.execute(sa.text("SELECT setval(:seq, :v, false)"), {"seq": self.sequence, "v": self.block_start})


# --- writing -------------------------------------------------------------------------


def _copy(cursor, table: str, columns: str, blocks: list[tuple[str, str]], *, freeze: bool = False) -> int:
    """COPY one table's rows, given as (workflow_id, COPY text) blocks;
    *freeze* when the table was truncated in this transaction."""
    if not blocks:
        return 0
    # In workflow_id order, each index page and each run's key is visited
    # once per chunk rather than at random; a run's rows stay in order (and
    # both ways of writing give the events the same ids).
    blocks.sort(key=itemgetter(0))
    options = " WITH (FREEZE)" if freeze else ""
    with cursor.copy(f"COPY {table} ({columns}) FROM STDIN{options}") as copy:
        copy.write("".join(block for _, block in blocks))
    return len(blocks)


def _set_up(conn, *, skip_row_checks: bool) -> None:
    """The seeding transaction's settings."""
    conn.exec_driver_sql("SET LOCAL synchronous_commit = off")
    if skip_row_checks:
        # The chunk is written parents first and names only its own runs,
        # so the per-row foreign-key checks (most of the server's work
        # here) are skipped, as pg_restore --disable-triggers does.
        conn.exec_driver_sql("SET LOCAL session_replication_role = replica")
    conn.exec_driver_sql("SET LOCAL TimeZone = 'UTC'")


def _copy_chunk(conn, chunk: Chunk, *, freeze: bool = False) -> None:
    with conn.connection.dbapi_connection.cursor() as cursor:
        _copy(cursor, "pgbus_workflows", RUN_COLUMNS, chunk.runs, freeze=freeze)
        _copy(cursor, "pgbus_batches", BATCH_COLUMNS, chunk.batches, freeze=freeze)
        _copy(cursor, "pgbus_workflow_steps", STEP_COLUMNS, chunk.steps, freeze=freeze)
        _copy(cursor, "pgbus_workflow_signals", SIGNAL_COLUMNS, chunk.signals, freeze=freeze)
        _copy(cursor, "pgbus_workflow_events", EVENT_COLUMNS, chunk.events, freeze=freeze)


def _write(engine: Engine, chunk: Chunk, *, skip_row_checks: bool) -> None:
    with engine.begin() as conn:
        _set_up(conn, skip_row_checks=skip_row_checks)
        _copy_chunk(conn, chunk)
        if skip_row_checks:
            # The runs' count and change-marker triggers did not fire either.
            workflow_counts.add_counts(conn, chunk.counts)
            workflow_counts.add_hours(conn, (workflow_id for workflow_id, _ in chunk.runs))
            attention_counts.add_runs(conn, (workflow_id for workflow_id, _ in chunk.runs))
            workflow_activity.add_runs(conn, (workflow_id for workflow_id, _ in chunk.runs))
            step_durations.add_runs(conn, (workflow_id for workflow_id, _ in chunk.runs))
            changes.mark(conn)


def _may_skip_row_checks(engine: Engine) -> bool:
    """Only a superuser may turn triggers off for its session."""
    with engine.connect() as conn:
        return conn.execute(sa.text("SELECT current_setting('is_superuser') = 'on'")).scalar_one()


def check_schema(engine: Engine) -> None:
    """Raise SeedError unless this release's schema is installed."""
    with engine.connect() as conn:
        version = schema.installed_version(conn)
    if version is None:
        raise SeedError("the pgbus-web schema is not installed in this database; run `pgbus-web db install` first")
    if version != schema.SCHEMA_VERSION:
        raise SeedError(
            f"the database has pgbus-web schema version {version}; this release seeds version {schema.SCHEMA_VERSION}"
        )


def _old_order_workflow() -> Workflow:
    steps = [step for step in demo.ORDER_WORKFLOW.steps if step.name != "notify_vendors"]
    return Workflow(demo.ORDER, steps)


@dataclass
class _Plan:
    """What the chunks are played from: the same plan gives the same rows."""

    runs: int
    rng: random.Random
    now: float
    first_number: int
    chunk_size: int


def _chunks(plan: _Plan, step_ids, signal_ids) -> Generator[Chunk, None, None]:
    old_order = _old_order_workflow()
    deck: list[str] = []
    told: dict[str, int] = {}
    first_deck = True
    made = 0
    while made < plan.runs:
        chunk = Chunk(plan.rng, step_ids, signal_ids, plan.now, old_order, told)
        for _ in range(min(plan.chunk_size, plan.runs - made)):
            if not deck:
                deck = shuffled_deck(plan.rng, first_deck)
                deck.reverse()
                first_deck = False
            chunk.play(deck.pop(), plan.first_number + made)
            made += 1
        yield chunk


def _played_ahead(chunks: Generator[Chunk, None, None]) -> Generator[Chunk, None, None]:
    """The chunks, played by a second thread while the caller writes."""
    ready: queue.Queue = queue.Queue(maxsize=CHUNKS_AHEAD)
    done = object()
    stop = threading.Event()

    def produce() -> None:
        try:
            for chunk in chunks:
                while not stop.is_set():
                    try:
                        ready.put(chunk, timeout=0.2)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    break
            ready.put(done)
        except BaseException as exc:  # noqa: BLE001  (handed to the writing thread)
            ready.put(exc)
        finally:
            chunks.close()

    worker = threading.Thread(target=produce, name="pgbus-seed-player", daemon=True)
    interval = sys.getswitchinterval()
    sys.setswitchinterval(min(interval, SWITCH_INTERVAL))
    worker.start()
    try:
        while True:
            item = ready.get()
            if item is done:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        while worker.is_alive():
            try:
                ready.get(timeout=0.2)
            except queue.Empty:
                pass
        worker.join()
        sys.setswitchinterval(interval)


def _seed_empty(engine: Engine, plan: _Plan, written) -> int | None:
    """Write the runs into empty tables in one transaction (empty_load.py):
    the number of indexes built again, or None, having written nothing,
    when any of the tables holds a row."""
    with engine.connect() as conn:
        # A look without a lock first: a database in use keeps its readers.
        if empty_load.any_rows(conn):
            return None
    # One transaction, so a failure anywhere leaves the database as it was,
    # indexes and all (closing the connection uncommitted rolls it back).
    with engine.connect() as conn:
        _set_up(conn, skip_row_checks=True)
        if not empty_load.claim(conn):
            return None
        step_ids = empty_load.HeldIds(conn, "pgbus_workflow_steps")
        signal_ids = empty_load.HeldIds(conn, "pgbus_workflow_signals")
        indexes = empty_load.drop_indexes(conn)
        with closing(_played_ahead(_chunks(plan, step_ids, signal_ids))) as chunks:
            for chunk in chunks:
                _copy_chunk(conn, chunk, freeze=True)
                # The runs' count triggers did not fire.
                workflow_counts.add_counts(conn, chunk.counts)
                attention_counts.add_runs(conn, (workflow_id for workflow_id, _ in chunk.runs))
                written(chunk)
        empty_load.build_indexes(conn, indexes)
        # Nor did the rollups': counted once, from every run written here
        # (the tables were empty), with the indexes back.
        workflow_activity.add_runs(conn, None)
        workflow_counts.add_hours(conn, None)
        step_durations.add_runs(conn, None)
        step_ids.finish(conn)
        signal_ids.finish(conn)
        changes.mark(conn)
        conn.commit()
    return len(indexes)


def _seed_chunked(engine: Engine, plan: _Plan, written, *, skip_row_checks: bool) -> None:
    """Write the runs a chunk per transaction, into the indexes as they are."""
    step_ids = _Ids(engine, "pgbus_workflow_steps")
    signal_ids = _Ids(engine, "pgbus_workflow_signals")
    try:
        with closing(_played_ahead(_chunks(plan, step_ids, signal_ids))) as chunks:
            for chunk in chunks:
                _write(engine, chunk, skip_row_checks=skip_row_checks)
                written(chunk)
    finally:
        step_ids.give_back()
        signal_ids.give_back()


def seed(
    engine: Engine,
    *,
    runs: int,
    seed: int | None = None,
    now: datetime | None = None,
    progress: bool = False,
    chunk_size: int = CHUNK_RUNS,
    into_empty: bool = True,
) -> SeedResult:
    """Write *runs* generated runs (with their steps, events, signals and
    batches) and return what was written. *seed* makes the runs
    reproducible (with the same *now*); *progress* shows a progress bar.
    *into_empty* False writes chunk by chunk even into empty tables (the
    same rows either way)."""
    if isinstance(runs, bool) or not isinstance(runs, int) or runs < 1:
        raise ValueError(f"runs must be a positive whole number, not {runs!r}")
    check_schema(engine)
    started = time.monotonic()
    now_ts = (now or datetime.now(UTC)).timestamp()
    with engine.connect() as conn:
        first_number = workflow_rows.highest_id(conn) + 1
    # The same seed on another database state gives other workflow ids, so
    # seeding twice with one seed adds runs instead of colliding.
    rng = random.Random(None if seed is None else f"{seed}:{first_number}")
    plan = _Plan(runs, rng, now_ts, first_number, chunk_size)
    skip_row_checks = _may_skip_row_checks(engine)
    result = SeedResult(runs=runs)
    with progress_bar(total=runs, unit="run", disable=not progress, desc="Seeding") as bar:

        def written(chunk: Chunk) -> None:
            result.add(chunk)
            bar.update(len(chunk.runs))

        rebuilt = None
        # Dropping indexes and turning triggers off both need the rights
        # the triggers-off path already checks for.
        if into_empty and skip_row_checks:
            rebuilt = _seed_empty(engine, plan, written)
        if rebuilt is None:
            _seed_chunked(engine, plan, written, skip_row_checks=skip_row_checks)
        else:
            result.indexes_rebuilt = rebuilt
    with engine.begin() as conn:
        workflow_counts.fold_counts(conn)
        attention_counts.fold(conn)
    result.seconds = time.monotonic() - started
    return result
