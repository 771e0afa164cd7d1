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
"""

from __future__ import annotations

import psycopg
from psycopg.errors import _WaitTimeout  # what psycopg's wait raises on its timeout


class AnswerTimeout(psycopg.OperationalError):
    """The server sent no answer within the bound; the connection is closed."""


class BoundedConnection(psycopg.Connection):
    # Seconds any one round trip may wait for the server; None: no bound.
    # Set per connection by the engine (pgbus_web.db), which gives the
    # pool's ping a shorter bound than a statement.
    answer_bound: float | None = None

    def wait(self, gen, *args, **kwargs):
        bound = self.answer_bound
        if bound is None or kwargs.get("timeout") is not None or len(args) > 1:
            # No bound, or the caller (psycopg's notifies, its Ctrl-C
            # handling) brings its own.
            return super().wait(gen, *args, **kwargs)
        try:
            return super().wait(gen, *args, timeout=bound, **kwargs)
        except _WaitTimeout:
            # The protocol is halfway through an exchange: the connection
            # cannot be used again.
            self.close()
            raise AnswerTimeout(
                f"the database server sent no answer within {bound:g} seconds; connection closed"
            ) from None
