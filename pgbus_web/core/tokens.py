"""The JSON API's bearer tokens: made here (shown once), kept as their
SHA-256 (a token is 32 random bytes: a fast hash cannot be searched back,
unlike a password), checked on each API request of the standalone app.

``checker(engine)`` is an ``api_auth`` hook (core/settings.py): given a
token, the caller it names (``Caller``), or None for a token that is
unknown or revoked.
"""

from __future__ import annotations

import hashlib
import secrets
import threading
import time
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Callable

from sqlalchemy.engine import Engine

from ..rules.roles import OPERATOR, ROLES, VIEWER, BadName, check_name
from . import permissions
from ..models import api_tokens
from ..runtime.clock import utcnow

# Every token starts with this, so a leaked one is recognisable (secret scanners).
PREFIX = "pgbw_"
# The longest Authorization value looked up: a token is far shorter.
MAX_TOKEN = 200
# A token's last use is written at most this often.
TOUCH_EVERY = timedelta(minutes=1)
# A token found live is taken without asking the database again for this
# many seconds, in the process that checked it (docs/api.md, Tokens): a
# token revoked by another process is refused within this time, by this
# one at once.
VERIFIED_FOR = 10.0
# Entries the verified tokens' memo holds at most (a flood of distinct
# live tokens cannot grow it).
VERIFIED_MAX = 1000


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

    @property
    def actor(self) -> str:
        return f"api:{self.name}"

    def principal(self, door: str = permissions.API) -> permissions.Principal:
        """The token as the principal who acts, at *door*."""
        return permissions.token(self.name, self.role, door=door)


def digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def add(engine: Engine, name: str, role: str) -> tuple[str, dict[str, Any]]:
    """A new token for *name* with *role*: (the token, its row). The token
    is not kept: this is the only time it is seen."""
    try:
        check_name(name)
    except BadName as problem:
        raise TokenError(str(problem)) from None
    if role not in ROLES:
        raise TokenError(f"the role must be one of {', '.join(ROLES)}")
    token = PREFIX + secrets.token_urlsafe(32)
    with engine.begin() as conn:
        if api_tokens.live_by_name(conn, name) is not None:
            raise TokenError(f"a token named {name!r} exists; revoke it first")
        row = api_tokens.insert(conn, name=name, role=role, token_sha256=digest(token), now=utcnow())
    return token, row


def listing(engine: Engine) -> list[dict[str, Any]]:
    with engine.connect() as conn:
        return api_tokens.all_tokens(conn)


def revoke(engine: Engine, name: str) -> bool:
    """Revoke *name*'s live token; False when it has none. This process
    forgets every token it verified, so it refuses this one at once."""
    with engine.begin() as conn:
        revoked = api_tokens.revoke(conn, name, now=utcnow()) > 0
    _forget()
    return revoked


# The tokens this process found live lately: (engine, digest) -> (caller,
# until when, on the monotonic clock); and when this process last wrote
# each token's use, by its digest. Only a live token is kept: an unknown or revoked one is asked
# each time (a refusal is rare and must never be stale).
_verified: dict[tuple[Engine, str], tuple[Caller, float]] = {}
_touched: dict[str, float] = {}
_lock = threading.Lock()


def _forget() -> None:
    with _lock:
        _verified.clear()


def check(engine: Engine, token: str) -> Caller | None:
    """The caller *token* names, or None (unknown, revoked, malformed)."""
    if not token.startswith(PREFIX) or len(token) > MAX_TOKEN or not token.isascii():
        return None
    key = digest(token)
    now = time.monotonic()
    found = _verified.get((engine, key))
    if found is not None and found[1] > now:
        return found[0]
    with engine.connect() as conn:
        row = api_tokens.by_digest(conn, key)
    if row is None or row["revoked_at"] is not None:
        with _lock:
            _verified.pop((engine, key), None)
        return None
    caller = Caller(name=row["name"], may_act=row["role"] != VIEWER, token_id=row["id"], digest=key, role=row["role"])
    with _lock:
        if len(_verified) >= VERIFIED_MAX:
            _verified.clear()
        _verified[(engine, key)] = (caller, now + VERIFIED_FOR)
    return caller


def used(engine: Engine, caller: Caller) -> None:
    """Record that *caller*'s token answered a request."""
    if caller.token_id is None:
        return
    # Written by this process at most once per TOUCH_EVERY (the row's own
    # condition keeps several processes to about that too).
    now = time.monotonic()
    last = _touched.get(caller.digest) if caller.digest is not None else None
    if last is not None and now - last < TOUCH_EVERY.total_seconds():
        return
    with engine.begin() as conn:
        api_tokens.touch(conn, caller.token_id, now=utcnow(), every=TOUCH_EVERY)
    with _lock:
        if len(_touched) >= VERIFIED_MAX:
            _touched.clear()
        if caller.digest is not None:
            _touched[caller.digest] = now


def checker(engine_of: Callable[[], Engine]) -> Callable[[Any, str], Caller | None]:
    """An api_auth hook over the tokens table of *engine_of*()'s database."""

    def api_auth(request, token: str) -> Caller | None:
        return check(engine_of(), token)

    return api_auth
