"""A block of statements the server cancels past a time budget
(statement_timeout), the connection's own timeout put back after: what a
page's optional reads (a signal's walk, a capped count) run under.
"""

from __future__ import annotations

from types import TracebackType
from typing import Any, Literal

import sqlalchemy as sa
from sqlalchemy.engine import Connection


class Cancelled(Exception):
    """The statement ran past its budget (SQLSTATE 57014, query_canceled)."""


# SQLSTATE of a statement the server cancelled (statement_timeout among others).
_QUERY_CANCELED = "57014"


class within:
    """The statements of the block are cancelled by the server past
    *seconds* (statement_timeout), and the connection's own timeout is put
    back after. On a connection in a transaction the block is a savepoint
    (a cancelled statement rolls back to it, with the setting); on an
    AUTOCOMMIT one the setting is the session's until it is put back."""

    def __init__(self, conn: Connection, seconds: float) -> None:
        self.conn = conn
        self.limit = f"{max(int(seconds * 1000), 1)}ms"
        self.autocommit = conn.get_execution_options().get("isolation_level") == "AUTOCOMMIT"
        self.savepoint: sa.NestedTransaction | None = None
        self.before: Any = None

    def __enter__(self) -> within:
        if not self.autocommit:
            self.savepoint = self.conn.begin_nested()
        self.before = self.conn.execute(
            sa.text("SELECT current_setting('statement_timeout'), set_config('statement_timeout', :limit, :local)"),
            {"limit": self.limit, "local": not self.autocommit},
        ).one()[0]
        return self

    def __exit__(
        self, kind: type[BaseException] | None, problem: BaseException | None, trace: TracebackType | None
    ) -> Literal[False]:
        cancelled = (
            isinstance(problem, sa.exc.DBAPIError) and getattr(problem.orig, "sqlstate", None) == _QUERY_CANCELED
        )
        if self.savepoint is not None:
            if problem is None:
                self._put_back()
                self.savepoint.commit()
            else:
                self.savepoint.rollback()  # the setting goes with it
        else:
            self._put_back()
        if cancelled:
            raise Cancelled() from problem
        return False

    def _put_back(self) -> None:
        self.conn.execute(
            sa.text("SELECT set_config('statement_timeout', :before, :local)"),
            {"before": self.before, "local": not self.autocommit},
        )
