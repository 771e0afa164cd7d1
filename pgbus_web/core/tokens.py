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
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Callable

from sqlalchemy.engine import Engine

from ..rules.roles import OPERATOR, ROLES, BadName, check_name
from ..models import api_tokens
from ..runtime.clock import utcnow

# Every token starts with this, so a leaked one is recognisable (secret scanners).
PREFIX = "pgbw_"
# The longest Authorization value looked up: a token is far shorter.
MAX_TOKEN = 200
# A token's last use is written at most this often.
TOUCH_EVERY = timedelta(minutes=1)


class TokenError(ValueError):
    """A name or role that cannot be a token's, or a name already in use."""


@dataclass(frozen=True)
class Caller:
    """Who an API request is: recorded as the actor ``api:<name>``."""

    name: str
    may_act: bool
    token_id: int | None = None

    @property
    def actor(self) -> str:
        return f"api:{self.name}"


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
    """Revoke *name*'s live token; False when it has none."""
    with engine.begin() as conn:
        return api_tokens.revoke(conn, name, now=utcnow()) > 0


def check(engine: Engine, token: str) -> Caller | None:
    """The caller *token* names, or None (unknown, revoked, malformed)."""
    if not token.startswith(PREFIX) or len(token) > MAX_TOKEN or not token.isascii():
        return None
    with engine.connect() as conn:
        row = api_tokens.by_digest(conn, digest(token))
    if row is None or row["revoked_at"] is not None:
        return None
    return Caller(name=row["name"], may_act=row["role"] == OPERATOR, token_id=row["id"])


def used(engine: Engine, caller: Caller) -> None:
    """Record that *caller*'s token answered a request."""
    if caller.token_id is None:
        return
    with engine.begin() as conn:
        api_tokens.touch(conn, caller.token_id, now=utcnow(), every=TOUCH_EVERY)


def checker(engine_of: Callable[[], Engine]) -> Callable[[Any, str], Caller | None]:
    """An api_auth hook over the tokens table of *engine_of*()'s database."""

    def api_auth(request, token: str) -> Caller | None:
        return check(engine_of(), token)

    return api_auth
