"""A psycopg connection that never waits for the server without end.

PostgreSQL's ``statement_timeout`` ends a slow statement, but only a
server that runs can cancel anything: a frozen one (stopped, swapped out,
its host hung) answers nothing, and a client waiting for its answer waits
for the whole outage. TCP keepalives and ``tcp_user_timeout`` do not see
that case either: the frozen server's kernel still acknowledges every
packet. So the client bounds its own waits: every round trip of a
``BoundedConnection`` (a statement, a commit, a rollback, the pool's
ping) waits at most ``answer_bound`` seconds, after which the connection
is closed and ``AnswerTimeout`` (an OperationalError, which SQLAlchemy
treats as a lost connection) is raised.

Every round trip of a psycopg connection goes through its ``wait`` method
(opening one goes through ``connect`` and its ``connect_timeout``), so that
is the one place bounded here.

A request may also give all its waits one budget (``waiting``): each
connect, ping and answer then waits at most what is left of it, and
spends what it waited. A page that makes several reads on a frozen server
waits once, not once per read; time spent drawing is not counted.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import psycopg
from psycopg.errors import _WaitTimeout  # what psycopg's wait raises on its timeout


class AnswerTimeout(psycopg.OperationalError):
    """The server sent no answer within the bound; the connection is closed."""


class Budget:
    """Seconds of waiting on the server left to the waits that share it."""

    def __init__(self, seconds: float) -> None:
        self.left = seconds

    def bound(self, bound: float | None) -> float:
        """*bound* (None: none), cut to what is left."""
        return self.left if bound is None else min(bound, self.left)

    @contextmanager
    def spending(self) -> Iterator[None]:
        started = time.monotonic()
        try:
            yield
        finally:
            self.left -= time.monotonic() - started


# The budget of the waits of this context (a page request's), None: each
# wait has its own bound only. A context variable, so that a thread of its
# own (a read behind a request) can leave it.
_budget: ContextVar[Budget | None] = ContextVar("pgbus_web_wait_budget", default=None)


@contextmanager
def waiting(seconds: float | None) -> Iterator[None]:
    """Every wait on the server inside shares *seconds* (None: no budget)."""
    token = _budget.set(None if seconds is None else Budget(seconds))
    try:
        yield
    finally:
        _budget.reset(token)


def current() -> Budget | None:
    """The budget of this context's waits, None when there is none."""
    return _budget.get()


def start_waiting(seconds: float | None):
    """As waiting(), for a caller that ends it elsewhere (a request's
    teardown): the token for end_waiting()."""
    return _budget.set(None if seconds is None else Budget(seconds))


def end_waiting(token) -> None:
    try:
        _budget.reset(token)
    except ValueError:  # ended in another context than it began: none there either
        _budget.set(None)


def _spent(bound: float | None) -> AnswerTimeout:
    return AnswerTimeout(
        f"the database server sent no answer within {bound:.3g} seconds; connection closed"
        if bound is not None
        else "no time was left to wait for the database server"
    )


class BoundedConnection(psycopg.Connection):
    # Seconds any one round trip may wait for the server; None: no bound.
    # Set per connection by the engine (pgbus_web.db), which gives the
    # pool's ping a shorter bound than a statement.
    answer_bound: float | None = None

    @classmethod
    def connect(cls, conninfo: str = "", **kwargs):
        budget = _budget.get()
        if budget is None:
            return super().connect(conninfo, **kwargs)
        if budget.left <= 0:
            raise _spent(None)
        # libpq counts whole seconds, and no fewer than 2.
        given = kwargs.get("connect_timeout")
        kwargs["connect_timeout"] = max(2, math.ceil(budget.bound(float(given) if given else None)))
        with budget.spending():
            return super().connect(conninfo, **kwargs)

    def wait(self, gen, *args, **kwargs):
        bound = self.answer_bound
        budget = _budget.get()
        if (bound is None and budget is None) or kwargs.get("timeout") is not None or len(args) > 1:
            # No bound, or the caller (psycopg's notifies, its Ctrl-C
            # handling) brings its own.
            return super().wait(gen, *args, **kwargs)
        if budget is not None:
            bound = budget.bound(bound)
            if bound <= 0:
                # Nothing sent yet, but the caller's time is up: closed, so
                # the pool takes it for the lost connection it reports.
                self.close()
                raise _spent(None)
        # The caller's timeout is None here (or not given): ours replaces it.
        bounded = {**kwargs, "timeout": bound}
        try:
            if budget is None:
                return super().wait(gen, *args, **bounded)
            with budget.spending():
                return super().wait(gen, *args, **bounded)
        except _WaitTimeout:
            # The protocol is halfway through an exchange: the connection
            # cannot be used again.
            self.close()
            raise _spent(bound) from None
