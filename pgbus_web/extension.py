"""The pgbus-web dashboard as a Flask extension: the Workflows pages in one
blueprint, mountable in any Flask app under any URL prefix::

    from pgbus_web.extension import PgbusWeb

    PgbusWeb(app, url_prefix="/ops", database_url="postgresql://...",
             can_view=lambda request: current_user.is_staff,
             can_act=lambda request: current_user.is_admin)

or, application-factory style, ``web = PgbusWeb(url_prefix="/ops", ...)``
then ``web.init_app(app)`` for each app (several apps in one process each
get their own settings and database). The keyword arguments are the fields
of ``pgbus_web.core.settings.Settings``; each can also come from the app's
config as ``PGBUS_WEB_<NAME>`` (``PGBUS_WEB_DATABASE_URL``,
``PGBUS_WEB_URL_PREFIX``, ...), and a keyword wins over the config. A wrong
value fails ``init_app`` with a message naming the setting. Templates and static files ship in the
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

from flask import Flask

from . import api, i18n
from .api import metrics as api_metrics
from .core.settings import MOVED_TO_POLICY, SettingError, Settings, check, moved_to_policy
from .db import Database
from .plumbing.state import EXTENSION_NAME, State, state
from .runtime.definitions import DefinitionError, load_registry
from .runtime.heartbeat import ServingOperations
from .runtime.operation_runner import Background
from .web import build_blueprint

__all__ = ["PgbusWeb", "SettingError", "Settings", "State", "settings_from", "state"]
# app.config keys: PGBUS_WEB_PAGE_SIZE for page_size, and so on.
CONFIG_PREFIX = "PGBUS_WEB_"
DEFAULT_URL_PREFIX = "/"
# Config only: PGBUS_WEB_DEFINITIONS names the module whose REGISTRY is the
# registry setting, as the commands' --definitions does, for a config that
# holds text (a file, the environment). A registry given as such wins.
DEFINITIONS = "definitions"


def settings_from(values: dict[str, Any]) -> Settings:
    """A Settings from keyword arguments; ``settings=`` may pass a whole
    Settings, which the other keywords then override. An unknown name is a
    TypeError that lists the known ones."""
    values = dict(values)
    base = values.pop("settings", None)
    if base is not None and not isinstance(base, Settings):
        raise TypeError("settings= must be a pgbus_web.core.settings.Settings")
    known = {field.name for field in dataclasses.fields(Settings)}
    for name in MOVED_TO_POLICY:
        if name in values:
            raise moved_to_policy(name)
    unknown = sorted(set(values) - known)
    if unknown:
        raise TypeError(f"unknown pgbus-web setting(s): {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    return dataclasses.replace(base, **values) if base is not None else Settings(**values)


def config_values(config) -> dict[str, Any]:
    """The settings an app's config gives as ``PGBUS_WEB_<NAME>`` (plus
    ``PGBUS_WEB_URL_PREFIX`` and ``PGBUS_WEB_DEFINITIONS``); a ``PGBUS_WEB_`` key that names no setting is
    refused by name, like an unknown keyword."""
    known = {field.name for field in dataclasses.fields(Settings)} | {"url_prefix", DEFINITIONS}
    values = {}
    for key, value in config.items():
        if not key.startswith(CONFIG_PREFIX):
            continue
        name = key[len(CONFIG_PREFIX) :].lower()
        if name in MOVED_TO_POLICY:
            raise moved_to_policy(name)
        if name not in known:
            raise TypeError(
                f"unknown pgbus-web setting in the app's config: {key}; known: "
                + ", ".join(CONFIG_PREFIX + n.upper() for n in sorted(known))
            )
        values[name] = value
    return values


def _registry_of(module: Any):
    if not isinstance(module, str) or not module:
        raise SettingError(f"pgbus-web setting {CONFIG_PREFIX}DEFINITIONS must be a module name; got {module!r}")
    try:
        return load_registry(module)
    except DefinitionError as exc:
        raise SettingError(f"pgbus-web setting {CONFIG_PREFIX}DEFINITIONS: {exc}") from None


class PgbusWeb:
    """The dashboard extension. *database* may pass a ready
    ``pgbus_web.db.Database`` (a host that already has engines, or tests);
    otherwise one is built from ``database_url`` and ``replica_url``."""

    def __init__(
        self,
        app: Flask | None = None,
        url_prefix: str | None = None,
        *,
        database: Database | None = None,
        **settings: Any,
    ) -> None:
        # Checked now for unknown names; merged with each app's config in init_app.
        settings_from(settings)
        self._keywords = settings
        self._url_prefix = url_prefix
        self._database = database
        self.settings: Settings | None = None  # the last bound app's (state().settings per request)
        self.operations: Background | None = None  # the thread doing operations (run_operations)
        if app is not None:
            self.init_app(app)

    def settings_for(self, app: Flask) -> tuple[Settings, str]:
        """The settings and URL prefix for *app*: its config's, then the
        keywords over them, checked (SettingError names a wrong one)."""
        values = config_values(app.config)
        prefix = self._url_prefix if self._url_prefix is not None else values.pop("url_prefix", None)
        values.pop("url_prefix", None)
        module = values.pop(DEFINITIONS, None)
        prefix = DEFAULT_URL_PREFIX if prefix is None else prefix
        if not isinstance(prefix, str) or not prefix.startswith("/"):
            raise SettingError(f"pgbus-web setting url_prefix must be a path starting with /; got {prefix!r}")
        if "settings" in self._keywords:
            # A whole Settings object says every field: the config adds nothing.
            values = dict(self._keywords)
        else:
            values.update(self._keywords)
            if module is not None and values.get("registry") is None:
                values["registry"] = _registry_of(module)
        return check(settings_from(values), i18n.available_locales()), prefix

    def init_app(self, app: Flask) -> None:
        if EXTENSION_NAME in app.extensions:
            raise RuntimeError("pgbus-web is already registered on this app")
        settings, prefix = self.settings_for(app)
        database = self._database or Database.from_urls(
            settings.database_url, settings.replica_url, settings.bounds(), settings.replica_max_lag
        )
        app.extensions[EXTENSION_NAME] = State(settings, database)
        app.register_blueprint(build_blueprint(), url_prefix=prefix)
        self.settings = settings
        api.register(app, prefix)
        if settings.metrics:
            api_metrics.register(app, prefix)
        if settings.run_operations:
            self.operations = ServingOperations(
                database.primary, settings.registry, stale_after=settings.operation_stale_after
            ).start()
            app.extensions[EXTENSION_NAME].operations = self.operations
