"""Signed-in sessions an admin can see and end, and the API tokens beside
them (docs/standalone.md, Sessions and the access log).

The sign-in form's session cookie carries the id of a row of
pgbus_web_sessions (models/session_rows.py); every request of the session reads
that row, so a session an admin ends, or its person's every session, is
refused on its next request at every process. Its last sight is written at
most once a minute. Listing, ending and revoking need the ``sessions``
power (the admin role, or a grant that gives it)."""

from __future__ import annotations

import secrets
import threading
import time
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.engine import Engine

from ..models import session_rows, sign_ins
from ..rules import roles
from ..runtime.clock import utcnow
from . import access_log, permissions, tokens
from .policy import Policy

# The only provider for now: the standalone server's users file.
USERS_FILE = "users file"
# A session's last sight is written at most this often.
SEEN_EVERY = timedelta(minutes=1)
# A session id as the cookie and the admin's command carry it (v17.sql's check).
ID_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
ID_LENGTHS = range(16, 65)
# The address as stored (v17.sql): longer is cut.
ADDRESS_LIMIT = 100
SIGNED_OUT, ENDED_BY_ADMIN = "signed_out", "ended_by_admin"
# When this process last wrote each session's sight (a memo, not a truth).
_seen: dict[str, float] = {}
_SEEN_MAX = 10_000
_lock = threading.Lock()


class SessionNotFound(LookupError):
    """No live session by that id."""

    def __init__(self, session_id: str) -> None:
        super().__init__(session_id)
        self.session_id = session_id


class TokenNotFound(LookupError):
    """No live token by that name."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


def well_formed(session_id: Any) -> bool:
    return isinstance(session_id, str) and len(session_id) in ID_LENGTHS and set(session_id) <= ID_CHARS


def _address(address: str | None) -> str | None:
    return address[:ADDRESS_LIMIT] if address else None


def start(engine: Engine, name: str, *, address: str | None, lifetime: timedelta, provider: str = USERS_FILE) -> str:
    """A new session of *name*: its id, for the cookie. The sign-in goes
    to the access log in the same transaction."""
    session_id = secrets.token_urlsafe(24)
    now = utcnow()
    with engine.begin() as conn:
        session_rows.insert(
            conn,
            session_id=session_id,
            name=name,
            provider=provider,
            address=_address(address),
            now=now,
            expires_at=now + lifetime,
        )
        access_log.write(conn, access_log.SIGN_IN, name, address=_address(address), detail=provider, at=now)
    return session_id


def alive(engine: Engine, session_id: Any, name: str) -> bool:
    """Is *session_id* a live session of *name*? Read on every request;
    its last sight written at most once a minute."""
    if not well_formed(session_id):
        return False
    now = utcnow()
    with engine.connect() as conn:
        row = session_rows.by_id(conn, session_id)
    if row is None or row["name"] != name or row["ended_at"] is not None or row["expires_at"] <= now:
        return False
    clock = time.monotonic()
    last = _seen.get(session_id)
    if last is None or clock - last >= SEEN_EVERY.total_seconds():
        with engine.begin() as conn:
            session_rows.touch(conn, session_id, now=now, every=SEEN_EVERY)
        with _lock:
            if len(_seen) >= _SEEN_MAX:
                _seen.clear()
            _seen[session_id] = clock
    return True


def sign_out(engine: Engine, session_id: Any, name: str, *, address: str | None) -> None:
    """*name* signs out: every session of theirs ends (sign-out means
    every browser, docs/standalone.md), and the access log says so."""
    now = utcnow()
    with engine.begin() as conn:
        sign_ins.bump(conn, name)
        session_rows.end_all(conn, name, now=now, by=None, reason=SIGNED_OUT)
        access_log.write(conn, access_log.SIGN_OUT, name, address=_address(address), at=now)


def failed(engine: Engine, name: str, *, address: str | None) -> None:
    """A failed sign-in (the typed name, cut; never the password)."""
    access_log.record(engine, access_log.SIGN_IN_FAILED, name, address=_address(address))


def listing(engine: Engine, principal: permissions.Principal, policy: Policy) -> dict[str, list[dict[str, Any]]]:
    """The live sessions and the live tokens, for a principal who may see them."""
    permissions.require(principal, roles.SESSIONS, None, policy)
    now = utcnow()
    with engine.connect() as conn:
        live = session_rows.live(conn, now=now)
    return {"sessions": live, "tokens": tokens.live(engine)}


def end(engine: Engine, principal: permissions.Principal, policy: Policy, session_id: str) -> dict[str, Any]:
    """End one session: refused on its next request at every process."""
    permissions.require(principal, roles.SESSIONS, None, policy)
    if not well_formed(session_id):
        raise SessionNotFound(str(session_id)[:80])
    now = utcnow()
    with engine.begin() as conn:
        row = session_rows.end(conn, session_id, now=now, by=principal.actor, reason=ENDED_BY_ADMIN)
        if row is None or row["expires_at"] <= now:
            raise SessionNotFound(session_id)
        access_log.write(conn, access_log.SESSION_ENDED, row["name"], actor=principal.actor, at=now, detail=session_id)
    return row


def end_all(engine: Engine, principal: permissions.Principal, policy: Policy, name: str) -> int:
    """End every session of *name* (also a cookie made before the rows
    existed: its generation is raised); how many live ones there were."""
    permissions.require(principal, roles.SESSIONS, None, policy)
    now = utcnow()
    with engine.begin() as conn:
        sign_ins.bump(conn, name)
        ended = session_rows.end_all(conn, name, now=now, by=principal.actor, reason=ENDED_BY_ADMIN)
        access_log.write(conn, access_log.SESSIONS_ENDED, name, actor=principal.actor, at=now, detail=str(ended))
    return ended


def revoke_token(engine: Engine, principal: permissions.Principal, policy: Policy, name: str) -> None:
    """Revoke *name*'s token as an admin: refused on its next request."""
    permissions.require(principal, roles.SESSIONS, None, policy)
    if not tokens.revoke(engine, name, actor=principal.actor):
        raise TokenNotFound(name[:80])


def prune(engine: Engine, *, before: datetime, dry_run: bool = False, batch: int = access_log.BATCH) -> tuple[int, int]:
    """The access log's retention: its lines older than *before*, and the
    sessions that ended or expired before it, *batch* per transaction;
    (lines, sessions) deleted, or that would be on a dry run."""
    lines = access_log.prune(engine, before=before, dry_run=dry_run, batch=batch)
    return lines, access_log.prune_rows(engine, session_rows, before=before, dry_run=dry_run, batch=batch)


def session_shown(row: dict[str, Any]) -> dict[str, Any]:
    """A session as the doors show it."""
    return {key: row[key] for key in ("id", "name", "provider", "address", "started_at", "last_seen_at", "expires_at")}


def token_shown(row: dict[str, Any]) -> dict[str, Any]:
    """A token as the doors show it (never its digest)."""
    return {
        "name": row["name"],
        "role": row["role"],
        "scope": "read-only" if row["read_only"] else "grants",
        "created_at": row["created_at"],
        "expires_at": row["expires_at"],
        "last_used_at": row["last_used_at"],
        "last_used_from": row["last_used_from"],
    }
