"""The JSON API's bearer tokens: made here (shown once), kept as their
SHA-256 (a token is 32 random bytes: a fast hash cannot be searched back,
unlike a password), checked on each request that carries one: the API of
the standalone app, and the command line's and MCP server's ``--token``.

A token may expire (refused from that moment at every door) and may be
read-only (it never acts, whatever its role or the policy's grants). Each
check reads its row, so a token revoked anywhere is refused on its next
request at every process.

``checker(engine)`` is an ``api_auth`` hook (core/settings.py): given a
token, the caller it names (``Caller``), or None for a token that is
unknown, expired or revoked (``refused`` says which).
"""

from __future__ import annotations

import hashlib
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.engine import Engine

from ..models import api_tokens
from ..rules.roles import OPERATOR, ROLES, VIEWER, BadName, check_name
from ..runtime.clock import utcnow
from . import access_log, permissions

# Every token starts with this, so a leaked one is recognisable (secret scanners).
PREFIX = "pgbw_"
# The longest Authorization value looked up: a token is far shorter.
MAX_TOKEN = 200
# A token's last use is written at most this often (from one address).
TOUCH_EVERY = timedelta(minutes=1)
# Entries the memo of written uses holds at most (a flood of distinct
# live tokens cannot grow it).
VERIFIED_MAX = 1000
# The longest expiry a token may be given.
MAX_EXPIRY = timedelta(days=3650)
# Why a token was refused (refused()).
UNKNOWN, EXPIRED, REVOKED = "unknown", "expired", "revoked"


class TokenError(ValueError):
    """A name or role that cannot be a token's, or a name already in use."""


@dataclass(frozen=True)
class Caller:
    """Who an API request is: recorded as the actor ``api:<name>``."""

    name: str
    may_act: bool
    token_id: int | None = None
    role: str = OPERATOR
    # The token's digest (check's): its last use is remembered by it.
    digest: str | None = field(default=None, compare=False, repr=False)
    read_only: bool = False
    expires_at: datetime | None = None

    @property
    def actor(self) -> str:
        return f"api:{self.name}"

    def principal(self, door: str = permissions.API) -> permissions.Principal:
        """The token as the principal who acts, at *door*."""
        return permissions.token(self.name, self.role, door=door, read_only=self.read_only)


def digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def add(
    engine: Engine,
    name: str,
    role: str,
    *,
    expires_in: timedelta | None = None,
    read_only: bool = False,
    actor: str | None = None,
) -> tuple[str, dict[str, Any]]:
    """A new token for *name* with *role*, expiring *expires_in* from now
    (None: never), read-only or not: (the token, its row). The token is
    not kept: this is the only time it is seen."""
    try:
        check_name(name)
    except BadName as problem:
        raise TokenError(str(problem)) from None
    if role not in ROLES:
        raise TokenError(f"the role must be one of {', '.join(ROLES)}")
    if expires_in is not None and not timedelta(0) < expires_in <= MAX_EXPIRY:
        raise TokenError(f"a token expires in more than no time and at most {MAX_EXPIRY.days} days")
    token = PREFIX + secrets.token_urlsafe(32)
    now = utcnow()
    with engine.begin() as conn:
        existing = api_tokens.live_by_name(conn, name)
        if existing is not None:
            if existing["expires_at"] is None or existing["expires_at"] > now:
                raise TokenError(f"a token named {name!r} exists; revoke it first")
            # An expired token gives its name back: revoked on its behalf.
            api_tokens.revoke(conn, name, now=now, by="expired")
        row = api_tokens.insert(
            conn,
            name=name,
            role=role,
            token_sha256=digest(token),
            now=now,
            expires_at=None if expires_in is None else now + expires_in,
            read_only=read_only,
        )
        access_log.write(
            conn, access_log.TOKEN_ADDED, name, actor=actor, at=now, detail=f"{role}{' read-only' if read_only else ''}"
        )
    return token, row


def listing(engine: Engine) -> list[dict[str, Any]]:
    with engine.connect() as conn:
        return api_tokens.all_tokens(conn)


def live(engine: Engine) -> list[dict[str, Any]]:
    """The tokens that still answer: neither revoked nor expired."""
    with engine.connect() as conn:
        return api_tokens.live_tokens(conn, now=utcnow())


def revoke(engine: Engine, name: str, *, actor: str | None = None) -> bool:
    """Revoke *name*'s live token; False when it has none."""
    now = utcnow()
    with engine.begin() as conn:
        revoked = api_tokens.revoke(conn, name, now=now, by=actor) > 0
        if revoked:
            access_log.write(conn, access_log.TOKEN_REVOKED, name, actor=actor, at=now)
    return revoked


# When this process last wrote each token's use, by (digest, address).
_touched: dict[tuple[str, str | None], float] = {}
_lock = threading.Lock()


def _well_formed(token: str) -> bool:
    return token.startswith(PREFIX) and len(token) <= MAX_TOKEN and token.isascii()


def check(engine: Engine, token: str) -> Caller | None:
    """The caller *token* names, or None (unknown, expired, revoked, malformed)."""
    if not _well_formed(token):
        return None
    key = digest(token)
    with engine.connect() as conn:
        row = api_tokens.by_digest(conn, key)
    if row is None or row["revoked_at"] is not None:
        return None
    if row["expires_at"] is not None and row["expires_at"] <= utcnow():
        return None
    return Caller(
        name=row["name"],
        may_act=row["role"] != VIEWER and not row["read_only"],
        token_id=row["id"],
        digest=key,
        role=row["role"],
        read_only=bool(row["read_only"]),
        expires_at=row["expires_at"],
    )


def refused(engine: Engine, token: str) -> str:
    """Why *token* is refused: UNKNOWN, EXPIRED or REVOKED (asked only
    after a refusal, to say which)."""
    if not _well_formed(token):
        return UNKNOWN
    with engine.connect() as conn:
        row = api_tokens.by_digest(conn, digest(token))
    if row is None:
        return UNKNOWN
    if row["revoked_at"] is not None:
        return REVOKED
    return EXPIRED if row["expires_at"] is not None and row["expires_at"] <= utcnow() else UNKNOWN


def used(engine: Engine, caller: Caller, address: str | None = None) -> None:
    """Record that *caller*'s token answered a request from *address*; a
    first use from an address goes to the access log."""
    if caller.token_id is None:
        return
    # Written by this process at most once per TOUCH_EVERY and address
    # (the row's own condition keeps several processes to about that too).
    now = time.monotonic()
    memo = (caller.digest or "", address)
    last = _touched.get(memo)
    if last is not None and now - last < TOUCH_EVERY.total_seconds():
        return
    with engine.begin() as conn:
        api_tokens.touch(conn, caller.token_id, now=utcnow(), every=TOUCH_EVERY, address=address)
    if address:
        access_log.new_address(engine, caller.name, address)
    with _lock:
        if len(_touched) >= VERIFIED_MAX:
            _touched.clear()
        _touched[memo] = now


def checker(engine_of: Callable[[], Engine]) -> Callable[[Any, str], Caller | None]:
    """An api_auth hook over the tokens table of *engine_of*()'s database."""

    def api_auth(request: Any, token: str) -> Caller | None:
        return check(engine_of(), token)

    return api_auth
