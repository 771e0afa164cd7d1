"""Operations: one outside verb on every run a filter of the runs index
matches, at any size, tracked in pgbus_web_operations (docs/operations.md).

- preview(): what an operation would do now: the exact count, by status,
  how many runs the verb fits (the verb table's rule) and how many it will
  skip and why, and a sample: the first runs the index shows.
- create(): the same, checked against the count the operator was shown,
  then stored as a queued operation with a ceiling (the highest run id
  now): runs created later are never swept in.
- Runner: what a worker or the serving process does with operations: claim
  one (SKIP LOCKED, or a running one whose heartbeat went stale), do it in
  chunks, and commit counts and cursor per chunk. Every verb does a chunk
  in one transaction (chunks/, and chunks/resume.py for resume: the verb's
  rules, gathered writes); what that path leaves goes run by run through
  the verbs themselves, each in its own transaction.

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
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import Engine

from .. import defaults
from ..models import changes, events, workflow_index, workflow_rows
from ..models import operations as store
from ..models.text import truncate
from ..rules import run_filters as index_filters
from ..rules import states, verb_table
from ..rules.approval import Approval  # noqa: F401  (its old home; doors read it from the policy)
from ..rules.limits import REASON_LIMIT
from . import chunks, pace, verbs
from .clock import parse_future, utcnow
from .errors import (
    AlreadyActed,
    InvalidSignalName,
    RunNotFound,
    UnknownVerb,
    WorkflowError,
    WrongStatus,
)

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
# Runs shown in a preview.
SAMPLE_SIZE = 10
# Id windows (workflow_index.WINDOW each, one statement each) a chunk's walk
# reads at most before it commits where it got to: a thin slice of a big
# table is crossed in bounded steps, its heartbeat renewed between them.
WINDOWS_PER_CHUNK = 10
# The verbs an operation may apply: every outside verb of the table.
VERBS = tuple(verb.name for verb in verb_table.TABLE)


# --- refusals ----------------------------------------------------------------


class OperationError(Exception):
    """An operation refused before anything was written."""

    code = "operation_error"


class ReasonMissing(OperationError):
    code = "reason_missing"

    def __init__(self) -> None:
        super().__init__("a reason is required")


class NothingFits(OperationError):
    """The verb fits none of the runs the filter matches (or none match)."""

    code = "nothing_fits"

    def __init__(self, preview: Preview) -> None:
        self.preview = preview
        super().__init__(f"{preview.verb} fits none of the {preview.total} matching runs")


class CountChanged(OperationError):
    """The count the operator confirmed is not the count now: they must see
    the fresh preview first."""

    code = "count_changed"

    def __init__(self, expected: int, preview: Preview) -> None:
        self.expected = expected
        self.preview = preview
        super().__init__(f"the filter matched {expected} runs when shown and matches {preview.total} now")


class OperationNotFound(OperationError):
    code = "operation_not_found"

    def __init__(self, operation_id: Any) -> None:
        self.operation_id = operation_id
        super().__init__(f"no operation {operation_id!r}")


class NotCancellable(OperationError):
    code = "not_cancellable"

    def __init__(self, operation: Mapping[str, Any]) -> None:
        self.operation = operation
        self.status = operation["status"]
        super().__init__(f"operation {operation['id']} is {self.status}: only a queued or running one can be cancelled")


class NotPausable(OperationError):
    code = "not_pausable"

    def __init__(self, operation: Mapping[str, Any]) -> None:
        self.operation = operation
        self.status = operation["status"]
        super().__init__(f"operation {operation['id']} is {self.status}: only a queued or running one can be paused")


class NotPaused(OperationError):
    code = "not_paused"

    def __init__(self, operation: Mapping[str, Any]) -> None:
        self.operation = operation
        self.status = operation["status"]
        super().__init__(f"operation {operation['id']} is {self.status}: only a paused one can go on")


class NotAwaitingApproval(OperationError):
    code = "not_awaiting_approval"

    def __init__(self, operation: Mapping[str, Any]) -> None:
        self.operation = operation
        self.status = operation["status"]
        super().__init__(f"operation {operation['id']} is {self.status}: it is not waiting for approval")


class OwnApproval(OperationError):
    """The operator who asked for an operation cannot approve it."""

    code = "own_approval"

    def __init__(self, operation: Mapping[str, Any]) -> None:
        self.operation = operation
        super().__init__(
            f"{operation['actor']} asked for operation {operation['id']}: another operator must approve it"
        )


class PaceEnded(OperationError):
    code = "pace_ended"

    def __init__(self, operation: Mapping[str, Any]) -> None:
        self.operation = operation
        self.status = operation["status"]
        super().__init__(f"operation {operation['id']} is {self.status}: its pace can no longer be changed")


class CeilingNotForVerb(OperationError):
    """A ceiling of runs in flight on a verb that starts no work."""

    code = "ceiling_not_for_verb"

    def __init__(self, verb: str) -> None:
        self.verb = verb
        super().__init__(f"{verb} starts no work: a ceiling of runs in flight does not apply to it")


# --- the filter, the verb and its fields -------------------------------------


def stored_query(run_filters: index_filters.RunFilters) -> dict[str, str]:
    """The index query an operation keeps: its filters without the page
    cursors, from/to with their offset so another process in another zone
    reads the same moments."""
    changes: dict[str, Any] = {"before": None, "after": None}
    if run_filters.created_from is not None:
        changes["from"] = run_filters.created_from.isoformat()
    if run_filters.created_to is not None:
        changes["to"] = run_filters.created_to.isoformat()
    query = run_filters.query(**changes)
    return query


def filters_of(operation: Mapping[str, Any]) -> index_filters.RunFilters:
    return index_filters.parse(operation["filters"] or {})


def _seconds(value: timedelta) -> float:
    return value.total_seconds()


def check(
    verb: str, params: Mapping[str, Any] | None, reason: str | None, *, now: datetime, require_reason: bool = True
) -> tuple[verb_table.Verb, dict[str, Any], str]:
    """The verb, its fields as stored, and the reason; raises what is wrong
    (UnknownVerb, ReasonMissing, InvalidTime, InvalidSignalName,
    InvalidPayload) before anything is read or written."""
    found = verb_table.get(verb) if isinstance(verb, str) else None
    if found is None:
        raise UnknownVerb(str(verb)[:50])
    params = dict(params or {})
    text = (reason or "").strip()
    if require_reason and not text:
        raise ReasonMissing()
    stored: dict[str, Any] = {}
    if verb_table.AT in found.fields:
        stored["at"] = parse_future(params.get("at"), now=now).isoformat()
    if verb_table.FROM_STEP in found.fields:
        step = (params.get("from_step") or "").strip()
        if step:
            stored["from_step"] = step
    if found.name == verb_table.SIGNAL:
        name = params.get("name")
        if not isinstance(name, str) or not name.strip():
            raise InvalidSignalName(name)
        stored["name"] = name.strip()
        stored["payload"] = verbs.parse_payload(params.get("payload"), None)
    return found, stored, truncate(text, REASON_LIMIT)


# --- preview ------------------------------------------------------------------


@dataclass
class Preview:
    verb: str
    query: dict[str, str]  # the index filters (stored_query)
    params: dict[str, Any]
    now: datetime
    ceiling_id: int
    total: int
    by_status: dict[str, int]  # in the order of states.RUN, only statuses present
    fits: int
    # Why the others are skipped: {"why": "status", "status", "count"} or
    # {"why": "class_not_loaded", "workflow_class", "count"}.
    skips: list[dict[str, Any]] = field(default_factory=list)
    sample: list[dict[str, Any]] = field(default_factory=list)
    # The runs the verb would act on, by class: whoever asks must be
    # allowed the verb on each (core/permissions.py).
    classes: dict[str, int] = field(default_factory=dict)

    @property
    def skipped(self) -> int:
        return self.total - self.fits


def _binds(run_filters: index_filters.RunFilters, now: datetime) -> dict[str, Any]:
    binds = run_filters.page_binds(now)
    binds.pop("before_id", None)
    binds.pop("after_id", None)
    return binds


def preview(
    engine: Engine,
    run_filters: index_filters.RunFilters,
    verb: str,
    params: Mapping[str, Any] | None = None,
    *,
    registry=None,
    thresholds: Mapping[str, timedelta],
    now: datetime | None = None,
    window: int = workflow_index.WINDOW,
) -> Preview:
    """What *verb* on every run *run_filters* matches would do now. Read in
    one repeatable-read snapshot, so the ceiling, counts and sample agree."""
    now = now or utcnow()
    found, stored, _ = check(verb, params, None, now=now, require_reason=False)
    binds = _binds(run_filters, now)
    with engine.connect() as conn:
        conn = conn.execution_options(isolation_level="REPEATABLE READ")
        with conn.begin():
            ceiling = workflow_rows.highest_id(conn)
            fragments = workflow_index.searches_fragments(conn, run_filters.q)
            where, where_binds = workflow_index.page_where(
                now=now, ceiling_id=ceiling, fragments=fragments, **thresholds, **binds
            )
            # One window of ids per statement (bounded walks, docs/operations.md).
            counts, holding = workflow_index.count_by_window(
                conn, where=where, binds=where_binds, ceiling_id=ceiling, window=window
            )
            sample = workflow_index.sample_in(
                conn, holding, limit=SAMPLE_SIZE, now=now, fragments=fragments, **thresholds, **binds
            )
    by_status: dict[str, int] = {}
    for (_, status), runs in counts.items():
        by_status[status] = by_status.get(status, 0) + runs
    by_status = {status: by_status[status] for status in states.RUN if status in by_status} | {
        status: runs for status, runs in by_status.items() if status not in states.RUN
    }
    fits = 0
    not_loaded: dict[str, int] = {}
    classes: dict[str, int] = {}
    for (workflow_class, status), runs in sorted(counts.items()):
        if not found.allows(status):
            continue
        if found.needs_class and (registry is None or registry.get(workflow_class) is None):
            not_loaded[workflow_class] = not_loaded.get(workflow_class, 0) + runs
            continue
        fits += runs
        classes[workflow_class] = classes.get(workflow_class, 0) + runs
    skips = [
        {"why": "status", "status": status, "count": runs}
        for status, runs in by_status.items()
        if not found.allows(status)
    ]
    skips += [
        {"why": "class_not_loaded", "workflow_class": klass, "count": runs}
        for klass, runs in sorted(not_loaded.items())
    ]
    return Preview(
        verb=found.name,
        query=stored_query(run_filters),
        params=stored,
        now=now,
        ceiling_id=ceiling,
        total=sum(by_status.values()),
        by_status=by_status,
        fits=fits,
        skips=skips,
        sample=sample,
        classes=classes,
    )


def create(
    engine: Engine,
    run_filters: index_filters.RunFilters,
    verb: str,
    params: Mapping[str, Any] | None,
    *,
    reason: str | None,
    actor: str,
    expected: int | None,
    registry=None,
    thresholds: Mapping[str, timedelta],
    now: datetime | None = None,
    rate: float | None = None,
    max_in_flight: int | None = None,
    approval: Approval | None = None,
    requested_by: str | None = None,
    permit=None,
) -> dict[str, Any]:
    """Store a queued operation: *verb* on every run *run_filters* matches,
    up to the highest run id now, at *rate* runs per second and
    *max_in_flight* runs started and unsettled at most (None: no limit).
    *expected* is the count the operator was shown: another count now
    raises CountChanged with the fresh preview (None: no check, for callers
    that just showed it). When *approval* asks for it, the operation waits
    as awaiting_approval for a different operator. Nothing is written
    when anything is refused."""
    now = now or utcnow()
    found, stored, text = check(verb, params, reason, now=now)
    if max_in_flight is not None and found.name not in verb_table.STARTS_WORK:
        raise CeilingNotForVerb(found.name)
    shown = preview(engine, run_filters, verb, params, registry=registry, thresholds=thresholds, now=now)
    if permit is not None:
        permit(shown)  # raises when the requester may not act on one of its classes
    if expected is not None and int(expected) != shown.total:
        raise CountChanged(int(expected), shown)
    if shown.fits == 0:
        raise NothingFits(shown)
    stored["thresholds"] = {name: _seconds(value) for name, value in thresholds.items()}
    # The classes it reaches: an approver must be allowed to approve each.
    stored["classes"] = sorted(shown.classes)
    with engine.begin() as conn:
        status = (
            states.OPERATION_AWAITING_APPROVAL
            if approval is not None and approval.needed(shown.verb, shown.fits)
            else states.OPERATION_QUEUED
        )
        return store.insert(
            conn,
            verb=shown.verb,
            filters=shown.query,
            ceiling_id=shown.ceiling_id,
            params=stored,
            reason=text,
            actor=actor,
            total=shown.total,
            now=now,
            status=status,
            rate=rate,
            max_in_flight=max_in_flight,
            requested_by=requested_by,
        )


def cancel(
    engine: Engine,
    operation_id: int,
    *,
    now: datetime | None = None,
    actor: str | None = None,
    reason: str | None = None,
) -> dict[str, Any]:
    """Stop an operation that has not ended (awaiting approval, queued,
    running or paused) -> cancelled, saying who and why. The process doing
    it stops after the chunk in hand, whose runs are still counted."""
    with engine.begin() as conn:
        cancelled = store.cancel(conn, operation_id, now=now or utcnow(), actor=actor, reason=_why(reason))
        if cancelled is not None:
            return cancelled
        current = store.find(conn, operation_id)
    if current is None:
        raise OperationNotFound(operation_id)
    raise NotCancellable(current)


def _changed(engine: Engine, operation_id: int, change, refused) -> dict[str, Any]:
    """*change*(conn) in a transaction, or the refusal *refused*(current row)
    when it changed nothing (OperationNotFound when there is none)."""
    with engine.begin() as conn:
        changed = change(conn)
        if changed is not None:
            return changed
        current = store.find(conn, operation_id)
    if current is None:
        raise OperationNotFound(operation_id)
    raise refused(current)


def _why(reason: str | None) -> str | None:
    text = (reason or "").strip()
    return truncate(text, REASON_LIMIT) or None


def pause(
    engine: Engine, operation_id: int, *, actor: str, now: datetime | None = None, reason: str | None = None
) -> dict[str, Any]:
    """queued or running -> paused: no process claims it; the one doing it
    drops it at its next write (the chunk in hand is finished and counted)."""
    return _changed(
        engine,
        operation_id,
        lambda conn: store.pause(conn, operation_id, now=now or utcnow(), actor=actor, reason=_why(reason)),
        NotPausable,
    )


def go_on(
    engine: Engine, operation_id: int, *, actor: str, now: datetime | None = None, reason: str | None = None
) -> dict[str, Any]:
    """paused -> queued: any process claims it and goes on from its cursor."""
    return _changed(
        engine,
        operation_id,
        lambda conn: store.go_on(conn, operation_id, now=now or utcnow(), actor=actor, reason=_why(reason)),
        NotPaused,
    )


def approve(
    engine: Engine,
    operation_id: int,
    *,
    actor: str,
    now: datetime | None = None,
    approver: str | None = None,
    reason: str | None = None,
) -> dict[str, Any]:
    """awaiting_approval -> queued, approved by *actor*, who must not be
    the one who asked for it (OwnApproval): neither the same actor nor the
    same principal (*approver*, its key, against the requester's)."""
    key = approver or actor

    def refused(current: Mapping[str, Any]) -> OperationError:
        if current["status"] == states.OPERATION_AWAITING_APPROVAL and (
            current["actor"] == actor or (current.get("requested_by") or current["actor"]) == key
        ):
            return OwnApproval(current)
        return NotAwaitingApproval(current)

    return _changed(
        engine,
        operation_id,
        lambda conn: store.approve(conn, operation_id, now=now or utcnow(), actor=actor, key=key, reason=_why(reason)),
        refused,
    )


def set_pace(engine: Engine, operation_id: int, changes: Mapping[str, Any]) -> dict[str, Any]:
    """Change rate and/or max_in_flight (*changes*, checked by
    checks.parse_pace; None clears one) of an operation that has not ended;
    the process doing it reads them at its next chunk."""
    changes = {name: value for name, value in changes.items() if name in ("rate", "max_in_flight")}
    with engine.connect() as conn:
        current = store.find(conn, operation_id)
    if current is None:
        raise OperationNotFound(operation_id)
    if changes.get("max_in_flight") is not None and current["verb"] not in verb_table.STARTS_WORK:
        raise CeilingNotForVerb(current["verb"])
    if not changes:
        return current
    return _changed(engine, operation_id, lambda conn: store.set_pace(conn, operation_id, changes), PaceEnded)


def find(engine: Engine, operation_id: int) -> dict[str, Any]:
    with engine.connect() as conn:
        found = store.find(conn, operation_id)
    if found is None:
        raise OperationNotFound(operation_id)
    return found


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
            params.get("name"),
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
        every = self.runner.stale_after.total_seconds() / BEATS
        while not self._stopped.wait(every):
            try:
                with self.runner.engine.begin() as conn:
                    fence = store.renew(conn, self.held.operation["id"], fence=self.held.fence, now=self.runner.clock())
            except Exception:  # noqa: BLE001  (the next beat tries again; the chunk's own write decides)
                log.warning("operation %s: could not renew its heartbeat", self.held.operation["id"], exc_info=True)
                continue
            if fence is None:
                return  # taken over or ended: the chunk's fenced write finds it so
            self.held.fence = fence

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
        window: int = workflow_index.WINDOW,
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
            claimed = store.claim(conn, now=now, stale_before=now - self.stale_after, operation_id=operation_id)
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
                store.release(conn, held.operation["id"], fence=held.fence)
                changes.mark(conn)  # the pages show what its chunks wrote at once
        except Exception:  # noqa: BLE001
            log.warning(
                "operation %s: could not hand it back; taken over once stale", held.operation["id"], exc_info=True
            )

    def release(self) -> None:
        """Give the operation in hand back to the queue (a stopping process)."""
        held, self.held = self.held, None
        if held is not None:
            with self.engine.begin() as conn:
                store.release(conn, held.operation["id"], fence=held.fence)
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
    ) -> tuple[list[dict[str, Any]], dict[str, Any] | None | bool]:
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
            written = store.progress(
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
        verb = verb_table.get(operation["verb"])
        result = Chunk(op_id)
        created = operation["created_at"]
        thresholds = {
            name: timedelta(seconds=value) for name, value in (operation["params"] or {}).get("thresholds", {}).items()
        }
        paced = self._budget(operation)
        with self.engine.connect() as conn:
            stored = filters_of(operation)
            fragments = workflow_index.searches_fragments(conn, stored.q)
            where, binds = workflow_index.page_where(
                now=created, fragments=fragments, **thresholds, **_binds(stored, created)
            )
            # With the pace spent, one run still tells whether any is
            # left: none, and the operation is done without waiting.
            rows, reached, more = workflow_index.walk(
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
                finished = store.finish(conn, op_id, fence=held.fence, now=now)
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
            written = store.progress(
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
            written = store.progress(
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
                        nothing_open = not store.any_open(conn)
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
        except Exception:  # noqa: BLE001
            log.exception("operations: could not release the operation in hand")
