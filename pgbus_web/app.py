"""The standalone dashboard: a Flask app with only pgbus-web in it, mounted
at ``/`` (``/`` itself leads to the runs index).

    from pgbus_web.app import create_app
    app = create_app({"database_url": "postgresql://..."})

*settings* is a ``pgbus_web.core.settings.Settings``, or a dict of its field
names; a dict may also carry ``database`` (a ready ``pgbus_web.db.Database``),
``trusted_proxies`` (see below) and upper-case Flask config keys
(``SECRET_KEY``, ...), and ``auth``: a ``pgbus_web.auth.Auth``, the
sign-in (users file, trusted proxy header) that supplies the blueprint's
can_view, can_act and actor_name hooks (docs/standalone.md). Serve it with any WSGI server; ``pgbus-web serve``
does so with waitress.

Behind a reverse proxy that ends TLS, ``trusted_proxies=N`` honours the
``X-Forwarded-For/-Proto/-Host/-Port/-Prefix`` headers set by the last N
proxies (Werkzeug's ProxyFix), and only on requests whose connecting peer
is in ``trusted_proxy_addresses`` (CIDRs; loopback when not given); from
any other peer, and with the default 0, they are dropped, since anyone can
send them. A prefix is believed only as a plain path of this site
(plumbing/forwarded.py). Whenever the request is HTTPS (directly, or by a
trusted proxy's word) every cookie the app sets is ``Secure``; the session
cookie, which carries the flashed messages, is also ``SameSite=Lax``.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from typing import Any

from flask import Flask, has_request_context, redirect, request, url_for
from flask.sessions import SecureCookieSessionInterface
from werkzeug.middleware.proxy_fix import ProxyFix

from .auth import Auth, with_hooks
from .core.settings import Settings
from .core.tokens import checker
from .extension import PgbusWeb
from .metrics import available
from .plumbing import forwarded, security
from .plumbing.state import state


class SessionInterface(SecureCookieSessionInterface):
    """Flask's signed-cookie session, Secure whenever the request is HTTPS
    (Flask's own setting is one value for every request)."""

    def get_cookie_secure(self, app: Flask) -> bool:
        return super().get_cookie_secure(app) or (has_request_context() and request.is_secure)


def create_app(settings: Settings | Mapping[str, Any] | None = None) -> Flask:
    if isinstance(settings, Settings):
        values: dict[str, Any] = {"settings": settings}
    else:
        values = dict(settings or {})
    flask_config = {key: values.pop(key) for key in list(values) if key.isupper()}
    database = values.pop("database", None)
    trusted_proxies = int(values.pop("trusted_proxies", 0) or 0)
    proxy_addresses = tuple(values.pop("trusted_proxy_addresses", None) or forwarded.LOOPBACK)
    auth: Auth | None = values.pop("auth", None)
    if auth is not None:
        values = with_hooks(values, auth)

    # The blueprint serves its own assets; the app needs no static route.
    app = Flask(__name__, static_folder=None)
    # The flash cookie goes along with top-level navigation only, like the
    # dashboard's own cookies.
    app.config["SESSION_COOKIE_SAMESITE"] = "Lax"
    app.config.update(flask_config)
    app.session_interface = SessionInterface()
    if trusted_proxies:
        app.wsgi_app = ProxyFix(  # type: ignore[method-assign]  # middleware wraps wsgi_app, as Flask says to
            app.wsgi_app,
            x_for=trusted_proxies,
            x_proto=trusted_proxies,
            x_host=trusted_proxies,
            x_port=trusted_proxies,
            x_prefix=trusted_proxies,
        )
    # Outside ProxyFix, so it sees the connecting peer; also with 0
    # proxies, so that no forwarded header reaches the app unchecked.
    gate = forwarded.ForwardedGate(app.wsgi_app, proxy_addresses, trusted_proxies)
    app.wsgi_app = gate  # type: ignore[method-assign]  # middleware, as Flask says to
    base = values.get("settings")
    if "api_auth" not in values and (base is None or base.api_auth is None):
        # The standalone app's bearer tokens (pgbus-web tokens, docs/api.md).
        values["api_auth"] = checker(lambda: state().database.primary)
    if values.get("metrics", getattr(base, "metrics", None)) is None:
        # Standalone, /metrics is on when prometheus_client is installed
        # (the standalone extra brings it; docs/metrics.md).
        values["metrics"] = available()
    web = PgbusWeb(database=database, **values)
    web.init_app(app)
    if not app.config.get("SECRET_KEY"):
        # Signs the session (flashed messages, CSRF). Without a configured
        # one a random key works for one process; several processes behind
        # one address need the same settings.secret_key.
        configured = web.settings.secret_key if web.settings is not None else None  # init_app set it
        app.config["SECRET_KEY"] = configured or secrets.token_hex(32)
    if auth is not None:
        auth.init_app(app)
    security.init_standalone(app)

    @app.get("/")
    def root():
        return redirect(url_for("pgbus_web.workflows"))

    return app
