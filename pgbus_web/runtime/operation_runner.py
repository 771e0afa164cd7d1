"""An operation's runner (docs/operations.md): what a worker or the serving
process does with operations: claim one (SKIP LOCKED, or a running one
whose heartbeat went stale: the takeover), do it in chunks within its pace,
and commit counts and cursor per chunk under the fence its heartbeat
moves. Every verb does a chunk in one transaction (chunks/, and
chunks/resume.py for resume: the verb's rules, gathered writes); what that
path leaves goes run by run through the verbs themselves, each in its own
transaction. Background is the serving process's thread doing them.

Why no run is acted on twice, even after kill -9 (docs/operations.md): the
run's change commits with its audit event carrying details.operation_id,
and a run that already has one is not acted on again, checked under the
run's row lock; the cursor only moves past runs whose transactions
committed. A chunk done again after a crash therefore counts those runs as
moved without acting again; finish counts moved from the audit trail, so
runs a process that lost the operation commits late are counted too.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal, cast

from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import Engine

from .. import defaults
from ..models import changes, events, operation_rows, workflow_index, workflow_search, workflow_windows
from ..rules import states, verb_table
from ..rules.stuck import Thresholds
from . import chunks, pace, verbs
from .clock import utcnow
from .errors import AlreadyActed, RunNotFound, WorkflowError, WrongStatus
from .operation_preview import filter_binds
from .operation_record import filters_of

log = logging.getLogger("pgbus_web.operations")

# Runs per chunk: progress, cursor and heartbeat are committed this often.
# CHUNK where the runs go one by one through the verb (a verb without a
# chunk path); CHUNK_PATH where the chunk is one transaction (every verb
# now): its fixed cost (a dozen round trips, one commit) is spread over
# more runs, and its locks are held about a second (docs/operations.md).
CHUNK = 200
CHUNK_PATH = 1_000
# A running operation whose heartbeat is older than this is taken over
# (the setting operation_stale_after); its holder renews it every
# STALE_AFTER / BEATS while a chunk lasts, so a live holder never looks dead.
STALE_AFTER = defaults.OPERATION_STALE_AFTER
BEATS = 3
# Runs of one chunk acted on at once, each on its own connection and in its
# own transaction: one run's transaction is a dozen round trips, so a
# single connection waits on the server most of the time.
PARALLEL = 4
# Id windows (workflow_windows.WINDOW each, one statement each) a chunk's walk
# reads at most before it commits where it got to: a thin slice of a big
# table is crossed in bounded steps, its heartbeat renewed between them.
WINDOWS_PER_CHUNK = 10

# --- doing it ---------------------------------------------------------------------


def signal_key(operation_id: int, workflow_id: str) -> str:
    """The idempotency key of the signal an operation sends one run: a
    repeat stores nothing."""
    return f"pgbus-web-operation-{operation_id}-{workflow_id}"


def _act(engine: Engine, operation: Mapping[str, Any], workflow_id: str, registry) -> None:
    params = operation["params"] or {}
    if operation["verb"] == verb_table.SIGNAL:
        verbs.signal(
            engine,
            workflow_id,
            params["name"],  # a signal operation stores its name (operation_record)
            params.get("payload"),
            signal_key(operation["id"], workflow_id),
            actor=operation["actor"],
            operation_id=operation["id"],
            reason=operation["reason"],
        )
        return
    verbs.perform(
        engine,
        operation["verb"],
        workflow_id,
        actor=operation["actor"],
        reason=operation["reason"],
        at=params.get("at"),
        from_step=params.get("from_step"),
        registry=registry,
        operation_id=operation["id"],
    )


@dataclass
class Chunk:
    operation_id: int
    moved: int = 0
    skipped: int = 0
    refused: int = 0
    status: str = states.OPERATION_RUNNING  # the operation's status after the chunk
    lost: bool = False  # another process took it over: this one's counts were not written
    waited: float = 0.0  # the pace was spent: seconds until it allows a run (no run handled)


class _Lost(Exception):
    """The chunk's own progress write found the fence gone: roll it back."""


@dataclass
class _Held:
    operation: dict[str, Any]
    fence: datetime


class _Beat:
    """While a chunk is in hand: a thread that renews its operation's
    heartbeat every stale_after / BEATS, moving the fence the chunk's
    fenced writes name (they stop it first, so none of them races a renewal)."""

    def __init__(self, runner: Runner, held: _Held | None) -> None:
        self.runner = runner
        self.held = held
        self._stopped = threading.Event()
        self.thread = None
        if held is not None:
            self.thread = threading.Thread(target=self._loop, name="pgbus-web-operation-heartbeat", daemon=True)
            self.thread.start()

    def _loop(self) -> None:
        held = self.held
        if held is None:  # the thread is started only for an operation in hand
            return
        every = self.runner.stale_after.total_seconds() / BEATS
        while not self._stopped.wait(every):
            try:
                with self.runner.engine.begin() as conn:
                    fence = operation_rows.renew(conn, held.operation["id"], fence=held.fence, now=self.runner.clock())
            except Exception:  # noqa: BLE001  (the next beat tries again; the chunk's own write decides)
                log.warning("operation %s: could not renew its heartbeat", held.operation["id"], exc_info=True)
                continue
            if fence is None:
                return  # taken over or ended: the chunk's fenced write finds it so
            held.fence = fence

    def running(self) -> bool:
        return self.thread is not None and not self._stopped.is_set()

    def stop(self) -> None:
        self._stopped.set()
        if self.thread is not None and self.thread is not threading.current_thread():
            self.thread.join()


class Runner:
    """Does operations for one process: step() claims one when it holds
    none and does one chunk of it. Not shared between threads."""

    def __init__(
        self,
        engine: Engine,
        registry=None,
        *,
        chunk: int | None = None,
        stale_after: timedelta = STALE_AFTER,
        clock=utcnow,
        parallel: int = PARALLEL,
        window: int = workflow_windows.WINDOW,
        nap: float = pace.NAP,
        sleep=time.sleep,
    ) -> None:
        self.engine = engine
        self.window = window
        # The longest step() sleeps on a spent pace before it answers
        # (0: never; a worker's tick has steps to run meanwhile).
        self.nap = nap
        self.sleep = sleep
        self.parallel = max(int(parallel), 1)
        self.registry = registry
        # Runs per chunk; None: CHUNK_PATH for a verb with a chunk path, else CHUNK.
        self.chunk = chunk
        self.stale_after = stale_after
        self.clock = clock
        self.held: _Held | None = None
        self._beat = _Beat(self, None)

    def claim(self, operation_id: int | None = None) -> dict[str, Any] | None:
        now = self.clock()
        with self.engine.begin() as conn:
            claimed = operation_rows.claim(
                conn, now=now, stale_before=now - self.stale_after, operation_id=operation_id
            )
            if claimed is None:
                return None
        self.held = _Held(claimed, claimed["heartbeat_at"])
        return claimed

    def step(self, operation_id: int | None = None) -> Chunk | None:
        """One chunk of the operation in hand, claiming one first (with
        *operation_id*: that one) when none is; None when there is none to do."""
        if self.held is None and self.claim(operation_id) is None:
            return None
        held = self.held
        if held is None:  # claim() holds the one it claimed
            return None
        self._beat = _Beat(self, held)
        try:
            return self._chunk(held)
        except Exception as problem:  # noqa: BLE001  (handed back, then raised)
            self._beat.stop()
            self.held = None
            log.exception("operation %s: chunk failed: %s", held.operation["id"], problem)
            self._hand_back(held)
            raise
        finally:
            self._beat.stop()

    def _quiet(self) -> None:
        """Stop renewing the heartbeat: a fenced write follows, with the
        fence the last renewal left."""
        self._beat.stop()

    def _hand_back(self, held: _Held) -> None:
        """A chunk failed: give the operation back to the queue at once
        (nothing of the chunk's is counted twice: each run's change commits
        with its event, and the cursor did not move); when the database is
        away too, it goes stale and is taken over."""
        try:
            with self.engine.begin() as conn:
                operation_rows.release(conn, held.operation["id"], fence=held.fence)
                changes.mark(conn)  # the pages show what its chunks wrote at once
        except Exception:  # noqa: BLE001  (not handed back: taken over once stale)
            log.warning(
                "operation %s: could not hand it back; taken over once stale", held.operation["id"], exc_info=True
            )

    def release(self) -> None:
        """Give the operation in hand back to the queue (a stopping process)."""
        held, self.held = self.held, None
        if held is not None:
            with self.engine.begin() as conn:
                operation_rows.release(conn, held.operation["id"], fence=held.fence)
                changes.mark(conn)  # the pages show what its chunks wrote at once

    def _one(self, operation: Mapping[str, Any], row: Mapping[str, Any]) -> str:
        """Act on one run: "moved", "skipped" or "refused"."""
        try:
            _act(self.engine, operation, row["workflow_id"], self.registry)
        except AlreadyActed:
            return "moved"  # by this operation, before a crash: counted now
        except (WrongStatus, RunNotFound):
            return "skipped"
        except WorkflowError as problem:
            log.info(
                "operation %s: %s refused on %s: %s", operation["id"], operation["verb"], row["workflow_id"], problem
            )
            return "refused"
        return "moved"

    def _fast(
        self, held: _Held, todo: list[dict[str, Any]], result: Chunk, *, reached: int, paced: pace.Budget, acting: int
    ) -> tuple[list[dict[str, Any]], dict[str, Any] | None | Literal[False]]:
        """The chunk's runs through the verb's chunk path (chunks.act),
        counted into *result*: the runs left for the per-run verb (all of
        them when the path does not apply or fails), and what the chunk's
        own progress write left (False when it did not write it: runs are
        left, or the path did not apply). When no run is left, the counts,
        the cursor (*reached*) and the pace's log are written in the
        chunk's own transaction, under the fence, so a chunk is one commit;
        a fence that no longer holds rolls the chunk back (None: lost)."""
        operation = held.operation
        if not chunks.covers(operation["verb"]) or not todo:
            return todo, False
        wrote: dict[str, Any] = {}

        def then(conn, done) -> None:
            if done.rest:
                return  # the per-run verb first; the progress after it
            self._quiet()
            ended = self.clock()
            written = operation_rows.progress(
                conn,
                operation["id"],
                fence=held.fence,
                now=ended,
                cursor=reached,
                moved=result.moved + len(done.moved) + len(done.already),
                skipped=result.skipped + len(done.skipped),
                refused=result.refused,
                pace_log=pace.logged(paced.log, operation.get("rate"), ended, acting),
            )
            if written is None:
                raise _Lost()
            wrote["row"] = written

        try:
            done = chunks.act(
                self.engine,
                operation,
                [row["workflow_id"] for row in todo],
                registry=self.registry,
                now=self.clock(),
                key_of=lambda workflow_id: signal_key(operation["id"], workflow_id),
                then=then,
            )
        except _Lost:
            return [], None  # taken over: the chunk rolled back, nothing of it written
        except Exception:  # noqa: BLE001  (rolled back whole: each run on its own then, with its own answer)
            log.warning("operation %s: the chunk's one transaction failed: run by run", operation["id"], exc_info=True)
            if not self._beat.running():
                self._beat = _Beat(self, held)  # stopped for the progress write that did not commit
            return todo, False
        result.moved += len(done.moved) + len(done.already)
        result.skipped += len(done.skipped)
        if "row" in wrote:
            return [], wrote["row"]
        rest = set(done.rest)
        return [row for row in todo if row["workflow_id"] in rest], False

    def _chunk(self, held: _Held) -> Chunk:
        operation = held.operation
        op_id = operation["id"]
        verb = verb_table.BY_NAME[operation["verb"]]
        result = Chunk(op_id)
        created = operation["created_at"]
        # As create stored them: the policy's thresholds, in seconds.
        thresholds = cast(
            Thresholds,
            {
                name: timedelta(seconds=value)
                for name, value in (operation["params"] or {}).get("thresholds", {}).items()
            },
        )
        paced = self._budget(operation)
        with self.engine.connect() as conn:
            stored = filters_of(operation)
            fragments = workflow_search.searches_fragments(conn, stored.q)
            where, binds = workflow_index.page_where(
                now=created, fragments=fragments, **thresholds, **filter_binds(stored, created)
            )
            # With the pace spent, one run still tells whether any is
            # left: none, and the operation is done without waiting.
            rows, reached, more = workflow_windows.walk(
                conn,
                where=where,
                binds=binds,
                after_id=operation["cursor"],
                ceiling_id=operation["ceiling_id"],
                limit=max(paced.runs, 1),
                window=self.window,
                windows=WINDOWS_PER_CHUNK,
            )
        if rows and paced.runs == 0:
            return self._wait(held, paced, result)
        now = self.clock()
        if not rows and not more:
            self._quiet()
            with self.engine.begin() as conn:
                finished = operation_rows.finish(conn, op_id, fence=held.fence, now=now)
                # Its chunks' changes stood behind for a moment
                # (changes.by_operation); its end is shown at once.
                changes.mark(conn)
            self.held = None
            if finished is None:
                result.lost = True
                return result
            result.status = finished["status"]
            return result
        # The verb table's rule first, without a lock: most runs that do
        # not fit are skipped for the price of the walk. One that no longer
        # fits because this operation acted on it (a chunk done again after
        # a takeover, the filter still matching it) was moved, not skipped.
        todo = [row for row in rows if verb.allows(row["status"])]
        acting = len(todo)
        others = [row["workflow_id"] for row in rows if not verb.allows(row["status"])]
        if others:
            with self.engine.connect() as conn:
                acted = events.operation_acted_among(conn, others, op_id)
            result.moved += len(acted)
            result.skipped += len(others) - len(acted)
        todo, written = self._fast(held, todo, result, reached=reached, paced=paced, acting=acting)
        if written is not False:
            return self._after(written, result)
        if self.parallel > 1 and len(todo) > 1:
            with ThreadPoolExecutor(max_workers=self.parallel) as pool:
                outcomes = list(pool.map(lambda row: self._one(operation, row), todo))
        else:
            outcomes = [self._one(operation, row) for row in todo]
        for outcome in outcomes:
            setattr(result, outcome, getattr(result, outcome) + 1)
        self._quiet()
        ended = self.clock()
        with self.engine.begin() as conn:
            written = operation_rows.progress(
                conn,
                op_id,
                fence=held.fence,
                now=ended,
                cursor=reached,
                moved=result.moved,
                skipped=result.skipped,
                refused=result.refused,
                pace_log=pace.logged(paced.log, operation.get("rate"), ended, acting),
            )
        return self._after(written, result)

    def _budget(self, operation: Mapping[str, Any]) -> pace.Budget:
        """The runs the next chunk may take: the chunk size within the
        operation's pace, as stored on its row (read fresh: the rate may
        have been changed while it runs)."""
        if operation.get("max_in_flight"):
            with self.engine.connect() as conn:
                in_flight = events.operation_in_flight(conn, operation["id"])
        else:
            in_flight = None
        size = self.chunk or (CHUNK_PATH if chunks.covers(operation["verb"]) else CHUNK)
        return pace.budget(operation, now=self.clock(), in_flight=in_flight, chunk=size)

    def _wait(self, held: _Held, paced: pace.Budget, result: Chunk) -> Chunk:
        """The pace is spent: sleep up to self.nap (never the whole wait
        when it is longer), then renew the heartbeat under the fence, which
        also reads a pause, a cancel or a changed pace."""
        result.waited = paced.wait
        if self.nap > 0:
            self.sleep(min(paced.wait, self.nap))
        elif held.fence > self.clock() - pace.HEARTBEAT_EVERY:
            return result  # renewed a moment ago
        self._quiet()
        with self.engine.begin() as conn:
            written = operation_rows.progress(
                conn,
                held.operation["id"],
                fence=held.fence,
                now=self.clock(),
                cursor=held.operation["cursor"],
                moved=0,
                skipped=0,
                refused=0,
            )
        return self._after(written, result)

    def _after(self, written: dict[str, Any] | None, result: Chunk) -> Chunk:
        """The operation as the fenced write left it: held on while it is
        running, dropped when it was taken over, cancelled or paused."""
        if written is None:
            self.held = None
            result.lost = True
            return result
        result.status = written["status"]
        if written["status"] != states.OPERATION_RUNNING:
            self.held = None
            with self.engine.begin() as conn:
                changes.mark(conn)  # paused or cancelled: its chunks' changes shown at once
        else:
            self.held = _Held(written, written["heartbeat_at"])
        return result


# What a database that is down, restarting or unreachable raises (the
# pages' 503 too): no connection, a dropped one, a full pool.
DATABASE_AWAY = (sa_exc.OperationalError, sa_exc.InterfaceError, sa_exc.TimeoutError)


def first_line(problem: BaseException) -> str:
    text = str(getattr(problem, "orig", None) or problem).strip()
    return text.splitlines()[0] if text else type(problem).__name__


class Background:
    """The serving process's share of the work: a daemon thread that does
    queued operations (one cheap look every *poll* seconds when none is
    open), so a dashboard without a worker still finishes what it starts."""

    def __init__(
        self, engine: Engine, registry=None, *, poll: float = 2.0, stale_after: timedelta = STALE_AFTER
    ) -> None:
        self.runner = Runner(engine, registry, stale_after=stale_after)
        self.engine = engine
        self.poll = poll
        self._stop = threading.Event()
        # Whether the last look at the database failed to reach it.
        self.database_away = False
        self.thread = threading.Thread(target=self._loop, name="pgbus-web-operations", daemon=True)

    def _database_answered(self) -> None:
        if self.database_away:
            self.database_away = False
            log.warning("operations: the database is back")

    def start(self) -> Background:
        self.thread.start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        self.thread.join(timeout)

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                if self.runner.held is None:
                    # The connection goes back to the pool before the wait:
                    # held across it, it sat idle in a transaction (a
                    # snapshot and a lock on the table) every poll.
                    with self.engine.connect() as conn:
                        nothing_open = not operation_rows.any_open(conn)
                    if nothing_open:
                        self._database_answered()
                        self._stop.wait(self.poll)
                        continue
                stepped = self.runner.step()
                self._database_answered()
                if stepped is None:
                    self._stop.wait(self.poll)
            except DATABASE_AWAY as problem:
                # Tried again every poll while it lasts: said once, in a
                # line, not a traceback every two seconds.
                if not self.database_away:
                    self.database_away = True
                    log.warning(
                        "operations: the database is unavailable (%s); trying again every %.1fs",
                        first_line(problem),
                        self.poll,
                    )
                self._stop.wait(self.poll)
            except Exception:  # noqa: BLE001  (a bug in one step must not end the thread)
                log.exception("operations: retrying in %.1fs", self.poll)
                self._stop.wait(self.poll)
        try:
            self.runner.release()
        except Exception:  # noqa: BLE001  (stopping all the same: the operation is taken over once stale)
            log.exception("operations: could not release the operation in hand")
