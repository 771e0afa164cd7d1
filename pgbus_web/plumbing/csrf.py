"""One CSRF scheme for every state-changing request of the blueprint.

A signed double-submit token, kept to the blueprint so that it imposes
nothing on the host app (no session, no app-wide hook):

- the first page a browser gets sets a cookie ``pgbus_csrf`` holding a
  random value (HttpOnly, SameSite=Lax, scoped to the blueprint's URL
  prefix, Secure over HTTPS);
- every form carries ``csrf_token``, that value signed with itsdangerous
  (which Flask ships) under the app's ``SECRET_KEY`` or the dashboard's
  ``secret_key`` setting; HTMX requests also send it as the
  ``X-CSRF-Token`` header (``hx-headers`` on the page's body);
- a POST, PUT, PATCH or DELETE to any route of the blueprint is refused with
  400 before its view runs, unless the token's signature is good, it is
  younger than TOKEN_MAX_AGE and it signs the value in the cookie.

Another site can make a browser post to the dashboard, but cannot read the
page to learn a token, and cannot forge one without the secret.

Routes need nothing to be protected; a template puts ``{{ csrf_field() }}``
in each form (``csrf_token()`` gives the bare token).
"""

from __future__ import annotations

import hmac
import logging
import re
import secrets

from flask import Blueprint, current_app, g, request, url_for
from itsdangerous import BadSignature, SignatureExpired, URLSafeTimedSerializer
from markupsafe import Markup, escape
from werkzeug.exceptions import BadRequest

from . import unrouted
from .security import UNSAFE_METHODS
from .state import state

log = logging.getLogger(__name__)

COOKIE_NAME = "pgbus_csrf"
FIELD_NAME = "csrf_token"
HEADER_NAME = "X-CSRF-Token"
# Separates these signatures from anything else signed with the same key.
SALT = "pgbus-web.csrf"
# A page left open longer than this needs a reload before it can act; live
# refresh re-renders the forms with fresh tokens, so open tabs keep working.
TOKEN_MAX_AGE = 12 * 60 * 60
# The most a state-changing request may send. The token is read from the
# form, so the limit must be set before anything reads the body.
MAX_BODY = 256 * 1024
# What a cookie value we issued looks like (token_urlsafe(32)).
_COOKIE_VALUE = re.compile(r"^[A-Za-z0-9_-]{43}$")

_process_secret: str | None = None


class CSRFError(BadRequest):
    """A state-changing request without a valid token. ``problem`` says
    which check failed: missing, cookie, invalid, expired or mismatch."""

    def __init__(self, problem: str) -> None:
        super().__init__(f"CSRF check failed: {problem}")
        self.problem = problem


def _secret() -> str | bytes:
    configured = state().settings.secret_key or current_app.secret_key
    if configured:
        return configured
    global _process_secret
    if _process_secret is None:
        # Tokens still work, for this process only: after a restart, or
        # behind a second process, forms need a reload.
        _process_secret = secrets.token_hex(32)
        log.warning(
            "pgbus-web: neither the app's SECRET_KEY nor the secret_key setting is set; "
            "CSRF tokens are signed with a key that lasts as long as this process"
        )
    return _process_secret


def _serializer() -> URLSafeTimedSerializer:
    return URLSafeTimedSerializer(_secret(), salt=SALT)


def _cookie_value() -> str:
    """The browser's random value; a new one (set on the response) when it
    has none or an ill-formed one."""
    value = g.get("_pgbus_csrf_value")
    if value is None:
        sent = request.cookies.get(COOKIE_NAME, "")
        if _COOKIE_VALUE.match(sent):
            value = sent
        else:
            value = secrets.token_urlsafe(32)
            g._pgbus_csrf_new = True
        g._pgbus_csrf_value = value
    return value


def token() -> str:
    """The token for this browser, signed now (one per request)."""
    signed = g.get("_pgbus_csrf_token")
    if signed is None:
        signed = _serializer().dumps(_cookie_value())
        g._pgbus_csrf_token = signed
    return signed


def field() -> Markup:
    """The hidden input every form of the blueprint carries."""
    return Markup(f'<input type="hidden" name="{FIELD_NAME}" value="{escape(token())}">')


def validate() -> None:
    """Raise CSRFError unless this request carries a good token for the
    browser's cookie."""
    sent = request.form.get(FIELD_NAME) or request.headers.get(HEADER_NAME)
    if not sent:
        raise CSRFError("missing")
    cookie = request.cookies.get(COOKIE_NAME)
    if not cookie:
        raise CSRFError("cookie")
    try:
        value = _serializer().loads(sent, max_age=TOKEN_MAX_AGE)
    except SignatureExpired:
        raise CSRFError("expired") from None
    except BadSignature:
        raise CSRFError("invalid") from None
    if not isinstance(value, str) or not hmac.compare_digest(value.encode(), cookie.encode()):
        raise CSRFError("mismatch")


def _protect() -> None:
    if request.method not in UNSAFE_METHODS or unrouted.adopted():
        return
    limit = request.max_content_length
    if limit is None or limit > MAX_BODY:
        request.max_content_length = MAX_BODY
    validate()


def cookie_path() -> str:
    # The blueprint's own prefix: the health route sits at its root.
    path = url_for("pgbus_web.health").rsplit("/", 1)[0]
    return path or "/"


def _set_cookie(response):
    if g.get("_pgbus_csrf_new"):
        response.set_cookie(
            COOKIE_NAME,
            g._pgbus_csrf_value,
            httponly=True,
            samesite="Lax",
            secure=request.is_secure,
            path=cookie_path(),
        )
    return response


def init_blueprint(blueprint: Blueprint) -> None:
    blueprint.before_request(_protect)
    blueprint.after_request(_set_cookie)


# What the templates call (template_names.py gives them).
TEMPLATE_NAMES = {"csrf_token": token, "csrf_field": field, "csrf_header": HEADER_NAME}
