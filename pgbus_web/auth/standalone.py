"""Sign-in for the standalone app, wired through the blueprint's own hooks:
``can_view`` (anyone identified), ``can_act`` (operators) and
``actor_name`` (the user's name). The blueprint knows nothing of it; a host
app that mounts the blueprint keeps its own hooks.

Who a request is, in this order: a trusted proxy's header; HTTP Basic
credentials (scripts); the session of the sign-in form. Nobody: a browser
navigating to a page is sent to the sign-in form, anything else (HTMX,
scripts, posts) gets 401, with a Basic challenge when there is a users
file. See docs/standalone.md.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import logging
import secrets
import threading
import time
import unicodedata
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from flask import (
    Blueprint,
    Flask,
    Response,
    abort,
    g,
    redirect,
    render_template,
    request,
    session,
    url_for,
)
from werkzeug.datastructures import Authorization

from .. import i18n
from ..core import sessions as live_sessions
from ..models import sign_ins
from ..plumbing import hx
from ..plumbing.redirects import see_other
from ..plumbing.security import same_origin
from ..plumbing.state import state
from . import passwords, proxy
from . import session as sessions
from .throttle import Throttle
from .users import VIEWER, UsersFile, UsersFileError

log = logging.getLogger(__name__)

REALM = "pgbus-web"
BLUEPRINT = "pgbus_auth"
# The longest name echoed into a log line of a failed sign-in.
LOGGED_NAME = 64
# HTTP Basic credentials that verified are remembered this long (in memory,
# as a keyed digest): a script polling with Basic does not cost an Argon2
# verify (tens of ms and 64 MiB) on every request.
BASIC_MEMORY = 300


@dataclass(frozen=True)
class Identity:
    name: str
    role: str
    via: str  # "proxy", "basic" or "session"
    groups: tuple[str, ...] = ()


# A request whose Basic credentials were refused: answered 401, never
# taken for anonymous-and-then-signed-in by a session.
_REFUSED = Identity("", "", "refused")


class Auth:
    """The standalone app's sign-in. *users_file*: the form and HTTP Basic;
    *trusted_header*: a proxy's word, from *trusted_proxies* only."""

    def __init__(
        self,
        users_file: Path | None = None,
        *,
        trusted_header: str | None = None,
        trusted_role_header: str | None = None,
        trusted_proxies=(),
        session_lifetime: timedelta = sessions.LIFETIME,
        throttle: Throttle | None = None,
    ) -> None:
        if users_file is None and not trusted_header:
            raise ValueError("sign-in needs a users file or a trusted header")
        if trusted_header and not trusted_proxies:
            raise ValueError("--trusted-header needs --trusted-proxy: the addresses it is believed from")
        self.users = UsersFile(users_file) if users_file is not None else None
        self.header = (
            proxy.TrustedHeader(trusted_header, trusted_role_header, proxy.networks(trusted_proxies))
            if trusted_header
            else None
        )
        self.lifetime = session_lifetime
        self.throttle = throttle or Throttle()
        self._basic_key = secrets.token_bytes(32)
        self._basic_ok: dict[bytes, tuple[str, float]] = {}
        self._basic_lock = threading.Lock()

    # --- the blueprint's hooks ------------------------------------------------

    def settings_hooks(self) -> dict[str, Any]:
        return {
            "can_view": self.can_view,
            "can_act": self.can_act,
            "actor_name": self.actor_name,
            "role_of": self.role_of,
            "groups_of": self.groups_of,
        }

    def can_view(self, request_) -> bool:
        if self.identity() is None:
            abort(self._challenge())
        return True

    def can_act(self, request_) -> bool:
        found = self.identity()
        return found is not None and found.role != VIEWER

    def role_of(self, request_) -> str:
        found = self.identity()
        return found.role if found is not None else VIEWER

    def groups_of(self, request_) -> tuple[str, ...]:
        found = self.identity()
        return found.groups if found is not None else ()

    def actor_name(self, request_) -> str:
        found = self.identity()
        return found.name if found else "anonymous"

    # --- who is asking ----------------------------------------------------------

    def identity(self) -> Identity | None:
        if "_pgbus_identity" not in g:
            try:
                if self.users is not None:
                    self.users.users()  # broken: 503 for everyone, signed in or not
                found = self._identify()
            except UsersFileError as problem:
                abort(_unavailable(problem))
            g._pgbus_identity = found
        found = g._pgbus_identity
        return None if found is _REFUSED else found

    def _identify(self) -> Identity | None:
        if self.header is not None:
            named = self.header.identify(request, self.users)
            if named:
                return Identity(named[0], named[1], "proxy")
        if self.users is not None and request.authorization and request.authorization.type == "basic":
            return self._basic(request.authorization, self.users)
        if self.users is not None:
            user = sessions.user(
                session, self.users.get, self.lifetime, generation=self.generation, live=self.session_live
            )
            if user is not None:
                return Identity(user.name, user.role, "session", user.groups)
        return None

    def generation(self, name: str) -> int:
        """*name*'s session generation, from the database every process shares."""
        with state().database.primary.connect() as conn:
            return sign_ins.generation(conn, name)

    def session_live(self, session_id, name: str) -> bool:
        """Is the cookie's session row still live (not ended by an admin)?"""
        return live_sessions.alive(state().database.primary, session_id, name)

    def end_sessions(self, name: str) -> None:
        """End every session of *name* made so far (sign-out)."""
        live_sessions.sign_out(
            state().database.primary, sessions.session_id(session), name, address=request.remote_addr
        )

    def _basic(self, authorization: Authorization, users: UsersFile) -> Identity:
        name = authorization.username or ""
        password = authorization.password or ""
        digest = hmac.new(self._basic_key, f"{name}\0{password}".encode(), hashlib.sha256).digest()
        known = users.get(name)
        with self._basic_lock:
            remembered = self._basic_ok.get(digest)
        # Remembered only for the same stored hash: a new password or a
        # removed user takes effect at once.
        if known and remembered and remembered[1] > time.monotonic() and remembered[0] == known.password_hash:
            return Identity(known.name, known.role, "basic", known.groups)
        user = self.check_password(name, password)
        if user is None:
            return _REFUSED
        with self._basic_lock:
            now = time.monotonic()
            self._basic_ok = {k: v for k, v in self._basic_ok.items() if v[1] > now}
            self._basic_ok[digest] = (user.password_hash, now + BASIC_MEMORY)
        return Identity(user.name, user.role, "basic", user.groups)

    def check_password(self, name: str, password: str):
        """The user when *name* and *password* match; None otherwise."""
        return self.attempt(name, password)[0]

    def attempt(self, name: str, password: str):
        """(user, throttled): the user when *name* and *password* match and
        the throttle let the attempt through, reserved before the slow hash
        (auth/throttle.py); failures are logged without the password."""
        address = request.remote_addr or ""
        shown = name[:LOGGED_NAME]
        reservation = self.throttle.reserve(name, address)
        if reservation is None:
            log.warning("pgbus-web: sign-in refused for %r from %s: too many failed attempts", shown, address)
            return None, True
        try:
            user = self.users.get(name) if self.users is not None else None
        except UsersFileError as problem:
            abort(_unavailable(problem))
        if user is None:
            passwords.burn(password)
        elif passwords.verify(user.password_hash, password):
            self.throttle.succeeded(reservation)
            return user, False
        log.warning("pgbus-web: failed sign-in for %r from %s", shown, address)
        live_sessions.failed(state().database.primary, shown, address=address)
        return None, False

    def _challenge(self) -> Response:
        if self.users is not None and _browser_navigation():
            return see_other(url_for(f"{BLUEPRINT}.sign_in", next=_here()))
        response = Response(i18n.t("pgbus.web.auth.required") + "\n", 401, mimetype="text/plain")
        if hx.details().request:
            # htmx follows HX-Redirect whatever the status.
            if self.users is not None:
                response.headers["HX-Redirect"] = url_for(f"{BLUEPRINT}.sign_in", next=_here())
        elif self.users is not None:
            response.headers["WWW-Authenticate"] = f'Basic realm="{REALM}", charset="UTF-8"'
        return response

    # --- wiring -----------------------------------------------------------------

    def init_app(self, app: Flask) -> None:
        app.config.setdefault("PERMANENT_SESSION_LIFETIME", self.lifetime)
        app.register_blueprint(build_blueprint(self))
        app.context_processor(lambda: {"pgbus_account": self.account()})

    def account(self) -> dict | None:
        """What the top bar shows: who is signed in, and sign-out for a session."""
        found = self.identity() if request else None
        if found is None:
            return None
        token = sessions.sign_out_token(session) if found.via == "session" else None
        return {"name": found.name, "role": found.role, "sign_out_token": token}


def _unavailable(problem: UsersFileError) -> Response:
    """503 while the users file is broken: nobody can be told apart, so no
    page is served (UsersFile has logged what is wrong, with the file's
    path, which the page leaves out)."""
    if problem.line is not None:
        sentence = i18n.t("pgbus.web.auth.users_file_broken", line=problem.line)
    else:
        sentence = i18n.t("pgbus.web.auth.users_file_unreadable")
    return Response(sentence + "\n", 503, mimetype="text/plain")


def _browser_navigation() -> bool:
    return (
        request.method in ("GET", "HEAD")
        and not hx.details().request
        and request.accept_mimetypes.accept_html
        and request.authorization is None
    )


def _here() -> str:
    return request.full_path.rstrip("?")


def _safe_next(value: str | None) -> str:
    """*value* when it is a plain path of this site, else the start page.
    A CR or LF would break the Location header (a 500); a control
    character, ``//host``, a scheme or a backslash (which browsers read as
    a slash) could lead off the site: none is a link of the dashboard, so
    such a value is dropped rather than mended."""
    if (
        not value
        or not value.startswith("/")
        or value.startswith("//")
        or "\\" in value
        or any(unicodedata.category(char) == "Cc" for char in value)
    ):
        return url_for("pgbus_web.workflows")
    return same_origin(value)


def build_blueprint(auth: Auth) -> Blueprint:
    blueprint = Blueprint(BLUEPRINT, __name__, template_folder="templates")
    i18n.init_app(blueprint)

    def page(status: int = 200, error: str | None = None):
        return render_template(
            "pgbus_auth/sign_in.html",
            error=error,
            form_token=sessions.form_token(session),
            next=_safe_next(request.values.get("next")),
            name=request.form.get("name", "") if request.method == "POST" else "",
        ), status

    @blueprint.route("/sign-in", methods=["GET", "POST"])
    def sign_in():
        if auth.users is None:
            abort(404)
        # First, so that a broken users file is a 503 before the form.
        signed_in = auth.identity() is not None
        if request.method == "GET":
            if signed_in:
                return redirect(_safe_next(request.args.get("next")), 303)
            return page()
        if not sessions.token_matches(session.get(sessions.FORM_KEY), request.form.get("token")):
            return page(400, i18n.t("pgbus.web.auth.form_expired"))
        name = request.form.get("name", "").strip()
        user, throttled = auth.attempt(name, request.form.get("password", ""))
        if throttled:
            return page(429, i18n.t("pgbus.web.auth.throttled"))
        if user is None:
            return page(401, i18n.t("pgbus.web.auth.failed"))
        started = live_sessions.start(
            state().database.primary, user.name, address=request.remote_addr, lifetime=auth.lifetime
        )
        sessions.start(session, user, auth.generation(user.name), session_id=started)
        return redirect(_safe_next(request.form.get("next")), 303)

    @blueprint.post("/sign-out")
    def sign_out():
        if sessions.token_matches(sessions.sign_out_token(session), request.form.get("token")):
            # On the server first: a copy of this cookie must not outlive it.
            name = sessions.name(session)
            if name:
                auth.end_sessions(name)
            sessions.end(session)
        return redirect(url_for(f"{BLUEPRINT}.sign_in"), 303)

    return blueprint


def with_hooks(values: dict[str, Any], auth: Auth) -> dict[str, Any]:
    """The standalone app's settings values with the sign-in's hooks."""
    settings = values.get("settings")
    if settings is not None:
        return {**values, "settings": dataclasses.replace(settings, **auth.settings_hooks())}
    return {**values, **auth.settings_hooks()}
