"""The standalone dashboard: a Flask app with only pgbus-web in it, mounted
at ``/`` (``/`` itself leads to the runs index).

    from pgbus_web.app import create_app
    app = create_app({"database_url": "postgresql://..."})

*settings* is a ``pgbus_web.web.settings.Settings``, or a dict of its field
names; a dict may also carry ``database`` (a ready ``pgbus_web.db.Database``)
and upper-case Flask config keys (``SECRET_KEY``, ...). Serve it with any
WSGI server; ``pgbus-web serve`` does so with waitress.
"""

from __future__ import annotations

import secrets
from typing import Any, Mapping

from flask import Flask, redirect, url_for

from .web import PgbusWeb, security
from .web.settings import Settings


def create_app(settings: Settings | Mapping[str, Any] | None = None) -> Flask:
    if isinstance(settings, Settings):
        values: dict[str, Any] = {"settings": settings}
    else:
        values = dict(settings or {})
    flask_config = {key: values.pop(key) for key in list(values) if key.isupper()}
    database = values.pop("database", None)

    # The blueprint serves its own assets; the app needs no static route.
    app = Flask(__name__, static_folder=None)
    app.config.update(flask_config)
    web = PgbusWeb(database=database, **values)
    if not app.config.get("SECRET_KEY"):
        # Signs the session (flashed messages, CSRF). Without a configured
        # one a random key works for one process; several processes behind
        # one address need the same settings.secret_key.
        app.config["SECRET_KEY"] = web.settings.secret_key or secrets.token_hex(32)
    web.init_app(app)
    security.init_standalone(app)

    @app.get("/")
    def root():
        return redirect(url_for("pgbus_web.workflows"))

    return app
