"""What every chunk of an operation answers (ChunkResult) and how it is
run in one transaction (in_one, Then); the verbs resume and resume_at take
this path as runtime/chunks/resume.py, and what follows is how
(docs/operations.md).

verbs.resume is about ten statements and a commit per run; an incident's
40,000 paused runs would keep a process and the database busy for minutes.
Here a chunk takes three statements whatever its size: the lock, what the
chunk reads under it (runtime/chunks/locked_runs.lock_and_read), and the writes
(models/chunk_writes.schedule_and_move). Every decision stays
the verb's own, only the writes are gathered:

- the runs are locked (FOR UPDATE, in id order, SKIP LOCKED: never waiting,
  so never deadlocking with a single verb or another operation);
- under those locks, a run this operation already acted on is "already"
  (verbs' AlreadyActed), one whose status the verb does not fit (the verb
  table's rule) is "skipped" (WrongStatus);
- the plan is plan.plan_for over the same latest step row the verb reads,
  the "resumed" event's details verbs.resume_details, the scheduled row and
  its event flow.schedule's plain case.

Runs this path does not do go back to the caller, for the per-run verb:
one held by another transaction (the verb waits for it), a definition not
loaded here, a plan that lets a pending step go on or finishes the run, a
step that waits for a signal (flow.schedule's signal rules), a step the
definition lost. A problem in the transaction rolls it all back; the caller
does the chunk run by run then.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from sqlalchemy.engine import Connection, Engine

from ..models import changes

# The operation verbs this path does.
VERBS = ("resume", "resume_at")


@dataclass
class ChunkResult:
    moved: list[str] = field(default_factory=list)  # resumed here
    already: list[str] = field(default_factory=list)  # this operation acted on them before
    skipped: list[str] = field(default_factory=list)  # the verb no longer fits their status
    rest: list[str] = field(default_factory=list)  # for the per-run verb


# What a chunk's caller may add to the chunk's own transaction, after its
# writes and before its COMMIT: the Runner's progress write under its
# fence, so that a chunk is one commit (docs/operations.md). It may raise
# to roll the chunk back whole.
Then = Callable[[Connection, ChunkResult], None]


def in_one(engine: Engine, statements: Callable[[Connection], ChunkResult], then: Then | None) -> ChunkResult:
    """*statements* (a chunk's) in one transaction, then *then*, given,
    in the same transaction before it commits."""
    with engine.begin() as conn:
        # The pages follow these writes within a moment, not at once
        # (web/answering/page_cache.py, OPERATION_LAG).
        changes.by_operation(conn)
        result = statements(conn)
        if then is not None:
            then(conn, result)
    return result
