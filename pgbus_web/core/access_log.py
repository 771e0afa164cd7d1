"""The access log: who signed in, failed to, signed out or was signed out
by an admin, and which tokens were made, revoked and first used from a new
address (models/access_log_rows.py). Written beside the act it records, read by
admins (the sessions page, the API, ``pgbus-web sessions log``), pruned by
``pgbus-web prune``."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Protocol

from sqlalchemy.engine import Connection, Engine

from ..models import access_log_rows
from ..rules import roles
from ..runtime.clock import utcnow
from . import permissions
from .policy import Policy

SIGN_IN = "sign_in"
SIGN_IN_FAILED = "sign_in_failed"
SIGN_OUT = "sign_out"
SESSION_ENDED = "session_ended"
SESSIONS_ENDED = "sessions_ended"
TOKEN_ADDED = "token_added"
TOKEN_REVOKED = "token_revoked"
TOKEN_NEW_ADDRESS = "token_new_address"
KINDS = (
    SIGN_IN,
    SIGN_IN_FAILED,
    SIGN_OUT,
    SESSION_ENDED,
    SESSIONS_ENDED,
    TOKEN_ADDED,
    TOKEN_REVOKED,
    TOKEN_NEW_ADDRESS,
)
# The stored text's limits (v17.sql): a typed name or an address past
# them is cut, never refused (a failed sign-in is logged whatever was typed).
SUBJECT_LIMIT, ADDRESS_LIMIT, DETAIL_LIMIT = 64, 100, 200
# Lines shown at once: the newest.
SHOWN = 200
# pgbus-web prune deletes this many lines per transaction.
BATCH = 1000


def _cut(value: str | None, limit: int) -> str | None:
    return None if value is None else value[:limit]


def write(
    conn: Connection,
    kind: str,
    subject: str,
    *,
    actor: str | None = None,
    address: str | None = None,
    detail: str | None = None,
    at: datetime | None = None,
) -> None:
    """One line, in the caller's transaction (so it is kept exactly when the act is)."""
    if kind not in KINDS:
        raise ValueError(f"no access log kind {kind!r}")
    access_log_rows.insert(
        conn,
        at=at or utcnow(),
        kind=kind,
        subject=_cut(subject, SUBJECT_LIMIT) or "",
        actor=_cut(actor, 200),
        address=_cut(address, ADDRESS_LIMIT),
        detail=_cut(detail, DETAIL_LIMIT),
    )


def record(engine: Engine, kind: str, subject: str, **values: Any) -> None:
    """One line in a transaction of its own."""
    with engine.begin() as conn:
        write(conn, kind, subject, **values)


def new_address(engine: Engine, subject: str, address: str) -> bool:
    """A token used from *address*: a line when no line says so yet."""
    with engine.begin() as conn:
        return access_log_rows.insert_new_address(
            conn, at=utcnow(), subject=_cut(subject, SUBJECT_LIMIT) or "", address=_cut(address, ADDRESS_LIMIT) or ""
        )


def latest(
    engine: Engine, principal: permissions.Principal, policy: Policy, *, limit: int = SHOWN
) -> list[dict[str, Any]]:
    """The newest lines, for a principal who may see sessions."""
    permissions.require(principal, roles.SESSIONS, None, policy)
    with engine.connect() as conn:
        return access_log_rows.latest(conn, limit=limit)


def prune(engine: Engine, *, before: datetime, dry_run: bool = False, batch: int = BATCH) -> int:
    """Delete the lines older than *before*, *batch* per transaction; how
    many went (or would, on a dry run)."""
    return prune_rows(engine, access_log_rows, before=before, dry_run=dry_run, batch=batch)


class AgingRows(Protocol):
    """A table's module whose rows age out: counted and deleted before a
    time (models/access_log_rows.py, models/session_rows.py)."""

    def count_before(self, conn: Connection, before: datetime) -> int: ...

    def delete_before(self, conn: Connection, before: datetime, *, batch: int) -> int: ...


def prune_rows(engine: Engine, rows: AgingRows, *, before: datetime, dry_run: bool, batch: int) -> int:
    """Delete *rows* older than *before*, *batch* per transaction; how
    many went (or would, on a dry run)."""
    if dry_run:
        with engine.connect() as conn:
            return rows.count_before(conn, before)
    deleted = 0
    while True:
        with engine.begin() as conn:
            gone = rows.delete_before(conn, before, batch=batch)
        deleted += gone
        if gone < batch:
            return deleted
