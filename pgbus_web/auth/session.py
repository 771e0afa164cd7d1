"""A signed-in browser: the user's name in Flask's signed session cookie
(HttpOnly, SameSite=Lax, Secure over HTTPS: pgbus_web.app), with the moment
of sign-in and a fingerprint of the user's password hash. It counts only
while that user still exists with that same hash and LIFETIME has not
passed since sign-in, whatever the browser keeps: removing a user or
changing their password ends their sessions, and an old cookie replayed
after its lifetime is refused. It also holds the user's generation at
sign-in (kept in the database, models/sign_ins.py): sign-out raises it,
so a copy of the cookie taken before sign-out is refused too. And it
holds the id of the session's row (core/sessions.py), read on every
request: a session an admin ends is refused on its next request. Forging
one needs the secret key.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections.abc import Callable, Mapping, MutableMapping
from datetime import timedelta

from .users import User

KEY = "pgbus_auth"
# The sign-in form's token, kept in the session until the form is posted.
FORM_KEY = "pgbus_sign_in"
LIFETIME = timedelta(hours=8)


def fingerprint(user: User) -> str:
    return hashlib.sha256(user.password_hash.encode()).hexdigest()[:32]


def start(
    session: MutableMapping, user: User, generation: int = 0, now: float | None = None, session_id: str | None = None
) -> None:
    """Sign *user* in at their current *generation*, as the session row
    *session_id*: a fresh session (nothing carried over from before)."""
    session.clear()
    session.permanent = True  # type: ignore[attr-defined]  # flask's session has it; its proxy's type does not
    session[KEY] = {
        "u": user.name,
        "t": int(time.time() if now is None else now),
        "h": fingerprint(user),
        "g": int(generation),
        # Sign-out's token: a cross-site post cannot sign anyone out.
        "c": secrets.token_urlsafe(24),
        "s": session_id,
    }


def end(session: MutableMapping) -> None:
    session.clear()


def user(
    session: Mapping,
    lookup: Callable[[str], User | None],
    lifetime: timedelta = LIFETIME,
    now: float | None = None,
    generation: Callable[[str], int] | None = None,
    live: Callable[[object, str], bool] | None = None,
) -> User | None:
    """The signed-in user, or None (no session, expired, user gone,
    password changed, or signed out since: *generation* gives the user's
    current one, asked last, as it costs a database read; or its row
    ended: *live* answers for the session id and the name)."""
    data = session.get(KEY)
    if not isinstance(data, dict):
        return None
    name, started, mark = data.get("u"), data.get("t"), data.get("h")
    if not isinstance(name, str) or not isinstance(started, int) or not isinstance(mark, str):
        return None
    now = time.time() if now is None else now
    if not (started <= now + 60 and now < started + lifetime.total_seconds()):
        return None
    found = lookup(name)
    if found is None or not hmac.compare_digest(fingerprint(found), mark):
        return None
    if generation is not None:
        made = data.get("g")
        if not isinstance(made, int) or made != generation(found.name):
            return None
    if live is not None and not live(data.get("s"), found.name):
        return None
    return found


def session_id(session: Mapping) -> str | None:
    data = session.get(KEY)
    found = data.get("s") if isinstance(data, dict) else None
    return found if isinstance(found, str) else None


def name(session: Mapping) -> str | None:
    data = session.get(KEY)
    found = data.get("u") if isinstance(data, dict) else None
    return found if isinstance(found, str) else None


def sign_out_token(session: Mapping) -> str | None:
    data = session.get(KEY)
    return data.get("c") if isinstance(data, dict) else None


def form_token(session: MutableMapping) -> str:
    """The sign-in form's token (made once per session)."""
    token = session.get(FORM_KEY)
    if not isinstance(token, str):
        token = session[FORM_KEY] = secrets.token_urlsafe(24)
    return token


def token_matches(expected: str | None, sent: str | None) -> bool:
    if not expected or not sent:
        return False
    return hmac.compare_digest(expected.encode(), sent.encode())
