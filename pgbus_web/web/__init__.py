"""The pgbus-web dashboard as a Flask extension: the Workflows pages in one
blueprint, mountable in any Flask app under any URL prefix::

    from pgbus_web.web import PgbusWeb

    PgbusWeb(app, url_prefix="/ops", database_url="postgresql://...",
             can_view=lambda request: current_user.is_staff,
             can_act=lambda request: current_user.is_admin)

or, application-factory style, ``web = PgbusWeb(url_prefix="/ops", ...)``
then ``web.init_app(app)``. The keyword arguments are the fields of
``pgbus_web.web.settings.Settings``. Templates and static files ship in the
package and are served by the blueprint itself (no CDN).

Security boundary. Authentication belongs to the host app: the blueprint
has no login of its own and trusts whatever the host put in front of it.
It asks two hooks, each a callable given the request:

- ``can_view(request)`` decides who may see the pages. Left unset, the
  pages are open to anyone who can reach them, and a warning is logged
  once per process to say so.
- ``can_act(request)`` decides who may change runs (the POST routes);
  viewers see no buttons. Left unset, whoever may view may act.

The health check (``GET /health``) and the static assets answer without
``can_view``: they reveal nothing about runs. Every answer in the
blueprint's URL space (its routes, and the 404, 405 and slash redirects
routing gives under its prefix) carries the security headers of
``security.py`` (no framing, no MIME sniffing, a Content-Security-Policy
without inline scripts or styles) and ``Vary: HX-Request``; no redirect of
it names a host.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from flask import Blueprint, Flask

from .. import i18n
from ..db import Database
from . import (
    actions,
    csrf,
    locks_views,
    operations_views,
    run_ids,
    security,
    template_names,
    views,
)
from .extension import EXTENSION_NAME, State, state
from .settings import Settings

__all__ = ["PgbusWeb", "Settings", "State", "build_blueprint", "settings_from", "state"]
# Where the blueprint serves its own assets, under its URL prefix; a name
# unlikely to clash with a host app's /static.
STATIC_URL_PATH = "/pgbus-static"


def settings_from(values: dict[str, Any]) -> Settings:
    """A Settings from keyword arguments; ``settings=`` may pass a whole
    Settings, which the other keywords then override. An unknown name is a
    TypeError that lists the known ones."""
    values = dict(values)
    base = values.pop("settings", None)
    if base is not None and not isinstance(base, Settings):
        raise TypeError("settings= must be a pgbus_web.web.settings.Settings")
    known = {field.name for field in dataclasses.fields(Settings)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise TypeError(
            f"unknown pgbus-web setting(s): {', '.join(unknown)}; known: {', '.join(sorted(known))}"
        )
    return dataclasses.replace(base, **values) if base is not None else Settings(**values)


class PgbusWeb:
    """The dashboard extension. *database* may pass a ready
    ``pgbus_web.db.Database`` (a host that already has engines, or tests);
    otherwise one is built from ``database_url`` and ``replica_url``."""

    def __init__(
        self,
        app: Flask | None = None,
        url_prefix: str = "/",
        *,
        database: Database | None = None,
        **settings: Any,
    ) -> None:
        self.settings = settings_from(settings)
        self.url_prefix = url_prefix
        self._database = database
        self.operations = None  # the thread doing operations (run_operations)
        if app is not None:
            self.init_app(app)

    def init_app(self, app: Flask) -> None:
        if EXTENSION_NAME in app.extensions:
            raise RuntimeError("pgbus-web is already registered on this app")
        database = self._database or Database.from_urls(
            self.settings.database_url, self.settings.replica_url, self.settings.bounds()
        )
        app.extensions[EXTENSION_NAME] = State(self.settings, database)
        app.register_blueprint(build_blueprint(), url_prefix=self.url_prefix)
        from .. import api

        api.register(app, self.url_prefix)
        if self.settings.metrics:
            from . import metrics_view

            metrics_view.register(app, self.url_prefix)
        if self.settings.run_operations:
            from ..runtime.operations import Background

            self.operations = Background(database.primary, self.settings.registry).start()
            app.extensions[EXTENSION_NAME].operations = self.operations


def build_blueprint() -> Blueprint:
    """A fresh blueprint with every route module's routes on it."""
    blueprint = Blueprint(
        EXTENSION_NAME,
        __name__,
        template_folder="templates",
        static_folder="static",
        static_url_path=STATIC_URL_PATH,
    )
    # The language and time-zone cookies keep to the dashboard's prefix,
    # like the CSRF cookie.
    cookie_path = i18n.init_locale(
        blueprint, default_locale=lambda: state().settings.default_locale, cookie_path=csrf.cookie_path
    )
    security.init_blueprint(blueprint)
    template_names.init_blueprint(blueprint, cookie_path)

    run_ids.init_blueprint(blueprint)  # before the routes that use it
    views.register(blueprint)
    operations_views.register(blueprint)
    actions.register(blueprint)
    locks_views.register(blueprint)
    return blueprint
